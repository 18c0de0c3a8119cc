"""The three patch types the API takes, applied to a stored object: JSON merge (RFC 7386), JSON patch (RFC 6902)
and strategic merge. Errors are `PatchError` (422) or `UnsupportedPatch` (415), both ValueErrors."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from provisioner.apimachinery.mergepatch import merge_patch
from provisioner.apimachinery.strategic import PatchError, UnsupportedPatch, apply_strategic

__all__ = ["PATCH_TYPES", "PatchError", "UnsupportedPatch", "apply_patch"]

PATCH_TYPES = ("merge", "json", "strategic")


def apply_patch(obj: dict[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    """`obj` after `patch` of `patch_type` ("merge", "json" or "strategic"); `obj` is not changed."""
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise PatchError("a JSON merge patch must be a JSON object")
        patched: Any = merge_patch(obj, patch)
    elif patch_type == "json":
        if not isinstance(patch, list):
            raise PatchError("a JSON patch must be a list of operations")
        try:
            patched = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            raise PatchError(str(error)) from None
        except (TypeError, KeyError, IndexError) as error:  # malformed operations the library does not name
            raise PatchError(f"invalid JSON patch: {error}") from None
    elif patch_type == "strategic":
        patched = apply_strategic(obj, patch)
    else:
        raise UnsupportedPatch(f"unknown patch type {patch_type!r}: one of {', '.join(PATCH_TYPES)}")
    if not isinstance(patched, dict):
        raise PatchError("the patched object is not a JSON object")
    return patched
