"""Node actions a person takes from the dashboard: cordon and uncordon, audited like every other human change."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import lab, models
from karpui.services import Actor, _audit

# Cordoning keeps pods off a node, a lesser step than asking for it to go: the same permission covers both.
PERMISSION = "karpui.request_disruption"


def node_cordon(*, cluster: models.Cluster, name: str, actor: Actor, cordoned: bool = True) -> bool:
    """Set the Node's spec.unschedulable (kubectl cordon / uncordon) through the cluster's own write path, so its
    scheduler and Karpenter's see it at once; True if it changed. Raises LookupError for a node that is not there."""
    user = actor.user
    if user is None or not user.is_active or not user.has_perm(PERMISSION):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not cordon nodes")
    with transaction.atomic():
        with lab.writing(cluster.name) as api:
            node = api.get("Node", name)
            if node is None:
                raise LookupError(f'node "{name}" not found')
            spec = node.setdefault("spec", {})
            if bool(spec.get("unschedulable")) == cordoned:
                return False
            before = {"unschedulable": bool(spec.get("unschedulable"))}
            if cordoned:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
            api.update(node, spec_changed=True)
        _audit(actor, "cordon" if cordoned else "uncordon", "Node", name, before, {"unschedulable": cordoned})
    return True
