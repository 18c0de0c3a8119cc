"""A pod's PersistentVolumeClaims as Karpenter's VolumeTopology reads them: whether kube-scheduler would refuse them,
and which node labels (zones, mostly) each volume allows its node as alternatives."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.cluster.api import ClusterReader
from provisioner.cluster.objects import Obj, is_deleting

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


def _claims(api: ClusterReader, pod: Obj) -> Iterable[Obj]:
    """The pod's PVCs in volume order; VolumeError at the first that does not exist (yet)."""
    namespace = pod["metadata"].get("namespace") or "default"
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        name = claim_name(pod, volume)
        if name is None:
            continue
        claim = api.get("PersistentVolumeClaim", name, namespace)
        if claim is None:
            raise VolumeError(
                _wrapped(
                    f'getting persistent volume claim, persistentvolumeclaims "{name}" not found',
                    PersistentVolumeClaim=name,
                )
            )
        yield claim


def _ref(claim: Obj) -> str:
    """klog.KObj of a PVC: namespace/name."""
    return f"{claim['metadata'].get('namespace') or 'default'}/{claim['metadata']['name']}"


def validation_error(api: ClusterReader, pod: Obj) -> str | None:
    """Karpenter's ValidatePersistentVolumeClaims: why kube-scheduler would refuse one of the pod's PVCs, which
    leaves the pod out of provisioning (a node launched for it could never run it); None when they are all usable.

    Karpenter's last check, the volume's driver against its cloud provider's unsupported provisioners and topology
    keys, is left out: both sets are empty unless a provider fills them, and no karpui provider does."""
    try:
        for claim in _claims(api, pod):
            error = _claim_error(api, claim)
            if error is not None:
                return error
    except VolumeError as error:
        return str(error)
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
