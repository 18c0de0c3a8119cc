"""NodeOverlay manifests (karpenter.sh/v1alpha1), checked as the CRD's schema and CEL rules check them at v1.14."""

from __future__ import annotations

import re
from typing import Any

from provisioner import labels as wk
from provisioner.manifests import fields as f
from provisioner.manifests.apivalidation import go_quote
from provisioner.manifests.errors import ManifestError
from provisioner.objects import NodeSelectorRequirement
from provisioner.overlays import PRICE, PRICE_ADJUSTMENT, RESTRICTED_RESOURCES, NodeOverlay
from provisioner.quantity import format_resources
from provisioner.requirements import DOES_NOT_EXIST, EXISTS, GT, GTE, IN, LT, LTE, NOT_IN

API_VERSION = "karpenter.sh/v1alpha1"
KIND = "NodeOverlay"
# The CRD's enum order (karpenter.sh_nodeoverlays.yaml at v1.15.0).
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NON_NEGATIVE_INT = re.compile(r"^[0-9]+$")
_ALLOWED_KARPENTER_KEYS = (wk.CAPACITY_TYPE, wk.NODEPOOL)


def parse_nodeoverlay(doc: dict[str, Any]) -> NodeOverlay:
    if doc.get("apiVersion") != API_VERSION:
        raise ManifestError(
            f'no matches for kind "{KIND}" in version "{doc.get("apiVersion")}" (use {API_VERSION})', field="apiVersion"
        )
    f.mapping(doc, "", allowed=("apiVersion", "kind", "metadata", "spec", "status"))
    meta = f.metadata(doc)
    spec = f.mapping(
        doc.get("spec"),
        "spec",
        allowed=("requirements", "priceAdjustment", "price", "capacity", "weight"),
        required=True,
    )
    if "requirements" not in spec:
        raise ManifestError("Required value", field="spec.requirements")
    requirements = _requirements(spec.get("requirements"))
    price = _patterned(spec.get("price"), "spec.price", PRICE)
    adjustment = _patterned(spec.get("priceAdjustment"), "spec.priceAdjustment", PRICE_ADJUSTMENT)
    if price is not None and adjustment is not None:
        raise ManifestError("cannot set both 'price' and 'priceAdjustment'", field="spec")
    capacity = f.resources(spec.get("capacity"), "spec.capacity", numbers=False)
    if any(name in RESTRICTED_RESOURCES for name in capacity):
        raise ManifestError("invalid resource restricted", field="spec.capacity")
    weight = f.integer(spec.get("weight"), "spec.weight", minimum=1, maximum=10000)
    return NodeOverlay(
        name=meta["name"],
        requirements=requirements,
        price=price,
        price_adjustment=adjustment,
        capacity=capacity,
        weight=weight,
        generation=meta["generation"] if isinstance(meta.get("generation"), int) else 1,
    )


def _requirements(value: Any) -> tuple[NodeSelectorRequirement, ...]:
    path = "spec.requirements"
    items = f.sequence(value, path, max_items=100)
    result = []
    for index, item in enumerate(items):
        item_path = f.join(path, index)
        spec = f.mapping(item, item_path, allowed=("key", "operator", "values"), required=True)
        key = f.string(spec.get("key"), f.join(item_path, "key"), required=True)
        assert key is not None
        key_path = f.join(item_path, "key")
        if len(key) > 316:
            raise ManifestError("Too long: may not be more than 316 bytes", field=key_path)
        _patterned(key, key_path, _KEY)
        # The rule's self.find("^([^/]+)") is everything before the first slash, the whole key when it has none.
        if key not in _ALLOWED_KARPENTER_KEYS and key.split("/", 1)[0].endswith("karpenter.sh"):
            raise ManifestError('label domain "karpenter.sh" is restricted', field=key_path)
        if key == wk.HOSTNAME:
            raise ManifestError('label "kubernetes.io/hostname" is restricted', field=key_path)
        operator = f.string(spec.get("operator"), f.join(item_path, "operator"), required=True)
        assert operator is not None
        if operator not in OPERATORS:
            raise ManifestError(
                f"Unsupported value: {go_quote(operator)}: supported values: "
                + ", ".join(go_quote(o) for o in OPERATORS),
                field=f.join(item_path, "operator"),
            )
        values = []
        for value_index, raw in enumerate(f.sequence(spec.get("values"), f.join(item_path, "values"))):
            value_path = f.join(f.join(item_path, "values"), value_index)
            text = f.string(raw, value_path) or ""
            if len(text) > 63:
                raise ManifestError("Too long: may not be more than 63 bytes", field=value_path)
            values.append(_patterned(text, value_path, _VALUE) or "")
        result.append(NodeSelectorRequirement(key, operator, tuple(values)))
    # The CRD's list-level rules, in its order.
    for requirement in result:
        if requirement.operator == NOT_IN and not requirement.values:
            raise ManifestError("requirements with operator 'NotIn' must have a value defined", field=path)
    for requirement in result:
        if requirement.operator == IN and not requirement.values:
            raise ManifestError("requirements with operator 'In' must have a value defined", field=path)
    for requirement in result:
        if requirement.operator in (GT, LT, GTE, LTE) and (
            len(requirement.values) != 1 or not _NON_NEGATIVE_INT.match(requirement.values[0])
        ):
            raise ManifestError(
                "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
                field=path,
            )
    return tuple(result)


def _patterned(value: Any, path: str, pattern: re.Pattern[str]) -> str | None:
    """A string the schema's `pattern` checks, refused in kube-apiserver's words."""
    text = f.string(value, path)
    if text is not None and not pattern.fullmatch(text):  # Go's $ ends the text, Python's a line
        raise ManifestError(
            f"Invalid value: {go_quote(text)}: {path} in body should match '{pattern.pattern}'", field=path
        )
    return text


def nodeoverlay_to_manifest(overlay: NodeOverlay) -> dict[str, Any]:
    spec: dict[str, Any] = {"requirements": [r.to_spec() for r in overlay.requirements]}
    if overlay.price is not None:
        spec["price"] = overlay.price
    if overlay.price_adjustment is not None:
        spec["priceAdjustment"] = overlay.price_adjustment
    if overlay.capacity:
        spec["capacity"] = format_resources(overlay.capacity)
    if overlay.weight is not None:
        spec["weight"] = overlay.weight
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": overlay.name}, "spec": spec}
