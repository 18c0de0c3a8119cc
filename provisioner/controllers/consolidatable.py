"""Karpenter's NodeClaim disruption controller, consolidation half: a NodeClaim is `Consolidatable` once its
NodePool's consolidateAfter has passed since its last pod event (or since it was initialized); the condition is
cleared while that has not happened, when consolidateAfter is Never, or before initialization.

Keeping this a condition (a write when the moment comes) rather than a computation at each disruption pass is what
lets the disruption controller skip passes over a cluster that has not changed, as Karpenter does.
"""

from __future__ import annotations

import bisect
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import clear_condition, is_true, set_claim_condition, transition_time
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.lifecycle import is_managed

CONSOLIDATABLE = "Consolidatable"


def consolidatable_at(ctx: ClusterContext, claim: Obj) -> float | None:
    """When the NodeClaim becomes consolidatable, or None (not initialized, consolidateAfter Never, no pool)."""
    pool = ctx.nodepool((claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, ""))
    # A static NodePool's NodeClaims are never consolidated, so never marked (Karpenter's runReconcilers).
    after = pool.consolidate_after_seconds if pool is not None and not pool.static else None
    if after is None or not is_true(claim, "Initialized"):
        return None
    last = (claim.get("status") or {}).get("lastPodEventTime") or transition_time(claim, "Initialized")
    return parse_timestamp(last) + after if last is not None else None


def _any_between(moments: list[float], after: float, until: float) -> bool:
    """Whether any of the sorted `moments` lies in (after, until]."""
    index = bisect.bisect_right(moments, after)
    return index < len(moments) and moments[index] <= until


class ConsolidatableController:
    """Runs when NodeClaims or NodePools changed since its last run, or one of its moments came."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None
        self._ran_at = float("-inf")
        self._moments: list[float] = []

    def next_due(self, ctx: ClusterContext) -> list[float]:
        return [t for t in self._moments if t > ctx.now][:1]

    def reconcile(self, ctx: ClusterContext) -> bool:
        inputs = (ctx.api.kind_version("NodeClaim"), repr(ctx.nodepools))
        if inputs == self._seen and not _any_between(self._moments, self._ran_at, ctx.now):
            return False
        changed = False
        moments = []
        for claim in ctx.api.list("NodeClaim"):
            # Karpenter leaves a NodeClaim of a node class it does not manage, or one being deleted, as it is
            # (nodeclaim/disruption/controller.go:83).
            if not is_managed(claim) or claim["metadata"].get("deletionTimestamp"):
                continue
            at = consolidatable_at(ctx, claim)
            if at is not None and ctx.now >= at:
                updated = set_claim_condition(claim, CONSOLIDATABLE, "True", ctx.now, CONSOLIDATABLE)
            else:
                updated = clear_condition(claim, CONSOLIDATABLE)
                if at is not None:
                    moments.append(at)
            if updated:
                ctx.api.update(claim)
                changed = True
        self._moments = sorted(moments)
        self._seen = (ctx.api.kind_version("NodeClaim"), repr(ctx.nodepools))
        self._ran_at = ctx.now
        return changed
