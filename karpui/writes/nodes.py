"""Node actions a person takes, from the dashboard or `karp`: cordon and uncordon, audited like every other human
change."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import models
from karpui.people.audit import Actor, audit_event_create
from karpui.writes import objects
from provisioner.cluster.objects import NotFound

# Cordoning keeps pods off a node, a lesser step than asking for it to go: the same permission covers both.
PERMISSION = "karpui.request_disruption"


def node_cordon(*, cluster: models.Cluster, name: str, actor: Actor, cordoned: bool = True) -> bool:
    """Set the Node's spec.unschedulable (kubectl cordon / uncordon) through the cluster's one write path, so its
    scheduler and Karpenter's see it at once; True if it changed. Raises LookupError for a node that is not there.
    A user needs PERMISSION; `karp`'s operator (no user) is the machine's, as for every other write."""
    user = actor.user
    if user is not None and (not user.is_active or not user.has_perm(PERMISSION)):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not cordon nodes")

    def edit(node: dict[str, Any]) -> None:
        spec = node.setdefault("spec", {})
        if cordoned:
            spec["unschedulable"] = True
        else:
            spec.pop("unschedulable", None)

    with transaction.atomic():
        try:
            # The permission that counts here is request_disruption, checked above, not the editors' one.
            _, changed = objects.object_edit(
                cluster=cluster, kind="Node", name=name, namespace="", edit=edit, actor=Actor(actor.name, actor.via)
            )
        except NotFound:
            raise LookupError(f'node "{name}" not found') from None
        if changed:
            audit_event_create(
                actor,
                "cordon" if cordoned else "uncordon",
                "Node",
                name,
                {"unschedulable": not cordoned},
                {"unschedulable": cordoned},
                cluster=cluster,
            )
    return changed
