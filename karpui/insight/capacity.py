"""Capacity at a glance: pod requests against allocatable per node, NodePool and cluster, and NodePool limit use.

Everything is read from summary columns and JSON paths in SQL (no manifest is decoded for the totals), so the
overview stays cheap at thousands of nodes; only the rows of the page shown read their bodies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Sum
from django.db.models.fields.json import KT

from karpui import models
from karpui.insight import paging
from provisioner.cluster.objects import parse_timestamp
from provisioner.quantity import QuantityError, parse_quantity

GIB = 2**30
# A limit or a node at or past these shares of its capacity is coloured: amber when high, red when full.
HIGH_PERCENT = 80
FULL_PERCENT = 100

NODEPOOL = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
PRICE = "karpui.dev/price"


def level(percent: float) -> str:
    """The colour class of a share: "full" (red) from 100 %, "high" (amber) from 80 %, else "ok"."""
    if percent >= FULL_PERCENT:
        return "full"
    return "high" if percent >= HIGH_PERCENT else "ok"


def percent(used: int | float, total: int | float) -> float:
    """`used` as a share of `total`, in % (0 of nothing is 0 %, anything of nothing is full)."""
    if total <= 0:
        return 0.0 if used <= 0 else float(FULL_PERCENT)
    return 100.0 * used / total


def cores(millis: int) -> str:
    return f"{millis / 1000:.2f}"


def gib(size: int) -> str:
    return f"{size / GIB:.1f}"


@dataclass(frozen=True)
class Usage:
    """Pod requests against allocatable: CPU in millicores, memory in bytes."""

    cpu_requested: int = 0
    cpu_allocatable: int = 0
    memory_requested: int = 0
    memory_allocatable: int = 0

    @property
    def cpu_percent(self) -> float:
        return percent(self.cpu_requested, self.cpu_allocatable)

    @property
    def memory_percent(self) -> float:
        return percent(self.memory_requested, self.memory_allocatable)

    @property
    def utilisation(self) -> float:
        """The busier of CPU and memory: the resource that decides whether another pod fits."""
        return max(self.cpu_percent, self.memory_percent)

    def bars(self) -> list[dict[str, Any]]:
        """One bar per resource, in the unit of its column (cores, GiB)."""
        return [
            _bar(
                "cpu",
                self.cpu_percent,
                f"{cores(self.cpu_requested)} / {cores(self.cpu_allocatable)}",
            ),
            _bar(
                "memory",
                self.memory_percent,
                f"{gib(self.memory_requested)} / {gib(self.memory_allocatable)}",
            ),
        ]

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.cpu_requested + other.cpu_requested,
            self.cpu_allocatable + other.cpu_allocatable,
            self.memory_requested + other.memory_requested,
            self.memory_allocatable + other.memory_allocatable,
        )


def _bar(resource: str, share: float, text: str) -> dict[str, Any]:
    return {
        "resource": resource,
        "percent": round(share),
        "width": min(round(share), 100),
        "level": level(share),
        "text": text,
    }


@dataclass(frozen=True)
class NodeCapacity:
    """One node's row: where it runs, what it costs, and how full its pods' requests make it."""

    name: str
    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    created: str
    pods: int
    usage: Usage

    @property
    def utilisation(self) -> float:
        return self.usage.utilisation


@dataclass(frozen=True)
class LimitUse:
    """One resource of a NodePool's spec.limits against what its NodeClaims hold (status.resources)."""

    resource: str
    used: str
    limit: str
    percent: float

    @property
    def level(self) -> str:
        return level(self.percent)

    @property
    def over(self) -> bool:
        return self.percent > FULL_PERCENT


@dataclass(frozen=True)
class PoolCapacity:
    name: str
    nodes: int
    price: float
    usage: Usage
    limits: list[LimitUse] = field(default_factory=list)

    @property
    def level(self) -> str:
        """The worst of its limits' colours: a pool at or over any limit can launch nothing more there."""
        order = ("ok", "high", "full")
        return max((limit.level for limit in self.limits), key=order.index, default="ok")


def _quantity(text: Any) -> int:
    """A stored quantity in milli-units; 0 when absent or not a quantity (a hand-written Node may hold anything)."""
    if text in (None, ""):
        return 0
    try:
        return parse_quantity(str(text))
    except QuantityError:
        return 0


def _price(text: Any) -> float:
    try:
        return float(text or 0)
    except ValueError:
        return 0.0


def node_capacity_list(*, cluster: models.Cluster) -> list[NodeCapacity]:
    """Every node with its requests, allocatable, labels and price, by name: two queries, no manifest decoded."""
    usage = {
        row["node_name"]: row
        for row in models.KubeObject.objects.filter(cluster=cluster, kind="Pod")
        .exclude(node_name="")
        .exclude(phase__in=("Succeeded", "Failed"))
        .values("node_name")
        .annotate(cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), pods=Count("id"))
    }
    nodes = (
        models.KubeObject.objects.filter(cluster=cluster, kind="Node")
        .order_by("name")
        .values_list(
            "name",
            KT(f"body__metadata__labels__{NODEPOOL}"),
            KT(f"body__metadata__labels__{INSTANCE_TYPE}"),
            KT(f"body__metadata__labels__{ZONE}"),
            KT(f"body__metadata__labels__{CAPACITY_TYPE}"),
            KT(f"body__metadata__annotations__{PRICE}"),
            KT("body__metadata__creationTimestamp"),
            KT("body__status__allocatable__cpu"),
            KT("body__status__allocatable__memory"),
        )
    )
    rows = []
    for name, pool, instance_type, zone, capacity_type, price, created, cpu, memory in nodes:
        used = usage.get(name, {})
        rows.append(
            NodeCapacity(
                name=name,
                nodepool=pool or "",
                instance_type=instance_type or "",
                zone=zone or "",
                capacity_type=capacity_type or "",
                price=_price(price),
                created=created or "",
                pods=used.get("pods", 0),
                usage=Usage(
                    cpu_requested=used.get("cpu") or 0,
                    cpu_allocatable=_quantity(cpu),
                    memory_requested=used.get("memory") or 0,
                    memory_allocatable=_quantity(memory) // 1000,
                ),
            )
        )
    return rows


def limit_uses(limits: Mapping[str, Any], resources: Mapping[str, Any]) -> list[LimitUse]:
    """Each limited resource's use, in the order people read limits (cpu, memory, then the rest by name)."""
    order = {"cpu": 0, "memory": 1}
    uses = []
    for resource in sorted(limits, key=lambda r: (order.get(r, 2), r)):
        used, limit = _quantity(resources.get(resource, 0)), _quantity(limits[resource])
        uses.append(
            LimitUse(
                resource=resource,
                used=str(resources.get(resource, "0")),
                limit=str(limits[resource]),
                percent=percent(used, limit),
            )
        )
    return uses


def pool_capacity_list(*, cluster: models.Cluster, nodes: Iterable[NodeCapacity]) -> list[PoolCapacity]:
    """Per NodePool (and "" for nodes of none): its nodes' summed requests and allocatable, and its limits' use.
    One query besides the nodes."""
    totals: dict[str, tuple[int, float, Usage]] = {}
    for node in nodes:
        count, price, usage = totals.get(node.nodepool, (0, 0.0, Usage()))
        totals[node.nodepool] = (count + 1, price + node.price, usage + node.usage)
    pools = []
    for row in models.NodePool.objects.filter(cluster=cluster):
        count, price, usage = totals.pop(row.name, (0, 0.0, Usage()))
        resources = (row.status or {}).get("resources") or {}
        pools.append(PoolCapacity(row.name, count, price, usage, limit_uses(row.spec.get("limits") or {}, resources)))
    # Nodes of a deleted NodePool, or of none (static nodes), still hold capacity.
    for name, (count, price, usage) in sorted(totals.items()):
        pools.append(PoolCapacity(name, count, price, usage))
    return pools


def capacity_summary(*, cluster: models.Cluster) -> dict[str, Any]:
    """The overview's capacity: the cluster's requests against allocatable, and each NodePool's with its limits."""
    nodes = node_capacity_list(cluster=cluster)
    total = Usage()
    for node in nodes:
        total = total + node.usage
    return {"total": total, "node_count": len(nodes), "pools": pool_capacity_list(cluster=cluster, nodes=nodes)}


NODES_PAGE_SIZE = 75  # a row is ~0.5 KB with 63-character names: 75 keep the page, not only its partial, under 50 KB
# Column -> sort key; "-column" sorts descending. Ties break by name, so pages are stable between polls.
NODE_SORTS: dict[str, Any] = {
    "name": lambda n: n.name,
    "nodepool": lambda n: n.nodepool,
    "type": lambda n: n.instance_type,
    "zone": lambda n: n.zone,
    "capacity": lambda n: n.capacity_type,
    "cpu": lambda n: n.usage.cpu_percent,
    "memory": lambda n: n.usage.memory_percent,
    "utilisation": lambda n: n.utilisation,
    "price": lambda n: n.price,
    "age": lambda n: n.created,  # sorted descending for ascending age: the newest node is the youngest
    "pods": lambda n: n.pods,
}


@dataclass(frozen=True)
class NodeFilters:
    """What the nodes page narrows to; empty text and None mean "any"."""

    nodepool: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    search: str = ""
    min_utilisation: int | None = None
    max_utilisation: int | None = None

    def keeps(self, node: NodeCapacity) -> bool:
        exact = (
            (self.nodepool, node.nodepool),
            (self.instance_type, node.instance_type),
            (self.zone, node.zone),
            (self.capacity_type, node.capacity_type),
        )
        if any(wanted and wanted != value for wanted, value in exact):
            return False
        if self.search and self.search.lower() not in node.name.lower():
            return False
        # Whole percents, as the page shows them: "at most 30 %" keeps a node shown as 30 %.
        shown = round(node.utilisation)
        if self.min_utilisation is not None and shown < self.min_utilisation:
            return False
        return self.max_utilisation is None or shown <= self.max_utilisation


def nodes_page(
    *,
    cluster: models.Cluster,
    filters: NodeFilters = NodeFilters(),
    sort: str = "name",
    page: int = 1,
    everything: bool = False,
) -> dict[str, Any]:
    """eks-node-viewer's view, sortable and filterable: the page's nodes with requests against allocatable, price,
    age and lifecycle state, and the choices each filter offers. Only the page's Nodes and NodeClaims are decoded."""
    every = node_capacity_list(cluster=cluster)
    column = sort.removeprefix("-")
    if column not in NODE_SORTS:
        sort, column = "name", "name"
    kept = sorted((n for n in every if filters.keeps(n)), key=lambda n: n.name)
    kept.sort(key=NODE_SORTS[column], reverse=sort.startswith("-") != (column == "age"))
    total = len(kept)
    page, pages = paging.page_within(total, page, NODES_PAGE_SIZE)
    shown = kept if everything else kept[(page - 1) * NODES_PAGE_SIZE : page * NODES_PAGE_SIZE]
    states = _states(cluster, [n.name for n in shown])
    return {
        "nodes": [
            {"node": n, "bars": n.usage.bars(), "state": states.get(n.name, "static"), "age": age(cluster, n.created)}
            for n in shown
        ],
        "pools": pool_capacity_list(cluster=cluster, nodes=every),
        "choices": {
            "nodepool": sorted({n.nodepool for n in every} - {""}),
            "instance_type": sorted({n.instance_type for n in every} - {""}),
            "zone": sorted({n.zone for n in every} - {""}),
            "capacity_type": sorted({n.capacity_type for n in every} - {""}),
        },
        "sort": sort,
        "page": page,
        "pages": pages,
        "total": total,
        "count": len(every),
    }


def _states(cluster: models.Cluster, names: list[str]) -> dict[str, str]:
    """The lifecycle state of each named node, from its Node and NodeClaim (two queries for the page)."""
    nodes = dict(
        models.KubeObject.objects.filter(cluster=cluster, kind="Node", name__in=names).values_list("name", "body")
    )
    claims = {
        (body.get("status") or {}).get("nodeName"): body
        for body in models.KubeObject.objects.filter(
            cluster=cluster, kind="NodeClaim", body__status__nodeName__in=names
        ).values_list("body", flat=True)
    }
    return {name: node_state(body, claims.get(name)) for name, body in nodes.items()}


def age(cluster: models.Cluster, created: str) -> float:
    """Seconds since `created` on the cluster's clock (0 for no or a malformed timestamp)."""
    try:
        return max(cluster.clock.timestamp() - parse_timestamp(created), 0.0) if created else 0.0
    except ValueError:
        return 0.0


def node_state(node: dict[str, Any], claim: dict[str, Any] | None) -> str:
    """deleting, disrupting, cordoned, drifted, initialized, registered, launched, pending, or static (no NodeClaim)."""
    taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
    if node["metadata"].get("deletionTimestamp") or (claim and claim["metadata"].get("deletionTimestamp")):
        return "deleting"
    if "karpenter.sh/disrupted" in taints:
        return "disrupting"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    if claim is None:
        return "static"
    conditions = {c["type"]: c["status"] for c in (claim.get("status") or {}).get("conditions") or []}
    for state in ("Initialized", "Registered", "Launched"):
        if conditions.get(state) == "True":
            return "drifted" if conditions.get("Drifted") == "True" else state.lower()
    return "pending"
