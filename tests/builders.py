"""Builders for domain objects with sensible defaults: tests say only what matters to them."""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Mapping, Sequence

from provisioner.catalog import InstanceType, Offering, Overhead
from provisioner.catalog.kwok import kwok_catalog
from provisioner.nodes import DaemonSet, Node
from provisioner.objects import Budget, NodeClassRef, NodePool, NodeSelectorRequirement
from provisioner.pods import (
    DO_NOT_SCHEDULE,
    HostPort,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)
from provisioner.quantity import MILLI, parse_quantity, parse_resources
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve
from provisioner.selectors import LabelSelector
from provisioner.taints import Taint, Toleration

_uids = itertools.count(1)
KWOK = kwok_catalog().instance_types
KWOK_CLASS = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ARCH = "kubernetes.io/arch"


def req(key: str, operator: str, *values: str, min_values: int | None = None) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, operator, tuple(values), min_values)


def nodepool(
    name: str = "default",
    *requirements: NodeSelectorRequirement,
    weight: int | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    startup_taints: Sequence[Taint] = (),
    limits: Mapping[str, str] | None = None,
    budgets: Sequence[Budget] | None = None,
    consolidate_after: str = "0s",
) -> NodePool:
    return NodePool(
        name=name,
        node_class_ref=KWOK_CLASS,
        requirements=tuple(requirements),
        template_labels=dict(labels or {}),
        taints=tuple(taints),
        startup_taints=tuple(startup_taints),
        limits=parse_resources(limits or {}),
        weight=weight,
        consolidate_after=consolidate_after,
        **({"budgets": tuple(budgets)} if budgets is not None else {}),
    )


def selector(**labels: str) -> LabelSelector:
    return LabelSelector.parse(",".join(f"{k}={v}" for k, v in labels.items()))


def pod(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[Sequence[Requirement]] = (),
    preferred: Sequence[tuple[int, Sequence[Requirement]]] = (),
    tolerations: Sequence[Toleration] = (),
    affinity: Sequence[PodAffinityTerm] = (),
    anti_affinity: Sequence[PodAffinityTerm] = (),
    preferred_affinity: Sequence[PodAffinityTerm] = (),
    preferred_anti_affinity: Sequence[PodAffinityTerm] = (),
    spread: Sequence[TopologySpreadConstraint] = (),
    host_ports: Sequence[int] = (),
    requests: Mapping[str, str] | None = None,
    created: float | None = None,
    owner: OwnerReference | None = None,
    node_name: str = "",
    phase: str = "Pending",
) -> Pod:
    number = next(_uids)
    resources = dict(requests or {})
    if cpu is not None:
        resources["cpu"] = cpu
    if memory is not None:
        resources["memory"] = memory
    return Pod(
        name=name or f"pod-{number}",
        namespace=namespace,
        uid=f"uid-{number:06d}",
        labels=dict(labels or {}),
        created=float(number) if created is None else created,
        requests=parse_resources(resources),
        node_selector=dict(node_selector or {}),
        required_terms=tuple(NodeSelectorTerm(Requirements(term)) for term in required),
        preferred_terms=tuple(PreferredSchedulingTerm(w, Requirements(term)) for w, term in preferred),
        tolerations=tuple(tolerations),
        affinity=tuple(affinity),
        anti_affinity=tuple(anti_affinity),
        preferred_affinity=tuple(preferred_affinity),
        preferred_anti_affinity=tuple(preferred_anti_affinity),
        spread=tuple(spread),
        host_ports=tuple(HostPort(p) for p in host_ports),
        owner=owner,
        node_name=node_name,
        unschedulable=not node_name,
        phase="Running" if node_name else phase,
    )


def spread(
    key: str, max_skew: int = 1, when: str = DO_NOT_SCHEDULE, min_domains: int | None = None, **match: str
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(max_skew, key, when, selector(**match), min_domains)


def term(key: str, weight: int = 0, **match: str) -> PodAffinityTerm:
    return PodAffinityTerm(topology_key=key, selector=selector(**match), weight=weight)


def r(key: str, operator: str, *values: str) -> Requirement:
    return Requirement.from_operator(operator, key, values)


def instance_type(
    name: str,
    cpu: str,
    memory: str,
    pods: int = 5,
    *,
    arch: str = "amd64",
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    zones: Sequence[tuple[str, str]] = (
        ("test-zone-1", "spot"),
        ("test-zone-2", "spot"),
        ("test-zone-1", "on-demand"),
        ("test-zone-2", "on-demand"),
        ("test-zone-3", "on-demand"),
    ),
    price: float | None = None,
    prices: Mapping[str, float] | None = None,
    overhead: bool = True,
) -> InstanceType:
    """Karpenter's fake provider: price 0.1/CPU + 0.1/GB (+1 per GPU), overhead 100m CPU and 10Mi memory."""
    capacity = {"cpu": parse_quantity(cpu), "memory": parse_quantity(memory), "pods": pods * MILLI}
    gpus = 0
    for resource, amount in (extra or {}).items():
        capacity[resource] = parse_quantity(amount)
        gpus += parse_quantity(amount) // MILLI
    if price is None:
        price = 0.1 * capacity["cpu"] / MILLI + 0.1 * capacity["memory"] / MILLI / 1e9 + gpus
    offerings = tuple(Offering(zone, ct, (prices or {}).get(ct, price)) for zone, ct in zones)
    return InstanceType(
        name=name,
        capacity=capacity,
        offerings=offerings,
        labels={ARCH: arch, "kubernetes.io/os": "linux", **(labels or {})},
        overhead=Overhead(kube_reserved={"cpu": 100, "memory": 10 * 2**20 * MILLI}) if overhead else Overhead(),
    )


def fake_catalog() -> list[InstanceType]:
    """The default types of Karpenter's fake cloud provider."""
    return [
        instance_type("default-instance-type", "4", "4Gi"),
        instance_type("small-instance-type", "2", "2Gi"),
        instance_type("gpu-vendor-instance-type", "4", "4Gi", extra={"fake.com/vendor-a": "2"}),
        instance_type("gpu-vendor-b-instance-type", "4", "4Gi", extra={"fake.com/vendor-b": "2"}),
        instance_type("arm-instance-type", "16", "128Gi", arch="arm64"),
        instance_type("single-pod-instance-type", "4", "4Gi", pods=1),
    ]


@functools.cache
def assorted_catalog() -> tuple[InstanceType, ...]:
    """Karpenter's fake.InstanceTypesAssorted(), in its order: one type per CPU x memory x zone x capacity type x OS x
    architecture (1,344), named `<cpu>-cpu-<mem>-mem-<arch>-<os>-<zone>-<capacity type>`, one offering each."""
    return tuple(
        instance_type(
            f"{cpu}-cpu-{memory}-mem-{arch}-{os}-{zone}-{capacity_type}",
            str(cpu),
            f"{memory}Gi",
            arch=arch,
            labels={"kubernetes.io/os": os},
            zones=[(zone, capacity_type)],
        )
        for cpu, memory, zone, capacity_type, os, arch in itertools.product(
            (1, 2, 4, 8, 16, 32, 64),
            (1, 2, 4, 8, 16, 32, 64, 128),
            ("test-zone-1", "test-zone-2", "test-zone-3"),
            ("spot", "on-demand"),
            ("linux", "windows"),
            ("amd64", "arm64"),
        )
    )


def node(
    name: str,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: int = 110,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    scheduled: Sequence[Pod] = (),
    initialized: bool = True,
    managed: bool = False,
    nodepool_name: str = "",
) -> Node:
    allocatable = {"cpu": parse_quantity(cpu), "memory": parse_quantity(memory), "pods": pods * MILLI}
    all_labels = {HOSTNAME: name, **(labels or {})}
    if nodepool_name:
        all_labels["karpenter.sh/nodepool"] = nodepool_name
    return Node(
        name=name,
        labels=all_labels,
        allocatable=allocatable,
        capacity=dict(allocatable),
        taints=tuple(taints),
        pods=tuple(scheduled),
        initialized=initialized,
        managed=managed,
        nodepool=nodepool_name,
    )


def daemonset(
    cpu: str, memory: str, *, host_ports: Sequence[int] = (), tolerations: Sequence[Toleration] = ()
) -> DaemonSet:
    template = pod(cpu, memory, host_ports=host_ports, tolerations=tolerations, owner=OwnerReference("DaemonSet", "ds"))
    return DaemonSet(name=f"ds-{template.uid}", namespace="kube-system", template=template)


def schedule(pods, pools=None, types=None, nodes=(), daemonsets=(), **options):
    """Solve with one or more NodePools over `types` (the fake provider catalog by default)."""
    pools = pools if pools is not None else [nodepool()]
    types = types if types is not None else fake_catalog()
    offers = [PoolOffer(p, types) for p in pools]
    return solve(
        SchedulingInput(pods=list(pods), pools=offers, nodes=list(nodes), daemonsets=list(daemonsets), **options)
    )


def placed_types(result) -> list[str]:
    return [nc.cheapest.instance_type.name for nc in result.new_nodeclaims]


def zone_counts(result, key: str = ZONE) -> list[int]:
    counts: dict[str, int] = {}
    for nc in result.new_nodeclaims:
        values = nc.requirements.get(key).values
        assert len(values) == 1, f"NodeClaim not pinned on {key}: {values}"
        counts[next(iter(values))] = counts.get(next(iter(values)), 0) + len(nc.pods)
    return sorted(counts.values())


# A NodePool manifest with only what the API requires, for tests of what one more field does.
MINIMAL_NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            }
        }
    },
}


def with_spec(path: str, value):
    """A copy of MINIMAL_NODEPOOL with `value` set at a dotted path below the document."""
    doc = copy.deepcopy(MINIMAL_NODEPOOL)
    keys = path.split(".")
    target = doc
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value
    return doc
