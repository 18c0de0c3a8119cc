"""The events Karpenter's orchestration queue publishes while a command runs (sigs.k8s.io/karpenter@v1.15.0
pkg/controllers/disruption/queue.go waitOrTerminate, events/events.go Launching, WaitingOnReadiness, Terminating)."""

from provisioner.lab import Lab
from tests.lab_builders import deployment, lab, nodepool_doc

OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
CONSOLIDATING = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "0s",
    "budgets": [{"nodes": "1"}],
}


def queue_events(made: Lab) -> list[tuple[str, str, str, str, int]]:
    """(reason, kind, name, message, count) of the queue's events, by reason then kind."""
    return sorted(
        (e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"], e["count"])
        for e in made.store.list("Event")
        if e["reason"] in ("DisruptionLaunching", "DisruptionWaitingReadiness", "DisruptionTerminating")
    )


def test_a_replace_tells_its_replacement_launching_and_waiting_then_disrupting_the_node_and_its_nodeclaim():
    made = lab(nodepool_doc(template_spec={"requirements": OD}, disruption=CONSOLIDATING), deployment("inflate", 10))
    made.advance(30)
    [old] = made.store.list("NodeClaim")
    old_node = old["status"]["nodeName"]
    found = made.store.get("Deployment", "inflate", "default")
    found["spec"]["replicas"] = 3
    made.store.update(found)
    while not [c for c in made.store.list("DisruptionCommand") if c["status"]["phase"] == "Executing"]:
        made.advance(1)
    [command] = made.store.list("DisruptionCommand")
    [replacement] = command["status"]["replacementNodeClaims"]
    waiting = [
        ("DisruptionLaunching", "NodeClaim", replacement, "Launching NodeClaim: Underutilized", 1),
        ("DisruptionWaitingReadiness", "NodeClaim", replacement, "Waiting on readiness to continue disruption", 1),
    ]
    while made.store.get("NodeClaim", old["metadata"]["name"]) is not None:
        made.advance(1)
    assert queue_events(made) == sorted(
        [
            *waiting,
            ("DisruptionTerminating", "Node", old_node, "Disrupting Node: Underutilized", 1),
            ("DisruptionTerminating", "NodeClaim", old["metadata"]["name"], "Disrupting NodeClaim: Underutilized", 1),
        ]
    )
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Succeeded"


def test_a_node_its_command_is_deleting_is_no_disruption_blocked_event_nor_one_inside_consolidate_after():
    """NewCandidate skips a node the queue holds without an event ("candidate is already being disrupted"), and
    ShouldDisrupt passes over a NodeClaim not yet Consolidatable without one: the dashboard says both."""
    waiting = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "10s",
        "budgets": [{"nodes": "1"}],
    }
    made = lab(nodepool_doc(template_spec={"requirements": OD}, disruption=waiting), deployment("inflate", 3))
    made.advance(30)
    found = made.store.get("Deployment", "inflate", "default")
    found["spec"]["replicas"] = 0
    made.store.update(found)
    for _ in range(90):
        made.advance(1)
    [command] = made.store.list("DisruptionCommand")
    assert (command["spec"]["reason"], command["status"]["phase"]) == ("Empty", "Succeeded")
    assert made.store.list("NodeClaim") == []
    told = [(e["reason"], e["message"]) for e in made.store.list("Event") if e["involvedObject"]["kind"] == "Node"]
    # Before the scale-down, past consolidateAfter: the one thing said of the node, as Karpenter says it.
    assert [r for r in told if r[0] in ("DisruptionBlocked", "Unconsolidatable")] == [
        ("Unconsolidatable", "Can't replace with a cheaper node")
    ]
    assert ("DisruptionTerminating", "Disrupting Node: Empty") in told
