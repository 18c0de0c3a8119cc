"""Karpenter's NodeClaim disruption controller, drift half: mark a launched NodeClaim `Drifted` when its NodePool's
template hash or requirements no longer match it (the disruption controller then replaces it)."""

from __future__ import annotations

from provisioner import labels as wk
from provisioner.cluster.conditions import is_true, set_condition
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.disruption.drift import drift_reason


def reconcile(ctx: ClusterContext) -> bool:
    changed = False
    for claim in ctx.api.list("NodeClaim"):
        pool = ctx.nodepool((claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, ""))
        if pool is None or not is_true(claim, "Launched"):
            continue
        reason = drift_reason(
            pool,
            nodepool_hash(pool),
            claim["metadata"].get("annotations") or {},
            claim["metadata"].get("labels") or {},
            ctx.instance_types_for(pool) or [],
            HASH_VERSION,
        )
        if reason is not None and set_condition(claim, "Drifted", "True", ctx.now, reason):
            ctx.api.update(claim)
            changed = True
    return changed
