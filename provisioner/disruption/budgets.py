"""NodePool disruption budgets: how many nodes a reason may disrupt now (Karpenter's BuildDisruptionBudgetMapping)."""

from __future__ import annotations

import functools
import re
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


_NODES = re.compile(r"^([0-9]+%?)$")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# The names a cron field may give for a number: months count from 1, days of the week from Sunday, 0.
_NAMES = ({m: i + 1 for i, m in enumerate(_MONTHS)}, {d: i for i, d in enumerate(_DAYS)})


@functools.lru_cache(maxsize=1024)  # asked per budget on every pass, of the few schedules NodePools hold
def schedule_parses(schedule: str) -> bool:
    """Whether Karpenter's cron parser (robfig/cron ParseStandard) reads `schedule`: croniter's checks, and no range
    that runs backwards ("tue-mon": "beginning of range (2) beyond end of range (1)"), which croniter wraps."""
    expression = _MACROS.get(schedule, schedule)
    if not croniter.is_valid(expression):
        return False
    fields = expression.split()
    for index, field in enumerate(fields[:5]):
        names = _NAMES[0] if index == 3 else _NAMES[1] if index == 4 else {}
        for part in field.split(","):
            low, dash, high = part.split("/", 1)[0].partition("-")
            if dash:
                ends = [names.get(end.lower(), end) for end in (low, high)]
                if all(str(end).isdigit() for end in ends) and int(ends[0]) > int(ends[1]):
                    return False
    return True


def budget_errors(budgets: Sequence[Budget]) -> str | None:
    """GetAllowedDisruptionsByReason's error for a NodePool's budgets (nodepool.go:368-381, multierr's "; "), None
    when every budget reads. Karpenter's disruption controller logs it on every pass (controller.go:268-287)."""
    errors = [
        f'invariant violated, invalid cron, cannot parse "{budget.schedule}" (cron=<nil>)'
        for budget in budgets
        if budget.schedule is not None and budget.duration is not None and not schedule_parses(budget.schedule)
    ]
    errors += [f'invalid value for IntOrString: "{b.nodes}"' for b in budgets if not _NODES.match(b.nodes)]
    return "; ".join(errors) or None


def budget_allowed(budget: Budget, total_nodes: int, now: float) -> int | None:
    """Budget.GetAllowedDisruptions (nodepool.go:386-408): None while the budget is inactive (no limit), its count
    while active, and 0 when its schedule cannot be parsed: Karpenter fails closed, that budget allows nothing."""
    if budget.schedule is not None and budget.duration is not None and not schedule_parses(budget.schedule):
        return 0
    if not _NODES.match(budget.nodes):  # intstr.GetScaledValueFromIntOrPercent's error: also none
        return 0
    return budget.allowed(total_nodes) if budget_active(budget, now) else None


def budget_active(budget: Budget, now: float) -> bool:
    """A budget without a schedule is always active; with one, for `duration` after each scheduled hit."""
    if budget.schedule is None or budget.duration is None:
        return True
    expression = _MACROS.get(budget.schedule, budget.schedule)
    try:
        moment = datetime.fromtimestamp(now, UTC)
        last_hit = croniter(expression, moment + timedelta(seconds=1)).get_prev(datetime)
    except (ValueError, KeyError):
        return True  # an unparsable schedule: budget_allowed makes it allow nothing
    seconds = parse_duration(budget.duration) or 0
    try:
        return bool(moment < last_hit + timedelta(seconds=seconds))
    except OverflowError:  # the window ends past the year 9999: it is still open
        return True


def allowed_disruptions(nodepool: NodePool, reason: str, nodes: Sequence[ClaimedNode], now: float) -> int:
    """min over active budgets that apply to `reason`, minus nodes of the pool already disrupting; never negative."""
    counted = [n for n in nodes if n.nodepool == nodepool.name and n.initialized]
    disrupting = sum(1 for n in counted if _disrupting(n, reason))
    allowed = (
        budget_allowed(b, len(counted), now) for b in nodepool.budgets if b.reasons is None or reason in b.reasons
    )
    limits = [limit for limit in allowed if limit is not None]
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
