"""A node's health as Karpenter's node repair sees it (gate NodeRepair): the condition a repair policy matches,
since when, when the repair is forced, and the repair on the disruption queue, for the node's page."""

from __future__ import annotations

from typing import Any

from karpui import models
from karpui.clusters.karpenter_options import cluster_options
from provisioner.cloudprovider.kwok import KWOK_REPAIR_POLICIES
from provisioner.cluster.objects import timestamp
from provisioner.controllers.repair import UNHEALTHY, unhealthy
from provisioner.options import NODE_REPAIR

LIVE = ("Proposed", "AwaitingApproval", "Approved", "Executing")


def node_repair(cluster: models.Cluster, node: dict[str, Any]) -> dict[str, Any]:
    """`healthy`, or the matched condition with its age and the time left before the forced repair; whether the
    gate is on; and the latest repair command about the node (a live one first)."""
    gate = cluster_options(cluster).gate(NODE_REPAIR)
    found = unhealthy(node, KWOK_REPAIR_POLICIES)
    if found is None:
        return {"healthy": True, "gate": gate}
    now = cluster.clock.timestamp()
    name = node["metadata"]["name"]
    commands = [
        row.body
        for row in models.KubeObject.objects.filter(
            cluster=cluster, kind="DisruptionCommand", body__spec__reason=UNHEALTHY
        )
        if any(c["node"] == name for c in row.body["spec"]["candidates"])
    ]
    commands.sort(key=lambda c: (c["status"].get("phase") in LIVE, c["status"].get("proposedAt", "")), reverse=True)
    command = commands[0] if commands else None
    return {
        "healthy": False,
        "gate": gate,
        "condition": found.text,
        "since": timestamp(found.since),
        "unhealthy_for": max(0.0, now - found.since),
        "toleration": found.toleration,
        "forced_in": max(0.0, found.due - now),
        "command": {
            "name": command["metadata"]["name"],
            "phase": command["status"].get("phase", ""),
            "message": command["status"].get("forced") or command["status"].get("message", ""),
        }
        if command is not None
        else None,
    }
