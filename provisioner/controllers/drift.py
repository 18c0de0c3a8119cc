"""Karpenter's NodeClaim disruption controller, drift half: mark a launched NodeClaim `Drifted` when its NodePool's
template hash or requirements no longer match it (the disruption controller then replaces it)."""

from __future__ import annotations

from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import is_true, set_claim_condition
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.disruption.drift import HASH_ANNOTATION, HASH_VERSION_ANNOTATION, drift_reason


class DriftController:
    """Runs when NodeClaims, NodePools or their instance types changed since its last run; otherwise nothing can
    have drifted."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None
        # What a NodeClaim's drift is judged from (its labels and NodePool hash annotations) -> the reason, under the
        # NodePools and instance types of `_seen`. Every NodeClaim write (hundreds a step while a cluster scales)
        # used to judge every NodeClaim again: 3 s of 20,000 pods' provisioning.
        self._judged: dict[tuple[Any, ...], str | None] = {}

    def reconcile(self, ctx: ClusterContext) -> bool:
        pools = {np.name: np for np in ctx.nodepools}
        types = {name: ctx.instance_types_for(pool) or [] for name, pool in pools.items()}
        inputs = (ctx.api.kind_version("NodeClaim"), repr(ctx.nodepools), tuple(id(t) for t in types.values()))
        if inputs == self._seen:
            return False
        known = self._judged if self._seen is not None and inputs[1:] == self._seen[1:] else {}
        hashes = {name: nodepool_hash(pool) for name, pool in pools.items()}
        judged: dict[tuple[Any, ...], str | None] = {}
        changed = False
        for claim in ctx.api.list("NodeClaim"):
            labels = claim["metadata"].get("labels") or {}
            annotations = claim["metadata"].get("annotations") or {}
            name = labels.get(wk.NODEPOOL, "")
            pool = pools.get(name)
            if pool is None or not is_true(claim, "Launched"):
                continue
            key = (
                frozenset(labels.items()),
                annotations.get(HASH_VERSION_ANNOTATION),
                annotations.get(HASH_ANNOTATION),
            )
            reason = (
                known[key]
                if key in known
                else drift_reason(pool, hashes[name], annotations, labels, types[name], HASH_VERSION)
            )
            judged[key] = reason
            if reason is not None and set_claim_condition(claim, "Drifted", "True", ctx.now, reason):
                ctx.api.update(claim)
                changed = True
        self._judged = judged
        self._seen = (ctx.api.kind_version("NodeClaim"), *inputs[1:])
        return changed
