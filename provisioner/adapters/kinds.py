"""The kinds the engine reads and writes on a real cluster: where each lives in the REST API, and which version of
it the cluster serves (found by discovery; a kind whose group the cluster does not serve is absent, not an error)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core group
    plural: str
    namespaced: bool
    versions: tuple[str, ...]  # the versions whose shape the engine reads, preferred first
    status: bool  # has a status subresource: a PUT of the object leaves its status alone


KINDS: tuple[Kind, ...] = (
    Kind("Pod", "", "pods", True, ("v1",), True),
    Kind("Node", "", "nodes", False, ("v1",), True),
    Kind("Namespace", "", "namespaces", False, ("v1",), True),
    Kind("Event", "", "events", True, ("v1",), False),
    Kind("PodDisruptionBudget", "policy", "poddisruptionbudgets", True, ("v1",), True),
    Kind("Deployment", "apps", "deployments", True, ("v1",), True),
    Kind("ReplicaSet", "apps", "replicasets", True, ("v1",), True),
    Kind("DaemonSet", "apps", "daemonsets", True, ("v1",), True),
    Kind("NodePool", "karpenter.sh", "nodepools", False, ("v1",), True),
    Kind("NodeClaim", "karpenter.sh", "nodeclaims", False, ("v1",), True),
    Kind("KWOKNodeClass", "karpenter.kwok.sh", "kwoknodeclasses", False, ("v1alpha1",), True),
    # A NodePool may point at an EC2NodeClass (seed 004): karpui launches it from the AWS-style catalog.
    Kind("EC2NodeClass", "karpenter.k8s.aws", "ec2nodeclasses", False, ("v1",), True),
    Kind("NodeOverlay", "karpenter.sh", "nodeoverlays", False, ("v1alpha1",), True),
    # CapacityBuffer (gate CapacityBuffer): its pod shape comes from a PodTemplate or a workload.
    Kind("CapacityBuffer", "autoscaling.x-k8s.io", "capacitybuffers", True, ("v1beta1",), True),
    Kind("PodTemplate", "", "podtemplates", True, ("v1",), False),
    # A pod's volumes: which zones its node may be in, and whether a node helps it at all (Karpenter's volume topology).
    Kind("PersistentVolumeClaim", "", "persistentvolumeclaims", True, ("v1",), True),
    Kind("PersistentVolume", "", "persistentvolumes", False, ("v1",), True),
    Kind("StorageClass", "storage.k8s.io", "storageclasses", False, ("v1",), False),
    # A node's CSI drivers and how many volumes each can attach (Karpenter's volume attachment limits).
    Kind("CSINode", "storage.k8s.io", "csinodes", False, ("v1",), False),
    # DRA objects are read in resource.k8s.io/v1's shape (Kubernetes 1.34 and later).
    Kind("DeviceClass", "resource.k8s.io", "deviceclasses", False, ("v1",), False),
    Kind("ResourceClaim", "resource.k8s.io", "resourceclaims", True, ("v1",), True),
    Kind("ResourceClaimTemplate", "resource.k8s.io", "resourceclaimtemplates", True, ("v1",), False),
    Kind("ResourceSlice", "resource.k8s.io", "resourceslices", False, ("v1",), False),
    Kind("DRAConfig", "test.karpenter.sh", "draconfigs", False, ("v1alpha1",), True),
    Kind("Lease", "coordination.k8s.io", "leases", True, ("v1",), False),
)
BY_KIND: Mapping[str, Kind] = {k.kind: k for k in KINDS}
# The kinds the engine keeps informers of: all but Lease. Its own Lease is read and written directly (leader
# election); a watch of every Lease in the cluster would need RBAC across all namespaces (deploy/ grants Leases only
# in karpui's own) and would mirror every node's heartbeat, which nothing reads.
INFORMED: tuple[Kind, ...] = tuple(k for k in KINDS if k.kind != "Lease")


@dataclass(frozen=True)
class Resource:
    """A kind at the version the cluster serves: its REST paths."""

    kind: Kind
    version: str

    @property
    def api_version(self) -> str:
        return f"{self.kind.group}/{self.version}" if self.kind.group else self.version

    def collection(self, namespace: str | None = None) -> str:
        """The list/watch/create path: across all namespaces when `namespace` is None."""
        root = f"/apis/{self.kind.group}/{self.version}" if self.kind.group else f"/api/{self.version}"
        if self.kind.namespaced and namespace is not None:
            root += f"/namespaces/{quote(namespace, safe='')}"
        return f"{root}/{self.kind.plural}"

    def item(self, name: str, namespace: str = "", subresource: str = "") -> str:
        scope = (namespace or "default") if self.kind.namespaced else None
        path = f"{self.collection(scope)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path


def resolve(kinds: Iterable[Kind], served: Mapping[str, Iterable[str]]) -> dict[str, Resource]:
    """Each kind at the first of its versions the cluster serves; `served` maps a group ("" core) to its versions.
    Kinds the cluster does not serve are left out."""
    result = {}
    for kind in kinds:
        versions = set(served.get(kind.group, ()))
        version = next((v for v in kind.versions if v in versions), None)
        if version is not None:
            result[kind.kind] = Resource(kind, version)
    return result


def listed_in_core(resources: Mapping[str, Resource], listing: Mapping[str, Any]) -> dict[str, Resource]:
    """`resources` less the core kinds the core group's APIResourceList (GET /api/v1) does not list. A server may
    serve the core group without every core kind (a lab API of an older karpui served no PersistentVolumeClaims), and an informer of
    a kind answered 404 would keep the cache from ever syncing."""
    names = {str(entry.get("name")) for entry in listing.get("resources") or []}
    return {kind: r for kind, r in resources.items() if r.kind.group or r.kind.plural in names}


def served_versions(core: Mapping[str, Any], groups: Mapping[str, Any]) -> dict[str, list[str]]:
    """Group -> versions, from the bodies of GET /api (APIVersions) and GET /apis (APIGroupList)."""
    served: dict[str, list[str]] = {"": [str(v) for v in core.get("versions") or []]}
    for group in groups.get("groups") or []:
        served[str(group["name"])] = [str(v["version"]) for v in group.get("versions") or []]
    return served
