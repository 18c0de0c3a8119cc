"""The InstanceCatalog file format (YAML or JSON): reading with field-named errors, and writing."""

from __future__ import annotations

import math
from typing import Any

from provisioner.catalog.instance_type import Catalog, InstanceType, Offering, Overhead
from provisioner.manifests import fields as f
from provisioner.manifests.documents import load_documents
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import QuantityError, Resources, format_resources, parse_resources

API_VERSION = "karpui.dev/v1alpha1"
KIND = "InstanceCatalog"
_TYPE_FIELDS = ("name", "labels", "capacity", "overhead", "offerings", "devices")
_OVERHEAD_FIELDS = ("kubeReserved", "systemReserved", "evictionThreshold")
_OFFERING_FIELDS = ("zone", "capacityType", "price", "available")


def load_catalog(text: str) -> Catalog:
    """Parse one InstanceCatalog document; every error names the field (e.g. `spec.instanceTypes[3].capacity.cpu`)."""
    documents = load_documents(text)
    if len(documents) != 1:
        raise ManifestError(f"expected exactly one {KIND} document, found {len(documents)}")
    document = documents[0]
    try:
        return catalog_from_manifest(document.body)
    except ManifestError as error:
        raise error.located(document=document.index, kind=document.kind, name=document.name) from None


def catalog_from_manifest(doc: dict[str, Any]) -> Catalog:
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise ManifestError(f"expected apiVersion {API_VERSION} and kind {KIND}", field="kind")
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec"))
    meta = f.metadata(doc)
    spec = f.mapping(doc.get("spec"), "spec", allowed=("description", "nodeClassKinds", "instanceTypes"), required=True)
    kinds = tuple(
        f.string(kind, f"spec.nodeClassKinds[{i}]", required=True) or ""
        for i, kind in enumerate(f.sequence(spec.get("nodeClassKinds"), "spec.nodeClassKinds"))
    )
    types: list[InstanceType] = []
    seen: set[str] = set()
    for index, item in enumerate(f.sequence(spec.get("instanceTypes"), "spec.instanceTypes")):
        instance_type = _instance_type(item, f"spec.instanceTypes[{index}]")
        if instance_type.name in seen:
            raise ManifestError(
                f"duplicate instance type {instance_type.name!r}", field=f"spec.instanceTypes[{index}].name"
            )
        seen.add(instance_type.name)
        types.append(instance_type)
    return Catalog(
        name=meta["name"],
        instance_types=tuple(types),
        node_class_kinds=kinds,
        description=f.string(spec.get("description"), "spec.description") or "",
    )


def catalog_to_manifest(catalog: Catalog) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": catalog.name},
        "spec": {
            "description": catalog.description,
            "nodeClassKinds": list(catalog.node_class_kinds),
            "instanceTypes": [instance_type_to_spec(it) for it in catalog.instance_types],
        },
    }


def instance_type_to_spec(instance_type: InstanceType) -> dict[str, Any]:
    overhead = instance_type.overhead
    return {
        "name": instance_type.name,
        "labels": dict(sorted(instance_type.labels.items())),
        "capacity": format_resources(instance_type.capacity),
        "overhead": {
            "kubeReserved": format_resources(overhead.kube_reserved),
            "systemReserved": format_resources(overhead.system_reserved),
            "evictionThreshold": format_resources(overhead.eviction_threshold),
        },
        "offerings": [
            {"zone": o.zone, "capacityType": o.capacity_type, "price": o.price, "available": o.available}
            for o in instance_type.offerings
        ],
        "devices": [dict(d) for d in instance_type.devices],
    }


def instance_type_from_spec(item: Any, path: str) -> InstanceType:
    return _instance_type(item, path)


def _instance_type(item: Any, path: str) -> InstanceType:
    spec = f.mapping(item, path, allowed=_TYPE_FIELDS, required=True)
    name = f.object_name(spec.get("name"), f"{path}.name")
    labels = f.string_map(spec.get("labels"), f"{path}.labels")
    capacity = _resources(spec.get("capacity"), f"{path}.capacity")
    for required in ("cpu", "memory", "pods"):
        if required not in capacity:
            raise ManifestError("Required value", field=f"{path}.capacity.{required}")
    overhead_spec = f.mapping(spec.get("overhead"), f"{path}.overhead", allowed=_OVERHEAD_FIELDS)
    overhead = Overhead(
        kube_reserved=_resources(overhead_spec.get("kubeReserved"), f"{path}.overhead.kubeReserved"),
        system_reserved=_resources(overhead_spec.get("systemReserved"), f"{path}.overhead.systemReserved"),
        eviction_threshold=_resources(overhead_spec.get("evictionThreshold"), f"{path}.overhead.evictionThreshold"),
    )
    offerings = []
    for index, raw in enumerate(f.sequence(spec.get("offerings"), f"{path}.offerings")):
        offerings.append(_offering(raw, f"{path}.offerings[{index}]"))
    if not offerings:
        raise ManifestError("an instance type needs at least one offering", field=f"{path}.offerings")
    devices = tuple(
        f.mapping(d, f"{path}.devices[{i}]") for i, d in enumerate(f.sequence(spec.get("devices"), f"{path}.devices"))
    )
    return InstanceType(
        name=name, capacity=capacity, offerings=tuple(offerings), labels=labels, overhead=overhead, devices=devices
    )


def _offering(raw: Any, path: str) -> Offering:
    spec = f.mapping(raw, path, allowed=_OFFERING_FIELDS, required=True)
    zone = f.string(spec.get("zone"), f"{path}.zone", required=True)
    capacity_type = f.string(spec.get("capacityType"), f"{path}.capacityType", required=True)
    price = spec.get("price")
    if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price) or price < 0:
        raise ManifestError(f"price must be a non-negative number, got {price!r}", field=f"{path}.price")
    available = spec.get("available", True)
    if not isinstance(available, bool):
        raise ManifestError(f"expected a boolean, got {f.type_name(available)}", field=f"{path}.available")
    assert zone is not None and capacity_type is not None
    return Offering(zone=zone, capacity_type=capacity_type, price=float(price), available=available)


def _resources(value: Any, path: str) -> Resources:
    try:
        resources = parse_resources(f.mapping(value, path), field=path)
    except QuantityError as error:
        field, _, message = str(error).partition(": ")
        raise ManifestError(message, field=field) from None
    for name, amount in resources.items():
        if amount < 0:
            raise ManifestError("must not be negative", field=f"{path}.{name}")
    return resources
