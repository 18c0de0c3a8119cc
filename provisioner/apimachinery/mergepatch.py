"""JSON merge patch (RFC 7386): `application/merge-patch+json`, what `kubectl patch --type merge` sends."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """The document `target` becomes after `patch`: objects merge key by key, null deletes, anything else
    (lists included) replaces. Neither argument is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
