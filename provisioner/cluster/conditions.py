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


def set_claim_condition(
    claim: dict[str, Any], kind: str, status: str, now: float, reason: str = "", message: str = ""
) -> bool:
    """set_condition on a NodeClaim, stored in the order operatorpkg's ConditionSet.Set keeps Karpenter's: by
    transition time (ties as they were), Ready last, so `kubectl describe` lists them as it does for Karpenter."""
    if not set_condition(claim, kind, status, now, reason, message):
        return False
    _sort_as_operatorpkg(claim["status"]["conditions"], "Ready")
    return True


def _sort_as_operatorpkg(conditions: list[dict[str, Any]], root: str) -> None:
    """operatorpkg's order after a Set: by transition time (a stable sort), the root condition last."""
    conditions.sort(key=lambda c: (c.get("type") == root, c.get("lastTransitionTime", "")))


def transition_time(obj: dict[str, Any], kind: str) -> str | None:
    found = condition(obj, kind)
    return found.get("lastTransitionTime") if found else None


def clear_condition(obj: dict[str, Any], kind: str) -> bool:
    """Remove a condition as operatorpkg's ConditionSet.Clear does, leaving the rest sorted by type; True if it was
    there."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    kept = [item for item in conditions if item.get("type") != kind]
    if len(kept) == len(conditions):
        return False
    obj["status"]["conditions"] = sorted(kept, key=lambda c: c.get("type", ""))
    return True


def set_with_root(
    conditions: list[dict[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: float,
    generation: int,
    dependents: tuple[str, ...],
    root: str = "Ready",
) -> bool:
    """operatorpkg's ConditionSet.Set over a status's conditions (changed in place): the transition time moves only
    when the status does, each condition carries the generation it was set at, the root condition (Ready) is
    recomputed from its dependents after any other changes, and the root sorts last. True if anything changed."""
    new = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": timestamp(now),
    }
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None:
        if current.get("status") == status:
            new["lastTransitionTime"] = current.get("lastTransitionTime", new["lastTransitionTime"])
        if current == new:
            return False
        conditions.remove(current)
    conditions.append(new)
    if kind != root:
        _recompute_root(conditions, now, generation, dependents, root)
    _sort_as_operatorpkg(conditions, root)
    return True


def _recompute_root(
    conditions: list[dict[str, Any]], now: float, generation: int, dependents: tuple[str, ...], root: str
) -> None:
    by_type = {c.get("type"): c for c in conditions}
    unhealthy = [
        c
        for c in (by_type.get(kind) for kind in dependents)
        if c is not None and (c.get("status") != "True" or c.get("observedGeneration") != generation)
    ]
    missing = [kind for kind in dependents if kind not in by_type]
    if not unhealthy and not missing:
        set_with_root(conditions, root, "True", root, "", now, generation, dependents, root)
        return
    failed = any(c.get("status") == "False" and c.get("observedGeneration") == generation for c in unhealthy)
    unhealthy.sort(key=lambda c: c.get("lastTransitionTime", ""), reverse=True)
    message = ", ".join(f"{c['type']}={c['status']}" for c in unhealthy) or ", ".join(f"{k}=Unknown" for k in missing)
    set_with_root(
        conditions,
        root,
        "False" if failed else "Unknown",
        "UnhealthyDependents" if failed else "ReconcilingDependents",
        message,
        now,
        generation,
        dependents,
        root,
    )


# What a healthy kubelet (or kwok's node stages for a fake one) reports: every pressure condition False, Ready True.
_HEALTHY_NODE = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def healthy_node_conditions(stamp: str) -> list[dict[str, str]]:
    """A healthy node's conditions, each as of `stamp`, as `kubectl describe node` expects to read them."""
    return [
        {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, value, reason, message in _HEALTHY_NODE
    ]


def node_info(arch: str, os: str, kubelet: str, runtime: str, kernel: str = "", image: str = "") -> dict[str, str]:
    """A node's status.nodeInfo, as its kubelet reports it."""
    return {
        "architecture": arch,
        "operatingSystem": os,
        "kubeletVersion": kubelet,
        "kubeProxyVersion": kubelet,
        "containerRuntimeVersion": runtime,
        "kernelVersion": kernel,
        "osImage": image,
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
    }
