"""The NodePool editor's speed on a lab like issue 29's walk: prints a table; asserts nothing.

Usage: python bench/editor.py [--pods 2000]
Builds, in a throwaway SQLite database in a temporary directory (KARPUI_VAR_DIR, if set, is used instead), five
NodePools (one with a CPU limit that leaves about a tenth of the pods pending, one spot, one tainted, one arm64,
one weighted), a DaemonSet, and Deployments of one-CPU and half-CPU pods adding up to `--pods`, run until they
settle; then times, in-process with Django's test client (the median of five after one warm-up): opening the
editor, previewing a weight change, previewing a raised limit, and saving.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = Path(os.environ.get("KARPUI_VAR_DIR") or tempfile.mkdtemp(prefix="karpui-bench-editor-"))
os.environ["KARPUI_VAR_DIR"] = str(VAR)
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
os.environ["ALLOWED_HOSTS"] = "testserver"
os.environ["DATABASE_URL"] = f"sqlite:///{VAR / 'bench-editor.sqlite3'}"

import django  # noqa: E402

from tests.lab_manifests import NODE_CLASS, daemonset, deployment, documents, nodepool  # noqa: E402

RUNS = 5


def lab_files(pods: int) -> str:
    def pool(name: str, capacity: str = "on-demand", arch: str = "amd64", **options: Any) -> str:
        requirements = (("karpenter.sh/capacity-type", (capacity,)), ("kubernetes.io/arch", (arch,)))
        return nodepool(name, requirements=requirements, consolidate_after="1h", node_class=False, **options)

    pools = [
        pool("default"),
        pool("capped", weight=10, limits={"cpu": str(pods // 4)}),
        pool("batch-spot", "spot"),
        pool("gpu", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
        pool("arm", arch="arm64"),
    ]
    deployments = [
        deployment("web", pods * 4 // 10, "500m", grace_period=None),
        deployment("capped-app", pods * 4 // 10, "1", nodepool="capped", grace_period=None),
        deployment("batch", pods * 2 // 10, "250m", nodepool="batch-spot", grace_period=None),
    ]
    agent = daemonset("agent", "100m", tolerations=[{"operator": "Exists"}])
    return documents(NODE_CLASS, *pools, agent, *deployments)


def build(pods: int) -> None:
    from django.core.management import call_command

    from karpui.clusters import lab

    call_command("migrate", verbosity=0)
    manifest = VAR / "walk.yaml"
    manifest.write_text(lab_files(pods))
    with open(os.devnull, "w") as quiet:
        call_command("karp", "apply", "-f", str(manifest), stdout=quiet)
    for _ in range(12):  # a tick writes at most 2,500 objects: enough advances for every pod to settle
        lab.advance("lab", 30.0)


def measure() -> None:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.test.utils import setup_test_environment

    from karpui import models

    setup_test_environment()  # so the client's responses carry their context (the form's initial values)
    client = Client()
    client.force_login(User.objects.create_superuser("bench", "", "bench-password-not-used"))
    cluster = models.Cluster.objects.get(name="lab")
    pods = models.KubeObject.objects.filter(cluster=cluster, kind="Pod")
    print(
        f"{pods.count()} pods ({pods.filter(unschedulable=True).count()} pending) on "
        f"{models.KubeObject.objects.filter(cluster=cluster, kind='Node').count()} nodes, database in {VAR}"
    )
    form = client.get("/nodepools/capped/").context["form"]
    data = {name: ("" if value is None else value) for name, value in form.initial.items()}
    cases = [
        ("open the editor", "get", {}),
        ("preview a weight change", "post", {"spec.weight": "60", "action": "preview"}),
        ("preview a raised limit", "post", {"spec.limits": "cpu=100000", "action": "preview"}),
    ]
    print(f"{'':<28}{'ms':>8}{'KB':>8}")
    for label, method, change in cases:
        times = []
        for _ in range(RUNS + 1):
            start = time.perf_counter()
            response = (
                client.get("/nodepools/capped/")
                if method == "get"
                else client.post("/nodepools/capped/", {**data, **change})
            )
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200, (label, response.status_code)
        print(f"{label:<28}{statistics.median(times[1:]):>8.0f}{len(response.content) / 1024:>8.1f}")
    start = time.perf_counter()
    saved = client.post("/nodepools/capped/", {**data, "spec.weight": "60", "action": "save"})
    assert saved.status_code == 302, saved.status_code
    print(f"{'save a weight change':<28}{(time.perf_counter() - start) * 1000:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    django.setup()
    build(args.pods)
    measure()


if __name__ == "__main__":
    main()
