"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as kube-apiserver validates them (pkg/apis/core and
pkg/apis/storage validation), in its words: the lab stores them so the engine can read a pod's volume topology."""

from __future__ import annotations

from typing import Any

from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import format_quantity

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
PV_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
CLASS_RECLAIM_POLICIES = ("Delete", "Retain")  # a class may not recycle (deprecated, and only for static PVs)
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
STORAGE = "storage"
# The fields of a PersistentVolumeSpec that are not a volume source: a PV must name exactly one of the others.
_PV_SPEC_NOT_SOURCES = frozenset(
    {
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeAttributesClassName",
        "volumeMode",
    }
)
STORAGE_CLASS_FIELDS = (
    "apiVersion",
    "kind",
    "metadata",
    "provisioner",
    "parameters",
    "reclaimPolicy",
    "mountOptions",
    "allowVolumeExpansion",
    "volumeBindingMode",
    "allowedTopologies",
)


def _supported(value: Any, supported: tuple[str, ...], path: str) -> None:
    if value is not None and value not in supported:
        listed = ", ".join(f'"{s}"' for s in supported)
        raise ManifestError(f'Unsupported value: "{value}": supported values: {listed}', field=path)


def _access_modes(spec: dict[str, Any], path: str) -> None:
    modes = f.sequence(spec.get("accessModes"), f"{path}.accessModes")
    if not modes:
        raise ManifestError("Required value: at least 1 access mode is required", field=f"{path}.accessModes")
    for index, mode in enumerate(modes):
        _supported(mode, ACCESS_MODES, f"{path}.accessModes[{index}]")
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        raise ManifestError(
            "Forbidden: may not use ReadWriteOncePod with other access modes", field=f"{path}.accessModes"
        )


def _positive_storage(resources: dict[str, int], path: str) -> None:
    amount = resources.get(STORAGE)
    if amount is None:
        raise ManifestError("Required value", field=f"{path}[{STORAGE}]")
    if amount <= 0:
        raise ManifestError(
            f'Invalid value: "{format_quantity(amount, STORAGE)}": must be greater than zero',
            field=f"{path}[{STORAGE}]",
        )


def persistent_volume_claim(doc: dict[str, Any]) -> None:
    f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", required=True)
    _access_modes(spec, "spec")
    resources = f.mapping(spec.get("resources"), "spec.resources")
    _positive_storage(f.resources(resources.get("requests"), "spec.resources.requests"), "spec.resources")
    f.resources(resources.get("limits"), "spec.resources.limits")
    _supported(spec.get("volumeMode"), VOLUME_MODES, "spec.volumeMode")
    f.string(spec.get("storageClassName"), "spec.storageClassName")
    f.string(spec.get("volumeName"), "spec.volumeName")


def persistent_volume(doc: dict[str, Any]) -> None:
    f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", required=True)
    capacity = f.resources(spec.get("capacity"), "spec.capacity")
    if not capacity:
        raise ManifestError("Required value", field="spec.capacity")
    if set(capacity) != {STORAGE}:
        raise ManifestError(
            f'Unsupported value: "{sorted(capacity)}": supported values: "{STORAGE}"', field="spec.capacity"
        )
    _positive_storage(capacity, "spec.capacity")
    _access_modes(spec, "spec")
    _supported(spec.get("persistentVolumeReclaimPolicy"), PV_RECLAIM_POLICIES, "spec.persistentVolumeReclaimPolicy")
    _supported(spec.get("volumeMode"), VOLUME_MODES, "spec.volumeMode")
    sources = [key for key, value in spec.items() if key not in _PV_SPEC_NOT_SOURCES and value is not None]
    if not sources:
        raise ManifestError("Required value: must specify a volume type", field="spec")
    if len(sources) > 1:
        raise ManifestError(f"Forbidden: may not specify more than 1 volume type ({', '.join(sources)})", field="spec")
    affinity = f.mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
    if affinity.get("required") is not None:
        required = f.mapping(affinity["required"], "spec.nodeAffinity.required")
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        if not f.sequence(required.get("nodeSelectorTerms"), path):
            raise ManifestError("Required value: must have at least one node selector term", field=path)


def storage_class(doc: dict[str, Any]) -> None:
    f.mapping(doc, "", allowed=STORAGE_CLASS_FIELDS)
    f.metadata(doc)
    if not f.string(doc.get("provisioner"), "provisioner"):
        raise ManifestError("Required value", field="provisioner")
    f.string_map(doc.get("parameters"), "parameters")
    _supported(doc.get("reclaimPolicy"), CLASS_RECLAIM_POLICIES, "reclaimPolicy")
    _supported(doc.get("volumeBindingMode"), BINDING_MODES, "volumeBindingMode")
    for index, term in enumerate(f.sequence(doc.get("allowedTopologies"), "allowedTopologies")):
        path = f"allowedTopologies[{index}].matchLabelExpressions"
        expressions = f.sequence(f.mapping(term, f"allowedTopologies[{index}]").get("matchLabelExpressions"), path)
        if not expressions:
            raise ManifestError("Required value: must contain at least one key-value pair", field=path)
        for position, expression in enumerate(expressions):
            item = f.mapping(expression, f"{path}[{position}]", required=True)
            f.qualified_name(
                str(f.string(item.get("key"), f"{path}[{position}].key", required=True)), f"{path}[{position}].key"
            )
            values = f.sequence(item.get("values"), f"{path}[{position}].values")
            if not values:
                raise ManifestError(
                    "Required value: must specify as least one value", field=f"{path}[{position}].values"
                )
