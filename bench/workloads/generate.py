"""Writes bench/workloads/corpus/: issue 24's generated workloads (fixed seed), each replayable from its files.

Usage: python bench/workloads/generate.py [--seed 24] [--out bench/workloads/corpus]

Every workload is a directory in the format of bench/workloads/karpenter-1.x/README.md (manifests plus a
`scenario.yaml` of steps), with one more step, `compare: NAME`: where bench/versus_karpenter.py records what the
provisioner decided (NodeClaims, cost, pending pods, disruptions since the last `compare`). The categories are the
issue's list: requirements and node selectors, taints and tolerations, topology spread (zone and hostname), pod
(anti-)affinity, NodePool limits and weights, DaemonSets, spot and on-demand, minValues, consolidation after
scale-downs, and DRA. The same seed writes the same files byte for byte, so a later change is checked against the
same workloads (and against Karpenter's recorded decisions in bench/workloads/corpus/karpenter.json).
`--seed 2027 --out bench/workloads/holdout` writes the holdout set: the same categories, drawn with a seed karpui's
engine was never tuned against, and compared with Karpenter once (its decisions in holdout/karpenter.json).
"""

from __future__ import annotations

import argparse
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
IMAGE = "registry.k8s.io/pause:3.10"
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
CPUS = ("100m", "250m", "500m", "750m", "1", "1500m", "2", "3")
MEMORIES = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "3Gi")
# A scale-down's disruption is compared once it has settled (bench/versus_karpenter.py's `settle` step), at most this
# long after the scale: Karpenter's budget of 10 % deletes 16 empty nodes in 12 commands, 15-25 s apart.
SCALE_DOWN_SETTLE = "6m"
SCALE_UP_WAIT = "25s"

Workload = dict[str, Any]


def node_class() -> dict[str, Any]:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}


def nodepool(
    name: str = "default",
    requirements: list[dict[str, Any]] | None = None,
    *,
    taints: list[dict[str, str]] | None = None,
    limits: dict[str, str] | None = None,
    weight: int | None = None,
    consolidate_after: str = "10s",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": requirements
                if requirements is not None
                else [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "expireAfter": "720h",
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after},
    }
    if taints:
        spec["template"]["spec"]["taints"] = taints
    if limits:
        spec["limits"] = limits
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def deployment(name: str, replicas: int, cpu: str, memory: str, **pod: Any) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    spec.update(pod)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def daemonset(name: str, cpu: str, memory: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {"name": "main", "image": IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                    ],
                },
            },
        },
    }


def size(rng: random.Random) -> tuple[str, str]:
    return rng.choice(CPUS), rng.choice(MEMORIES)


def steps(scale_down: tuple[str, int] | None = None) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = [{"apply": ["manifests.yaml"]}, {"wait": SCALE_UP_WAIT}, {"compare": "up"}]
    if scale_down is not None:
        made += [
            {"scale": {"target": f"deploy/{scale_down[0]}", "replicas": scale_down[1]}},
            {"settle": SCALE_DOWN_SETTLE},
            {"compare": "down"},
        ]
    return made


# Categories: each makes one workload from the generator's random state -------------------------------------------


def requirements(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    choice = rng.randrange(5)
    selector: dict[str, str] = {}
    pool_requirements = None
    if choice == 0:
        selector = {"kubernetes.io/arch": rng.choice(["amd64", "arm64"])}
        pool_requirements = [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ]
        what = f"node selector {selector}"
    elif choice == 1:
        family = rng.choice(["c", "s", "m"])
        selector = {"karpenter.kwok.sh/instance-family": family}
        what = f"instance family {family} by node selector"
    elif choice == 2:
        above = rng.choice([3, 7, 15])
        pool_requirements = [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Gt", "values": [str(above)]},
        ]
        what = f"instance-cpu Gt {above}"
    elif choice == 3:
        zone = rng.choice(ZONES)
        selector = {"topology.kubernetes.io/zone": zone}
        what = f"zone {zone} by node selector"
    else:
        below = rng.choice([5, 9, 17])
        pool_requirements = [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": [str(below)]},
        ]
        what = f"instance-cpu Lt {below}"
    replicas = rng.randint(2, 12)
    pod: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    return {
        "feature": f"requirements and node selectors: {replicas} pods of {cpu}/{memory}, {what}",
        "objects": [
            node_class(),
            nodepool(requirements=pool_requirements),
            deployment("app", replicas, cpu, memory, **pod),
        ],
        "steps": steps(),
    }


def taints(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    tolerated, plain = rng.randint(1, 6), rng.randint(1, 6)
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    return {
        "feature": f"taints and tolerations: a tainted NodePool (weight 50) beside an untainted one, {tolerated} "
        f"tolerating and {plain} plain pods of {cpu}/{memory}",
        "objects": [
            node_class(),
            nodepool("tainted", taints=[taint], weight=50),
            nodepool("plain"),
            deployment(
                "tolerating",
                tolerated,
                cpu,
                memory,
                tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            ),
            deployment("plain", plain, cpu, memory),
        ],
        "steps": steps(),
    }


def topology_spread(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    key = rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
    skew = rng.choice([1, 1, 2])
    replicas = rng.randint(3, 9)
    constraint = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    return {
        "feature": f"topology spread on {key} (maxSkew {skew}): {replicas} pods of {cpu}/{memory}",
        "objects": [
            node_class(),
            nodepool(),
            deployment("spread", replicas, cpu, memory, topologySpreadConstraints=[constraint]),
        ],
        "steps": steps(),
    }


def affinity(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    kind = rng.choice(["anti-hostname", "anti-zone", "affinity-zone", "affinity-hostname"])
    term = {
        "topologyKey": "kubernetes.io/hostname" if kind.endswith("hostname") else "topology.kubernetes.io/zone",
        "labelSelector": {"matchLabels": {"app": "web" if kind.startswith("anti") else "backend"}},
    }
    objects = [node_class(), nodepool()]
    if kind.startswith("anti"):
        replicas = rng.randint(2, 4 if kind == "anti-zone" else 6)
        objects.append(
            deployment(
                "web",
                replicas,
                cpu,
                memory,
                affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            )
        )
        what = f"{replicas} pods, required anti-affinity on {term['topologyKey']}"
    else:
        backends, fronts = rng.randint(1, 3), rng.randint(2, 6)
        objects.append(deployment("backend", backends, cpu, memory))
        objects.append(
            deployment(
                "front",
                fronts,
                cpu,
                memory,
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            )
        )
        what = f"{backends} backends and {fronts} fronts with required affinity to them on {term['topologyKey']}"
    return {"feature": f"pod (anti-)affinity: {what} ({cpu}/{memory})", "objects": objects, "steps": steps()}


def limits_and_weights(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    if rng.random() < 0.5:
        limit = rng.choice([4, 6, 10])
        replicas = rng.randint(4, 16)
        return {
            "feature": f"NodePool limits: cpu {limit}, {replicas} pods of {cpu}/{memory} (some may stay pending)",
            "objects": [node_class(), nodepool(limits={"cpu": str(limit)}), deployment("app", replicas, cpu, memory)],
            "steps": steps(),
        }
    heavy, light = rng.choice([(10, 90), (80, 20), (50, 60)])
    family = rng.choice(["s", "m"])
    replicas = rng.randint(2, 10)
    heavy_requirements = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": [family]},
    ]
    return {
        "feature": f"NodePool weights: {family}-family pool weight {heavy} beside a default pool weight {light}, "
        f"{replicas} pods of {cpu}/{memory}",
        "objects": [
            node_class(),
            nodepool("family", heavy_requirements, weight=heavy),
            nodepool("default", weight=light),
            deployment("app", replicas, cpu, memory),
        ],
        "steps": steps(),
    }


def daemonsets(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    ds_cpu, ds_memory = rng.choice(["100m", "250m", "500m"]), rng.choice(["64Mi", "256Mi", "1Gi"])
    replicas = rng.randint(2, 10)
    return {
        "feature": f"DaemonSets: a DaemonSet of {ds_cpu}/{ds_memory} on every node, {replicas} pods of {cpu}/{memory}",
        "objects": [
            node_class(),
            nodepool(),
            daemonset("agent", ds_cpu, ds_memory),
            deployment("app", replicas, cpu, memory),
        ],
        "steps": steps(),
    }


def capacity_types(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    replicas = rng.randint(2, 10)
    choice = rng.randrange(3)
    base = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    if choice == 0:
        pool = nodepool(
            requirements=[
                *base,
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            ]
        )
        pod: dict[str, Any] = {}
        what = "a NodePool of spot and on-demand"
    elif choice == 1:
        pool = nodepool(
            requirements=[*base, {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
        )
        pod = {}
        what = "a spot-only NodePool"
    else:
        pool = nodepool(
            requirements=[
                *base,
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            ]
        )
        pod = {"nodeSelector": {"karpenter.sh/capacity-type": "on-demand"}}
        what = "pods selecting on-demand from a NodePool of both"
    return {
        "feature": f"spot and on-demand: {what}, {replicas} pods of {cpu}/{memory}",
        "objects": [node_class(), pool, deployment("app", replicas, cpu, memory, **pod)],
        "steps": steps(),
    }


def min_values(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    replicas = rng.randint(1, 8)
    types = rng.choice([2, 3, 5])
    key = rng.choice(["node.kubernetes.io/instance-type", "karpenter.kwok.sh/instance-family"])
    count = types if key.endswith("instance-type") else rng.choice([2, 3])
    requirement = {"key": key, "operator": "Exists", "minValues": count}
    pool = nodepool(
        requirements=[
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            requirement,
        ]
    )
    return {
        "feature": f"minValues: {key} at least {count}, {replicas} pods of {cpu}/{memory}",
        "objects": [node_class(), pool, deployment("app", replicas, cpu, memory)],
        "steps": steps(),
    }


def consolidation(rng: random.Random) -> Workload:
    cpu, memory = size(rng)
    replicas = rng.randint(6, 16)
    left = rng.choice([0, 1, replicas // 3, replicas // 2])
    spread = rng.random() < 0.4
    pod: dict[str, Any] = {}
    what = ""
    if spread:
        pod["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "app"}},
            }
        ]
        what = ", spread softly over hostnames"
    return {
        "feature": f"consolidation after a scale-down: {replicas} pods of {cpu}/{memory}{what}, scaled to {left}",
        "objects": [node_class(), nodepool(), deployment("app", replicas, cpu, memory, **pod)],
        "steps": steps(("app", left)),
    }


def dra(rng: random.Random) -> Workload:
    replicas = rng.randint(1, 3)
    family = rng.choice(["m", "c"])
    objects = [
        node_class(),
        nodepool(),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.example.com",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "test.karpenter.sh/v1alpha1",
            "kind": "DRAConfig",
            "metadata": {"name": "fake-gpu"},
            "spec": {
                "driver": "gpu.example.com",
                "pools": [
                    {
                        "name": "fake-gpu-pool",
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": [family]}
                                ]
                            }
                        ],
                        "resourceSlices": [{"devices": [{"name": "gpu-0"}]}],
                    }
                ],
            },
        },
        deployment(
            "dra",
            replicas,
            "100m",
            "128Mi",
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        ),
    ]
    objects[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {
        "feature": f"DRA: {replicas} pods each claiming one gpu.example.com device, published on {family}-family nodes",
        "karpenter": {"env": {"IGNORE_DRA_REQUESTS": "false"}},
        "objects": objects,
        "steps": steps(),
    }


CATEGORIES: tuple[tuple[str, Callable[[random.Random], Workload], int], ...] = (
    ("requirements", requirements, 7),
    ("taints", taints, 5),
    ("spread", topology_spread, 6),
    ("affinity", affinity, 6),
    ("limits-weights", limits_and_weights, 6),
    ("daemonsets", daemonsets, 5),
    ("capacity-type", capacity_types, 6),
    ("minvalues", min_values, 5),
    ("consolidation", consolidation, 8),
    ("dra", dra, 3),
)


def generate(seed: int, out: Path) -> list[str]:
    rng = random.Random(seed)
    if out.exists():
        for old in out.iterdir():
            if old.is_dir():
                shutil.rmtree(old)
    out.mkdir(parents=True, exist_ok=True)
    names = []
    number = 0
    for category, make, count in CATEGORIES:
        for _ in range(count):
            number += 1
            made = make(rng)
            name = f"{number:03d}-{category}"
            folder = out / name
            folder.mkdir()
            (folder / "manifests.yaml").write_text(yaml.safe_dump_all(made["objects"], sort_keys=False))
            scenario: dict[str, Any] = {"feature": made["feature"]}
            if "karpenter" in made:
                scenario["karpenter"] = made["karpenter"]
            scenario["steps"] = made["steps"]
            (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False, width=120))
            names.append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--out", type=Path, default=HERE / "corpus")
    args = parser.parse_args()
    names = generate(args.seed, args.out)
    print(f"{len(names)} workloads in {args.out} (seed {args.seed})")


if __name__ == "__main__":
    main()
