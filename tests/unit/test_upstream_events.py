"""Karpenter v1.15.0's event recorder suite (pkg/events/suite_test.go) ported onto karpui's recorder, each test naming
the It it follows.

Karpenter's recorder is karpui's `ClusterContext.publish` (dedupe by reason and dedupe values, 2 minutes unless the
event says otherwise) over `events.record`; an Event's `count` is the Go suite's InternalRecorder.Calls for one
object, so "Calls == N" over N objects is N Events of count 1. NominatePodEvent is `provisioning.nominate`, with the
one PodNominationRateLimiter every pod shares (`ctx.nominated_events`, 5 a second, bursts of 10); the Go suite's
time.Sleep is the lab's clock stepping.
"""

from __future__ import annotations

from typing import Any

from provisioner.controllers.provisioning import FAILED_DEDUPE, nominate
from provisioner.lab import Lab
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_lifecycle import _lab, _step

_names = iter(range(1, 1_000_000))


def _pod(made: Lab) -> dict[str, Any]:
    """PodWithUID: test.Pod with a UID of its own."""
    return made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{next(_names)}", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        }
    )


def _node(made: Lab) -> dict[str, Any]:
    """NodeWithUID."""
    return made.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{next(_names)}"}})


def _calls(made: Lab, reason: str) -> int:
    """InternalRecorder.Calls(reason): every Event of `reason` the recorder wrote, repeats counted."""
    return sum(e["count"] for e in made.store.list("Event") if e["reason"] == reason)


def _nominate(made: Lab) -> None:
    """Publish(NominatePodEvent(PodWithUID(), NodeWithUID(), NodeClaimWithUID()))."""
    pod = made.ctx.views.pod(_pod(made))
    nominate(made.ctx, pod, lambda: "nodeclaim/default-x7k2p, node/n1")


def _evict(made: Lab, pod: dict[str, Any], dedupe_seconds: float | None = None) -> None:
    """Publish(EvictPod(pod, "")): the termination controller's event, its DedupeValues the pod's name."""
    options: dict[str, Any] = {} if dedupe_seconds is None else {"dedupe_seconds": dedupe_seconds}
    made.ctx.publish(pod, "Normal", "Evicted", "Evicted pod: ", dedupe_values=[pod["metadata"]["name"]], **options)


# Describe("Event Creation") ---------------------------------------------------------------------------------------


def test_event_creation_should_create_a_nominate_pod_event() -> None:
    """It("should create a NominatePod event")"""
    made = _lab()
    _nominate(made)
    assert [(e["reason"], e["message"], e["count"]) for e in made.store.list("Event")] == [
        ("Nominated", "Pod should schedule on: nodeclaim/default-x7k2p, node/n1", 1)
    ]


def test_event_creation_should_create_a_evict_pod_event() -> None:
    """It("should create a EvictPod event")"""
    made = _lab()
    _evict(made, _pod(made))
    assert _calls(made, "Evicted") == 1


def test_event_creation_should_create_a_pod_failed_to_schedule_event() -> None:
    """It("should create a PodFailedToSchedule event"): DedupeValues the pod's UID, a 5-minute dedupe."""
    made = _lab()
    pod = _pod(made)
    made.ctx.publish(
        pod,
        "Warning",
        "FailedScheduling",
        "Failed to schedule pod, ",
        dedupe_seconds=FAILED_DEDUPE,
        dedupe_values=[pod["metadata"]["uid"]],
    )
    assert _calls(made, "FailedScheduling") == 1


def test_event_creation_should_create_a_node_failed_to_drain_event() -> None:
    """It("should create a NodeFailedToDrain event")"""
    made = _lab()
    made.ctx.publish(_node(made), "Warning", "FailedDraining", "Failed to drain node, ")
    assert _calls(made, "FailedDraining") == 1


# Describe("Dedupe") -----------------------------------------------------------------------------------------------


def test_dedupe_should_only_create_a_single_event_when_many_events_are_created_quickly() -> None:
    """It("should only create a single event when many events are created quickly")"""
    made = _lab()
    pod = _pod(made)
    for _ in range(100):
        _evict(made, pod)
    assert _calls(made, "Evicted") == 1


def test_dedupe_should_allow_the_dedupe_timeout_to_be_overridden() -> None:
    """It("should allow the dedupe timeout to be overridden")"""
    made = _lab()
    pod = _pod(made)
    for _ in range(10):
        _evict(made, pod, dedupe_seconds=2)
    assert _calls(made, "Evicted") == 1
    _step(made, 3)
    _evict(made, pod, dedupe_seconds=2)
    assert _calls(made, "Evicted") == 2


def test_dedupe_should_allow_events_with_different_entities_to_be_created() -> None:
    """It("should allow events with different entities to be created")"""
    made = _lab()
    for _ in range(100):
        _evict(made, _pod(made))
    assert _calls(made, "Evicted") == 100


# Describe("Rate Limiting") ----------------------------------------------------------------------------------------


def test_rate_limiting_should_only_create_max_burst_when_many_events_are_created_quickly() -> None:
    """It("should only create max-burst when many events are created quickly"): the burst of 10 (the Go test allows
    11 for a token refilled while it runs; the lab's clock stands still)."""
    made = _lab()
    for _ in range(100):
        _nominate(made)
    assert _calls(made, "Nominated") == 10


def test_rate_limiting_should_allow_many_events_over_time_due_to_smoothed_rate_limiting() -> None:
    """It("should allow many events over time due to smoothed rate limiting")"""
    made = _lab()
    for _ in range(3):
        for _ in range(5):
            _nominate(made)
        _step(made, 1)
    assert _calls(made, "Nominated") == 15


def test_a_pod_the_rate_limiter_turns_away_is_held_by_the_dedupe_all_the_same() -> None:
    """Karpenter's recorder takes an event's dedupe entry before it asks the event's rate limiter (pkg/events/
    recorder.go:66-74): a pod whose nomination the limiter turned away is not told for 2 minutes, even once tokens
    are back; after them it is."""
    made = _lab()
    pods = [made.ctx.views.pod(_pod(made)) for _ in range(11)]
    for pod in pods:
        nominate(made.ctx, pod, lambda: "nodeclaim/a")
    assert _calls(made, "Nominated") == 10  # the 11th found no token
    _step(made, 5)
    nominate(made.ctx, pods[-1], lambda: "nodeclaim/a")
    assert _calls(made, "Nominated") == 10
    _step(made, 120)
    nominate(made.ctx, pods[-1], lambda: "nodeclaim/a")
    assert _calls(made, "Nominated") == 11


def test_a_pod_that_still_fails_to_schedule_is_told_again_once_the_five_minute_dedupe_runs_out() -> None:
    """PodFailedToScheduleEvent (provisioning/scheduling/events.go:64-73) is published by every scheduling pass
    (scheduler.go:322-333; the pod controller triggers one every 10 s while the pod is pending, provisioning/
    controller.go:70-77), deduped for 5 minutes by the pod's UID: a pod failing the same way for 6 minutes is told
    twice, the one Event counted twice."""
    made = lab(nodepool_doc(limits={"cpu": "0"}))
    pod = _pod(made)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    pod["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    made.store.update(pod)
    made.advance(30)
    assert _calls(made, "FailedScheduling") == 1
    made.advance(330)
    assert _calls(made, "FailedScheduling") == 2
