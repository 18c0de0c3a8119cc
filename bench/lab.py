"""How long the lab takes to run: provision N pods, then tick. Prints a table; asserts nothing.

Usage: python bench/lab.py [--pods 1000,5000]
For each size, in a throwaway SQLite database (var/bench-lab.sqlite3): apply examples/provisioning, scale inflate
to N, time `advance 30s` (batching, scheduling, launching, registering, kube-scheduler binding every pod), then time
three `advance 1s` runs, the work of one worker tick. In-process, so no interpreter start-up is counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
os.environ["DATABASE_URL"] = f"sqlite:///{ROOT / 'var' / 'bench-lab.sqlite3'}"

import django  # noqa: E402


def run(pods: int) -> tuple[float, float, int, int]:
    from django.core.management import call_command

    from karpui import models
    from karpui.clusters import lab

    Path(os.environ["DATABASE_URL"].removeprefix("sqlite:///")).unlink(missing_ok=True)
    call_command("migrate", verbosity=0)
    quiet = open(os.devnull, "w")  # noqa: SIM115 - closed below
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "provisioning"), stdout=quiet)
    call_command("karp", "scale", "deploy/inflate", "--replicas", str(pods), stdout=quiet)
    quiet.close()
    start = time.perf_counter()
    lab.advance("lab", 30.0)
    provision = time.perf_counter() - start
    ticks = []
    for _ in range(3):
        start = time.perf_counter()
        lab.advance("lab", 1.0)
        ticks.append(time.perf_counter() - start)
    cluster = models.Cluster.objects.get(name="lab")
    running = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", phase="Running").count()
    nodes = models.KubeObject.objects.filter(cluster=cluster, kind="Node").count()
    return provision, statistics.median(ticks), running, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", default="1000,5000")
    args = parser.parse_args()
    django.setup()
    print(f"{'pods':>8}{'advance 30s s':>15}{'tick s':>9}{'running':>9}{'nodes':>7}")
    for pods in (int(p) for p in args.pods.split(",")):
        provision, tick, running, nodes = run(pods)
        print(f"{pods:>8}{provision:>15.2f}{tick:>9.2f}{running:>9}{nodes:>7}")


if __name__ == "__main__":
    main()
