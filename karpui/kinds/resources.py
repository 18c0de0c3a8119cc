"""The resource kinds karpui serves, in one registry for `karp` and the Kubernetes API (karpui.kubeapi): their
names (singular, plural, short names, categories), API group and served versions, scope, which table holds them
(karpui.clusters.storage reads it), subresources, and their table columns as `kubectl get` prints them (Karpenter's
CRD printer columns for its kinds, kubectl's own for the built-in ones)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpui.kinds import display
from karpui.kinds.printers import Column, Manifest, age
from provisioner.cluster.storageclasses import BETA_STORAGE_CLASS, is_default
from provisioner.quantity import format_quantity, parse_quantity

# Where a kind's objects live: the lab's KubeObject rows, or a configuration table of their own.
LAB, NODEPOOLS, NODECLASSES, DECLARATIONS, CATALOGS = "lab", "nodepools", "nodeclasses", "declarations", "catalogs"
READ_VERBS = ("get", "list", "watch")
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    kind: str
    plural: str
    group: str
    columns: tuple[Column, ...]
    versions: tuple[str, ...] = ("v1",)  # served, the preferred (stored) one first
    namespaced: bool = False
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    store: str = LAB
    verbs: tuple[str, ...] = ALL_VERBS
    # Columns of an older served version whose CRD prints others (Karpenter's v1beta1 NodeClaim), by version.
    older_columns: tuple[tuple[str, tuple[Column, ...]], ...] = ()
    # Subresources of an older served version whose CRD had fewer (v1beta1 NodePools had no scale), by version.
    older_subresources: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def aliases(self) -> tuple[str, ...]:
        return (self.singular, self.plural, *self.short_names)

    def columns_at(self, version: str) -> tuple[Column, ...]:
        return dict(self.older_columns).get(version, self.columns)

    def subresources_at(self, version: str) -> tuple[str, ...]:
        return dict(self.older_subresources).get(version, self.subresources)

    @property
    def version(self) -> str:
        return self.versions[0]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """kubectl's `nodepools.karpenter.sh` form used in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


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


def _name(m: Manifest, now: object) -> str:
    return str(m["metadata"]["name"])


def _condition(m: Manifest, kind: str) -> str:
    for item in (m.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return str(item.get("status"))
    return ""


def _ready(m: Manifest, now: object) -> str:
    return _condition(m, "Ready") or "Unknown"


def _label(key: str) -> Callable[[Manifest, object], str]:
    return lambda m, now: str((m["metadata"].get("labels") or {}).get(key, ""))


def _field(*path: str, default: str = "") -> Callable[[Manifest, object], str]:
    def value(m: Manifest, now: object) -> str:
        current: Any = m
        for part in path:
            current = current.get(part) if isinstance(current, dict) else None
        return default if current is None else str(current)

    return value


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


def _address(kind: str) -> Callable[[Manifest, object], str]:
    def value(m: Manifest, now: object) -> str:
        addresses = (m.get("status") or {}).get("addresses") or []
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    return value


def _pod_ready(m: Manifest, now: object) -> str:
    containers = len((m.get("spec") or {}).get("containers") or [])
    running = (m.get("status") or {}).get("phase") == "Running"
    return f"{containers if running else 0}/{containers}"


def _pod_status(m: Manifest, now: object) -> str:
    if m["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((m.get("status") or {}).get("phase") or "Pending")


def _containers(what: str) -> Callable[[Manifest, object], str]:
    def value(m: Manifest, now: object) -> str:
        containers = (((m.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        return ",".join(str(c.get(what, "")) for c in containers)

    return value


def _conditions(what: str) -> Callable[[Manifest, object], str]:
    """A CRD column of `.status.conditions[*].WHAT`: every condition's, comma-separated as kubectl prints a list."""

    def value(m: Manifest, now: object) -> str:
        return ",".join(str(c.get(what, "")) for c in (m.get("status") or {}).get("conditions") or [])

    return value


def _template_containers(what: str) -> Callable[[Manifest, object], str]:
    def value(m: Manifest, now: object) -> str:
        containers = (((m.get("template") or {}).get("spec") or {}).get("containers")) or []
        return ",".join(str(c.get(what, "")) for c in containers)

    return value


def _template_labels(m: Manifest, now: object) -> str:
    labels = ((m.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def _selector(m: Manifest, now: object) -> str:
    return display.label_selector((m.get("spec") or {}).get("selector"))


def _node_selector(m: Manifest, now: object) -> str:
    selector = ((((m.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector")) or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


def _event_object(m: Manifest, now: object) -> str:
    involved = m.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_age(m: Manifest, now: Any) -> str:
    return age({"metadata": {"creationTimestamp": m.get("lastTimestamp")}}, now)


def _event_first_seen(m: Manifest, now: Any) -> str:
    return age({"metadata": {"creationTimestamp": m.get("firstTimestamp")}}, now)


def _ready_of(ready_key: str, total_key: str) -> Callable[[Manifest, object], str]:
    return lambda m, now: (
        f"{(m.get('status') or {}).get(ready_key, 0)}/{(m.get('spec') or {}).get(total_key, (m.get('status') or {}).get(total_key, 0))}"
    )


def _created_at(m: Manifest, now: object) -> str:
    """A ClusterRole's CREATED AT: its creationTimestamp as it is (kube-apiserver prints no age for roles)."""
    return str(m["metadata"].get("creationTimestamp", ""))


def _subjects(kind: str) -> Callable[[Manifest, object], str]:
    """A binding's subjects of one kind, as kube-apiserver's table prints them (`kube-system/karpenter`)."""

    def value(m: Manifest, now: object) -> str:
        return ", ".join(
            f"{s.get('namespace')}/{s.get('name')}" if kind == "ServiceAccount" else str(s.get("name", ""))
            for s in m.get("subjects") or []
            if s.get("kind") == kind
        )

    return value


def _claim_state(m: Manifest, now: object) -> str:
    """kubectl's STATE of a ResourceClaim: pending, or allocated (and reserved for a pod), or deleted."""
    status = m.get("status") or {}
    states = []
    if m["metadata"].get("deletionTimestamp"):
        states.append("deleted")
    if status.get("allocation"):
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states) or "pending"


# kubectl's short names of access modes, in its order (helper.GetAccessModesAsString).
_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _access_modes(modes: Any) -> str:
    given = set(modes or ())
    return ",".join(short for mode, short in _ACCESS_MODES if mode in given)


def _volume_phase(m: Manifest, now: object) -> str:
    if m["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((m.get("status") or {}).get("phase") or "")


def _storage_class_of(m: Manifest, now: object) -> str:
    annotations = m["metadata"].get("annotations") or {}
    if BETA_STORAGE_CLASS in annotations:  # kube-apiserver's printers still prefer the older annotation
        return str(annotations[BETA_STORAGE_CLASS])
    return str((m.get("spec") or {}).get("storageClassName") or "")


def _claim_bound(what: str) -> Callable[[Manifest, object], str]:
    """A PVC's CAPACITY or ACCESS MODES: what its status says, once it names a volume (blank before)."""

    def value(m: Manifest, now: object) -> str:
        if not (m.get("spec") or {}).get("volumeName"):
            return ""
        status = m.get("status") or {}
        return (
            str((status.get("capacity") or {}).get("storage", ""))
            if what == "capacity"
            else _access_modes(status.get("accessModes"))
        )

    return value


def _claim_ref(m: Manifest, now: object) -> str:
    ref = (m.get("spec") or {}).get("claimRef")
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if isinstance(ref, dict) else ""


def _bool(*path: str, default: str) -> Callable[[Manifest, object], str]:
    """A boolean field as Go prints one (true/false), `default` when unset."""
    field = _field(*path, default=default)
    return lambda m, now: field(m, now).lower()


_NAME = Column("Name", _name)
_AGE = Column("Age", age)
_CRD_AGE = Column("Age", age, type="date")
_READY = Column("Ready", _ready)
_NODECLASS_NAME = Column("NodeClass", lambda m, now: m["spec"]["template"]["spec"]["nodeClassRef"]["name"])
_WEIGHT = Column("Weight", lambda m, now: str(m["spec"].get("weight", "")), wide_only=True, type="integer")
# Built-in kinds' columns as kube-apiserver prints them; karp leaves out those the lab never fills.
_WIDE_WORKLOAD = (
    Column("Containers", _containers("name"), wide_only=True),
    Column("Images", _containers("image"), wide_only=True),
    Column("Selector", _selector, wide_only=True),
)

RESOURCES: Sequence[Resource] = (
    Resource(
        kind="NodePool",
        plural="nodepools",
        group="karpenter.sh",
        versions=("v1", "v1beta1"),
        short_names=("np",),
        categories=("karpenter",),
        subresources=("status", "scale"),  # scale: .spec.replicas / .status.nodes (static NodePools)
        older_subresources=(("v1beta1", ("status",)),),  # static capacity came with v1
        store=NODEPOOLS,
        columns=(
            _NAME,
            _NODECLASS_NAME,
            Column(
                "Nodes",
                lambda m, now: str(
                    (m.get("status") or {}).get("nodes", (m.get("status") or {}).get("resources", {}).get("nodes", 0))
                ),
            ),
            _READY,
            _CRD_AGE,
            _WEIGHT,
            Column("CPU", lambda m, now: str(m.get("status", {}).get("resources", {}).get("cpu", "0")), wide_only=True),
            Column(
                "Memory",
                lambda m, now: str(m.get("status", {}).get("resources", {}).get("memory", "0")),
                wide_only=True,
            ),
        ),
        # Karpenter's v1beta1 CRD printed only the node class (and the weight with -o wide), not even an age.
        older_columns=(("v1beta1", (_NAME, _NODECLASS_NAME, _WEIGHT)),),
    ),
    Resource(
        kind="KWOKNodeClass",
        plural="kwoknodeclasses",
        group="karpenter.kwok.sh",
        versions=("v1alpha1",),
        short_names=("kwoknc", "kwokncs"),
        categories=("karpenter",),
        subresources=("status",),
        store=NODECLASSES,
        columns=(_NAME, _READY, _CRD_AGE),
    ),
    Resource(
        kind="EC2NodeClass",
        plural="ec2nodeclasses",
        group="karpenter.k8s.aws",
        versions=("v1", "v1beta1"),
        short_names=("ec2nc", "ec2ncs"),
        categories=("karpenter",),
        subresources=("status",),
        store=NODECLASSES,
        columns=(_NAME, _READY, _CRD_AGE, Column("Role", _field("spec", "role"), wide_only=True)),
    ),
    Resource(
        kind="InstanceType",
        plural="instancetypes",
        group="karpui.dev",
        versions=("v1alpha1",),
        short_names=("it",),
        store=CATALOGS,
        verbs=("get", "list"),
        columns=(
            _NAME,
            Column("Catalog", lambda m, now: m["spec"]["catalog"]),
            Column("CPU", _quantity("capacity", "cpu")),
            Column("Memory", _quantity("capacity", "memory")),
            Column("Pods", _quantity("capacity", "pods")),
            Column("Arch", lambda m, now: m["metadata"]["labels"].get("kubernetes.io/arch", "")),
            Column("OS", lambda m, now: m["metadata"]["labels"].get("kubernetes.io/os", "")),
            Column("On-Demand", lambda m, now: _cheapest(m, "on-demand")),
            Column("Spot", lambda m, now: _cheapest(m, "spot")),
            Column("Alloc-CPU", _quantity("allocatable", "cpu"), wide_only=True),
            Column("Alloc-Memory", _quantity("allocatable", "memory"), wide_only=True),
            Column(
                "Zones", lambda m, now: ",".join(sorted({o["zone"] for o in m["spec"]["offerings"]})), wide_only=True
            ),
        ),
    ),
)

LAB_RESOURCES: Sequence[Resource] = (
    Resource(
        "Node",
        "nodes",
        "",
        short_names=("no",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Status", _node_status),
            Column("Roles", _roles),
            _AGE,
            Column("Version", lambda m, now: "v1.34.0"),
            Column("Internal-IP", _address("InternalIP"), wide_only=True, karp=False),
            Column("External-IP", _address("ExternalIP"), wide_only=True, karp=False),
            Column(
                "OS-Image", _field("status", "nodeInfo", "osImage", default="<unknown>"), wide_only=True, karp=False
            ),
            Column(
                "Kernel-Version",
                _field("status", "nodeInfo", "kernelVersion", default="<unknown>"),
                wide_only=True,
                karp=False,
            ),
            Column(
                "Container-Runtime",
                _field("status", "nodeInfo", "containerRuntimeVersion", default="<unknown>"),
                wide_only=True,
                karp=False,
            ),
            # What Karpenter users look for on a node; kubectl shows the same with -L.
            Column("Instance-Type", _label("node.kubernetes.io/instance-type"), wide_only=True),
            Column("Capacity-Type", _label("karpenter.sh/capacity-type"), wide_only=True),
            Column("Zone", _label("topology.kubernetes.io/zone"), wide_only=True),
            Column("NodePool", _label("karpenter.sh/nodepool"), wide_only=True),
        ),
    ),
    Resource(
        "Pod",
        "pods",
        "",
        namespaced=True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "eviction", "log"),
        columns=(
            _NAME,
            Column("Ready", _pod_ready),
            Column("Status", _pod_status),
            Column("Restarts", lambda m, now: "0", type="integer"),
            _AGE,
            Column("IP", _field("status", "podIP", default="<none>"), wide_only=True, karp=False),
            Column("Node", _field("spec", "nodeName", default="<none>"), wide_only=True),
            Column(
                "Nominated Node", _field("status", "nominatedNodeName", default="<none>"), wide_only=True, karp=False
            ),
            Column("Readiness Gates", lambda m, now: "<none>", wide_only=True, karp=False),
        ),
    ),
    Resource(
        "NodeClaim",
        "nodeclaims",
        "karpenter.sh",
        versions=("v1", "v1beta1"),
        short_names=("nc",),
        categories=("karpenter",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Type", _label("node.kubernetes.io/instance-type")),
            Column("Capacity", _label("karpenter.sh/capacity-type")),
            Column("Zone", _label("topology.kubernetes.io/zone")),
            Column("Node", _field("status", "nodeName")),
            _READY,
            _CRD_AGE,
            Column("ImageID", _field("status", "imageID"), wide_only=True, karp=False),
            Column("ID", _field("status", "providerID"), wide_only=True),
            Column("NodePool", _label("karpenter.sh/nodepool"), wide_only=True),
            Column("NodeClass", _field("spec", "nodeClassRef", "name"), wide_only=True),
            Column("Drifted", lambda m, now: _condition(m, "Drifted"), wide_only=True, karp=False),
        ),
        # Karpenter's v1beta1 CRD printed the capacity type only with -o wide, and no ID, ImageID or Drifted.
        older_columns=(
            (
                "v1beta1",
                (
                    _NAME,
                    Column("Type", _label("node.kubernetes.io/instance-type")),
                    Column("Zone", _label("topology.kubernetes.io/zone")),
                    Column("Node", _field("status", "nodeName")),
                    _READY,
                    _CRD_AGE,
                    Column("Capacity", _label("karpenter.sh/capacity-type"), wide_only=True),
                    Column("NodePool", _label("karpenter.sh/nodepool"), wide_only=True),
                    Column("NodeClass", _field("spec", "nodeClassRef", "name"), wide_only=True),
                ),
            ),
        ),
    ),
    Resource(
        "Deployment",
        "deployments",
        "apps",
        namespaced=True,
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
        columns=(
            _NAME,
            Column("Ready", _ready_of("readyReplicas", "replicas")),
            Column("Up-to-date", _field("status", "updatedReplicas", default="0"), type="integer"),
            Column("Available", _field("status", "availableReplicas", default="0"), type="integer"),
            _AGE,
            *_WIDE_WORKLOAD,
        ),
    ),
    Resource(
        "ReplicaSet",
        "replicasets",
        "apps",
        namespaced=True,
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
        columns=(
            _NAME,
            Column("Desired", _field("spec", "replicas", default="0"), type="integer"),
            Column("Current", _field("status", "replicas", default="0"), type="integer"),
            Column("Ready", _field("status", "readyReplicas", default="0"), type="integer"),
            _AGE,
            *_WIDE_WORKLOAD,
        ),
    ),
    Resource(
        "DaemonSet",
        "daemonsets",
        "apps",
        namespaced=True,
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Desired", _field("status", "desiredNumberScheduled", default="0"), type="integer"),
            Column("Current", _field("status", "currentNumberScheduled", default="0"), type="integer"),
            Column("Ready", _field("status", "numberReady", default="0"), type="integer"),
            Column("Up-to-date", _field("status", "updatedNumberScheduled", default="0"), type="integer"),
            Column("Available", _field("status", "numberAvailable", default="0"), type="integer"),
            Column("Node Selector", _node_selector),
            _AGE,
            *_WIDE_WORKLOAD,
        ),
    ),
    Resource(
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "policy",
        namespaced=True,
        short_names=("pdb",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Min Available", _field("spec", "minAvailable", default="N/A")),
            Column("Max Unavailable", _field("spec", "maxUnavailable", default="N/A")),
            Column("Allowed Disruptions", _field("status", "disruptionsAllowed", default="0"), type="integer"),
            _AGE,
        ),
    ),
    Resource(
        "Namespace",
        "namespaces",
        "",
        short_names=("ns",),
        subresources=("status",),
        columns=(_NAME, Column("Status", _field("status", "phase", default="Active")), _AGE),
    ),
    Resource(
        "Event",
        "events",
        "",
        namespaced=True,
        short_names=("ev",),
        columns=(
            Column("Last Seen", _event_age),
            Column("Type", _field("type")),
            Column("Reason", _field("reason")),
            Column("Object", _event_object),
            Column("Message", _field("message")),
            Column("Subobject", _field("involvedObject", "fieldPath"), wide_only=True, karp=False),
            Column("Source", _field("source", "component"), wide_only=True, karp=False),
            Column("First Seen", _event_first_seen, wide_only=True, karp=False),
            Column("Count", _field("count", default="1"), wide_only=True, karp=False, type="integer"),
            Column("Name", _name, wide_only=True, karp=False),
        ),
    ),
    Resource(
        "Lease",
        "leases",
        "coordination.k8s.io",
        namespaced=True,
        columns=(_NAME, Column("Holder", _field("spec", "holderIdentity")), _AGE),
    ),
    Resource(
        "ServiceAccount",
        "serviceaccounts",
        "",
        namespaced=True,
        short_names=("sa",),
        columns=(
            _NAME,
            Column("Secrets", lambda m, now: str(len(m.get("secrets") or [])), type="integer"),
            _AGE,
        ),
    ),
    Resource(
        "ClusterRole",
        "clusterroles",
        "rbac.authorization.k8s.io",
        columns=(_NAME, Column("Created At", _created_at, type="date")),
    ),
    Resource(
        "ClusterRoleBinding",
        "clusterrolebindings",
        "rbac.authorization.k8s.io",
        columns=(
            _NAME,
            Column("Role", lambda m, now: f"{m['roleRef'].get('kind', '')}/{m['roleRef'].get('name', '')}"),
            _AGE,
            Column("Users", _subjects("User"), wide_only=True),
            Column("Groups", _subjects("Group"), wide_only=True),
            Column("ServiceAccounts", _subjects("ServiceAccount"), wide_only=True),
        ),
    ),
    Resource(
        "DeviceClass",
        "deviceclasses",
        "resource.k8s.io",
        columns=(_NAME, _AGE),
    ),
    Resource(
        "ResourceClaim",
        "resourceclaims",
        "resource.k8s.io",
        namespaced=True,
        subresources=("status",),
        columns=(_NAME, Column("State", _claim_state, karp=False), _AGE),
    ),
    Resource(
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        "resource.k8s.io",
        namespaced=True,
        columns=(_NAME, _AGE),
    ),
    Resource(
        "ResourceSlice",
        "resourceslices",
        "resource.k8s.io",
        columns=(
            _NAME,
            Column("Node", _field("spec", "nodeName")),
            Column("Driver", _field("spec", "driver")),
            Column("Pool", _field("spec", "pool", "name"), karp=False),
            _AGE,
        ),
    ),
    Resource(
        "NodeOverlay",
        "nodeoverlays",
        "karpenter.sh",
        versions=("v1alpha1",),
        short_names=("overlays",),
        categories=("karpenter",),
        subresources=("status",),
        columns=(_NAME, Column("Ready", lambda m, now: _condition(m, "Ready")), _CRD_AGE, _WEIGHT),
    ),
    Resource(
        "CapacityBuffer",
        "capacitybuffers",
        "autoscaling.x-k8s.io",
        versions=("v1beta1",),
        namespaced=True,
        short_names=("cb",),
        categories=("autoscaling",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Strategy", _field("spec", "provisioningStrategy")),
            Column("PodTemplate", _field("status", "podTemplateRef", "name")),
            Column("Replicas", _field("status", "replicas"), type="integer"),
            Column("ConditionsType", _conditions("type")),
            Column("ConditionsStatus", _conditions("status")),
            Column("ConditionsReason", _conditions("reason")),
            _CRD_AGE,
        ),
    ),
    Resource(
        "PodTemplate",
        "podtemplates",
        "",
        namespaced=True,
        columns=(
            _NAME,
            Column("Containers", _template_containers("name")),
            Column("Images", _template_containers("image")),
            Column("Pod Labels", _template_labels),
        ),
    ),
    Resource(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "",
        namespaced=True,
        short_names=("pvc",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Status", _volume_phase),
            Column("Volume", _field("spec", "volumeName")),
            Column("Capacity", _claim_bound("capacity")),
            Column("Access Modes", _claim_bound("accessModes")),
            Column("StorageClass", _storage_class_of),
            Column("VolumeAttributesClass", _field("spec", "volumeAttributesClassName", default="<unset>")),
            _AGE,
            Column("VolumeMode", _field("spec", "volumeMode", default="<unset>"), wide_only=True),
        ),
    ),
    Resource(
        "PersistentVolume",
        "persistentvolumes",
        "",
        short_names=("pv",),
        subresources=("status",),
        columns=(
            _NAME,
            Column("Capacity", _field("spec", "capacity", "storage")),
            Column("Access Modes", lambda m, now: _access_modes((m.get("spec") or {}).get("accessModes"))),
            Column("Reclaim Policy", _field("spec", "persistentVolumeReclaimPolicy")),
            Column("Status", _volume_phase),
            Column("Claim", _claim_ref),
            Column("StorageClass", _storage_class_of),
            Column("VolumeAttributesClass", _field("spec", "volumeAttributesClassName", default="<unset>")),
            Column("Reason", _field("status", "reason")),
            _AGE,
            Column("VolumeMode", _field("spec", "volumeMode", default="<unset>"), wide_only=True),
        ),
    ),
    Resource(
        "StorageClass",
        "storageclasses",
        "storage.k8s.io",
        short_names=("sc",),
        columns=(
            # printStorageClass: the default class is named "NAME (default)".
            Column("Name", lambda m, now: _name(m, now) + (" (default)" if is_default(m) else "")),
            Column("Provisioner", _field("provisioner")),
            # kube-apiserver's printer says what an unset field means, though defaulting has set both by then.
            Column("ReclaimPolicy", _field("reclaimPolicy", default="Delete")),
            Column("VolumeBindingMode", _field("volumeBindingMode", default="Immediate")),
            Column("AllowVolumeExpansion", _bool("allowVolumeExpansion", default="false")),
            _AGE,
        ),
    ),
    Resource(
        "CSINode",
        "csinodes",
        "storage.k8s.io",
        columns=(
            _NAME,
            # printCSINode: how many drivers the node publishes.
            Column("Drivers", lambda m, now: str(len((m.get("spec") or {}).get("drivers") or [])), type="integer"),
            _AGE,
        ),
    ),
    Resource(
        "DRAConfig",
        "draconfigs",
        "test.karpenter.sh",
        versions=("v1alpha1",),
        columns=(
            _NAME,
            Column("Driver", _field("spec", "driver"), karp=False),
            Column("Nodes", _field("status", "nodeCount"), type="integer", karp=False),
            Column("ResourceSlices", _field("status", "resourceSliceCount"), type="integer", karp=False),
            Column("Ready", lambda m, now: _condition(m, "Ready"), karp=False),
            _CRD_AGE,
        ),
    ),
    Resource(
        "DisruptionCommand",
        "disruptioncommands",
        "karpui.dev",
        versions=("v1alpha1",),
        short_names=("dc",),
        verbs=READ_VERBS,  # decided with `karp approve|deny` and the dashboard, which check who may
        columns=(
            _NAME,
            Column("Reason", _field("spec", "reason")),
            Column("Decision", _field("spec", "decision")),
            Column("Nodes", lambda m, now: ",".join(c["node"] for c in m["spec"]["candidates"])),
            Column("Savings", lambda m, now: f"${m['spec']['savings']:.4f}/h"),
            Column("Phase", _field("status", "phase")),
            _CRD_AGE,
            Column("Mode", _field("spec", "approvalMode"), wide_only=True),
            Column("Decided-By", _field("spec", "approval", "by"), wide_only=True),
            Column("Message", _field("status", "message"), wide_only=True),
        ),
    ),
    Resource(
        "DeviceDeclaration",
        "devicedeclarations",
        "karpui.dev",
        versions=("v1alpha1",),
        store=DECLARATIONS,
        columns=(
            _NAME,
            Column("Driver", _field("spec", "driver")),
            Column("Devices", lambda m, now: str(len(m["spec"].get("devices") or [])), type="integer"),
            Column("Selector", lambda m, now: display.label_selector(m["spec"].get("instanceTypeSelector"))),
        ),
    ),
)
ALL: Sequence[Resource] = (*RESOURCES, *LAB_RESOURCES)
NAMESPACED = frozenset(r.kind for r in ALL if r.namespaced)
BY_KIND = {r.kind: r for r in ALL}

_BY_NAME = {alias: r for r in ALL for alias in (*r.aliases, r.qualified, f"{r.singular}.{r.group}")}


def resolve(name: str) -> Resource:
    """Find a resource by kubectl name (singular, plural, short or qualified), case-insensitively."""
    resource = _BY_NAME.get(name.lower())
    if resource is None:
        raise LookupError(f'the server doesn\'t have a resource type "{name}"')
    return resource
