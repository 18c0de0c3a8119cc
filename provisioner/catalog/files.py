"""The InstanceCatalog file format (YAML or JSON): reading with field-named errors, and writing."""

from __future__ import annotations

import math
from typing import Any

from provisioner import labels as wk
from provisioner.catalog.instance_type import Catalog, InstanceType, Offering, Overhead
from provisioner.dra.cel import Device
from provisioner.manifests import fields as f
from provisioner.manifests.documents import load_documents
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import format_resources

API_VERSION = "karpui.dev/v1alpha1"
KIND = "InstanceCatalog"
_TYPE_FIELDS = ("name", "labels", "capacity", "overhead", "offerings", "devices")
_OVERHEAD_FIELDS = ("kubeReserved", "systemReserved", "evictionThreshold")
_OFFERING_FIELDS = (
    "zone",
    "capacityType",
    "price",
    "available",
    "reservationID",
    "reservationType",
    "reservationCapacity",
)
_DEVICE_GROUP_FIELDS = ("driver", "pool", "devices")
# Kubernetes' bounds on a ResourceSlice: devices in one, and attributes plus capacities of one device. CEL cost
# estimates (provisioner/dra/cel.py) count on devices staying within them.
MAX_DEVICES = 128
MAX_DEVICE_ATTRIBUTES = 32
# Columns the catalog page filters on (karpui.models.InstanceType, Offering): arch, os and capacity type hold 32.
_SHORT_LABEL = 32
_MAX_PODS = 2**31 - 1


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
    # A catalog's name is part of its URLs (/catalog/<name>/export), so it is a DNS label, not a subdomain.
    f.dns_label(meta.get("name"), "metadata.name", what="catalog name")
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
        "offerings": [_offering_spec(o) for o in instance_type.offerings],
        "devices": [dict(d) for d in instance_type.devices],
    }


def instance_type_from_spec(item: Any, path: str) -> InstanceType:
    return _instance_type(item, path)


def _instance_type(item: Any, path: str) -> InstanceType:
    spec = f.mapping(item, path, allowed=_TYPE_FIELDS, required=True)
    # The name becomes the node.kubernetes.io/instance-type label's value: a label value's 63 characters at most.
    name = f.object_name(spec.get("name"), f"{path}.name", max_length=63)
    labels = f.label_map(spec.get("labels"), f"{path}.labels")
    for key in (wk.ARCH, wk.OS):
        if len(labels.get(key, "")) > _SHORT_LABEL:
            raise ManifestError(f"must be no more than {_SHORT_LABEL} characters", field=f"{path}.labels.{key}")
    capacity = f.resources(spec.get("capacity"), f"{path}.capacity")
    for required in ("cpu", "memory", "pods"):
        if required not in capacity:
            raise ManifestError("Required value", field=f"{path}.capacity.{required}")
    if capacity["pods"] > _MAX_PODS * 1000:
        raise ManifestError(f"must be no more than {_MAX_PODS}", field=f"{path}.capacity.pods")
    overhead_spec = f.mapping(spec.get("overhead"), f"{path}.overhead", allowed=_OVERHEAD_FIELDS)
    overhead = Overhead(
        kube_reserved=f.resources(overhead_spec.get("kubeReserved"), f"{path}.overhead.kubeReserved"),
        system_reserved=f.resources(overhead_spec.get("systemReserved"), f"{path}.overhead.systemReserved"),
        eviction_threshold=f.resources(overhead_spec.get("evictionThreshold"), f"{path}.overhead.evictionThreshold"),
    )
    offerings = []
    places: set[tuple[str, str, str]] = set()
    for index, raw in enumerate(f.sequence(spec.get("offerings"), f"{path}.offerings")):
        offering = _offering(raw, f"{path}.offerings[{index}]")
        place = (offering.zone, offering.capacity_type, offering.reservation_id)
        if place in places:
            reservation = f" and reservation {offering.reservation_id!r}" if offering.reservation_id else ""
            raise ManifestError(
                f"duplicate offering for zone {offering.zone!r} and capacity type {offering.capacity_type!r}"
                + reservation,
                field=f"{path}.offerings[{index}]",
            )
        places.add(place)
        offerings.append(offering)
    if not offerings:
        raise ManifestError("an instance type needs at least one offering", field=f"{path}.offerings")
    devices = tuple(
        _device_group(group, f"{path}.devices[{i}]", name)
        for i, group in enumerate(f.sequence(spec.get("devices"), f"{path}.devices"))
    )
    return InstanceType(
        name=name, capacity=capacity, offerings=tuple(offerings), labels=labels, overhead=overhead, devices=devices
    )


def _offering(raw: Any, path: str) -> Offering:
    spec = f.mapping(raw, path, allowed=_OFFERING_FIELDS, required=True)
    # Both become node labels (topology.kubernetes.io/zone, karpenter.sh/capacity-type).
    zone = f.string(spec.get("zone"), f"{path}.zone", required=True)
    capacity_type = f.string(spec.get("capacityType"), f"{path}.capacityType", required=True)
    assert zone is not None and capacity_type is not None
    f.label_value(zone, f"{path}.zone")
    f.label_value(capacity_type, f"{path}.capacityType")
    if len(capacity_type) > _SHORT_LABEL:
        raise ManifestError(f"must be no more than {_SHORT_LABEL} characters", field=f"{path}.capacityType")
    price = spec.get("price")
    if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price) or price < 0:
        raise ManifestError(f"price must be a non-negative number, got {price!r}", field=f"{path}.price")
    available = spec.get("available", True)
    if not isinstance(available, bool):
        raise ManifestError(f"expected a boolean, got {f.type_name(available)}", field=f"{path}.available")
    reserved = capacity_type == wk.CAPACITY_TYPE_RESERVED
    reservation_id = f.string(spec.get("reservationID"), f"{path}.reservationID", required=reserved) or ""
    reservation_type = f.string(spec.get("reservationType"), f"{path}.reservationType") or ""
    capacity = f.integer(spec.get("reservationCapacity"), f"{path}.reservationCapacity", minimum=0, maximum=2**31 - 1)
    if reserved:
        f.label_value(reservation_id, f"{path}.reservationID")  # it becomes the node's reservation-id label
        if capacity is None:
            raise ManifestError(
                "Required value: how many instances the reservation holds", field=f"{path}.reservationCapacity"
            )
        reservation_type = reservation_type or wk.RESERVATION_TYPES[0]
        if reservation_type not in wk.RESERVATION_TYPES:
            raise ManifestError(
                f'Unsupported value: "{reservation_type}": supported values: {", ".join(wk.RESERVATION_TYPES)}',
                field=f"{path}.reservationType",
            )
    else:
        for name in ("reservationID", "reservationType", "reservationCapacity"):
            if spec.get(name) is not None:
                raise ManifestError("only a reserved offering belongs to a reservation", field=f"{path}.{name}")
    return Offering(
        zone=zone,
        capacity_type=capacity_type,
        price=float(price),
        available=available,
        reservation_id=reservation_id,
        reservation_capacity=capacity or 0,
        reservation_type=reservation_type,
    )


def _offering_spec(offering: Offering) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "zone": offering.zone,
        "capacityType": offering.capacity_type,
        "price": offering.price,
        "available": offering.available,
    }
    if offering.reserved:
        spec.update(
            reservationID=offering.reservation_id,
            reservationType=offering.reservation_type,
            reservationCapacity=offering.reservation_capacity,
        )
    return spec


def _device_group(raw: Any, path: str, type_name: str) -> dict[str, Any]:
    """A DRA declaration on a type: the driver, its pool (default `<type>-pool`) and the devices it publishes."""
    spec = f.mapping(raw, path, allowed=_DEVICE_GROUP_FIELDS, required=True)
    driver = f.object_name(spec.get("driver"), f"{path}.driver", max_length=63)
    pool = f.string(spec.get("pool"), f"{path}.pool") or f"{type_name}-pool"
    devices = device_specs(spec.get("devices"), f"{path}.devices", driver)
    return {"driver": driver, "pool": pool, "devices": [dict(d) for d in devices]}


def device_specs(value: Any, path: str, driver: str) -> tuple[dict[str, Any], ...]:
    """resource.k8s.io Devices as a driver publishes them: named uniquely, readable as CEL sees them, within
    Kubernetes' bounds (MAX_DEVICES, MAX_DEVICE_ATTRIBUTES)."""
    devices = tuple(
        f.mapping(d, f"{path}[{i}]", required=True)
        for i, d in enumerate(f.sequence(value, path, max_items=MAX_DEVICES))
    )
    if not devices:
        raise ManifestError("at least one device is required", field=path)
    names: set[str] = set()
    for index, device in enumerate(devices):
        name = f.object_name(device.get("name"), f"{path}[{index}].name", max_length=63)
        if name in names:
            raise ManifestError(f"duplicate device name {name!r}", field=f"{path}[{index}].name")
        names.add(name)
        attributes = f.mapping(device.get("attributes"), f"{path}[{index}].attributes")
        capacity = f.mapping(device.get("capacity"), f"{path}[{index}].capacity")
        if len(attributes) + len(capacity) > MAX_DEVICE_ATTRIBUTES:
            raise ManifestError(
                f"must have at most {MAX_DEVICE_ATTRIBUTES} attributes and capacities together",
                field=f"{path}[{index}]",
            )
        try:
            Device.from_spec(device, driver)
        except ValueError as error:
            raise ManifestError(str(error), field=f"{path}[{index}]") from None
    return devices
