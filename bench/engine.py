"""The engine alone, in memory: how long a lab takes to bring N pods to Running, what an idle tick costs, peak RSS.

Usage: python bench/engine.py [--pods 20000] [--ticks 30]
No database: a Lab (the simulated cluster side and karpui's controllers on one in-memory API server) built directly,
as the warm engine holds it between ticks. One NodePool of 8-vCPU kwok types, Deployments of 200 pods asking
700m CPU and 1Gi each, so about 11 pods a node: 20,000 pods make about 1,800 nodes. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner.catalog.kwok import kwok_catalog
from provisioner.lab import Lab, LabConfig
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass

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


def running(lab: Lab) -> int:
    return len(lab.store.list("Pod", fields={"status.phase": "Running"}))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args()
    lab = new_lab()
    start = time.perf_counter()
    for index in range(args.pods // 200):
        lab.store.create(deployment(index, 200))
    lab.settle()
    created = time.perf_counter() - start
    seconds = 0
    while running(lab) < args.pods and seconds < 600:
        lab.advance(1.0)
        seconds += 1
    to_running = time.perf_counter() - start
    nodes = len(lab.store.list("Node"))
    ticks = []
    for _ in range(args.ticks):
        tick = time.perf_counter()
        lab.advance(1.0)
        ticks.append(time.perf_counter() - tick)
    print(f"pods {args.pods}, nodes {nodes}, running {running(lab)}")
    print(f"apply + settle: {created:.2f} s; to all Running: {to_running:.2f} s wall for {seconds} s of lab time")
    print(
        f"idle 1 s tick over {args.ticks} ticks: median {statistics.median(ticks) * 1000:.0f} ms, "
        f"max {max(ticks) * 1000:.0f} ms (the max includes the 10 s disruption pass)"
    )
    print(f"peak RSS {rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
