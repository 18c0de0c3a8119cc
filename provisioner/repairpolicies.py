"""Karpenter v1.15's repair policy matcher (pkg/controllers/node/health/policy.go): validation, matching, merging."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from provisioner.cloudprovider.types import RepairPolicy
from provisioner.cluster.objects import parse_timestamp
from provisioner.durations import format_duration

REPLACE_NODE = "ReplaceNode"
REBOOT_NODE = "RebootNode"
SUPPORTED_ACTIONS = frozenset({REPLACE_NODE, REBOOT_NODE})
# cloudprovider.RepairAction.IsMoreDisruptiveThan: a replacement outranks a reboot.
_DISRUPTIVENESS = {REBOOT_NODE: 0, REPLACE_NODE: 1}
MIN_PRIORITY, MAX_PRIORITY = 0, 100
# agingConstant: the wait past toleration that earns one dense priority rank, so no node starves.
AGING_SECONDS = 30 * 60.0
_STATUSES = ("True", "False", "Unknown")


def more_disruptive(action: str, other: str) -> bool:
    """RepairAction.IsMoreDisruptiveThan (cloudprovider/types.go:74): an action outside the supported two is a
    programming error there (it panics), a ValueError here."""
    for name in (action, other):
        if name not in _DISRUPTIVENESS:
            raise ValueError(f'unsupported repair action "{name}"')
    return _DISRUPTIVENESS[action] > _DISRUPTIVENESS[other]


class RepairPolicyError(ValueError):
    """A provider's repair policy set that Karpenter refuses to start with."""


def _go_duration(seconds: float) -> str:
    return format_duration(int(seconds)) if seconds >= 0 else f"-{format_duration(int(-seconds))}"


def describe(policy: RepairPolicy) -> str:
    """The policy as Go's %+v prints a cloudprovider.RepairPolicy, so errors name it whole."""
    grace = policy.termination_grace_period_seconds
    return (
        f"{{ConditionType:{policy.condition_type} ConditionStatus:{policy.condition_status} "
        f"ReasonRegex:{policy.reason_regex} TolerationDuration:{_go_duration(policy.toleration_seconds)} "
        f"TerminationGracePeriod:{'<nil>' if grace is None else _go_duration(grace)} "
        f"Priority:{policy.priority} Action:{policy.action}}}"
    )


def _validate(index: int, policy: RepairPolicy, actions: frozenset[str]) -> list[str]:
    """validateRepairPolicy and compileRepairPolicyReasonRegex: every fault of one policy."""
    value = f"policy[{index}]={describe(policy)}"
    faults = []
    if not policy.condition_type:
        faults.append(f"{value} has an empty condition type")
    if policy.condition_status not in _STATUSES:
        faults.append(f'{value} has invalid condition status "{policy.condition_status}"')
    if policy.toleration_seconds < 0:
        faults.append(f"{value} has negative toleration duration {_go_duration(policy.toleration_seconds)}")
    grace = policy.termination_grace_period_seconds
    if grace is not None and grace < 0:
        faults.append(f"{value} has negative termination grace period {_go_duration(grace)}")
    if not MIN_PRIORITY <= policy.priority <= MAX_PRIORITY:
        faults.append(
            f"{value} has priority {policy.priority} outside the supported range [{MIN_PRIORITY}, {MAX_PRIORITY}]"
        )
    if policy.action not in actions:
        faults.append(f'{value} has unsupported action "{policy.action}"')
    if policy.reason_regex:
        try:
            re.compile(policy.reason_regex)
        except re.error as error:
            faults.append(f"{value} has invalid reason regex, {error}")
    return [
        f'validating repair policy for condition status "{policy.condition_status}", {fault} '
        f"(condition={policy.condition_type})"
        for fault in faults
    ]


@dataclass(frozen=True)
class RepairPolicyMatch:
    """A policy that matches one of a Node's conditions, whatever the clock: resolved against it later."""

    policy: RepairPolicy
    condition_type: str
    condition_status: str
    reason: str
    rank: int
    eligible_at: float

    def log_values(self) -> list[Any]:
        values: list[Any] = [
            "condition",
            self.condition_type,
            "status",
            self.condition_status,
            "reason",
            self.reason,
            "reason-regex",
            self.policy.reason_regex,
            "fallback",
            self.policy.reason_regex == "",
            "action",
            self.policy.action,
            "eligible-at",
            self.eligible_at,
        ]
        if self.policy.termination_grace_period_seconds is not None:
            values += ["termination-grace-period", self.policy.termination_grace_period_seconds]
        return values


@dataclass(frozen=True)
class RepairResult:
    """Every policy eligible for one Node merged into one decision: the most disruptive action (then the highest
    priority, the earliest eligibility, the lowest condition type) names its source; the drain bound is the
    shortest; the score is the highest rank + age/agingConstant. An empty action: nothing is eligible yet."""

    action: str = ""
    condition: str = ""
    condition_status: str = ""
    reason: str = ""
    reason_regex: str = ""
    fallback: bool = False
    selected_eligible_at: float = 0.0
    termination_grace_period: float | None = None
    termination_grace_period_condition: str = ""
    selected_priority: int = 0
    termination_grace_period_eligible_at: float = 0.0
    score_rank: int = 0
    score_eligible_at: float = 0.0

    def score_at(self, now: float) -> float:
        """The repair score as of `now` (0 with nothing eligible): scoring all candidates at one time keeps ties."""
        if not self.action:
            return 0.0
        return self.score_rank + (now - self.score_eligible_at) / AGING_SECONDS

    def log_values(self) -> list[Any]:
        values: list[Any] = [
            "condition",
            self.condition,
            "status",
            self.condition_status,
            "reason",
            self.reason,
            "reason-regex",
            self.reason_regex,
            "fallback",
            self.fallback,
            "action",
            self.action,
            "eligible-at",
            self.selected_eligible_at,
        ]
        if self.termination_grace_period is not None:
            values += [
                "termination-grace-period",
                self.termination_grace_period,
                "termination-grace-period-condition",
                self.termination_grace_period_condition,
            ]
        return values

    def merge(self, match: RepairPolicyMatch, eligible_at: float, now: float) -> RepairResult:
        """mergePolicy: this result with one more policy, if it is eligible at `now`."""
        if eligible_at > now:
            return self
        policy, first = match.policy, not self.action
        merged = self
        score = match.rank + (now - eligible_at) / AGING_SECONDS
        if first or score > self.score_at(now):
            merged = replace(merged, score_rank=match.rank, score_eligible_at=eligible_at)
        grace = policy.termination_grace_period_seconds
        if grace is not None and self._shorter_grace(grace, match.condition_type, eligible_at):
            merged = replace(
                merged,
                termination_grace_period=grace,
                termination_grace_period_condition=match.condition_type,
                termination_grace_period_eligible_at=eligible_at,
            )
        selected = first or more_disruptive(policy.action, self.action)
        if policy.action == self.action:
            if policy.priority != self.selected_priority:
                selected = policy.priority > self.selected_priority
            elif eligible_at != self.selected_eligible_at:
                selected = eligible_at < self.selected_eligible_at
            else:
                selected = match.condition_type < self.condition
        if not selected:
            return merged
        return replace(
            merged,
            action=policy.action,
            condition=match.condition_type,
            condition_status=match.condition_status,
            reason=match.reason,
            reason_regex=policy.reason_regex,
            fallback=policy.reason_regex == "",
            selected_eligible_at=eligible_at,
            selected_priority=policy.priority,
        )

    def _shorter_grace(self, bound: float, condition: str, eligible_at: float) -> bool:
        """Equal bounds keep the earliest-eligible condition, then the lowest type: order-independent."""
        if self.termination_grace_period is None:
            return True
        if bound != self.termination_grace_period:
            return bound < self.termination_grace_period
        if eligible_at != self.termination_grace_period_eligible_at:
            return eligible_at < self.termination_grace_period_eligible_at
        return condition < self.termination_grace_period_condition


def _time(value: Any) -> float:
    # An omitted time is Go's zero time: before any Node, so the clamp below lifts it to the Node's creation.
    return parse_timestamp(value) if value else 0.0


@dataclass(frozen=True)
class RepairPolicyMatcher:
    """A provider's validated policy set, grouped by (condition type, status) with its one default fallback."""

    groups: Mapping[tuple[str, str], tuple[tuple[RepairPolicy, re.Pattern[str]], ...]]
    fallback: RepairPolicy
    ranks: Mapping[int, int]

    def matches(self, condition: Mapping[str, Any]) -> bool:
        """Whether the condition's type and status are covered by the set, whatever the toleration: the 20% rule
        counts a node unhealthy from then."""
        return (condition.get("type"), condition.get("status")) in self.groups

    def match(self, node: Mapping[str, Any]) -> list[RepairPolicyMatch]:
        """Every policy matching one of the Node's conditions: its specific policies whose regex finds the reason
        (Go's MatchString searches), else the fallback."""
        created = _time(node.get("metadata", {}).get("creationTimestamp"))
        found = []
        for condition in (node.get("status") or {}).get("conditions") or []:
            kind, status, reason = condition.get("type", ""), condition.get("status", ""), condition.get("reason") or ""
            specific = self.groups.get((kind, status))
            if specific is None:
                continue
            # A condition cannot predate its Node; this also bounds an omitted transition time.
            since = max(_time(condition.get("lastTransitionTime")), created)
            matched = [policy for policy, regex in specific if regex.search(reason)]
            for policy in matched or [self.fallback]:
                found.append(
                    RepairPolicyMatch(
                        policy, kind, status, reason, self.ranks[policy.priority], since + policy.toleration_seconds
                    )
                )
        return found


def resolve(matches: Iterable[RepairPolicyMatch], now: float, not_before: float | None = None) -> RepairResult:
    """The matches eligible at `now` merged into one decision, each toleration measured from no earlier than
    `not_before` (the end of a reboot)."""
    result = RepairResult()
    for match in matches:
        eligible_at = match.eligible_at
        if not_before is not None:
            eligible_at = max(eligible_at, not_before + match.policy.toleration_seconds)
        result = result.merge(match, eligible_at, now)
    return result


def repair_policy_matcher(
    policies: Sequence[RepairPolicy], actions: frozenset[str] = SUPPORTED_ACTIONS
) -> RepairPolicyMatcher:
    """newRepairPolicyMatcher: the set compiled, or RepairPolicyError naming every fault in it."""
    return _compile(tuple(policies), actions)


@lru_cache(maxsize=16)
def _compile(policies: tuple[RepairPolicy, ...], actions: frozenset[str]) -> RepairPolicyMatcher:
    groups: dict[tuple[str, str], list[tuple[RepairPolicy, re.Pattern[str]]]] = {}
    fallback: RepairPolicy | None = None
    faults: list[str] = []
    for index, policy in enumerate(policies):
        faults += _validate(index, policy, actions)
        specific = groups.setdefault((policy.condition_type, policy.condition_status), [])
        if not policy.reason_regex:
            if fallback is not None:
                faults.append(
                    f"repair policy set has multiple default fallbacks: {describe(fallback)} and {describe(policy)}"
                )
            else:
                fallback = policy
        else:
            with suppress(re.error):  # _validate has said why
                specific.append((policy, re.compile(policy.reason_regex)))
    if fallback is None:
        faults.append("repair policy set must define one default fallback")
    elif fallback.action != REPLACE_NODE:
        faults.append(f'default fallback policy {describe(fallback)} must use action "{REPLACE_NODE}"')
    if faults or fallback is None:
        raise RepairPolicyError("; ".join(faults))
    ranks = {priority: rank for rank, priority in enumerate(sorted({p.priority for p in policies}))}
    return RepairPolicyMatcher({k: tuple(v) for k, v in groups.items()}, fallback, ranks)


def _inputs(node: Mapping[str, Any]) -> tuple[Any, ...]:
    conditions = (node.get("status") or {}).get("conditions") or []
    return (
        _time(node.get("metadata", {}).get("creationTimestamp")),
        tuple(
            (c.get("type"), c.get("status"), c.get("reason") or "", _time(c.get("lastTransitionTime")))
            for c in conditions
        ),
    )


def match_inputs_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """MatchInputsEqual: whether matching reads the same from both Nodes (heartbeats, messages, labels aside)."""
    return _inputs(a) == _inputs(b)
