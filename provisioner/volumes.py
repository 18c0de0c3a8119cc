"""A pod's PersistentVolumeClaims as Karpenter's VolumeTopology reads them: whether kube-scheduler would refuse them,
and which node labels (zones, mostly) each volume allows its node as alternatives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.api import ClusterReader
from provisioner.cluster.objects import Obj, is_deleting
from provisioner.requirements import IN, Requirement, Requirements

# kube-scheduler counts a PVC naming a volume as bound only once the PV controller has marked it so (binder.go).
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
IMMEDIATE = "Immediate"


class VolumeError(Exception):
    """Why a pod's volumes cannot be read or would be refused; its text is Karpenter's error text."""


def _wrapped(message: str, **values: str) -> str:
    """serrors.Wrap's Error(): the message, then its values sorted by key, as `(K=v, K2=v2)`."""
    return f"{message} ({', '.join(f'{key}={values[key]}' for key in sorted(values))})"


def claim_name(pod: Obj, volume: Mapping[str, Any]) -> str | None:
    """The PVC a pod volume uses (GetPersistentVolumeClaim): its claim, or for an ephemeral volume the PVC Kubernetes
    makes for it, named <pod>-<volume>; None for volumes without one (emptyDir, hostPath, ...)."""
    if volume.get("persistentVolumeClaim") is not None:
        return str(volume["persistentVolumeClaim"].get("claimName") or "")
    if volume.get("ephemeral") is not None:
        return f"{pod['metadata']['name']}-{volume.get('name', '')}"
    return None


def _claim(api: ClusterReader, pod: Obj, volume: Mapping[str, Any]) -> Obj | None:
    """GetPersistentVolumeClaim: the PVC of one pod volume, None for a volume without one; VolumeError when it does
    not exist (yet: an ephemeral volume's PVC is made only after the pod)."""
    name = claim_name(pod, volume)
    if name is None:
        return None
    claim = api.get("PersistentVolumeClaim", name, pod["metadata"].get("namespace") or "default")
    if claim is None:
        raise VolumeError(
            _wrapped(
                f'getting persistent volume claim, persistentvolumeclaims "{name}" not found',
                PersistentVolumeClaim=name,
            )
        )
    return claim


def _volumes(pod: Obj) -> Sequence[Mapping[str, Any]]:
    return (pod.get("spec") or {}).get("volumes") or ()


def _ref(claim: Obj) -> str:
    """klog.KObj of a PVC: namespace/name."""
    return f"{claim['metadata'].get('namespace') or 'default'}/{claim['metadata']['name']}"


def validation_error(api: ClusterReader, pod: Obj) -> str | None:
    """Karpenter's ValidatePersistentVolumeClaims: why kube-scheduler would refuse one of the pod's PVCs, which
    leaves the pod out of provisioning (a node launched for it could never run it); None when they are all usable.

    Karpenter's last check, the volume's driver against its cloud provider's unsupported provisioners and topology
    keys, is left out: both sets are empty unless a provider fills them, and no karpui provider does."""
    for volume in _volumes(pod):
        try:
            claim = _claim(api, pod, volume)
        except VolumeError as missing:
            return str(missing)
        refused = _claim_error(api, claim) if claim is not None else None
        if refused is not None:
            return refused
    return None


def _claim_error(api: ClusterReader, claim: Obj) -> str | None:
    spec, meta = claim.get("spec") or {}, claim["metadata"]
    storage_class = str(spec.get("storageClassName") or "")
    volume_name = str(spec.get("volumeName") or "")
    if is_deleting(claim):
        return _wrapped("persistentvolumeclaim is being deleted", PersistentVolumeClaim=_ref(claim))
    if (claim.get("status") or {}).get("phase") == "Lost":
        return _wrapped(
            "persistentvolumeclaim bound to non-existent persistentvolume",
            PersistentVolumeClaim=_ref(claim),
            PersistentVolume=volume_name,
        )
    if volume_name:
        volume = api.get("PersistentVolume", volume_name)
        problem = (
            f'persistentvolumes "{volume_name}" not found'
            if volume is None
            else "persistentvolume is being deleted"
            if is_deleting(volume)
            else None
        )
        if problem is not None:
            return _wrapped(
                f"failed to validate pvc, {problem}",
                PersistentVolumeClaim=_ref(claim),
                PersistentVolume=volume_name,
                StorageClass=storage_class,
            )
        if BIND_COMPLETED not in (meta.get("annotations") or {}):
            return _wrapped(
                "pvc is considered unbound because it does not contain annotation",
                annotation=BIND_COMPLETED,
                PersistentVolumeClaim=meta["name"],
                PersistentVolume=volume_name,
            )
        return None
    # Unbound: a node helps only if the PVC can be provisioned once the pod is placed (WaitForFirstConsumer).
    if not storage_class:
        return _wrapped(
            "unbound pvc must define a storage class", PersistentVolumeClaim=_ref(claim), StorageClass=storage_class
        )
    found = api.get("StorageClass", storage_class)
    if found is None:
        return _wrapped(
            f'failed to validate pvc, failed to get storage class, storageclasses.storage.k8s.io "{storage_class}" '
            "not found",
            PersistentVolumeClaim=_ref(claim),
            StorageClass=storage_class,
        )
    if found.get("volumeBindingMode") == IMMEDIATE:
        return _wrapped(
            "failed to validate pvc, pvc with immediate volume binding mode must be bound",
            PersistentVolumeClaim=_ref(claim),
            StorageClass=storage_class,
        )
    return None


def requirement_alternatives(api: ClusterReader, pod: Obj) -> tuple[Requirements, ...]:
    """Karpenter's VolumeTopology.GetRequirements: where the pod's volumes let its node be, as alternatives (the
    first that fits a place wins); () when no volume constrains it. They narrow the node's requirements only, never
    the pod's own affinity, so topology spread still counts the pod by what it asks for itself.

    Raises VolumeError, with Karpenter's text, when a PVC, its PersistentVolume or its StorageClass is missing."""
    alternatives: list[Requirements] = [Requirements()]
    constrained = False
    for volume in _volumes(pod):
        try:
            claim = _claim(api, pod, volume)
        except VolumeError as error:
            raise VolumeError(f"discovering persistent volume claim, {error}") from None
        per_volume = _volume_alternatives(api, claim) if claim is not None else []
        if per_volume:
            alternatives = merge_alternatives(alternatives, per_volume)
            constrained = True
    return tuple(alternatives) if constrained else ()


def merge_alternatives(alternatives: Sequence[Requirements], per_volume: Sequence[Requirements]) -> list[Requirements]:
    """mergeVolumeRequirementAlternatives: the cross product of what earlier volumes allow and what this one does,
    keeping only the branches whose requirements intersect; all of them when none does (Karpenter keeps the old
    merged result then, and lets scheduling find that nothing fits)."""
    compatible = [a.merged(v) for a in alternatives for v in per_volume if a.intersects(v)]
    return compatible or [a.merged(v) for a in alternatives for v in per_volume]


def _volume_alternatives(api: ClusterReader, claim: Obj) -> list[Requirements]:
    """One volume's alternatives: its bound PV's node affinity terms, or else its StorageClass's allowed topologies
    (a volume not provisioned yet goes where the class can make it); each term ORed, so each is an alternative."""
    spec = claim.get("spec") or {}
    volume_name = str(spec.get("volumeName") or "")
    if volume_name:
        volume = api.get("PersistentVolume", volume_name)
        if volume is None:
            raise VolumeError(
                "getting existing requirements, "
                + _wrapped(
                    f'getting persistent volume, persistentvolumes "{volume_name}" not found',
                    PersistentVolume=volume_name,
                )
            )
        return _volume_node_affinity(volume)
    storage_class = str(spec.get("storageClassName") or "")
    if not storage_class:
        return []
    found = api.get("StorageClass", storage_class)
    if found is None:
        raise VolumeError(
            _wrapped(
                f'getting storage class, storageclasses.storage.k8s.io "{storage_class}" not found',
                StorageClass=storage_class,
            )
        )
    alternatives = []
    for term in found.get("allowedTopologies") or ():
        expressions = term.get("matchLabelExpressions") or ()
        if expressions:
            alternatives.append(
                Requirements(Requirement.from_operator(IN, e["key"], e.get("values") or ()) for e in expressions)
            )
    return alternatives


def _volume_node_affinity(volume: Obj) -> list[Requirements]:
    """getPersistentVolumeRequirements: each required node selector term of the PV. A local or hostPath volume's
    hostname is dropped: a pod moved to a new node cannot keep its old one, and a term that named only the hostname
    is kept as an alternative allowing anywhere."""
    spec = volume.get("spec") or {}
    required = (spec.get("nodeAffinity") or {}).get("required") or {}
    node_local = spec.get("local") is not None or spec.get("hostPath") is not None
    alternatives = []
    for term in required.get("nodeSelectorTerms") or ():
        expressions = list(term.get("matchExpressions") or ())
        kept = [e for e in expressions if e.get("key") != wk.HOSTNAME] if node_local else expressions
        if node_local and expressions and not kept:
            alternatives.append(Requirements())
        elif kept:
            alternatives.append(Requirements.from_specs(kept))
    return alternatives


# Volume attachment limits ------------------------------------------------------------------------------------------

# A pod's (or a node's) attachable volumes: CSI driver -> the PVCs (namespace/name) it attaches (Karpenter's Volumes).
Volumes = Mapping[str, frozenset[str]]
# As a Pod or Node carries them: sorted, hashable.
VolumeItems = tuple[tuple[str, frozenset[str]], ...]

# csi-translation-lib's in-tree plugins (translate.go:30, v0.35.0): a StorageClass naming one provisions through
# its CSI driver since CSIMigration, and the node's CSINode publishes that driver's limit.
IN_TREE_DRIVERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
AWS_EBS_DRIVER = IN_TREE_DRIVERS["kubernetes.io/aws-ebs"]


def union(a: Volumes, b: Volumes) -> dict[str, frozenset[str]]:
    """Volumes.Union: each driver's PVCs of both, a PVC two pods share counted once."""
    merged = dict(a)
    for driver, claims in b.items():
        merged[driver] = merged[driver] | claims if driver in merged else claims
    return merged


def limit_exceeded(volumes: Volumes, limits: Mapping[str, int]) -> str | None:
    """VolumeUsage.ExceedsLimits over volumes already united: NewVolumeLimitExceededError's text for the first driver
    (by name; Go's map order is random) holding more PVCs than its limit, None when every limited driver has room."""
    for driver in sorted(volumes):
        limit = limits.get(driver)
        if limit is not None and len(volumes[driver]) > limit:
            return limit_error("would exceed volume limit", driver, len(volumes[driver]), limit)
    return None


def limit_error(message: str, driver: str, count: int, limit: int) -> str:
    """NewVolumeLimitExceededError (volumeusage.go:46): the message with the driver, its PVC count and its limit."""
    return _wrapped(message, provisioner=driver, **{"volume-count": str(count), "volume-limit": str(limit)})


def items(volumes: Volumes) -> VolumeItems:
    return tuple(sorted(volumes.items()))


@dataclass(frozen=True)
class VolumeUsage:
    """Karpenter's VolumeUsage (pkg/scheduling/volumeusage.go), immutable: the PVCs per driver that a node's pods
    attach, and the drivers' limits. A driver its CSINode publishes (with a count, or without one: unbounded)
    overrides any fallback limit, which its instance type declares for the time before the CSINode is published."""

    volumes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    pod_volumes: Mapping[str, Volumes] = field(default_factory=dict)  # pod namespace/name -> its volumes
    limits: Mapping[str, int] = field(default_factory=dict)
    published: frozenset[str] = frozenset()

    def exceeds_limits(self, volumes: Volumes) -> str | None:
        return limit_exceeded(union(self.volumes, volumes), self.limits)

    def add_limit(self, driver: str, value: int) -> VolumeUsage:
        return replace(self, published=self.published | {driver}, limits={**self.limits, driver: value})

    def add_unbounded(self, driver: str) -> VolumeUsage:
        limits = {k: v for k, v in self.limits.items() if k != driver}
        return replace(self, published=self.published | {driver}, limits=limits)

    def add_fallback_limit(self, driver: str, value: int) -> VolumeUsage:
        return self if driver in self.published else replace(self, limits={**self.limits, driver: value})

    def add(self, pod: str, volumes: Volumes) -> VolumeUsage:
        return replace(self, pod_volumes={**self.pod_volumes, pod: volumes}, volumes=union(self.volumes, volumes))

    def delete_pod(self, pod: str) -> VolumeUsage:
        # Two pods may share a PVC, so what is left is built again from the pods that stay.
        kept = {key: v for key, v in self.pod_volumes.items() if key != pod}
        volumes: dict[str, frozenset[str]] = {}
        for v in kept.values():
            volumes = union(volumes, v)
        return replace(self, pod_volumes=kept, volumes=volumes)


def csi_drivers(csi_node: Obj) -> tuple[tuple[str, int | None], ...]:
    """populateVolumeLimits (state/cluster.go:917): each driver a node's CSINode publishes, with its allocatable
    count, or None when it publishes none (unbounded)."""
    drivers = []
    for driver in (csi_node.get("spec") or {}).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        drivers.append((str(driver.get("name") or ""), None if count is None else int(count)))
    return tuple(drivers)


def node_usage(drivers: Sequence[tuple[str, int | None]], fallback: Mapping[str, int] | None = None) -> VolumeUsage:
    """A node's limits: its CSINode's drivers, then its instance type's VolumeAttachmentLimits for the drivers the
    CSINode has not published (NewExistingNode, existingnode.go:48)."""
    usage = VolumeUsage()
    for driver, count in drivers:
        usage = usage.add_unbounded(driver) if count is None else usage.add_limit(driver, count)
    for driver, limit in (fallback or {}).items():
        usage = usage.add_fallback_limit(driver, limit)
    return usage


def pod_volumes(api: ClusterReader, pod: Obj) -> VolumeItems:
    """GetVolumes (volumeusage.go:94): the pod's PVCs by the CSI driver that attaches them. A missing PVC, one with no
    driver Karpenter can name (NFS, a PV of no CSI driver, no StorageClass) is not counted."""
    found: dict[str, frozenset[str]] = {}
    for volume in _volumes(pod):
        name = claim_name(pod, volume)
        if name is None:
            continue
        namespace = pod["metadata"].get("namespace") or "default"
        claim = api.get("PersistentVolumeClaim", name, namespace)
        if claim is None:
            continue
        driver = _driver(api, claim)
        if driver:
            found = union(found, {driver: frozenset({f"{namespace}/{name}"})})
    return items(found)


def _driver(api: ClusterReader, claim: Obj) -> str:
    """ResolveDriver (volumeusage.go:124): a bound PVC's PV's CSI driver (an in-tree EBS volume's migrated one); an
    unbound one's StorageClass provisioner, an in-tree plugin's named as its CSI driver; "" when there is none."""
    spec = claim.get("spec") or {}
    volume_name = str(spec.get("volumeName") or "")
    if volume_name:
        volume = api.get("PersistentVolume", volume_name)
        volume_spec = (volume or {}).get("spec") or {}
        if volume_spec.get("csi") is not None:
            return str(volume_spec["csi"].get("driver") or "")
        if volume_spec.get("awsElasticBlockStore") is not None:
            return AWS_EBS_DRIVER
        return ""
    storage_class = (
        api.get("StorageClass", str(spec.get("storageClassName") or "")) if spec.get("storageClassName") else None
    )
    if storage_class is None:
        return ""
    provisioner = str(storage_class.get("provisioner") or "")
    return IN_TREE_DRIVERS.get(provisioner, provisioner)
