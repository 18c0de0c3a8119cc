"""kubectl's client-side apply: the last applied configuration kept in an annotation, and the three-way merge that
changes only the fields a manifest owns, so fields set by other writers (the dashboard's approval mode, `kubectl
scale`, a label someone added) survive an apply of a file that never mentioned them."""

from __future__ import annotations

import copy
import json
from typing import Any

from provisioner.apimachinery.patch import apply_patch
from provisioner.apimachinery.strategic import root_type, three_way_patch
from provisioner.manifests.documents import load_json
from provisioner.manifests.errors import ManifestError

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def last_applied(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The configuration last applied to `obj`, from its annotation (None when it was never applied).

    An annotation that does not hold a JSON object within the loader's bounds (depth 100, as for any manifest) is a
    ManifestError naming it, as kubectl's apply refuses to merge with an original it cannot read: 5,000 nested
    brackets written with `annotate` made the next apply a RecursionError traceback."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return None
    field = f"metadata.annotations.{LAST_APPLIED}"
    try:
        applied = load_json(str(text))
    except ManifestError as error:
        raise ManifestError(f"cannot read the last applied configuration: {error.message}", field=field) from None
    if not isinstance(applied, dict):
        raise ManifestError("cannot read the last applied configuration: not a JSON object", field=field)
    return applied


def with_last_applied(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` carrying itself (without the annotation) as its last applied configuration, as kubectl writes
    it: compact JSON with sorted keys and a final newline."""
    applied = copy.deepcopy(manifest)
    annotations = (applied.get("metadata") or {}).get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if not annotations:
        (applied.get("metadata") or {}).pop("annotations", None)
    result = copy.deepcopy(manifest)
    meta = result.setdefault("metadata", {})
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        LAST_APPLIED: json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n",
    }
    return result


def apply_patch_of(current: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """The patch `kubectl apply -f manifest` sends for `current` (empty when nothing would change): strategic for
    built-in kinds, a JSON merge patch for the others."""
    modified = with_last_applied(manifest)
    original = last_applied(current) or {}
    root = root_type(str(current.get("apiVersion", "")), str(current.get("kind", "")))
    return three_way_patch(original, modified, current, root)


def applied(current: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any] | None:
    """`current` after `kubectl apply -f manifest`, or None when the apply changes nothing."""
    patch = apply_patch_of(current, manifest)
    if not patch:
        return None
    patch_type = "strategic" if root_type(str(current.get("apiVersion", "")), str(current.get("kind", ""))) else "merge"
    return apply_patch(current, patch, patch_type)
