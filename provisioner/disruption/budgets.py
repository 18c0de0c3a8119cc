"""NodePool disruption budgets: how many nodes a reason may disrupt now (Karpenter's BuildDisruptionBudgetMapping)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from croniter import croniter

from provisioner.disruption.types import DRIFTED, EMPTY, UNDERUTILIZED, UNHEALTHY, ClaimedNode
from provisioner.durations import parse_duration
from provisioner.objects import Budget, NodePool

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def budget_active(budget: Budget, now: float) -> bool:
    """A budget without a schedule is always active; with one, for `duration` after each scheduled hit."""
    if budget.schedule is None or budget.duration is None:
        return True
    expression = _MACROS.get(budget.schedule, budget.schedule)
    try:
        moment = datetime.fromtimestamp(now, UTC)
        last_hit = croniter(expression, moment + timedelta(seconds=1)).get_prev(datetime)
    except (ValueError, KeyError):
        return True  # an unparsable schedule fails closed below: treated as active with its (small) count
    seconds = parse_duration(budget.duration) or 0
    try:
        return bool(moment < last_hit + timedelta(seconds=seconds))
    except OverflowError:  # the window ends past the year 9999: it is still open
        return True


def allowed_disruptions(nodepool: NodePool, reason: str, nodes: Sequence[ClaimedNode], now: float) -> int:
    """min over active budgets that apply to `reason`, minus nodes of the pool already disrupting; never negative."""
    counted = [n for n in nodes if n.nodepool == nodepool.name and n.initialized]
    disrupting = sum(1 for n in counted if _disrupting(n, reason))
    limits = [
        b.allowed(len(counted))
        for b in nodepool.budgets
        if (b.reasons is None or reason in b.reasons) and budget_active(b, now)
    ]
    if not limits:
        return len(counted)  # no active budget for this reason: unlimited
    return max(min(limits) - disrupting, 0)


def _disrupting(node: ClaimedNode, reason: str) -> bool:
    """Whether a node uses up `reason`'s budget (NodePoolStatsFromNodes, helpers.go:405-410): it is going, or it is
    NotReady, an unhealthy node counting as one disrupted, but not for repair, whose trigger NotReady is (counting
    those would let a wave of unhealthy nodes starve the budget that repairs them)."""
    return node.deleting or node.node.marked_for_deletion or (not node.ready and reason != UNHEALTHY)


def evaluate(nodepool: NodePool, now: float) -> None:
    """Ask of a NodePool's budgets everything a disruption pass asks, raising what the pass would raise: the pass
    leaves a NodePool that raises out, so that one NodePool never stops its cluster's disruption."""
    for reason in (EMPTY, DRIFTED, UNDERUTILIZED):
        allowed_disruptions(nodepool, reason, (), now)
