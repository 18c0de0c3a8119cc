"""The lab's kubelets: each Node carries its hostname label, and pods bound to a Ready node start Running."""

from __future__ import annotations

from provisioner.cluster.conditions import set_condition
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.views import is_ready
from provisioner.sim.workloads import Burst


def reconcile(store: ObjectStore, now: float, burst: Burst | None = None) -> bool:
    """Start pods bound to Ready nodes, at most `burst` of them (the rest at the next step)."""
    changed = False
    burst = burst or Burst()
    for node in store.list("Node"):
        labels = node["metadata"].setdefault("labels", {})
        if "kubernetes.io/hostname" not in labels:
            labels["kubernetes.io/hostname"] = node["metadata"]["name"]
            store.update(node)
            changed = True
    # Only bound pods can start, and only the nodes they are bound to need looking at.
    bound = [p for p in store.list("Pod", fields={"status.phase": "Pending"}) if p["spec"].get("nodeName")]
    ready = {name for name in {p["spec"]["nodeName"] for p in bound} if (n := store.get("Node", name)) and is_ready(n)}
    for pod in bound:
        status = pod.setdefault("status", {})
        if pod["spec"].get("nodeName") in ready:
            if burst.exhausted():
                break
            burst.spend()
            status["phase"] = "Running"
            status["startTime"] = pod["metadata"].get("creationTimestamp")
            set_condition(pod, "Ready", "True", now)
            store.update(pod)
            changed = True
    return changed
