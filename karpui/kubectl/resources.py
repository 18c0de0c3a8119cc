"""The resource kinds `karp` knows: their names, how to list them as manifests, and their table columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpui import models, services, store
from karpui.kubectl.printers import Column, Manifest, age
from provisioner.dra.declarations import declaration_to_manifest, declare
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
    declarations = services.device_declarations()
    return [
        store.instance_type_manifest(row.name, it)
        for row in store.catalogs_with_types()
        for it in declare(row.name, [store.instance_type_domain(t) for t in row.instance_types.all()], declarations)
    ]


def _declarations(cluster: models.Cluster) -> list[Manifest]:
    return [declaration_to_manifest(d) for d in services.device_declarations()]


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


def _lab(kind: str) -> Callable[[models.Cluster], list[Manifest]]:
    def list_manifests(cluster: models.Cluster) -> list[Manifest]:
        return [
            row.body
            for row in models.KubeObject.objects.filter(cluster=cluster, kind=kind).order_by("namespace", "name")
        ]

    return list_manifests


def _name(m: Manifest, now: object) -> str:
    return str(m["metadata"]["name"])


def _condition(m: Manifest, kind: str) -> str:
    for item in (m.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return str(item.get("status"))
    return "Unknown"


def _node_status(m: Manifest, now: object) -> str:
    ready = _condition(m, "Ready") if (m.get("status") or {}).get("conditions") else "True"
    text = "Ready" if ready == "True" else "NotReady"
    if (m.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _roles(m: Manifest, now: object) -> str:
    labels = m["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _label(key: str) -> Callable[[Manifest, object], str]:
    return lambda m, now: str((m["metadata"].get("labels") or {}).get(key, ""))


def _pod_ready(m: Manifest, now: object) -> str:
    containers = len((m.get("spec") or {}).get("containers") or [])
    running = (m.get("status") or {}).get("phase") == "Running"
    return f"{containers if running else 0}/{containers}"


def _pod_status(m: Manifest, now: object) -> str:
    if m["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((m.get("status") or {}).get("phase") or "Pending")


def _field(*path: str, default: str = "") -> Callable[[Manifest, object], str]:
    def value(m: Manifest, now: object) -> str:
        current: Any = m
        for part in path:
            current = current.get(part) if isinstance(current, dict) else None
        return default if current is None else str(current)

    return value


def _event_object(m: Manifest, now: object) -> str:
    involved = m.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_age(m: Manifest, now: Any) -> str:
    return age({"metadata": {"creationTimestamp": m.get("lastTimestamp")}}, now)


def _ready_of(ready_key: str, total_key: str) -> Callable[[Manifest, object], str]:
    return lambda m, now: (
        f"{(m.get('status') or {}).get(ready_key, 0)}/{(m.get('spec') or {}).get(total_key, (m.get('status') or {}).get(total_key, 0))}"
    )


LAB_RESOURCES: Sequence[Resource] = (
    Resource(
        "Node",
        "nodes",
        "",
        ("node", "nodes", "no"),
        (
            Column("NAME", _name),
            Column("STATUS", _node_status),
            Column("ROLES", _roles),
            _AGE,
            Column("VERSION", lambda m, now: "v1.34.0"),
            Column("INSTANCE-TYPE", _label("node.kubernetes.io/instance-type"), wide_only=True),
            Column("CAPACITY-TYPE", _label("karpenter.sh/capacity-type"), wide_only=True),
            Column("ZONE", _label("topology.kubernetes.io/zone"), wide_only=True),
            Column("NODEPOOL", _label("karpenter.sh/nodepool"), wide_only=True),
        ),
        _lab("Node"),
    ),
    Resource(
        "Pod",
        "pods",
        "",
        ("pod", "pods", "po"),
        (
            Column("NAME", _name),
            Column("READY", _pod_ready),
            Column("STATUS", _pod_status),
            Column("RESTARTS", lambda m, now: "0"),
            _AGE,
            Column("NODE", _field("spec", "nodeName", default="<none>"), wide_only=True),
        ),
        _lab("Pod"),
    ),
    Resource(
        "NodeClaim",
        "nodeclaims",
        "karpenter.sh",
        ("nodeclaim", "nodeclaims", "nc"),
        (
            Column("NAME", _name),
            Column("TYPE", _label("node.kubernetes.io/instance-type")),
            Column("CAPACITY", _label("karpenter.sh/capacity-type")),
            Column("ZONE", _label("topology.kubernetes.io/zone")),
            Column("NODE", _field("status", "nodeName")),
            Column("READY", lambda m, now: _condition(m, "Ready")),
            _AGE,
            Column("ID", _field("status", "providerID"), wide_only=True),
            Column("NODEPOOL", _label("karpenter.sh/nodepool"), wide_only=True),
            Column("NODECLASS", _field("spec", "nodeClassRef", "name"), wide_only=True),
        ),
        _lab("NodeClaim"),
    ),
    Resource(
        "Deployment",
        "deployments",
        "apps",
        ("deployment", "deployments", "deploy"),
        (
            Column("NAME", _name),
            Column("READY", _ready_of("readyReplicas", "replicas")),
            Column("UP-TO-DATE", _field("status", "updatedReplicas", default="0")),
            Column("AVAILABLE", _field("status", "readyReplicas", default="0")),
            _AGE,
        ),
        _lab("Deployment"),
    ),
    Resource(
        "ReplicaSet",
        "replicasets",
        "apps",
        ("replicaset", "replicasets", "rs"),
        (
            Column("NAME", _name),
            Column("DESIRED", _field("spec", "replicas", default="0")),
            Column("CURRENT", _field("status", "replicas", default="0")),
            Column("READY", _field("status", "readyReplicas", default="0")),
            _AGE,
        ),
        _lab("ReplicaSet"),
    ),
    Resource(
        "DaemonSet",
        "daemonsets",
        "apps",
        ("daemonset", "daemonsets", "ds"),
        (
            Column("NAME", _name),
            Column("DESIRED", _field("status", "desiredNumberScheduled", default="0")),
            Column("READY", _field("status", "numberReady", default="0")),
            _AGE,
        ),
        _lab("DaemonSet"),
    ),
    Resource(
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "policy",
        ("pdb", "pdbs", "poddisruptionbudget", "poddisruptionbudgets"),
        (
            Column("NAME", _name),
            Column("MIN AVAILABLE", _field("spec", "minAvailable", default="N/A")),
            Column("MAX UNAVAILABLE", _field("spec", "maxUnavailable", default="N/A")),
            _AGE,
        ),
        _lab("PodDisruptionBudget"),
    ),
    Resource(
        "Namespace",
        "namespaces",
        "",
        ("namespace", "namespaces", "ns"),
        (Column("NAME", _name), Column("STATUS", lambda m, now: "Active"), _AGE),
        _lab("Namespace"),
    ),
    Resource(
        "Event",
        "events",
        "",
        ("event", "events", "ev"),
        (
            Column("LAST SEEN", _event_age),
            Column("TYPE", _field("type")),
            Column("REASON", _field("reason")),
            Column("OBJECT", _event_object),
            Column("MESSAGE", _field("message")),
        ),
        _lab("Event"),
    ),
    Resource(
        "DeviceClass",
        "deviceclasses",
        "resource.k8s.io",
        ("deviceclass", "deviceclasses"),
        (Column("NAME", _name), _AGE),
        _lab("DeviceClass"),
    ),
    Resource(
        "ResourceClaim",
        "resourceclaims",
        "resource.k8s.io",
        ("resourceclaim", "resourceclaims"),
        (Column("NAME", _name), _AGE),
        _lab("ResourceClaim"),
    ),
    Resource(
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        "resource.k8s.io",
        ("resourceclaimtemplate", "resourceclaimtemplates"),
        (Column("NAME", _name), _AGE),
        _lab("ResourceClaimTemplate"),
    ),
    Resource(
        "ResourceSlice",
        "resourceslices",
        "resource.k8s.io",
        ("resourceslice", "resourceslices"),
        (
            Column("NAME", _name),
            Column("NODE", _field("spec", "nodeName")),
            Column("DRIVER", _field("spec", "driver")),
            _AGE,
        ),
        _lab("ResourceSlice"),
    ),
    Resource(
        "DRAConfig",
        "draconfigs",
        "test.karpenter.sh",
        ("draconfig", "draconfigs"),
        (Column("NAME", _name), _AGE),
        _lab("DRAConfig"),
    ),
    Resource(
        "DisruptionCommand",
        "disruptioncommands",
        "karpui.dev",
        ("disruptioncommand", "disruptioncommands", "dc"),
        (
            Column("NAME", _name),
            Column("REASON", _field("spec", "reason")),
            Column("DECISION", _field("spec", "decision")),
            Column("NODES", lambda m, now: ",".join(c["node"] for c in m["spec"]["candidates"])),
            Column("SAVINGS", lambda m, now: f"${m['spec']['savings']:.4f}/h"),
            Column("PHASE", _field("status", "phase")),
            _AGE,
            Column("MODE", _field("spec", "approvalMode"), wide_only=True),
            Column("DECIDED-BY", _field("spec", "approval", "by"), wide_only=True),
            Column("MESSAGE", _field("status", "message"), wide_only=True),
        ),
        _lab("DisruptionCommand"),
    ),
    Resource(
        "DeviceDeclaration",
        "devicedeclarations",
        "karpui.dev",
        ("devicedeclaration", "devicedeclarations"),
        (
            Column("NAME", _name),
            Column("DRIVER", _field("spec", "driver")),
            Column("DEVICES", lambda m, now: str(len(m["spec"].get("devices") or []))),
            Column(
                "SELECTOR",
                lambda m, now: ",".join(
                    f"{k}={v}"
                    for k, v in sorted((m["spec"].get("instanceTypeSelector") or {}).get("matchLabels", {}).items())
                ),
            ),
        ),
        _declarations,
    ),
)
NAMESPACED = frozenset(
    {
        "Pod",
        "Deployment",
        "ReplicaSet",
        "DaemonSet",
        "PodDisruptionBudget",
        "Event",
        "ResourceClaim",
        "ResourceClaimTemplate",
    }
)

_BY_NAME = {
    alias: r for r in (*RESOURCES, *LAB_RESOURCES) for alias in (*r.aliases, r.qualified, f"{r.aliases[0]}.{r.group}")
}


def resolve(name: str) -> Resource:
    """Find a resource by kubectl name (singular, plural, short or qualified), case-insensitively."""
    resource = _BY_NAME.get(name.lower())
    if resource is None:
        raise LookupError(f'the server doesn\'t have a resource type "{name}"')
    return resource
