"""Status conditions on stored objects, as Kubernetes controllers set them."""

from __future__ import annotations

from typing import Any

from provisioner.cluster.objects import timestamp


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            found: dict[str, Any] = item
            return found
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def set_condition(obj: dict[str, Any], kind: str, status: str, now: float, reason: str = "", message: str = "") -> bool:
    """Set a condition; True if anything changed (the transition time moves only when the status does)."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for item in conditions:
        if item.get("type") == kind:
            if item.get("status") == status and item.get("reason", "") == reason and item.get("message", "") == message:
                return False
            if item.get("status") != status:
                item["lastTransitionTime"] = timestamp(now)
            item.update(status=status, reason=reason, message=message)
            return True
    conditions.append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": timestamp(now)}
    )
    return True


def transition_time(obj: dict[str, Any], kind: str) -> str | None:
    found = condition(obj, kind)
    return found.get("lastTransitionTime") if found else None


def clear_condition(obj: dict[str, Any], kind: str) -> bool:
    """Remove a condition (Karpenter's Clear); True if it was there."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    kept = [item for item in conditions if item.get("type") != kind]
    if len(kept) == len(conditions):
        return False
    obj["status"]["conditions"] = kept
    return True
