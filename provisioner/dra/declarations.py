"""DeviceDeclarations: which devices a driver will publish on nodes of the instance types a selector picks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from provisioner.catalog import InstanceType
from provisioner.dra.cel import Device
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.selectors import LabelSelector, SelectorError

API_VERSION = "karpui.dev/v1alpha1"
KIND = "DeviceDeclaration"


@dataclass(frozen=True)
class DeviceDeclaration:
    name: str
    selector: LabelSelector
    driver: str
    devices: tuple[Mapping[str, Any], ...]
    pool: str = ""
    catalog: str = ""  # empty: every catalog
    spec: Mapping[str, Any] | None = None  # as given, for printing back

    def applies_to(self, catalog: str, instance_type: InstanceType) -> bool:
        if self.catalog and self.catalog != catalog:
            return False
        return self.selector.matches({**instance_type.labels, "node.kubernetes.io/instance-type": instance_type.name})


def parse_declaration(doc: Mapping[str, Any]) -> DeviceDeclaration:
    if doc.get("apiVersion") != API_VERSION:
        raise ManifestError(
            f'no matches for kind "{KIND}" in version "{doc.get("apiVersion")}" (use {API_VERSION})', field="apiVersion"
        )
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec"))
    meta = f.metadata(doc)
    spec = f.mapping(
        doc.get("spec"), "spec", allowed=("catalog", "instanceTypeSelector", "driver", "pool", "devices"), required=True
    )
    try:
        selector = LabelSelector.from_spec(
            f.mapping(
                spec.get("instanceTypeSelector"),
                "spec.instanceTypeSelector",
                allowed=("matchLabels", "matchExpressions"),
                required=True,
            )
        )
    except SelectorError as error:
        raise ManifestError(str(error), field="spec.instanceTypeSelector") from None
    assert selector is not None
    driver = f.string(spec.get("driver"), "spec.driver", required=True) or ""
    devices = tuple(
        f.mapping(d, f"spec.devices[{i}]", required=True)
        for i, d in enumerate(f.sequence(spec.get("devices"), "spec.devices", max_items=128))
    )
    if not devices:
        raise ManifestError("at least one device is required", field="spec.devices")
    names = set()
    for index, device in enumerate(devices):
        name = f.object_name(device.get("name"), f"spec.devices[{index}].name")
        if name in names:
            raise ManifestError(f"duplicate device name {name!r}", field=f"spec.devices[{index}].name")
        names.add(name)
        try:
            Device.from_spec(device, driver)
        except ValueError as error:
            raise ManifestError(str(error), field=f"spec.devices[{index}]") from None
    return DeviceDeclaration(
        name=meta["name"],
        selector=selector,
        driver=driver,
        devices=devices,
        pool=f.string(spec.get("pool"), "spec.pool") or "",
        catalog=f.string(spec.get("catalog"), "spec.catalog") or "",
        spec=dict(spec),
    )


def declaration_to_manifest(declaration: DeviceDeclaration) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": declaration.name},
        "spec": dict(declaration.spec or {}),
    }


def declare(
    catalog: str, types: Sequence[InstanceType], declarations: Sequence[DeviceDeclaration]
) -> list[InstanceType]:
    """The catalog's types with every declaration that picks them added to their DRA devices."""
    if not declarations:
        return list(types)
    result = []
    for it in types:
        extra: tuple[dict[str, object], ...] = tuple(
            {"driver": d.driver, "pool": d.pool or f"{d.driver}/{d.name}", "devices": [dict(x) for x in d.devices]}
            for d in declarations
            if d.applies_to(catalog, it)
        )
        result.append(replace(it, devices=(*it.devices, *extra)) if extra else it)
    return result
