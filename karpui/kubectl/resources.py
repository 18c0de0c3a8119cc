"""The resource kinds `karp` knows: their names, how to list them as manifests, and their table columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from karpui import models, store
from karpui.kubectl.printers import Column, Manifest, age
from provisioner.quantity import format_quantity, parse_quantity


@dataclass(frozen=True)
class Resource:
    kind: str
    plural: str
    group: str
    aliases: tuple[str, ...]
    columns: tuple[Column, ...]
    list_manifests: Callable[[models.Cluster], list[Manifest]]

    @property
    def qualified(self) -> str:
        """kubectl's `nodepools.karpenter.sh` form used in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _nodepools(cluster: models.Cluster) -> list[Manifest]:
    return [store.nodepool_manifest(row) for row in models.NodePool.objects.filter(cluster=cluster).order_by("name")]


def _nodeclasses(kind: str) -> Callable[[models.Cluster], list[Manifest]]:
    def list_manifests(cluster: models.Cluster) -> list[Manifest]:
        rows = models.NodeClass.objects.filter(cluster=cluster, kind=kind).order_by("name")
        return [store.nodeclass_manifest(row) for row in rows]

    return list_manifests


def _instance_types(cluster: models.Cluster) -> list[Manifest]:
    return [
        store.instance_type_manifest(row.name, store.instance_type_domain(it))
        for row in store.catalogs_with_types()
        for it in row.instance_types.all()
    ]


def _cheapest(manifest: Manifest, capacity_type: str) -> str:
    prices = [
        o["price"] for o in manifest["spec"]["offerings"] if o["capacityType"] == capacity_type and o["available"]
    ]
    return f"{min(prices):.6f}" if prices else "-"


def _quantity(section: str, resource: str) -> Callable[[Manifest, object], str]:
    def value(manifest: Manifest, now: object) -> str:
        text = manifest.get("status" if section == "allocatable" else "spec", {}).get(section, {}).get(resource)
        return format_quantity(parse_quantity(text), resource) if text else ""

    return value


_READY = Column(
    "READY",
    lambda m, now: next(
        (c["status"] for c in m.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "Unknown"
    ),
)
_AGE = Column("AGE", age)

RESOURCES: Sequence[Resource] = (
    Resource(
        kind="NodePool",
        plural="nodepools",
        group="karpenter.sh",
        aliases=("nodepool", "nodepools", "np"),
        columns=(
            Column("NAME", lambda m, now: m["metadata"]["name"]),
            Column("NODECLASS", lambda m, now: m["spec"]["template"]["spec"]["nodeClassRef"]["name"]),
            Column("NODES", lambda m, now: str(m.get("status", {}).get("resources", {}).get("nodes", "0"))),
            _READY,
            _AGE,
            Column("WEIGHT", lambda m, now: str(m["spec"].get("weight", "")), wide_only=True),
            Column("CPU", lambda m, now: str(m.get("status", {}).get("resources", {}).get("cpu", "0")), wide_only=True),
            Column(
                "MEMORY",
                lambda m, now: str(m.get("status", {}).get("resources", {}).get("memory", "0")),
                wide_only=True,
            ),
        ),
        list_manifests=_nodepools,
    ),
    Resource(
        kind="KWOKNodeClass",
        plural="kwoknodeclasses",
        group="karpenter.kwok.sh",
        aliases=("kwoknodeclass", "kwoknodeclasses", "kwoknc"),
        columns=(Column("NAME", lambda m, now: m["metadata"]["name"]), _READY, _AGE),
        list_manifests=_nodeclasses("KWOKNodeClass"),
    ),
    Resource(
        kind="EC2NodeClass",
        plural="ec2nodeclasses",
        group="karpenter.k8s.aws",
        aliases=("ec2nodeclass", "ec2nodeclasses", "ec2nc"),
        columns=(Column("NAME", lambda m, now: m["metadata"]["name"]), _READY, _AGE),
        list_manifests=_nodeclasses("EC2NodeClass"),
    ),
    Resource(
        kind="InstanceType",
        plural="instancetypes",
        group="karpui.dev",
        aliases=("instancetype", "instancetypes", "it"),
        columns=(
            Column("NAME", lambda m, now: m["metadata"]["name"]),
            Column("CATALOG", lambda m, now: m["spec"]["catalog"]),
            Column("CPU", _quantity("capacity", "cpu")),
            Column("MEMORY", _quantity("capacity", "memory")),
            Column("PODS", _quantity("capacity", "pods")),
            Column("ARCH", lambda m, now: m["metadata"]["labels"].get("kubernetes.io/arch", "")),
            Column("OS", lambda m, now: m["metadata"]["labels"].get("kubernetes.io/os", "")),
            Column("ON-DEMAND", lambda m, now: _cheapest(m, "on-demand")),
            Column("SPOT", lambda m, now: _cheapest(m, "spot")),
            Column("ALLOC-CPU", _quantity("allocatable", "cpu"), wide_only=True),
            Column("ALLOC-MEMORY", _quantity("allocatable", "memory"), wide_only=True),
            Column(
                "ZONES", lambda m, now: ",".join(sorted({o["zone"] for o in m["spec"]["offerings"]})), wide_only=True
            ),
        ),
        list_manifests=_instance_types,
    ),
)

_BY_NAME = {alias: r for r in RESOURCES for alias in (*r.aliases, r.qualified, f"{r.aliases[0]}.{r.group}")}


def resolve(name: str) -> Resource:
    """Find a resource by kubectl name (singular, plural, short or qualified), case-insensitively."""
    resource = _BY_NAME.get(name.lower())
    if resource is None:
        raise LookupError(f'the server doesn\'t have a resource type "{name}"')
    return resource
