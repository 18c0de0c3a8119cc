"""The warm engine with its database, as a worker runs it: apply 100 Deployments, tick until every pod runs, then
what an idle tick and a write cost. Prints figures; asserts nothing.

Usage: python bench/warm.py [--pods 20000] [--deployments 100] [--database sqlite|postgres]
In a throwaway database (SQLite var/bench-warm.sqlite3, or PostgreSQL database karpui_bench on 127.0.0.1): one
NodePool of 8-vCPU kwok types, N pods of 700m CPU and 1 Gi in D Deployments (about 11 a node), applied with one
`karp apply`. Then `lab.tick` as the worker calls it, each tick one second of wall time later, until all pods run.
In-process, so the warm lab stays in memory between ticks as it does in the worker.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"

NODEPOOL = """
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: karpenter.kwok.sh/instance-cpu, operator: In, values: ["8"]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
"""


def deployments(count: int, replicas: int) -> str:
    return "\n---\n".join(
        f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      containers:
        - {{name: app, image: pause, resources: {{requests: {{cpu: 700m, memory: 1Gi}}}}}}"""
        for i in range(count)
    )


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--max-ticks", type=int, default=300)
    args = parser.parse_args()
    if args.database == "sqlite":
        path = ROOT / "var" / "bench-warm.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    else:
        import subprocess

        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", "karpui_bench"], check=True)
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", "karpui_bench"], check=True)
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/karpui_bench"
    import django

    django.setup()
    from django.core.management import call_command

    from karpui import lab, models, objects, services

    call_command("migrate", verbosity=0)
    cluster = models.Cluster.objects.get(name="lab")
    operator = services.Actor("bench", "cli")
    now = cluster.clock
    models.Cluster.objects.filter(pk=cluster.pk).update(ticked_at=now)  # a worker is running: writes are stored
    start = time.perf_counter()
    objects.manifests_apply(cluster=cluster, text=NODEPOOL, actor=operator)
    objects.manifests_apply(
        cluster=cluster, text=deployments(args.deployments, args.pods // args.deployments), actor=operator
    )
    applied = time.perf_counter() - start
    ticks: list[float] = []
    running = 0
    while running < args.pods and len(ticks) < args.max_ticks:
        now += timedelta(seconds=1)
        began = time.perf_counter()
        lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
        ticks.append(time.perf_counter() - began)
        running = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", phase="Running").count()
    to_running = time.perf_counter() - start
    nodes = models.KubeObject.objects.filter(cluster=cluster, kind="Node").count()
    print(f"{args.pods} pods in {args.deployments} Deployments on {args.database}")
    print(f"  karp apply                     {applied:8.2f} s")
    print(
        f"  apply to all Running           {to_running:8.2f} s wall ({len(ticks)} ticks, {running} running, {nodes} nodes)"
    )
    print(f"  slowest tick while provisioning {max(ticks):7.2f} s")
    idle = []
    for _ in range(15):
        now += timedelta(seconds=1)
        began = time.perf_counter()
        lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
        idle.append(time.perf_counter() - began)
    print(f"  idle tick (median of 15)       {statistics.median(idle):8.3f} s (max {max(idle):.3f} s)")
    writes = []
    for replicas in (args.pods // args.deployments + 1, args.pods // args.deployments):
        began = time.perf_counter()
        objects.workload_scale(
            cluster=cluster, kind="Deployment", name="app-0", namespace="default", replicas=replicas, actor=operator
        )
        writes.append(time.perf_counter() - began)
        now += timedelta(seconds=1)
        lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
    print(f"  a write while the engine runs  {max(writes):8.3f} s (karp scale, slowest of {len(writes)})")
    lab.forget()
    began = time.perf_counter()
    lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=1))
    print(f"  a cold tick (loads everything) {time.perf_counter() - began:8.2f} s")
    print(f"  peak RSS                       {rss_mib():8.1f} MiB")


if __name__ == "__main__":
    main()
