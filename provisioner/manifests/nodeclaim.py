"""A karpenter.sh/v1 NodeClaim's spec as kube-apiserver checks it against Karpenter's CRD (karpenter.sh_nodeclaims.yaml)."""

from __future__ import annotations

import json
import re
from typing import Any

from provisioner import labels as wk
from provisioner.manifests import fields as f
from provisioner.manifests.errors import ManifestError
from provisioner.requirements import DOES_NOT_EXIST, EXISTS, GT, GTE, IN, LT, LTE, NOT_IN
from provisioner.taints import EFFECTS

API_V1 = "karpenter.sh/v1"
# The CRD's patterns. Unlike a NodePool (whose RuntimeValidate also asks validation.IsQualifiedName), a NodeClaim is
# only ever checked by these, so a key's prefix may run past 253 characters within the key's 316.
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
_GRACE = re.compile(r"^([0-9]+(s|m|h))+$")
_INT = re.compile(r"^[+-]?[0-9]+$")
_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)  # the CRD's enum, in its order
_SPEC_FIELDS = (
    "taints",
    "startupTaints",
    "requirements",
    "resources",
    "nodeClassRef",
    "terminationGracePeriod",
    "expireAfter",
)
_INT64_MAX = 2**63 - 1


def validate_nodeclaim(doc: dict[str, Any]) -> None:
    """Refuse, naming the field, a v1 NodeClaim kube-apiserver would refuse with Karpenter's CRD."""
    spec = f.mapping(doc.get("spec"), "spec", allowed=_SPEC_FIELDS, required=True)
    _node_class_ref(spec.get("nodeClassRef"))
    _requirements(spec.get("requirements"))
    for name in ("taints", "startupTaints"):
        _taints(spec.get(name), f"spec.{name}")
    resources = f.mapping(spec.get("resources"), "spec.resources", allowed=("requests",))
    f.resources(resources.get("requests"), "spec.resources.requests", numbers=False)
    if spec.get("expireAfter") is not None:
        f.string(spec["expireAfter"], "spec.expireAfter", required=True, pattern=_DURATION)
    if spec.get("terminationGracePeriod") is not None:
        f.string(spec["terminationGracePeriod"], "spec.terminationGracePeriod", required=True, pattern=_GRACE)


def _node_class_ref(value: Any) -> None:
    path = "spec.nodeClassRef"
    ref = f.mapping(value, path, allowed=("group", "kind", "name"), required=True)
    for part in ("group", "kind", "name"):
        if ref.get(part) == "":  # given but empty: the rule `self != ''`; absent: required
            raise ManifestError(f"{part} may not be empty", field=f.join(path, part))
        f.string(ref.get(part), f.join(path, part), required=True)
    if "/" in ref["group"]:
        raise ManifestError(f"group {ref['group']!r} must not contain '/'", field=f.join(path, "group"))


def _requirements(value: Any) -> None:
    path = "spec.requirements"
    if value is None:
        raise ManifestError("Required value", field=path)
    for index, item in enumerate(f.sequence(value, path, max_items=100)):
        here = f.join(path, index)
        spec = f.mapping(item, here, allowed=("key", "operator", "values", "minValues"), required=True)
        key = f.string(spec.get("key"), f.join(here, "key"), required=True)
        assert key is not None
        if len(key) > 316:
            raise ManifestError(f"Too long: may not be more than 316 bytes, got {len(key)}", field=f.join(here, "key"))
        f.string(key, f.join(here, "key"), pattern=_QUALIFIED)
        # A NodeClaim carries karpenter.sh/nodepool: only the domain and hostname rules apply (:132-135).
        if key not in (wk.CAPACITY_TYPE, wk.NODEPOOL) and key.split("/", 1)[0].endswith("karpenter.sh"):
            raise ManifestError('label domain "karpenter.sh" is restricted', field=f.join(here, "key"))
        if key == wk.HOSTNAME:
            raise ManifestError('label "kubernetes.io/hostname" is restricted', field=f.join(here, "key"))
        operator = spec.get("operator")
        if operator not in _OPERATORS:
            supported = ", ".join(_OPERATORS)
            raise ManifestError(
                f"Unsupported value: {json.dumps(operator)}: supported values: {supported}",
                field=f.join(here, "operator"),
            )
        values = []
        for number, raw in enumerate(f.sequence(spec.get("values"), f.join(here, "values"))):
            at = f.join(f.join(here, "values"), number)
            if not isinstance(raw, str):
                raise ManifestError(f"expected a string, got {f.type_name(raw)}", field=at)
            if len(raw) > 63 or not _LABEL_VALUE.match(raw):
                f.label_value(raw, at)
            values.append(raw)
        min_values = f.integer(spec.get("minValues"), f.join(here, "minValues"), minimum=1, maximum=50)
        _rules(operator, values, min_values, path)


def _rules(operator: str, values: list[str], min_values: int | None, path: str) -> None:
    """The list's rules (:178-183), reported on the list as kube-apiserver reports them."""
    if operator == IN and not values:
        raise ManifestError("requirements with operator 'In' must have a value defined", field=path)
    if operator in (GT, LT, GTE, LTE) and not (
        len(values) == 1 and _INT.match(values[0]) and 0 <= int(values[0]) <= _INT64_MAX
    ):
        raise ManifestError(
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value", field=path
        )
    if operator == IN and min_values is not None and len(values) < min_values:
        raise ManifestError(
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            field=path,
        )


def _taints(value: Any, path: str) -> None:
    for index, item in enumerate(f.sequence(value, path)):
        here = f.join(path, index)
        spec = f.mapping(item, here, allowed=("key", "value", "effect", "timeAdded"), required=True)
        f.string(spec.get("key"), f.join(here, "key"), required=True, pattern=_QUALIFIED)
        if spec.get("value"):
            f.string(spec["value"], f.join(here, "value"), pattern=_QUALIFIED)
        effect = spec.get("effect")
        if effect is None:
            raise ManifestError("Required value", field=f.join(here, "effect"))
        if effect not in EFFECTS:
            supported = ", ".join(EFFECTS)
            raise ManifestError(
                f"Unsupported value: {json.dumps(effect)}: supported values: {supported}", field=f.join(here, "effect")
            )
