"""The warm engine with its database, as a worker runs it: apply 100 Deployments, tick until every pod runs, then
what an idle tick and a write cost. Prints figures; asserts nothing.

Usage: python bench/warm.py [--pods 20000] [--deployments 100] [--database sqlite|postgres] [--realtime 60]
                            [--settled 30] [--no-freeze]
In a throwaway database (SQLite var/bench-warm.sqlite3, or a PostgreSQL database on 127.0.0.1, dropped and created
again: --pg-name): one NodePool of 8-vCPU kwok types, N pods of 700m CPU and 1 Gi in D Deployments (about 11 a
node), applied with one `karp apply`. Then `lab.tick` as the worker calls it, at wall time (or one second of lab
time later, when a tick took less than that), until all pods run. In-process, so the warm lab stays in memory between ticks as it does in the worker.

While it provisions, a second thread scales one Deployment (`karp scale`, as the CLI or the web would) --write-after
seconds into every tick and times how long that write takes, waiting for the tick's row lock included, and whether
it failed. With --realtime S it then ticks against the real clock for S seconds, as the worker does (a tick every
second, or at once after a slower one), while one Deployment in ten is scaled up by half or back every ten
seconds, and reports how many lab seconds passed per wall second and how far the lab fell behind wall time.
After the first 15 idle ticks (the first disruption passes, which write an Event on every node and NodeClaim)
it times --settled more: the idle steady state. Full collections of the cycle collector are counted throughout;
--no-freeze leaves the warm lab unfrozen, for comparison.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"

from tests.lab_manifests import deployment, documents, nodepool  # noqa: E402

NODEPOOL = nodepool(
    requirements=(
        ("karpenter.kwok.sh/instance-cpu", ("8",)),
        ("kubernetes.io/arch", ("amd64",)),
        ("kubernetes.io/os", ("linux",)),
        ("karpenter.sh/capacity-type", ("on-demand",)),
    ),
    consolidate_after="30s",
)


def deployments(count: int, replicas: int) -> str:
    return documents(*(deployment(f"app-{i}", replicas, "700m", memory="1Gi", grace_period=None) for i in range(count)))


class FullCollections:
    """The cycle collector's full (generation 2) collections while the block runs: how many, and the slowest."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds.append(time.perf_counter() - self._began)

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def __str__(self) -> str:
        slowest = f", the slowest {max(self.seconds) * 1000:.0f} ms" if self.seconds else ""
        tracked = f"objects frozen {gc.get_freeze_count()}, tracked {len(gc.get_objects())}"
        return f"{len(self.seconds):8d}{slowest} ({tracked})"


class Phases:
    """Wall seconds spent in the parts of a tick, summed while the block runs: the engine's steps, reading the
    changes of others, working out summaries, and the save under the row lock with its heaviest parts."""

    PARTS = (
        ("engine steps (Lab.advance)", "provisioner.lab", "Lab.advance"),
        ("catch-up / load", "karpui.clusters.warm", "engine"),
        ("summaries", "karpui.clusters.saves", "summaries"),
        ("rebase", "karpui.clusters.warm", "rebase"),
        ("save, under the lock", "karpui.clusters.saves", "save"),
        ("  change log", "karpui.clusters.changelog", "record_lab_run"),
        ("  object rows", "karpui.clusters.saves", "_upsert"),
        ("  costs", "karpui.history.costs", "record"),
    )

    def __init__(self) -> None:
        self.seconds = {label: 0.0 for label, _, _ in self.PARTS}
        self._undo: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Phases:
        import importlib

        for label, module_name, attribute in self.PARTS:
            owner: Any = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = getattr(owner, name)
            setattr(owner, name, self._timed(label, original))
            self._undo.append((owner, name, original))
        return self

    def _timed(self, label: str, original: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - began

        return timed

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)

    def __str__(self) -> str:
        return "\n".join(f"    {label:<32} {seconds:8.2f} s" for label, seconds in self.seconds.items())


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="karpui_bench", help="the scratch PostgreSQL database")
    parser.add_argument("--max-ticks", type=int, default=300)
    parser.add_argument("--write-after", type=float, default=1.0, help="seconds into each tick; 0: no writes")
    parser.add_argument("--realtime", type=float, default=0.0, help="seconds of ticking against the real clock")
    parser.add_argument("--no-freeze", action="store_true", help="leave the warm lab to the cycle collector")
    parser.add_argument("--settled", type=int, default=30, help="idle ticks timed after the first 15")
    args = parser.parse_args()
    if args.database == "sqlite":
        path = ROOT / "var" / "bench-warm.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    else:
        import subprocess

        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", args.pg_name], check=True)
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", args.pg_name], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{args.pg_name}"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from karpui import models
    from karpui.clusters import lab, warm
    from karpui.people.audit import Actor
    from karpui.writes import manifests, objects

    call_command("migrate", verbosity=0)
    if args.no_freeze:
        warm.FREEZE_AT_OBJECTS = sys.maxsize
    cluster = models.Cluster.objects.get(name="lab")
    operator = Actor("bench", "cli")
    now = timezone.now()
    models.Cluster.objects.filter(pk=cluster.pk).update(clock=now, ticked_at=now)  # a worker is running
    start = time.perf_counter()
    manifests.manifests_apply(cluster=cluster, text=NODEPOOL, actor=operator)
    manifests.manifests_apply(
        cluster=cluster, text=deployments(args.deployments, args.pods // args.deployments), actor=operator
    )
    applied = time.perf_counter() - start
    replicas = args.pods // args.deployments
    waits: list[float] = []
    failures: list[str] = []

    def write_during_tick(scale_to: int) -> None:
        """`karp scale` from another thread, `--write-after` seconds into the tick: what a user waits for."""
        time.sleep(args.write_after)
        began = time.perf_counter()
        try:
            objects.workload_scale(
                cluster=models.Cluster.objects.get(pk=cluster.pk),
                kind="Deployment",
                name="app-0",
                namespace="default",
                replicas=scale_to,
                actor=operator,
            )
            waits.append(time.perf_counter() - began)
        except Exception as error:  # a failed write is a figure, not the end of the run
            failures.append(f"{type(error).__name__}: {error}")
        finally:
            connection.close()

    ticks: list[float] = []
    running = 0
    phases = Phases()
    phases.__enter__()
    while running < args.pods and len(ticks) < args.max_ticks:
        # The worker ticks at wall time; a tick quicker than a second is taken to be a second long all the same.
        now = max(now + timedelta(seconds=1), timezone.now())
        writer = None
        if args.write_after > 0:
            writer = threading.Thread(target=write_during_tick, args=(replicas + len(ticks) % 2,))
            writer.start()
        began = time.perf_counter()
        lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
        ticks.append(time.perf_counter() - began)
        if writer is not None:
            writer.join()
        running = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", phase="Running").count()
    to_running = time.perf_counter() - start
    phases.__exit__()
    nodes = models.KubeObject.objects.filter(cluster=cluster, kind="Node").count()
    print(f"{args.pods} pods in {args.deployments} Deployments on {args.database}")
    print(f"  karp apply                     {applied:8.2f} s")
    print(
        f"  apply to all Running           {to_running:8.2f} s wall ({len(ticks)} ticks, {running} running, {nodes} nodes)"
    )
    print(f"  ticks while provisioning       {statistics.median(ticks):8.2f} s median, {max(ticks):.2f} s max")
    print(f"  their parts, summed:\n{phases}")
    if waits or failures:
        print(
            f"  a write {args.write_after:g} s into each tick  {statistics.median(waits or [0]):8.2f} s median, "
            f"{max(waits or [0]):.2f} s max ({len(waits)} writes, {len(failures)} failed)"
        )
    for failure in sorted(set(failures)):
        print(f"    failed: {failure}")
    idle = []
    with FullCollections() as collections:
        for _ in range(15):
            now += timedelta(seconds=1)
            began = time.perf_counter()
            lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
            idle.append(time.perf_counter() - began)
    print(f"  idle tick (median of 15)       {statistics.median(idle):8.3f} s (max {max(idle):.3f} s)")
    print(f"  full collections in them       {collections}")
    # The first disruption passes after the pods started told every node why it cannot be consolidated (an
    # Event on each Node and NodeClaim, 3,638 at 20,000 pods): the ticks after them are the idle steady state,
    # the disruption poll every 10 s still evaluating every node.
    settled = []
    with FullCollections() as collections:
        for _ in range(args.settled):
            now += timedelta(seconds=1)
            began = time.perf_counter()
            lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now)
            settled.append(time.perf_counter() - began)
    if settled:
        slowest = sorted(range(len(settled)), key=settled.__getitem__)[-3:][::-1]
        print(
            f"  settled idle tick ({len(settled)})         {statistics.median(settled):8.3f} s median, "
            f"{max(settled):.3f} s max; slowest "
            + ", ".join(f"{settled[i]:.2f} s ({16 + i} s after Running)" for i in slowest)
        )
        print(f"  full collections in them       {collections}")
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
    print(f"  peak RSS before the cold tick  {rss_mib():8.1f} MiB")
    lab.forget()
    began = time.perf_counter()
    lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=1))
    print(f"  a cold tick (loads everything) {time.perf_counter() - began:8.2f} s")
    print(f"  peak RSS                       {rss_mib():8.1f} MiB")
    if args.realtime > 0:
        realtime(args, cluster, operator)


def realtime(args: argparse.Namespace, cluster: Any, operator: Any) -> None:
    """Tick against the real clock, as the worker does, while some Deployments scale up and back."""
    from karpui import models
    from karpui.clusters import lab
    from karpui.writes import objects

    replicas = args.pods // args.deployments
    clock = models.Cluster.objects.get(pk=cluster.pk).clock
    wall_start = time.monotonic()
    lags: list[float] = []
    ticks: list[float] = []
    scaled = -1
    with FullCollections() as collections:
        while (elapsed := time.monotonic() - wall_start) < args.realtime:
            period = int(elapsed // 10)
            if period != scaled:  # every ten seconds: one Deployment in ten up by half, or back
                scaled = period
                for index in range(0, args.deployments, 10):
                    objects.workload_scale(
                        cluster=models.Cluster.objects.get(pk=cluster.pk),
                        kind="Deployment",
                        name=f"app-{index}",
                        namespace="default",
                        replicas=replicas + (replicas // 2 if period % 2 == 0 else 0),
                        actor=operator,
                    )
            began = time.monotonic()
            lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=clock + timedelta(seconds=began - wall_start))
            ticks.append(time.monotonic() - began)
            lab_clock = models.Cluster.objects.get(pk=cluster.pk).clock
            lags.append((time.monotonic() - wall_start) - (lab_clock - clock).total_seconds())
            time.sleep(max(0.0, began + 1.0 - time.monotonic()))
    wall = time.monotonic() - wall_start
    advanced = (models.Cluster.objects.get(pk=cluster.pk).clock - clock).total_seconds()
    print(f"against the real clock for {wall:.0f} s ({len(ticks)} ticks, one Deployment in ten scaled every 10 s)")
    print(f"  lab seconds per wall second    {advanced / wall:8.2f}")
    print(f"  lag behind wall time           {lags[-1]:8.2f} s at the end, {max(lags):.2f} s max")
    print(f"  ticks                          {statistics.median(ticks):8.2f} s median, {max(ticks):.2f} s max")
    print(f"  full collections               {collections}")


if __name__ == "__main__":
    main()
