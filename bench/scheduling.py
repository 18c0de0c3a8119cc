"""Karpenter's scheduling benchmark, re-created: prints pods/s, nodes, $/h and peak RSS per batch size.

Usage: python bench/scheduling.py [--sizes 1,50,...] [--identical N]
Each size runs in a fresh process so peak RSS belongs to that size alone.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.catalog import InstanceType, Offering, Overhead
from provisioner.catalog.kwok import kwok_catalog
from provisioner.objects import NodeClassRef, NodePool, NodeSelectorRequirement
from provisioner.pods import DO_NOT_SCHEDULE, OwnerReference, Pod, PodAffinityTerm, TopologySpreadConstraint
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve
from provisioner.selectors import LabelSelector

ZONE, HOSTNAME = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMORIES = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
LABEL_VALUES = ["a", "b", "c", "d", "e", "f", "g"]
SIZES = [1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000]
CLASS = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")


def fake_instance_types(count: int = 400) -> list[InstanceType]:
    """Karpenter's fake.InstanceTypes(n): cpu i+1, memory 2(i+1)Gi, pods 10(i+1), price 0.1/vCPU + 0.1/GB."""
    types = []
    for i in range(count):
        cpu, memory = i + 1, 2 * (i + 1) * 2**30
        price = 0.1 * cpu + 0.1 * memory / 1e9
        offerings = tuple(
            Offering(zone, capacity_type, price)
            for zone, capacity_type in (
                ("test-zone-1", "spot"),
                ("test-zone-2", "spot"),
                ("test-zone-1", "on-demand"),
                ("test-zone-2", "on-demand"),
                ("test-zone-3", "on-demand"),
            )
        )
        types.append(
            InstanceType(
                name=f"fake-it-{i}",
                capacity={"cpu": cpu * MILLI, "memory": memory * MILLI, "pods": 10 * (i + 1) * MILLI},
                offerings=offerings,
                labels={"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                overhead=Overhead(kube_reserved={"cpu": 100, "memory": 10 * 2**20 * MILLI}),
            )
        )
    return types


class PodFactory:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def make(self, labels: dict[str, str], **constraints: object) -> Pod:
        self.count += 1
        requests = {"cpu": parse_quantity(self.rng.choice(CPUS)), "memory": parse_quantity(self.rng.choice(MEMORIES))}
        return Pod(
            name=f"pod-{self.count}",
            uid=f"uid-{self.count:07d}",
            labels=labels,
            requests=requests,
            unschedulable=True,
            created=float(self.count),
            **constraints,
        )  # type: ignore[arg-type]

    def label(self, key: str) -> dict[str, str]:
        return {key: self.rng.choice(LABEL_VALUES)}

    def diverse(self, count: int) -> list[Pod]:
        """1/5 generic, 1/5 zonal spread, 1/5 hostname spread, 1/5 zone affinity, 1/5 hostname anti-affinity."""
        share = count // 5
        pods = [self.make(self.label("my-label")) for _ in range(share)]
        for key in (ZONE, HOSTNAME):
            for _ in range(share):
                constraint = TopologySpreadConstraint(
                    1, key, DO_NOT_SCHEDULE, LabelSelector.parse("my-label=" + self.rng.choice(LABEL_VALUES))
                )
                pods.append(self.make(self.label("my-label"), spread=(constraint,)))
        for _ in range(share):
            # Self-affinity, as upstream since PR #1938: a selector matching no pod's label leaves the pod pending.
            labels = self.label("my-affinity")
            term = PodAffinityTerm(ZONE, LabelSelector.parse(f"my-affinity={labels['my-affinity']}"))
            pods.append(self.make(labels, affinity=(term,)))
        nginx = {"app": "nginx"}
        for _ in range(share):
            pods.append(self.make(nginx, anti_affinity=(PodAffinityTerm(HOSTNAME, LabelSelector.parse("app=nginx")),)))
        pods.extend(self.make(self.label("my-label")) for _ in range(count - len(pods)))
        return pods


def run_diverse(size: int) -> dict[str, object]:
    # Upstream's limits; 10,000,000Gi exceeds the int64 milli-units a manifest may carry, so built directly.
    limits = {"cpu": 10_000_000 * MILLI, "memory": 10_000_000 * 2**30 * MILLI}
    pool = NodePool(name="default", node_class_ref=CLASS, limits=limits)
    pods = PodFactory(42).diverse(size)
    request = SchedulingInput(pods=pods, pools=[PoolOffer(pool, fake_instance_types())])
    return measure(f"diverse {size}", request, len(pods))


def run_identical(size: int) -> dict[str, object]:
    pool = NodePool(
        name="default",
        node_class_ref=CLASS,
        requirements=(
            NodeSelectorRequirement("kubernetes.io/arch", "In", ("amd64",)),
            NodeSelectorRequirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
        ),
    )
    owner = OwnerReference("ReplicaSet", "pause-5d8f7", "rs-uid")
    pods = [
        Pod(
            name=f"pause-{i}",
            uid=f"uid-{i:07d}",
            labels={"app": "pause"},
            requests={"cpu": 1000},
            unschedulable=True,
            created=1.0,
            owner=owner,
        )
        for i in range(size)
    ]
    request = SchedulingInput(pods=pods, pools=[PoolOffer(pool, kwok_catalog().instance_types)])
    return measure(f"identical {size} (kwok)", request, size)


def measure(label: str, request: SchedulingInput, size: int) -> dict[str, object]:
    start = time.perf_counter()
    result = solve(request)
    seconds = time.perf_counter() - start
    if result.failures:
        # Upstream's benchmark fails the run too: a figure for a plan that leaves pods pending is not comparable.
        failure = next(iter(result.failures.values()))
        raise SystemExit(
            f"{label}: {len(result.failures)} pod(s) did not schedule, e.g. {failure.pod.key}: {failure.message}"
        )
    cost = sum(plan.cheapest.price for plan in result.new_nodeclaims)
    return {
        "case": label,
        "pods": size,
        "scheduled": result.scheduled_count(),
        "seconds": round(seconds, 3),
        "pods_per_second": round(size / seconds) if seconds else None,
        "nodes": len(result.new_nodeclaims),
        "dollars_per_hour": round(cost, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--identical", type=int, default=20000, help="identical pods over kwok (0 to skip)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        kind, size = args.one.split(":")
        print(json.dumps(run_diverse(int(size)) if kind == "diverse" else run_identical(int(size))))
        return
    jobs = [f"diverse:{s}" for s in args.sizes.split(",") if s] + (
        [f"identical:{args.identical}"] if args.identical else []
    )
    print(
        f"{'case':<24}{'pods':>8}{'scheduled':>11}{'seconds':>9}{'pods/s':>9}{'nodes':>7}{'$/h':>11}{'peak RSS MiB':>14}"
    )
    for job in jobs:
        run = subprocess.run([sys.executable, __file__, "--one", job], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(run.stderr.strip() or f"{job} failed with exit status {run.returncode}")
        row = json.loads(run.stdout)
        print(
            f"{row['case']:<24}{row['pods']:>8}{row['scheduled']:>11}{row['seconds']:>9}{row['pods_per_second']:>9}"
            f"{row['nodes']:>7}{row['dollars_per_hour']:>11}{row['peak_rss_mib']:>14}"
        )


if __name__ == "__main__":
    main()
