"""The budgets observe mode's gate writes into a real Karpenter's NodePools (provisioner/disruption/holds.py): what
Karpenter reads from them, and how karpui takes exactly its own out again."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from provisioner.cluster.objects import parse_timestamp
from provisioner.controllers.holds import Release, wanted_holds
from provisioner.disruption.holds import (
    FROM_THEN_ON,
    GATE_ANNOTATION,
    Hold,
    HoldOptions,
    Recorded,
    budgets_with,
    cron_at,
    own_budgets,
    own_manifest,
    whole_minutes,
)

NOON = int(parse_timestamp("2026-12-05T12:34:00Z"))


def test_a_gate_hold_is_a_budget_of_zero_nodes_for_every_reason_always_active() -> None:
    hold = Hold("gate")
    assert hold.budget() == {"nodes": "0"}
    assert hold.active(0) and hold.active(NOON) and hold.holds("Underutilized") and hold.holds("Unhealthy")


def test_a_release_lets_its_reason_through_and_names_the_others_in_karpenters_order() -> None:
    hold = Hold("gate", ("Unhealthy", "Empty", "Drifted"))
    assert hold.budget() == {"nodes": "0", "reasons": ["Empty", "Drifted", "Unhealthy"]}
    assert not hold.holds("Underutilized")


def test_a_scheduled_hold_is_the_cron_of_its_minute_and_day_with_a_duration() -> None:
    hold = Hold("release", ("Underutilized",), NOON, 600)
    assert hold.budget() == {
        "nodes": "0",
        "reasons": ["Underutilized"],
        "schedule": "34 12 5 12 *",
        "duration": "10m",
    }
    assert (hold.active(NOON - 1), hold.active(NOON), hold.active(NOON + 599), hold.active(NOON + 600)) == (
        False,
        True,
        True,
        False,
    )
    assert cron_at(NOON + 59) == "34 12 5 12 *"


@pytest.mark.parametrize(
    ("hold", "message"),
    [
        (lambda: Hold("gate", (), NOON + 1, 60), "whole minute"),
        (lambda: Hold("gate", (), NOON, 90), "whole number of minutes"),
        (lambda: Hold("gate", (), NOON, FROM_THEN_ON + 60), "whole number of minutes up to 8700h"),
        (lambda: Hold("gate", (), NOON, None), "both a start and a length"),
        (lambda: Hold("gate", ("Consolidation",)), "unknown disruption reason(s) ['Consolidation']"),
    ],
)
def test_a_hold_karpenter_could_not_read_as_meant_is_refused(hold, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        hold()


def test_durations_round_up_to_whole_minutes_within_a_year() -> None:
    assert [whole_minutes(s) for s in (0, 1, 60, 61, 10**9)] == [60, 60, 60, 120, FROM_THEN_ON]


def test_the_record_round_trips_and_only_karpuis_budgets_are_taken_out() -> None:
    holds = (Hold("gate", ("Empty",)), Hold("release", ("Underutilized",), NOON, 600))
    recorded = Recorded(holds, tuple(h.budget() for h in holds))
    again = Recorded.of({"metadata": {"annotations": {GATE_ANNOTATION: recorded.annotation()}}})
    assert again == recorded
    own = [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}]
    # A person's own zero budget the same as karpui's stays: each recorded budget is taken out once.
    written = [*budgets_with(own, holds), {"nodes": "0", "reasons": ["Empty", "Drifted", "Underutilized"]}]
    assert written[:2] == [
        {"nodes": "0", "reasons": ["Empty"]},
        {"nodes": "0", "reasons": ["Underutilized"], "schedule": "34 12 5 12 *", "duration": "10m"},
    ]
    assert own_budgets(written, recorded) == [*own, written[-1]]


def test_own_manifest_is_the_nodepool_as_its_owner_wrote_it() -> None:
    holds = (Hold("gate"),)
    manifest = {
        "metadata": {
            "name": "default",
            "annotations": {
                GATE_ANNOTATION: Recorded(holds, ({"nodes": "0"},)).annotation(),
                "karpui.dev/approval-mode": "manual",
            },
        },
        "spec": {"disruption": {"consolidateAfter": "5s", "budgets": [{"nodes": "0"}, {"nodes": "10%"}]}},
    }
    assert own_manifest(manifest) == {
        "metadata": {"name": "default", "annotations": {"karpui.dev/approval-mode": "manual"}},
        "spec": {"disruption": {"consolidateAfter": "5s", "budgets": [{"nodes": "10%"}]}},
    }
    assert json.loads(manifest["metadata"]["annotations"][GATE_ANNOTATION])["budgets"] == [{"nodes": "0"}]


def test_an_annotation_that_does_not_parse_is_no_record() -> None:
    assert Recorded.of({"metadata": {"annotations": {GATE_ANNOTATION: "{not json"}}}) == Recorded()


def ctx(now: float, *, fail_open: bool = False, paused_until: float = 0.0) -> SimpleNamespace:
    """What the gate reads of a ClusterContext when it works out a NodePool's holds."""
    return SimpleNamespace(
        now=now,
        holding=HoldOptions(fail_open=fail_open, lease_seconds=600, release_seconds=180),
        paused=paused_until > now,
        paused_until=paused_until,
    )


def pool(mode: str | None = "manual", holds: tuple[Hold, ...] = ()) -> dict[str, Any]:
    annotations = {"karpui.dev/approval-mode": mode} if mode else {}
    if holds:
        annotations[GATE_ANNOTATION] = Recorded(holds, tuple(h.budget() for h in holds)).annotation()
    return {"metadata": {"name": "default", "annotations": annotations}, "spec": {}}


def test_failing_closed_a_gated_nodepool_is_held_always_and_an_auto_one_not_at_all() -> None:
    assert wanted_holds(ctx(NOON + 7), pool(), []) == [Hold("gate")]
    assert wanted_holds(ctx(NOON + 7), pool("dry-run"), []) == [Hold("gate")]
    assert wanted_holds(ctx(NOON + 7), pool("auto"), []) == []
    assert wanted_holds(ctx(NOON + 7), pool(None), []) == []


def test_failing_open_the_hold_is_a_lease_renewed_once_half_of_it_has_passed() -> None:
    first = wanted_holds(ctx(NOON + 7, fail_open=True), pool(), [])
    assert first == [Hold("gate", (), NOON, 600)]
    assert wanted_holds(ctx(NOON + 299, fail_open=True), pool(holds=tuple(first)), []) == first
    assert wanted_holds(ctx(NOON + 301, fail_open=True), pool(holds=tuple(first)), []) == [
        Hold("gate", (), NOON + 300, 600)
    ]


def test_a_release_lets_its_reason_through_and_holds_it_again_from_its_end_by_karpenters_clock() -> None:
    release = Release("cmd-1", "Underutilized", frozenset({"default"}), frozenset({"node-a"}), NOON + 150.5)
    assert wanted_holds(ctx(NOON + 7), pool(), [release]) == [
        Hold("gate", ("Empty", "Drifted", "Unhealthy")),
        Hold("release", ("Underutilized",), NOON + 180, FROM_THEN_ON),
    ]
    elsewhere = Release("cmd-2", "Underutilized", frozenset({"other"}), frozenset({"node-b"}), NOON + 150)
    assert wanted_holds(ctx(NOON + 7), pool(), [elsewhere]) == [Hold("gate")]


def test_a_pause_holds_every_nodepool_until_it_ends_gated_or_not() -> None:
    assert wanted_holds(ctx(NOON + 7, paused_until=NOON + 3607), pool(None), []) == [Hold("pause", (), NOON, 3660)]
    assert wanted_holds(ctx(NOON + 7, paused_until=NOON + 3607), pool(), []) == [
        Hold("gate"),
        Hold("pause", (), NOON, 3660),
    ]
