"""Karpenter's expiration controller: a NodeClaim older than its `expireAfter` is deleted (then drained by
termination). Expiration is forced: no budgets, no human gate, no do-not-disrupt; the disruption queue records it
as executing, saying why no approval could hold it."""

from __future__ import annotations

from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.lifecycle import is_managed
from provisioner.controllers.records import fingerprint_of, node_entry, record_command
from provisioner.durations import DurationError, format_duration, parse_duration
from provisioner.scheduling.logs import LogRecord


def expire_seconds(claim: Obj) -> int | None:
    value = (claim.get("spec") or {}).get("expireAfter", "720h")
    return parse_duration(value, allow_never=True)


def expiry(claim: Obj) -> float | None:
    """When the NodeClaim expires, or None (Never, already being deleted, or of a node class this Karpenter does not
    manage: expiration.go:64 leaves that one alone)."""
    if claim["metadata"].get("deletionTimestamp") or not is_managed(claim):
        return None
    seconds = expire_seconds(claim)
    if seconds is None:
        return None
    return parse_timestamp(claim["metadata"]["creationTimestamp"]) + seconds


class ExpirationController:
    """Remembers the earliest expiry among NodeClaims, so runs between NodeClaim changes cost nothing until then."""

    def __init__(self) -> None:
        self._seen: int | None = None  # the NodeClaim version the expiries below were computed at
        self._expiries: list[float] = []

    def expiries(self, ctx: ClusterContext) -> list[float]:
        version = ctx.api.kind_version("NodeClaim")
        if version != self._seen:
            self._expiries = sorted(t for claim in ctx.api.list("NodeClaim") if (t := expiry(claim)) is not None)
            self._seen = version
        return self._expiries

    def next_due(self, ctx: ClusterContext) -> list[float]:
        return self.expiries(ctx)[:1]

    def reconcile(self, ctx: ClusterContext) -> bool:
        expiries = self.expiries(ctx)
        if not expiries or ctx.now < expiries[0]:
            return False
        return _expire(ctx)


def _expire(ctx: ClusterContext) -> bool:
    changed = False
    for claim in ctx.api.list("NodeClaim"):
        expires = expiry(claim)
        if expires is not None and ctx.now >= expires:
            _record(ctx, claim)
            ctx.api.delete("NodeClaim", claim["metadata"]["name"])
            ctx.log(
                LogRecord(
                    "disrupting node(s)",
                    {
                        "command": f"Expired: delete: [{claim['metadata']['name']}]",
                        "decision": "delete",
                        "disrupted-node-count": 1,
                        "replacement-node-count": 0,
                        "reason": "expired",
                    },
                    logger="controller.nodeclaim.expiration",
                )
            )
            changed = True
    return changed


def _compact(grace: str) -> str:
    """A NodeClaim's terminationGracePeriod as the NodePool would say it: Karpenter writes Go's form ("1h0m0s")."""
    try:
        return format_duration(parse_duration(grace))
    except DurationError:
        return grace


def _record(ctx: ClusterContext, claim: Obj) -> None:
    """The expiry on the queue, already executing: the NodeClaim, its node and pods, and why it is forced."""
    name = claim["metadata"]["name"]
    node_name = (claim.get("status") or {}).get("nodeName") or ""
    grace = (claim.get("spec") or {}).get("terminationGracePeriod")
    drain = (
        f"its pods leave within its terminationGracePeriod of {_compact(grace)}, PDBs and do-not-disrupt "
        "notwithstanding"
        if grace
        else "with no terminationGracePeriod, a PDB or a do-not-disrupt pod can still hold its drain"
    )
    forced = (
        f"forced: NodeClaim {name} expired (expireAfter {format_duration(expire_seconds(claim))} since "
        f"{claim['metadata']['creationTimestamp']}); Karpenter deletes an expired NodeClaim whatever the approval "
        f"mode, budgets or a pause; {drain}"
    )
    record_command(
        ctx,
        reason="Expired",
        method="expiration",
        entries=[node_entry(ctx, claim, ctx.api.get("Node", node_name) if node_name else None)],
        fingerprint=fingerprint_of("Expired", name),
        savings=0.0,
        status={
            "phase": "Executing",
            "validateAt": timestamp(ctx.now),
            "startedAt": timestamp(ctx.now),
            "replacementNodeClaims": [],
            "forced": forced,
        },
    )
