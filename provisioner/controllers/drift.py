"""Karpenter's NodeClaim disruption controller, drift half: a launched NodeClaim is `Drifted` while its NodePool's
template hash or requirements no longer match it, or (once it is an hour old) its instance type or offering is gone;
the condition is cleared when none of that holds or it is not launched. The disruption controller then replaces it."""

from __future__ import annotations

import bisect
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import clear_condition, condition, is_true, set_claim_condition
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.lifecycle import is_managed
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.disruption.drift import HASH_ANNOTATION, HASH_VERSION_ANNOTATION, drift_reason, instance_type_not_found
from provisioner.objects import NodePool

DRIFTED = "Drifted"
# Karpenter asks the cloud provider for instance types only for a NodeClaim more than an hour old (drift.go:247):
# an instance type is the provider's to change, so its drift may come later than a NodePool's.
INSTANCE_TYPE_CHECK_AGE = 3600.0
# The first whole second past that hour, when a NodeClaim whose instance type is gone is looked at again.
INSTANCE_TYPE_CHECK_STEP = 1.0


class DriftController:
    """Runs when NodeClaims, NodePools or their instance types changed since its last run, or a NodeClaim whose
    instance type is gone became old enough for that to count; otherwise nothing can have drifted."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None
        self._ran_at = float("-inf")
        self._moments: list[float] = []  # when a NodeClaim becomes old enough to be InstanceTypeNotFound
        # What a NodeClaim's drift is judged from (its labels and NodePool hash annotations) -> its NodePool drift
        # reason and its instance type's, under the NodePools and instance types of `_seen`. Every NodeClaim write
        # (hundreds a step while a cluster scales) used to judge every NodeClaim again: 3 s of 20,000 pods'
        # provisioning.
        self._judged: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}

    def next_due(self, ctx: ClusterContext) -> list[float]:
        return [t for t in self._moments if t > ctx.now][:1]

    def reconcile(self, ctx: ClusterContext) -> bool:
        pools = {np.name: np for np in ctx.nodepools}
        types = {name: ctx.instance_types_for(pool) or [] for name, pool in pools.items()}
        inputs = (ctx.api.kind_version("NodeClaim"), repr(ctx.nodepools), tuple(id(t) for t in types.values()))
        index = bisect.bisect_right(self._moments, self._ran_at)
        if inputs == self._seen and not (index < len(self._moments) and self._moments[index] <= ctx.now):
            return False
        known = self._judged if self._seen is not None and inputs[1:] == self._seen[1:] else {}
        hashes = {name: nodepool_hash(pool) for name, pool in pools.items()}
        judged: dict[tuple[Any, ...], tuple[str | None, str | None]] = {}
        moments: list[float] = []
        changed = False
        for claim in ctx.api.list("NodeClaim"):
            labels = claim["metadata"].get("labels") or {}
            name = labels.get(wk.NODEPOOL, "")
            pool = pools.get(name)
            if pool is None or not is_managed(claim):
                continue
            if _restamped(claim, pool, hashes[name]):
                claim = ctx.api.update(claim)
                changed = True
            if claim["metadata"].get("deletionTimestamp"):
                continue
            if not is_true(claim, "Launched"):
                if clear_condition(claim, DRIFTED):
                    ctx.api.update(claim)
                    changed = True
                continue
            annotations = claim["metadata"].get("annotations") or {}
            key = (
                frozenset(labels.items()),
                annotations.get(HASH_VERSION_ANNOTATION),
                annotations.get(HASH_ANNOTATION),
            )
            if key in known:
                judged[key] = known[key]
            else:
                static = drift_reason(
                    pool, hashes[name], annotations, labels, types[name], HASH_VERSION, check_types=False
                )
                # Awaiting NodeOverlays, Karpenter's GetInstanceTypes fails and only the static checks answer.
                skip = static or ctx.awaiting_overlays(pool)
                judged[key] = (static, None if skip else instance_type_not_found(labels, types[name]))
            static, gone = judged[key]
            reason = static
            if reason is None and gone is not None:
                checked_from = parse_timestamp(claim["metadata"]["creationTimestamp"]) + INSTANCE_TYPE_CHECK_AGE
                if ctx.now > checked_from:
                    reason = gone
                else:
                    moments.append(checked_from + INSTANCE_TYPE_CHECK_STEP)
            if reason is None:
                updated = clear_condition(claim, DRIFTED)
            else:
                updated = set_claim_condition(claim, DRIFTED, "True", ctx.now, reason, reason)
            if updated:
                ctx.api.update(claim)
                changed = True
        self._judged = judged
        self._moments = sorted(moments)
        self._seen = (ctx.api.kind_version("NodeClaim"), *inputs[1:])
        self._ran_at = ctx.now
        return changed


def _restamped(claim: Obj, pool: NodePool, current: str) -> bool:
    """The hash controller's updateNodeClaimHash (nodepool/hash/controller.go:102): while the NodePool was not hashed
    at this hash version, a NodeClaim of another version takes this one, and the NodePool's hash unless it is already
    Drifted (a hash of another version cannot say whether it still is); True if the NodeClaim changed."""
    annotations = claim["metadata"].get("annotations") or {}
    if pool.annotations.get(HASH_VERSION_ANNOTATION) == HASH_VERSION:
        return False
    if annotations.get(HASH_VERSION_ANNOTATION) == HASH_VERSION:
        return False
    stamped = {**annotations, HASH_VERSION_ANNOTATION: HASH_VERSION}
    if condition(claim, DRIFTED) is None:
        stamped[HASH_ANNOTATION] = current
    claim["metadata"]["annotations"] = stamped
    return True
