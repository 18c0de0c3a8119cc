"""Karpenter's NodeClaim disruption controller, drift half: mark a launched NodeClaim `Drifted` when its NodePool's
template hash or requirements no longer match it (the disruption controller then replaces it)."""

from __future__ import annotations

from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import is_true, set_condition
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.disruption.drift import drift_reason


class DriftController:
    """Runs when NodeClaims, NodePools or their instance types changed since its last run; otherwise nothing can
    have drifted."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None

    def reconcile(self, ctx: ClusterContext) -> bool:
        pools = {np.name: np for np in ctx.nodepools}
        types = {name: ctx.instance_types_for(pool) or [] for name, pool in pools.items()}
        inputs = (ctx.api.kind_version("NodeClaim"), repr(ctx.nodepools), tuple(id(t) for t in types.values()))
        if inputs == self._seen:
            return False
        hashes = {name: nodepool_hash(pool) for name, pool in pools.items()}
        changed = False
        for claim in ctx.api.list("NodeClaim"):
            name = (claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, "")
            pool = pools.get(name)
            if pool is None or not is_true(claim, "Launched"):
                continue
            reason = drift_reason(
                pool,
                hashes[name],
                claim["metadata"].get("annotations") or {},
                claim["metadata"].get("labels") or {},
                types[name],
                HASH_VERSION,
            )
            if reason is not None and set_condition(claim, "Drifted", "True", ctx.now, reason):
                ctx.api.update(claim)
                changed = True
        self._seen = (ctx.api.kind_version("NodeClaim"), *inputs[1:])
        return changed
