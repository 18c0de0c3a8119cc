"""How many NodeClaims a NodePool has, as Karpenter's NodePoolState counts them for static NodePools and node limits:
running, being deleted, and (a static NodePool's) held by a disruption command that has not deleted them yet."""

from __future__ import annotations

from dataclasses import dataclass

from provisioner import labels as wk
from provisioner.controllers.command_specs import live_commands
from provisioner.controllers.context import ClusterContext


@dataclass(frozen=True)
class Counts:
    """Karpenter's NodePoolState counts for one NodePool: NodeClaims running (not being deleted), being deleted,
    and, in a static NodePool, held by a disruption command that has not deleted them yet."""

    active: int
    deleting: int
    pending_disruption: int


def node_counts(ctx: ClusterContext, nodepool: str) -> Counts:
    claims = [c for c in ctx.api.list("NodeClaim") if (c["metadata"].get("labels") or {}).get(wk.NODEPOOL) == nodepool]
    deleting = {c["metadata"]["name"] for c in claims if c["metadata"].get("deletionTimestamp")}
    # Only a static NodePool's NodeClaims are marked pending disruption (queue.go:337-340, OwnedByStaticNodePool):
    # a dynamic NodePool's candidate stays running until it is marked for deletion.
    pool = ctx.nodepool(nodepool)
    held = (
        {
            candidate["nodeclaim"]
            for command in live_commands(ctx)
            for candidate in command["spec"]["candidates"]
            if candidate.get("nodepool") == nodepool
        }
        if pool is not None and pool.static
        else set()
    )
    active = [c["metadata"]["name"] for c in claims if c["metadata"]["name"] not in deleting]
    pending = sum(1 for name in active if name in held)
    return Counts(active=len(active) - pending, deleting=len(deleting), pending_disruption=pending)
