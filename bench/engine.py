"""The engine alone, in memory: what a warm lab costs per tick while it provisions, idles, consolidates and drains.

Usage: python bench/engine.py [--scenario provision] [--pods 20000] [--ticks 30] [--profile]
       python bench/engine.py --scenario consolidate --pods 2000
       python bench/engine.py --scenario drain --pods 1000 [--to 0.7] [--ticks 90]
       python bench/engine.py --scenario scale-down --pods 5000 [--to 0.1]
No database: a Lab (the simulated cluster side and karpui's controllers on one in-memory API server) built directly,
as the warm engine holds it between ticks. Prints figures; asserts nothing.

* provision: one NodePool of 8-vCPU kwok types (consolidateAfter 30s), Deployments of 200 pods asking 700m CPU and
  1Gi each, so about 11 pods a node: 20,000 pods make about 1,800 nodes. Apply, advance 1 s at a time until every
  pod runs, then time `--ticks` idle 1 s ticks (all before consolidateAfter has passed), and what `Lab.to_state()`
  costs (the persistence side serialises it on every save) with every pod pending and when idle.
* consolidate: the same, then the first disruption pass over consolidatable nodes (none can go: each is full and
  already the cheapest type that fits), the wall time of each simulation in it (the multi-node probes, then up to
  20 single-node candidates), and the idle ticks after it.
* drain: examples/provisioning (every amd64 on-demand kwok type, consolidateAfter 10s) and its inflate Deployment
  of one-CPU pods scaled to `--pods`, then, once consolidateAfter has passed, to `--to` of that (0.7): consolidation
  replaces or deletes nodes and termination drains their pods.
* scale-down: the provision scenario's Deployments, each scaled to `--to` of its replicas (0.1) as soon as every
  pod runs: nodes empty out, and 30 s later consolidation deletes them within the NodePool's budget.
  Both time 1 s ticks for `--ticks` lab seconds (90): tick times, the most settle rounds a tick took (the limit is
  Lab.MAX_SETTLE_ROUNDS), and the commands' outcomes.
--profile: cProfile every timed tick and print the slowest one's profile, with the time its garbage collections
took by generation (cProfile charges a collection to whatever function was running).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import resource
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.catalog.kwok import kwok_catalog
from provisioner.cluster.conditions import is_true
from provisioner.disruption import methods
from provisioner.lab import MAX_SETTLE_ROUNDS, Lab, LabConfig
from provisioner.manifests.nodeclass import parse_nodeclass
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass

ROOT = Path(__file__).resolve().parent.parent
START = 1_800_000_000.0
NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": ["8"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
    },
}


def deployment(index: int, replicas: int) -> dict[str, object]:
    labels = {"app": f"app-{index}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"app-{index}", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "pause", "resources": {"requests": {"cpu": "700m", "memory": "1Gi"}}}
                    ]
                },
            },
        },
    }


def new_lab() -> Lab:
    config = LabConfig(
        nodepools=[parse_nodepool(NODEPOOL)],
        nodepool_uids={"default": "uid-default"},
        nodeclasses={("KWOKNodeClass", "default"): NodeClass("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass", "default")},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types)},
    )
    return Lab([], config, {}, now=START)


def example_lab() -> tuple[Lab, dict[str, Any]]:
    """examples/provisioning as `karp apply` loads it: its NodePool and KWOKNodeClass, and inflate at 0 replicas."""
    folder = ROOT / "examples" / "provisioning"
    docs = [
        doc for name in ("nodepool.yaml", "deployment.yaml") for doc in yaml.safe_load_all((folder / name).read_text())
    ]
    nodeclass = parse_nodeclass(next(d for d in docs if d["kind"] == "KWOKNodeClass"))
    config = LabConfig(
        nodepools=[parse_nodepool(next(d for d in docs if d["kind"] == "NodePool"))],
        nodepool_uids={"default": "uid-default"},
        nodeclasses={(nodeclass.kind, nodeclass.name): nodeclass},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types)},
    )
    return Lab([], config, {}, now=START), next(d for d in docs if d["kind"] == "Deployment")


def running(lab: Lab) -> int:
    return len(lab.store.list("Pod", fields={"status.phase": "Running"}))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Rounds:
    """Settle rounds of every settle, gathered through the lab's observers."""

    def __init__(self, lab: Lab) -> None:
        self.seen: list[int] = []
        lab.observers.append(lambda settled: self.seen.append(settled.settle_rounds))

    def take(self) -> list[int]:
        taken, self.seen = self.seen, []
        return taken


class Simulations:
    """The wall time of every consolidation simulation (`compute`, as the disruption methods call it)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._compute = methods.compute
        methods.compute = self._timed

    def _timed(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self._compute(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)


PROFILE = False  # --profile: print where the slowest timed tick spent its time


class Collections:
    """Wall seconds spent in the garbage collector's collections, by generation (cProfile blames whatever ran)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._start

    def take(self) -> list[float]:
        taken, self.seconds = self.seconds, [0.0, 0.0, 0.0]
        return taken

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


@dataclass(frozen=True)
class Tick:
    wall: float  # seconds
    cpu: float  # this process's CPU seconds: steadier than the wall on a machine shared with other work
    rounds: int  # the most rounds any settle in it took
    collected: float  # seconds of it in full (generation 2) garbage collections


def timed_ticks(lab: Lab, count: int, rounds: Rounds) -> list[Tick]:
    """`count` 1 s ticks: each one's wall seconds, settle rounds and full collections."""
    ticks = []
    slowest: tuple[float, cProfile.Profile | None, list[float]] = (0.0, None, [])
    collections = Collections()
    for _ in range(count):
        rounds.take()
        collections.take()
        profile = cProfile.Profile() if PROFILE else None
        start, cpu = time.perf_counter(), time.process_time()
        if profile is not None:
            profile.enable()
        lab.advance(1.0)
        if profile is not None:
            profile.disable()
        wall = time.perf_counter() - start
        collected = collections.take()
        ticks.append(Tick(wall, time.process_time() - cpu, max(rounds.take(), default=0), collected[2]))
        if wall > slowest[0]:
            slowest = (wall, profile, collected)
    collections.close()
    if slowest[1] is not None:
        gen = ", ".join(f"gen{g} {ms(s)}" for g, s in enumerate(slowest[2]))
        print(f"profile of the slowest of {count} ticks ({ms(slowest[0])} with the profiler on; collections: {gen}):")
        pstats.Stats(slowest[1]).sort_stats("cumulative").print_stats(45)
    return ticks


def state_cost(lab: Lab) -> str:
    start = time.perf_counter()
    state = lab.to_state()
    made = time.perf_counter() - start
    text = json.dumps(state)
    encoded = time.perf_counter() - start - made
    return f"{len(text) / 1e6:.2f} MB, to_state {made * 1000:.1f} ms + json.dumps {encoded * 1000:.1f} ms"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def summary(ticks: list[Tick]) -> str:
    walls = [t.wall for t in ticks]
    slowest = max(ticks, key=lambda t: t.wall)
    return (
        f"median {ms(statistics.median(walls))}, max {ms(slowest.wall)} ({ms(slowest.cpu)} CPU, {ms(slowest.collected)} full gc), "
        f"total {sum(walls):.2f} s wall for {len(ticks)} s of lab time; settle rounds at most {max(t.rounds for t in ticks)} (limit {MAX_SETTLE_ROUNDS})"
    )


def provision(args: argparse.Namespace) -> Lab:
    lab = new_lab()
    rounds = Rounds(lab)
    start = time.perf_counter()
    for index in range(args.pods // 200):
        lab.store.create(deployment(index, 200))
    lab.settle()
    created = time.perf_counter() - start
    print(f"to_state with {args.pods} pods pending: {state_cost(lab)}")
    seconds = 0
    while running(lab) < args.pods and seconds < 600:
        lab.advance(1.0)
        seconds += 1
    to_running = time.perf_counter() - start
    nodes = len(lab.store.list("Node"))
    most = max(rounds.take())
    ticks = timed_ticks(lab, args.ticks, rounds)
    print(f"pods {args.pods}, nodes {nodes}, running {running(lab)}")
    print(
        f"apply + settle: {created:.2f} s; to all Running: {to_running:.2f} s wall for {seconds} s of lab time, "
        f"settle rounds at most {most}"
    )
    print(f"idle 1 s ticks: {summary(ticks)}")
    print(f"to_state when idle: {state_cost(lab)}")
    return lab


def consolidate(args: argparse.Namespace) -> None:
    lab = provision(args)
    rounds = Rounds(lab)
    while not any(is_true(c, "Consolidatable") for c in lab.store.list("NodeClaim")):
        lab.advance(1.0)
    poll = lab.manager.disruption.next_poll or lab.now
    if poll - lab.now > 1.0:
        lab.advance(poll - lab.now - 1.0)  # the tick timed next is the one with the pass
    simulations = Simulations()
    ticks = timed_ticks(lab, 1, rounds)
    timings = simulations.seconds
    result = lab.manager.disruption.last_result
    notes = Counter(r for reasons in (result.notes.values() if result else ()) for r in reasons)
    print(
        f"first disruption pass over consolidatable nodes: {ms(ticks[0].wall)} ({ms(ticks[0].cpu)} CPU, {ms(ticks[0].collected)} full gc), commands {len(result.commands) if result else 0}"
    )
    single = timings[-methods.MAX_SINGLE_SIMULATIONS :]  # single-node consolidation runs last, after multi-node
    print(
        f"  {len(timings)} simulations, {ms(sum(timings))}: the first {ms(timings[0])}, the last {len(single)} "
        f"(single-node) median {statistics.median(single) * 1000:.1f} ms, mean {statistics.fmean(single) * 1000:.1f} ms"
        if timings
        else "  no simulations"
    )
    for reason, count in notes.most_common(3):
        print(f"  {count} x {reason}")
    print(f"idle 1 s ticks after it: {summary(timed_ticks(lab, args.ticks, rounds))}")


def scale(args: argparse.Namespace) -> None:
    """drain: inflate on examples/provisioning; scale-down: the provision scenario's Deployments."""
    rounds: Rounds | None = None
    start = time.perf_counter()
    if args.scenario == "drain":
        lab, inflate = example_lab()
        rounds = Rounds(lab)
        inflate["spec"]["replicas"] = args.pods
        lab.store.create(inflate)
        deployments = [("inflate", args.pods)]
    else:
        lab = new_lab()
        rounds = Rounds(lab)
        for index in range(args.pods // 200):
            lab.store.create(deployment(index, 200))
        deployments = [(f"app-{index}", 200) for index in range(args.pods // 200)]
    seconds = 0
    while running(lab) < args.pods and seconds < 600:
        lab.advance(1.0)
        seconds += 1
    print(
        f"pods {args.pods} on {len(lab.store.list('Node'))} nodes: {time.perf_counter() - start:.2f} s wall for "
        f"{seconds} s of lab time, settle rounds at most {max(rounds.take())}"
    )
    if args.scenario == "drain":
        lab.advance(15.0)  # past consolidateAfter, with a disruption pass that finds nothing
        rounds.take()
    left = 0
    for name, replicas in deployments:
        stored = lab.store.must_get("Deployment", name, "default")
        stored["spec"]["replicas"] = int(replicas * args.to)
        left += int(replicas * args.to)
        lab.store.update(stored, spec_changed=True)
    ticks = timed_ticks(lab, args.ticks, rounds)
    phases = Counter(c["status"]["phase"] for c in lab.store.list("DisruptionCommand"))
    reasons = Counter(c["spec"]["reason"] for c in lab.store.list("DisruptionCommand"))
    print(
        f"scaled to {left}: {running(lab)} running on {len(lab.store.list('Node'))} nodes after {args.ticks} s; "
        f"commands {dict(phases)} {dict(reasons)}"
    )
    print(f"1 s ticks: {summary(ticks)}")
    slow = sorted(((t.wall, index + 1, t.rounds) for index, t in enumerate(ticks)), reverse=True)[:3]
    print("slowest: " + ", ".join(f"t+{t} s {ms(wall)} ({r} rounds)" for wall, t, r in slow))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=("provision", "consolidate", "drain", "scale-down"), default="provision")
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--ticks", type=int, default=None, help="1 s ticks to time (default 30; drain, scale-down 90)")
    parser.add_argument("--to", type=float, default=None, help="drain, scale-down: replicas left, as a fraction")
    parser.add_argument("--profile", action="store_true", help="print cProfile's figures for the slowest timed tick")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    if args.ticks is None:
        args.ticks = 90 if args.scenario in ("drain", "scale-down") else 30
    if args.to is None:
        args.to = 0.1 if args.scenario == "scale-down" else 0.7
    start = time.perf_counter()
    if args.scenario == "provision":
        provision(args)
    elif args.scenario == "consolidate":
        consolidate(args)
    else:
        scale(args)
    print(f"peak RSS {rss_mib():.0f} MiB; {time.perf_counter() - start:.1f} s in all")


if __name__ == "__main__":
    main()
