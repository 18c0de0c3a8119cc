"""Karpenter's kwok provider instance-types file (its INSTANCE_TYPES_FILE_PATH, the format of the provider's own
instance_types.json) read as a karpui catalog, with the labels, pod count and overhead the provider gives each type."""

from __future__ import annotations

import json
import re
from typing import Any

from provisioner import labels as wk
from provisioner.catalog.files import API_VERSION, KIND, catalog_from_manifest, load_catalog
from provisioner.catalog.instance_type import Catalog
from provisioner.catalog.kwok import KWOK_OVERHEAD
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import QuantityError, canonical_quantity, format_resources

# The provider's parseSizeFromType and parseFamilyFromType (kwok/cloudprovider/helpers.go).
_AWS_NAME = re.compile(r"^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$")
_FAMILY_DELIMITER = re.compile(r"[.-]")
# setDefaultOptions: a type that names no pod count gets Kubernetes' default of 110.
DEFAULT_PODS = "110"
_TYPE_FIELDS = ("name", "offerings", "architecture", "operatingSystems", "resources")
_OFFERING_FIELDS = ("Price", "Available", "ReservationCapacity", "Requirements")
_REQUIREMENT_FIELDS = ("key", "operator", "values")
# The offering requirements a karpui offering has a place for: its zone, capacity type and reservation.
_OFFERING_KEYS = {wk.ZONE: "zone", wk.CAPACITY_TYPE: "capacityType", wk.RESERVATION_ID: "reservationID"}


def read_catalog(text: str) -> Catalog:
    """A catalog file in either format: karpui's InstanceCatalog (one YAML or JSON object) or the kwok provider's
    instance-types file (a JSON array), which becomes the `kwok` catalog it stands for."""
    return load_kwok_instance_types(text) if text.lstrip().startswith("[") else load_catalog(text)


def load_kwok_instance_types(text: str, name: str = "kwok") -> Catalog:
    """The file as a catalog named `name` for KWOKNodeClass; every error names the field (`[3].offerings[0].Price`)."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise ManifestError(f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    types = [_instance_type(item, f"[{i}]") for i, item in enumerate(f.sequence(items, "instance types"))]
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "description": "Karpenter's kwok provider instance-types file",
            "nodeClassKinds": ["KWOKNodeClass"],
            "instanceTypes": types,
        },
    }
    # The catalog format's own checks (label values, quantities, duplicate names) on what was read, their field
    # paths turned back into the file's: spec.instanceTypes[3].capacity.cpu is [3].resources.cpu.
    try:
        return catalog_from_manifest(manifest)
    except ManifestError as error:
        field = error.field.replace("spec.instanceTypes", "", 1).replace(".capacity", ".resources", 1)
        raise ManifestError(error.message, field=field) from None


def _fields(raw: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    """An object's fields by their canonical names: Go's encoding/json matches a key to a field whatever its case.
    A key that is no field is an error here, where Go would drop it silently."""
    spec = f.mapping(raw, path, required=True)
    by_lower = {name.lower(): name for name in allowed}
    found: dict[str, Any] = {}
    for key, value in spec.items():
        canonical = by_lower.get(str(key).lower())
        if canonical is None:
            raise ManifestError(f'unknown field "{key}" (known: {", ".join(allowed)})', field=f.join(path, key))
        found[canonical] = value
    return found


def _instance_type(raw: Any, path: str) -> dict[str, Any]:
    spec = _fields(raw, path, _TYPE_FIELDS)
    name = f.string(spec.get("name"), f"{path}.name", required=True) or ""
    architecture = f.string(spec.get("architecture"), f"{path}.architecture", required=True) or ""
    systems = [
        f.string(os, f"{path}.operatingSystems[{i}]", required=True) or ""
        for i, os in enumerate(f.sequence(spec.get("operatingSystems"), f"{path}.operatingSystems"))
    ]
    if len(systems) != 1:
        raise ManifestError(
            f"expected exactly one operating system (a karpui instance type has one), got {len(systems)}",
            field=f"{path}.operatingSystems",
        )
    resources = f.mapping(spec.get("resources"), f"{path}.resources", required=True)
    capacity = {"pods": DEFAULT_PODS, **resources}
    labels = {wk.ARCH: architecture, wk.OS: systems[0], **_derived_labels(name, capacity, f"{path}.resources")}
    offerings = [
        _offering(item, f"{path}.offerings[{i}]")
        for i, item in enumerate(f.sequence(spec.get("offerings"), f"{path}.offerings"))
    ]
    return {
        "name": name,
        "labels": labels,
        "capacity": capacity,
        "overhead": {"kubeReserved": format_resources(KWOK_OVERHEAD.kube_reserved)},
        "offerings": offerings,
    }


def _derived_labels(name: str, resources: dict[str, Any], path: str) -> dict[str, str]:
    """setDefaultOptions' labels: size (from an AWS-style name, else the CPU count), family, CPU and memory, the
    quantities written as Go's Quantity.String() writes them."""
    written = {}
    for resource in ("cpu", "memory"):
        value = resources.get(resource)
        try:
            written[resource] = canonical_quantity(value) if value is not None else ""
        except QuantityError as error:
            raise ManifestError(str(error), field=f.join(path, resource)) from None
    aws = _AWS_NAME.match(name)
    parts = _FAMILY_DELIMITER.split(name, maxsplit=1)
    return {
        wk.KWOK_INSTANCE_SIZE: aws.group(1) if aws else written["cpu"],
        wk.KWOK_INSTANCE_FAMILY: parts[0] if len(parts) == 2 else name[:1],
        wk.KWOK_INSTANCE_CPU: written["cpu"],
        wk.KWOK_INSTANCE_MEMORY: written["memory"],
    }


def _offering(raw: Any, path: str) -> dict[str, Any]:
    """One offering in karpui's catalog format. Every offering is available, as the provider's setDefaultOptions
    makes it whatever the file says."""
    spec = _fields(raw, path, _OFFERING_FIELDS)
    placed: dict[str, Any] = {}
    for i, item in enumerate(f.sequence(spec.get("Requirements"), f"{path}.Requirements")):
        at = f"{path}.Requirements[{i}]"
        requirement = f.mapping(item, at, allowed=_REQUIREMENT_FIELDS, required=True)
        key = f.string(requirement.get("key"), f"{at}.key", required=True) or ""
        if key not in _OFFERING_KEYS:
            raise ManifestError(
                f'unsupported offering requirement "{key}" (supported: {", ".join(_OFFERING_KEYS)})', field=f"{at}.key"
            )
        values = f.sequence(requirement.get("values"), f"{at}.values")
        if requirement.get("operator") != "In" or len(values) != 1:
            raise ManifestError(f"an offering's {key} must be one value, operator In", field=at)
        placed[_OFFERING_KEYS[key]] = values[0]
    reserved = placed.get("capacityType") == wk.CAPACITY_TYPE_RESERVED
    for key, field in _OFFERING_KEYS.items():
        if field not in placed and (field != "reservationID" or reserved):
            raise ManifestError(f'Required value: a requirement on "{key}"', field=f"{path}.Requirements")
    if "reservationID" in placed and not reserved:
        raise ManifestError(f"only a reserved offering names {wk.RESERVATION_ID}", field=f"{path}.Requirements")
    offering: dict[str, Any] = {**placed, "price": spec.get("Price", 0), "available": True}
    if reserved:
        offering["reservationCapacity"] = spec.get("ReservationCapacity", 0)
    elif spec.get("ReservationCapacity"):
        raise ManifestError("only a reserved offering belongs to a reservation", field=f"{path}.ReservationCapacity")
    return offering
