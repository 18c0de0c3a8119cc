"""PodDisruptionBudgets: the disruptions each allows now, and the eviction API's verdict (200 or 429)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from provisioner.cluster.api import ClusterAPI, ClusterReader
from provisioner.cluster.objects import Obj
from provisioner.cluster.views import Views
from provisioner.disruption.types import DisruptionBudgetPolicy
from provisioner.pods import Pod
from provisioner.selectors import LabelSelector


def _count(value: Any, expected: int) -> int:
    text = str(value)
    if text.endswith("%"):
        return math.ceil(expected * int(text[:-1]) / 100)
    return int(text)


def budget_status(obj: Obj, pods: Iterable[Pod]) -> dict[str, int]:
    """A PDB's status as kube-controller-manager computes it from the pods it covers right now."""
    spec = obj.get("spec") or {}
    selector = LabelSelector.from_spec(spec.get("selector"))
    namespace = obj["metadata"].get("namespace", "default")
    covered = [
        p
        for p in pods
        if p.namespace == namespace and selector is not None and selector.matches(p.labels) and not p.is_terminal()
    ]
    expected = len(covered)
    # The disruption controller's countHealthyPods: not being deleted, and Ready (a Running pod whose Ready condition
    # is False, a failing readiness probe, is not healthy and leaves the others no room).
    healthy = sum(1 for p in covered if p.phase == "Running" and not p.deleting and not p.unready)
    if "minAvailable" in spec:
        desired = _count(spec["minAvailable"], expected)
    else:
        desired = expected - _count(spec.get("maxUnavailable", 0), expected)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(healthy - desired, 0),
    }


def covered_pods(store: ClusterReader, views: Views, obj: Obj) -> list[Pod]:
    """The pods a PDB's selector picks in its namespace (a missing selector picks none): found by the store's
    namespace and label filter, so a budget costs the pods it covers, not every pod."""
    selector = LabelSelector.from_spec((obj.get("spec") or {}).get("selector"))
    if selector is None:
        return []
    namespace = obj["metadata"].get("namespace", "default")
    return [views.pod(p) for p in store.list("Pod", namespace=namespace, selector=selector)]


def policies(store: ClusterReader, views: Views, covering: Pod | None = None) -> list[DisruptionBudgetPolicy]:
    """Every PDB (or every one that covers `covering`) with the disruptions it allows, computed from the pods it
    covers right now."""
    result = []
    for obj in store.list("PodDisruptionBudget"):
        spec = obj.get("spec") or {}
        if covering is not None and not _selects(obj, covering):
            continue
        status = budget_status(obj, covered_pods(store, views, obj))
        if "minAvailable" in spec:
            fully = str(spec["minAvailable"]) == "100%"
        else:
            fully = str(spec.get("maxUnavailable")) in ("0", "0%")
        result.append(
            DisruptionBudgetPolicy(
                obj["metadata"].get("namespace", "default"),
                obj["metadata"]["name"],
                LabelSelector.from_spec(spec.get("selector")),
                status["disruptionsAllowed"],
                fully,
                spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow",
            )
        )
    return result


def _selects(obj: Obj, pod: Pod) -> bool:
    selector = LabelSelector.from_spec((obj.get("spec") or {}).get("selector"))
    return obj["metadata"].get("namespace", "default") == pod.namespace and (
        selector is not None and selector.matches(pod.labels)
    )


def update_status(store: ClusterAPI, views: Views) -> bool:
    """Write each PDB's status where it changed (kube-controller-manager's job); True if any was written."""
    written = False
    for obj in store.list("PodDisruptionBudget"):
        status = budget_status(obj, covered_pods(store, views, obj))
        if obj.get("status") != status:
            obj["status"] = status
            store.update(obj)
            written = True
    return written


def eviction_refusal(store: ClusterReader, views: Views, pod_obj: Obj) -> str | None:
    """Why POST pods/eviction answers 429 for this pod now, or None when the eviction may go ahead."""
    pod: Pod = views.pod(pod_obj)
    covering = [p for p in policies(store, views, covering=pod) if p.covers(pod)]
    if len(covering) > 1:
        return "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    # AlwaysAllow lets a pod that is not Ready go whatever the budget allows (the eviction subresource's rule).
    if covering and covering[0].disruptions_allowed <= 0 and pod.phase == "Running" and not covering[0].lets_go(pod):
        return f"Cannot evict pod as it would violate the pod's disruption budget {covering[0].namespace}/{covering[0].name}."
    return None
