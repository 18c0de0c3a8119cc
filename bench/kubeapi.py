"""How fast the lab's Kubernetes API answers: list N pods (JSON and kubectl's Table), replay a watch of the changes
that provisioned them, and what logging those changes adds to the lab run. Prints figures; asserts nothing.

Usage: python bench/kubeapi.py [--pods 1000]
In a throwaway SQLite database (var/bench-kubeapi.sqlite3), through Django's test client (no network), in-process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench-kubeapi.sqlite3'}"
os.environ.setdefault("DEBUG", "false")

import django  # noqa: E402

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def timed(call: object) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()  # type: ignore[operator]
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from karpui import models
    from karpui.clusters import changelog, lab
    from karpui.kubeapi.auth import token_create

    settings.ALLOWED_HOSTS = ["testserver"]
    Path(os.environ["DATABASE_URL"].removeprefix("sqlite:///")).unlink(missing_ok=True)
    call_command("migrate", verbosity=0)
    quiet = open(os.devnull, "w")  # noqa: SIM115 - closed below
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "provisioning"), stdout=quiet)
    start_version = models.Cluster.objects.get(name="lab").resource_version
    logging = [0.0]
    record = changelog.record_lab_run

    def counted(*a: object, **k: object) -> int:
        seconds, result = timed(lambda: record(*a, **k))  # type: ignore[arg-type]
        logging[0] += seconds
        return result  # type: ignore[return-value]

    changelog.record_lab_run = counted  # type: ignore[assignment]
    call_command("karp", "scale", "deploy/inflate", "--replicas", str(args.pods), stdout=quiet)
    provision, _ = timed(lambda: lab.advance("lab", 30.0))
    quiet.close()
    entries = models.ChangeLogEntry.objects.count()
    print(f"provision {args.pods} pods: {provision:.2f} s run, of which {logging[0]:.2f} s logging {entries} changes")

    client = Client()
    token = token_create(user=User.objects.create_superuser("bench", "", "bench-pass-1"))
    headers = {"Authorization": f"Bearer {token}"}
    base = "/k8s/clusters/lab/api/v1/namespaces/default/pods"
    for label, accept in (("list (JSON)", "application/json"), ("list (Table)", TABLE)):
        seconds, response = timed(lambda accept=accept: client.get(base, headers={**headers, "Accept": accept}))
        print(f"{label}: {seconds * 1000:.0f} ms, {len(response.content) / 1e6:.1f} MB")  # type: ignore[attr-defined]

    expected = models.ChangeLogEntry.objects.filter(kind="Pod").count()

    def replay() -> int:
        """Events until the last logged pod change arrives (the stream itself goes on until its timeout)."""
        response = client.get(
            base, {"watch": "true", "resourceVersion": str(start_version), "timeoutSeconds": "60"}, headers=headers
        )
        seen = 0
        for chunk in response.streaming_content:  # type: ignore[attr-defined]
            seen += chunk.count(b"\n")
            if seen >= expected:
                break
        response.close()  # type: ignore[attr-defined]
        return seen

    seconds, events = timed(replay)
    print(f"watch replay: {events} events in {seconds * 1000:.0f} ms ({events / seconds:.0f} events/s)")


if __name__ == "__main__":
    main()
