"""Karpenter's consolidation events (pkg/controllers/disruption/events): ConsolidationCandidate on each candidate
of a consolidation command (v1.9, with its dollar savings), ConsolidationRejected when validation refuses it, and
ConsolidationApproved with a Balanced NodePool's score (v1.14): on the Node and NodeClaim of a single-node move, on
the NodePool of a multi-node one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner.controllers.context import ClusterContext
from provisioner.disruption import logs as disruption_logs
from provisioner.disruption.methods import score_text
from provisioner.disruption.scoring import ScoreResult
from provisioner.disruption.types import UNDERUTILIZED, Command

CANDIDATE, REJECTED, APPROVED = "ConsolidationCandidate", "ConsolidationRejected", "ConsolidationApproved"


def for_node(text: str, decision: str, node: str, count: int) -> str:
    """StringForNode: the command's text for a single-node command; one node's part of a multi-node one."""
    return text if count == 1 else f"{decision}: [{node}] (part of {count}-node consolidation)"


def _publish(ctx: ClusterContext, candidates: list[dict[str, Any]], reason: str, message_of: Any) -> None:
    for candidate in candidates:
        for kind, name in (("Node", candidate["node"]), ("NodeClaim", candidate["nodeclaim"])):
            obj = ctx.api.get(kind, name) if name else None
            if obj is not None:
                ctx.event(obj, "Normal", reason, message_of(candidate))


def computed(ctx: ClusterContext, command: Command, name: str, scores: Mapping[str, ScoreResult]) -> None:
    """A consolidation command computed (EmitCandidateEvents), and Balanced's approval of it."""
    if command.reason != UNDERUTILIZED:
        return  # emptiness and drift say nothing of the kind
    text = disruption_logs.command_text(command, name)
    entries = [{"node": c.name, "nodeclaim": c.claimed.nodeclaim} for c in command.candidates]
    count = len(entries)
    savings = command.savings
    _publish(
        ctx,
        entries,
        CANDIDATE,
        lambda c: (
            f"Consolidation candidate: {for_node(text, command.decision, c['node'], count)} (savings: ${savings:.2f})"
        ),
    )
    for pool, score in sorted(scores.items()):
        if not score.approved:
            continue
        if count == 1:
            _publish(ctx, entries, APPROVED, lambda _c, s=score: approved_message(s))
        else:
            ctx.event(ctx.nodepool_object(pool), "Normal", APPROVED, approved_message(score))


def rejected(ctx: ClusterContext, command: Any, problem: str) -> None:
    """EmitRejectedEvents: validation refused a consolidation command; the reason is its kind (budget, scheduling,
    churn), as getValidationFailureReason gives it."""
    spec = command["spec"]
    if spec["reason"] != UNDERUTILIZED:
        return
    reason = validation_failure_reason(problem)
    count = len(spec["candidates"])
    _publish(
        ctx,
        spec["candidates"],
        REJECTED,
        lambda c: (
            f"Consolidation rejected: {for_node(spec['text'], spec['decision'], c['node'], count)}, "
            f"reason: {reason} (savings: ${spec['savings']:.2f})"
        ),
    )


def validation_failure_reason(problem: str | None) -> str:
    """getValidationFailureReason (validation.go:359-378): the kind of validation error a rejection's problem leads
    with (budget, scheduling or churn, as recheck words them), "unknown" for none or any other."""
    kind = (problem or "").split(" ", 1)[0]
    return kind if kind in ("budget", "scheduling", "churn") else "unknown"


def approved_message(score: ScoreResult) -> str:
    """consolidationScoreMessage."""
    return (
        f"score {score_text(score.score)} >= threshold {score.threshold:.2f} (k: {score.k}, savings "
        f"{score.savings_fraction * 100:.1f}%, disruption {score.disruption_fraction * 100:.1f}%)"
    )
