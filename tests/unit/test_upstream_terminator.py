"""Karpenter v1.15.0's eviction queue suite (pkg/controllers/node/termination/terminator/suite_test.go) ported onto
karpui's termination controller, each test naming the It it follows.

Karpenter's Queue is a controller of its own that the termination controller's Drain feeds; karpui's
TerminationController evicts each pod in the same pass that drains its Node, keeping the queue's per-pod back-off in
`refused` (by pod uid, as the queue keys by UID) and reading the force-delete deadline from the NodeClaim's
karpenter.sh/nodeclaim-termination-timestamp at every pass, as the Drain passes it to the queue. A Go test's
`queue.Add(pod)` + `ExpectObjectReconciled` is one pass over a deleting Node (the helpers of
test_upstream_termination.py); the PDB of a Go test is the suite's `MaxUnavailable: 0` one over the pod's labels.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.objects import timestamp
from provisioner.lab import Lab
from tests.unit.test_upstream_lifecycle import _lab, _step
from tests.unit.test_upstream_termination import OWNER, _managed_node, _pod, _registered_node, _Terminating

TEST_LABELS = {"test": "label"}


def _budget(made: Lab, name: str = "pdb", max_unavailable: int = 0) -> None:
    made.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": TEST_LABELS}},
        }
    )


def _labelled(made: Lab, name: str, node: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """test.Pod with the suite's labels on the Node."""
    pod = _pod(made, name, node, **spec)
    pod["metadata"]["labels"] = dict(TEST_LABELS)
    return made.store.update(pod)


def _events(made: Lab, *reasons: str) -> list[tuple[str, str, str, str, int]]:
    """(reason, kind, name, message, count) of each Event of `reasons`, sorted."""
    return sorted(
        (e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"], e["count"])
        for e in made.store.list("Event")
        if e["reason"] in reasons
    )


def _with_deadline(made: Lab, seconds: float) -> None:
    """The deleting NodeClaim's termination timestamp `seconds` from now (the Go test's nodeTerminationTime)."""
    [claim] = made.store.list("NodeClaim")
    claim["metadata"].setdefault("annotations", {})[wk.TERMINATION_TIMESTAMP] = timestamp(made.now + seconds)
    made.store.update(claim)


# Context("Eviction API") -----------------------------------------------------------------------------------------


def test_eviction_api_should_succeed_with_no_event_when_the_pod_is_not_found() -> None:
    """It("should succeed with no event when the pod is not found")"""
    made = _lab()
    node = _registered_node(made)
    _labelled(made, "gone", node)
    made.store.delete("Pod", "gone", "default")
    terminating = _Terminating(made, node)
    terminating.run()
    assert _events(made, "Evicted", "FailedDraining", "Disrupted") == []


def test_eviction_api_should_succeed_with_no_event_when_the_pod_uid_conflicts() -> None:
    """It("should succeed with no event when the pod UID conflicts"): the queue keys a pod by its UID, so a pod made
    again under the same name is another item; its back-off starts afresh and the old one's is dropped."""
    made = _lab()
    node = _registered_node(made)
    _budget(made)
    old = _labelled(made, "p", node)
    terminating = _Terminating(made, node)
    terminating.run()
    assert list(terminating.controller.refused) == [old["metadata"]["uid"]]
    made.store.delete("Pod", "p", "default")
    new = _labelled(made, "p", node)
    terminating.run()
    assert {uid: entry[1] for uid, entry in terminating.controller.refused.items()} == {new["metadata"]["uid"]: 1}


def test_eviction_api_should_succeed_with_an_evicted_event_when_there_are_no_pdbs() -> None:
    """It("should succeed with an evicted event when there are no PDBs"): the Go test's Node has no NodeClaim, so
    evictionReason finds none and the pod is told no reason."""
    made = _lab()
    node = _managed_node(made, "lonely", "kwok://lonely")
    pod = _labelled(made, "p", node)
    _Terminating(made, node).run()
    assert made.store.get("Pod", "p", "default") is None
    assert _events(made, "Evicted") == [("Evicted", "Pod", pod["metadata"]["name"], "Evicted pod: ", 1)]


def test_eviction_api_should_succeed_with_no_event_when_there_are_pdbs_that_allow_an_eviction() -> None:
    """It("should succeed with no event when there are PDBs that allow an eviction")"""
    made = _lab()
    node = _registered_node(made)
    _budget(made, max_unavailable=1)
    _labelled(made, "p", node)
    _Terminating(made, node).run()
    assert made.store.get("Pod", "p", "default") is None
    assert _events(made, "Evicted") == [("Evicted", "Pod", "p", "Evicted pod: Forceful Termination", 1)]


def test_eviction_api_should_return_a_node_drain_error_event_when_a_pdb_is_blocking() -> None:
    """It("should return a NodeDrainError event when a PDB is blocking"): the eviction answers 429 and the pod is
    retried after the queue's 100 ms base delay. The queue's "evicting pod violates a PDB" shares FailedDraining and
    the Node with the drain's own event, which Karpenter's controller publishes first (it enqueues, then tells), so
    the 2-minute dedupe keeps the drain's."""
    made = _lab()
    node = _registered_node(made)
    _budget(made)
    pod = _labelled(made, "p", node)
    terminating = _Terminating(made, node)
    terminating.run()
    assert made.store.get("Pod", "p", "default") is not None
    assert terminating.controller.refused == {pod["metadata"]["uid"]: [node["metadata"]["name"], 1, made.now - 1 + 0.1]}
    assert _events(made, "FailedDraining", "Evicted") == [
        (
            "FailedDraining",
            "Node",
            node["metadata"]["name"],
            "Failed to drain node, 1 pods are waiting to be evicted",
            1,
        )
    ]


def test_eviction_api_should_return_a_node_drain_error_event_when_two_pdbs_refer_to_the_same_pod() -> None:
    """It("should return a NodeDrainError event when two PDBs refer to the same pod"): the eviction API refuses a pod
    two PDBs cover, whatever they allow, and the pod is retried as for a 429."""
    made = _lab()
    node = _registered_node(made)
    _budget(made, "pdb", 1)
    _budget(made, "pdb2", 1)
    pod = _labelled(made, "p", node)
    terminating = _Terminating(made, node)
    terminating.run()
    assert made.store.get("Pod", "p", "default") is not None
    assert terminating.controller.refused == {pod["metadata"]["uid"]: [node["metadata"]["name"], 1, made.now - 1 + 0.1]}
    assert _events(made, "Evicted") == []


def test_eviction_api_should_increment_pods_drained_total_metric_with_specific_reason_when_a_pod_is_evicted() -> None:
    """It("should increment PodsDrainedTotal metric with specific reason when a pod is evicted"): the reason the
    metric carries is the one the Evicted event tells, the NodeClaim's DisruptionReason."""
    made = _lab()
    node = _registered_node(made)
    [claim] = made.store.list("NodeClaim")
    claim.setdefault("status", {}).setdefault("conditions", []).append(
        {
            "type": "DisruptionReason",
            "status": "True",
            "reason": "SpotInterruption",
            "message": "Node is being interrupted",
            "lastTransitionTime": timestamp(made.now),
        }
    )
    made.store.update(claim)
    _labelled(made, "p", node)
    _Terminating(made, node).run()
    assert _events(made, "Evicted") == [("Evicted", "Pod", "p", "Evicted pod: SpotInterruption", 1)]


# Context("Pod Force-Delete via Queue") ---------------------------------------------------------------------------


def _deleting_words(granted: int, grace: int, deadline: float) -> str:
    at = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    return (
        f"Deleting the pod to accommodate the terminationTime {at} of the node. The pod was granted {granted} seconds "
        f"of grace-period of its {grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
        "do-not-disrupt annotation."
    )


def test_force_delete_should_force_delete_a_pod_via_the_queue_bypassing_pdbs() -> None:
    """It("should force-delete a pod via the queue, bypassing PDBs")"""
    made = _lab()
    node = _registered_node(made)
    _budget(made)
    held = _labelled(made, "p", node, terminationGracePeriodSeconds=120)
    held["metadata"]["finalizers"] = ["karpenter.sh/test-finalizer"]  # so the deletion can be read back
    made.store.update(held)
    terminating = _Terminating(made, node)
    lifecycle_now = made.now
    _with_deadline(made, 60)
    terminating.run()
    assert made.store.get("Pod", "p", "default")["metadata"]["deletionTimestamp"] is not None
    assert _events(made, "Disrupted") == [("Disrupted", "Pod", "p", _deleting_words(60, 120, lifecycle_now + 60), 1)]
    assert terminating.controller.refused == {}


def test_force_delete_should_upgrade_a_pod_already_enqueued_for_eviction_to_force_delete() -> None:
    """It("should upgrade a pod already enqueued for eviction to force-delete"): refused by the PDB first, then the
    NodeClaim gets a deadline its grace period does not fit in."""
    made = _lab()
    node = _registered_node(made)
    _budget(made)
    _labelled(made, "p", node, terminationGracePeriodSeconds=120)
    terminating = _Terminating(made, node)
    terminating.run()
    assert made.store.get("Pod", "p", "default") is not None
    _with_deadline(made, 60)
    terminating.run()
    assert made.store.get("Pod", "p", "default") is None
    assert [reason for reason, *_ in _events(made, "Disrupted")] == ["Disrupted"]


def test_force_delete_should_clean_up_the_queue_entry_when_the_pod_is_already_gone() -> None:
    """It("should clean up the queue entry when the pod is already gone")"""
    made = _lab()
    node = _registered_node(made)
    _budget(made)
    _labelled(made, "p", node)
    _labelled(made, "other", node)
    terminating = _Terminating(made, node)
    terminating.run()
    assert len(terminating.controller.refused) == 2
    made.store.delete("Pod", "p", "default")
    terminating.run()
    assert [made.store.get("Pod", "other", "default")["metadata"]["uid"]] == list(terminating.controller.refused)


def test_force_delete_should_clamp_grace_period_seconds_to_at_least_1_when_node_termination_time_is_in_the_past() -> (
    None
):
    """It("should clamp gracePeriodSeconds to >= 1 when nodeTerminationTime is in the past")"""
    made = _lab()
    node = _registered_node(made)
    held = _labelled(made, "p", node, terminationGracePeriodSeconds=120)
    held["metadata"]["finalizers"] = ["karpenter.sh/test-finalizer"]
    made.store.update(held)
    terminating = _Terminating(made, node)
    past = made.now - 3600
    _with_deadline(made, -3600)
    terminating.run()
    [(_, _, _, message, count)] = _events(made, "Disrupted")
    assert (message, count) == (_deleting_words(1, 120, past), 1)
    assert made.store.get("Pod", "p", "default")["metadata"]["deletionTimestamp"] is not None


def test_evicted_is_told_once_per_pod_name_within_two_minutes() -> None:
    """EvictPod's DedupeValues are the pod's name alone (terminator/events/events.go:33-41): a StatefulSet's pod made
    again under its name and evicted again within 2 minutes is not told again; after them it is."""
    made = _lab()
    node = _registered_node(made)
    _labelled(made, "web-0", node, owners=[{**OWNER[0], "kind": "StatefulSet", "name": "web"}])
    terminating = _Terminating(made, node)
    terminating.run()
    assert made.store.get("Pod", "web-0", "default") is None
    _labelled(made, "web-0", node, owners=[{**OWNER[0], "kind": "StatefulSet", "name": "web"}])
    terminating.run()
    assert made.store.get("Pod", "web-0", "default") is None
    assert [count for *_, count in _events(made, "Evicted")] == [1]
    _step(made, 120)
    _labelled(made, "web-0", node, owners=[{**OWNER[0], "kind": "StatefulSet", "name": "web"}])
    terminating.run()
    assert [count for *_, count in _events(made, "Evicted")] == [2]


def test_a_node_with_no_nodeclaim_is_told_its_drain_waits_too() -> None:
    """Karpenter's finalize drains a Node with no NodeClaim as any other, and publishes NodeFailedToDrain for it when
    pods wait (termination/controller.go:207-211)."""
    made = _lab()
    node = _managed_node(made, "lonely", "kwok://lonely")
    _budget(made)
    _labelled(made, "p", node)
    _Terminating(made, node).run()
    assert _events(made, "FailedDraining") == [
        ("FailedDraining", "Node", "lonely", "Failed to drain node, 1 pods are waiting to be evicted", 1)
    ]
