"""The budgets karpui writes into a real Karpenter's NodePools to hold its voluntary disruption (observe mode's gate),
and how they are told apart from the NodePool's own.

Karpenter honours a budget of `nodes: "0"` as "no voluntary disruption for its reasons while it is active"
(`BuildDisruptionBudgetMapping`: the minimum of the active budgets), and a budget with a cron `schedule` is active
for its `duration` after each hit (`Budget.IsActive`: a hit in (now - duration, now]). So a hold can begin and end by
itself, whether karpui is there or not: a hold that begins at a given minute is the cron of that minute of that day
(`M H D Mo *`, UTC, Karpenter's only time zone) with a duration. Such a cron hits once a year, so a hold of that form
lasts less than a year (FROM_THEN_ON); an always-active hold has no schedule.

karpui records the budgets it added in the NodePool's `karpui.dev/gate` annotation, and takes exactly those out again:
what remains is the NodePool's own budgets, which karpui's simulation of Karpenter uses and which a person edits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from provisioner.cluster.objects import parse_timestamp, timestamp
from provisioner.durations import format_duration

GATE_ANNOTATION = "karpui.dev/gate"  # on a NodePool: the holds karpui added, as JSON
HELD_BY = "karpui.dev/held-by"  # on a Node karpui gave `karpenter.sh/do-not-disrupt` while a release is open
# Every reason a v1.15 budget may name: Unhealthy is node repair's (the NodeRepair gate), voluntary too.
REASONS = ("Empty", "Drifted", "Underutilized", "Unhealthy")
# "From a minute on": its cron hits again a year later, and a duration of a year or more would make the hold active
# again before its minute (Karpenter looks back `duration` for a hit). 8,700 h is 362.5 days.
FROM_THEN_ON = 8700 * 3600
MINUTE = 60


@dataclass(frozen=True)
class HoldOptions:
    """How the gate holds a real Karpenter (README, "The gate over a real Karpenter")."""

    fail_open: bool = False  # karpui down: closed keeps every hold; open lets each lapse after its lease
    lease_seconds: int = 600  # fail open: how long a hold outlives karpui's last renewal
    release_seconds: int = 180  # how long Karpenter has to take an approved command once released


@dataclass(frozen=True)
class Hold:
    """A budget of zero nodes karpui puts in a NodePool: the reasons it holds (all of REASONS when empty), and when
    it is active: from the whole minute `start` for `seconds` (a whole number of minutes), or always (`start` None).
    `why` says what it is for: "gate" (the NodePool is gated), "release" (the gate comes back when a release ends),
    "pause" (a person paused voluntary disruption)."""

    why: str
    reasons: tuple[str, ...] = ()
    start: int | None = None
    seconds: int | None = None

    def __post_init__(self) -> None:
        if (self.start is None) != (self.seconds is None):
            raise ValueError("a hold has both a start and a length, or neither")
        if self.start is not None and self.start % MINUTE:
            raise ValueError(f"a hold starts on a whole minute (cron's resolution), not at {timestamp(self.start)}")
        if self.seconds is not None and (self.seconds <= 0 or self.seconds % MINUTE or self.seconds > FROM_THEN_ON):
            raise ValueError(f"a hold lasts a whole number of minutes up to {FROM_THEN_ON // 3600}h")
        unknown = set(self.reasons) - set(REASONS)
        if unknown:
            raise ValueError(f"unknown disruption reason(s) {sorted(unknown)}; Karpenter's are {', '.join(REASONS)}")

    @property
    def end(self) -> float | None:
        return None if self.start is None or self.seconds is None else float(self.start + self.seconds)

    def active(self, now: float) -> bool:
        """Whether Karpenter counts this budget at `now`."""
        if self.start is None or self.end is None:
            return True
        return self.start <= now < self.end

    def holds(self, reason: str) -> bool:
        return not self.reasons or reason in self.reasons

    def budget(self) -> dict[str, Any]:
        """The budget as it goes into `spec.disruption.budgets`."""
        spec: dict[str, Any] = {"nodes": "0"}
        if self.reasons:
            spec["reasons"] = [r for r in REASONS if r in self.reasons]  # a set in the CRD: one order, always
        if self.start is not None and self.seconds is not None:
            spec["schedule"] = cron_at(self.start)
            spec["duration"] = format_duration(self.seconds)
        return spec

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"why": self.why}
        if self.reasons:
            record["reasons"] = list(self.reasons)
        if self.start is not None:
            record["start"] = timestamp(self.start)
            record["seconds"] = self.seconds
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Hold:
        start = record.get("start")
        return cls(
            str(record.get("why", "")),
            tuple(record.get("reasons") or ()),
            int(parse_timestamp(start)) if start else None,
            int(record["seconds"]) if start else None,
        )


def cron_at(start: int) -> str:
    """The cron that hits at the minute `start` (UTC), once a year."""
    moment = datetime.fromtimestamp(start, UTC)
    return f"{moment.minute} {moment.hour} {moment.day} {moment.month} *"


def floor_minute(now: float) -> int:
    return int(now // MINUTE * MINUTE)


def ceil_minute(now: float) -> int:
    return int(math.ceil(now / MINUTE) * MINUTE)


def whole_minutes(seconds: float) -> int:
    """`seconds` rounded up to whole minutes (a budget's duration takes minutes and hours only), within FROM_THEN_ON."""
    return min(max(ceil_minute(seconds), MINUTE), FROM_THEN_ON)


@dataclass(frozen=True)
class Recorded:
    """What a NodePool's gate annotation says karpui added: its holds and the exact budgets written for them."""

    holds: tuple[Hold, ...] = ()
    budgets: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, nodepool: Mapping[str, Any]) -> Recorded:
        """Read from a NodePool manifest; an annotation that does not parse is no record (karpui then writes its
        holds again beside whatever the NodePool holds)."""
        text = ((nodepool.get("metadata") or {}).get("annotations") or {}).get(GATE_ANNOTATION)
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(
                tuple(Hold.from_record(h) for h in data.get("holds") or ()),
                tuple(dict(b) for b in data.get("budgets") or ()),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls()

    def annotation(self) -> str:
        return json.dumps(
            {"holds": [h.to_record() for h in self.holds], "budgets": [dict(b) for b in self.budgets]},
            sort_keys=True,
            separators=(",", ":"),
        )


def own_budgets(budgets: Sequence[Mapping[str, Any]], recorded: Recorded) -> list[dict[str, Any]]:
    """The NodePool's budgets without the ones karpui recorded adding (each taken out once, where it still is)."""
    left = [dict(b) for b in budgets]
    for mine in recorded.budgets:
        for index, budget in enumerate(left):
            if budget == dict(mine):
                del left[index]
                break
    return left


def budgets_with(own: Iterable[Mapping[str, Any]], holds: Sequence[Hold]) -> list[dict[str, Any]]:
    """karpui's holds first, then the NodePool's own budgets as they were."""
    return [h.budget() for h in holds] + [dict(b) for b in own]


def own_manifest(nodepool: Mapping[str, Any]) -> dict[str, Any]:
    """The NodePool as its owner wrote it: karpui's hold budgets and its gate annotation taken out."""
    recorded = Recorded.of(nodepool)
    manifest = {**nodepool, "metadata": dict(nodepool.get("metadata") or {})}
    annotations = {k: v for k, v in (manifest["metadata"].get("annotations") or {}).items() if k != GATE_ANNOTATION}
    manifest["metadata"]["annotations"] = annotations
    spec = dict(manifest.get("spec") or {})
    disruption = dict(spec.get("disruption") or {})
    if "budgets" in disruption:
        disruption["budgets"] = own_budgets(disruption["budgets"], recorded)
        spec["disruption"] = disruption
        manifest["spec"] = spec
    return manifest
