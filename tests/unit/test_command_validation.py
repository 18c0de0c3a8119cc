"""A proposed command validated as Karpenter validates it 15 s on: simulated again, not compared plan for plan.

Follows sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/disruption/validation.go (EmptinessValidator.Validate and
validateCommand) and the It of consolidation_test.go each test names.
"""

from typing import Any

from provisioner.lab import Lab
from tests.lab_builders import deployment, lab, nodepool_doc

OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
CONSOLIDATING = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "0s",
    "budgets": [{"nodes": "100%"}],
}


def two_nodes() -> Lab:
    """A c-16x-amd64-linux node full of `inflate` (15 one-CPU pods) and a c-4x-amd64-linux node holding `more`'s 3."""
    made = lab(nodepool_doc(template_spec={"requirements": OD}, disruption=CONSOLIDATING), deployment("inflate", 15))
    made.advance(30)
    made.store.create(deployment("more", 3))
    made.advance(30)
    assert sorted((types(made)[name], len(pods_on(made, name))) for name in types(made)) == [
        ("c-16x-amd64-linux", 15),
        ("c-4x-amd64-linux", 3),
    ]
    return made


def types(made: Lab) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        for n in made.store.list("Node")
    }


def node_of(made: Lab, instance_type: str) -> str:
    return next(name for name, kind in types(made).items() if kind == instance_type)


def pods_on(made: Lab, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in made.store.list("Pod") if p["spec"].get("nodeName") == node)


def scale(made: Lab, name: str, replicas: int) -> None:
    found = made.store.get("Deployment", name, "default")
    found["spec"]["replicas"] = replicas
    made.store.update(found)


def proposed(made: Lab) -> dict[str, Any]:
    while not made.store.list("DisruptionCommand"):
        made.advance(1)
    [command] = made.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "Proposed"
    return command


def test_a_delete_whose_node_lost_a_pod_during_the_wait_still_runs():
    """validateCommand: a delete stays valid while the simulation launches nothing; the pods it moves may be fewer
    (before, karpui rejected it with "plan changed: evicts 2 pods, 1 fewer" and proposed it again)."""
    made = two_nodes()
    small = node_of(made, "c-4x-amd64-linux")
    scale(made, "inflate", 10)  # room on the big node for the small one's pods
    command = proposed(made)
    assert command["spec"]["text"].endswith(f"delete: nodepools=[default]: [{small}] (savings: $0.11)")
    assert len(command["spec"]["candidates"][0]["pods"]) == 3
    scale(made, "more", 2)  # the small node runs more of `more` than the big one: it loses the pod
    made.advance(1)
    assert len(pods_on(made, small)) == 2
    made.advance(20)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert (command["status"]["phase"], command["status"]["message"]) == ("Succeeded", "command succeeded")
    # Recorded as Karpenter decided it: holding, with what changed (not as a plan gone stale that then ran anyway).
    assert command["status"]["checks"][0] == {
        "at": command["status"]["checks"][0]["at"],
        "result": "holds",
        "detail": "Karpenter's validation passes; the plan changed: evicts 2 pods, 1 fewer",
    }
    made.advance(30)
    assert list(types(made).values()) == ["c-16x-amd64-linux"]
    assert len(pods_on(made, node_of(made, "c-16x-amd64-linux"))) == 12


def test_an_emptiness_command_runs_with_its_nodes_still_empty():
    """ "does not delete nodes with pod churn, deletes nodes without pod churn": a pod lands on one of the two empty
    nodes during the wait; the other is deleted, and the command's record names only it."""
    made = two_nodes()
    big, small = node_of(made, "c-16x-amd64-linux"), node_of(made, "c-4x-amd64-linux")
    scale(made, "inflate", 0)
    scale(made, "more", 0)
    command = proposed(made)
    assert sorted(c["node"] for c in command["spec"]["candidates"]) == sorted([big, small])
    hostname = made.store.get("Node", big)["metadata"]["labels"]["kubernetes.io/hostname"]
    made.store.create(deployment("guard", 1, "100m", nodeSelector={"kubernetes.io/hostname": hostname}))
    made.advance(8)
    assert [p.split("-")[0] for p in pods_on(made, big)] == ["guard"]
    made.advance(20)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] == "Succeeded"
    assert [c["node"] for c in command["spec"]["candidates"]] == [small]
    assert command["spec"]["text"].endswith(f"delete: nodepools=[default]: [{small}] (savings: $0.11)")
    assert [s["step"] for s in command["status"]["steps"]][:2] == [
        f"narrowed to the nodes still empty: {big} left out",
        "tainted 1 node(s)",
    ]
    assert list(types(made)) == [big]


def one_node_scaled_to(replicas: int) -> tuple[Lab, dict[str, Any]]:
    """`inflate`'s 10 one-CPU pods on a c-16x-amd64-linux, scaled down to `replicas`: a replace is proposed."""
    made = lab(nodepool_doc(template_spec={"requirements": OD}, disruption=CONSOLIDATING), deployment("inflate", 10))
    made.advance(30)
    assert list(types(made).values()) == ["c-16x-amd64-linux"]
    scale(made, "inflate", replicas)
    command = proposed(made)
    assert command["spec"]["text"].endswith("-> [1 replacement] (savings: $0.33)")
    assert command["spec"]["replacements"][0]["instanceTypes"][0] == "c-4x-amd64-linux"
    return made, command


def test_a_replace_whose_node_lost_a_pod_runs_with_its_replacement_as_proposed():
    """validateCommand: one launch that still offers every type of the command's replacement (fewer pods fit more
    types) keeps it valid, and the command runs as proposed (before: Rejected, "evicts 2 pods, 1 fewer")."""
    made, command = one_node_scaled_to(3)
    scale(made, "inflate", 2)
    made.advance(20)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] == "Executing"
    assert command["status"]["checks"][-1]["result"] == "holds"
    assert command["status"]["checks"][-1]["detail"] == (
        "Karpenter's validation passes; the plan changed: evicts 2 pods, 1 fewer"
    )
    made.advance(60)
    assert [(kind, len(pods_on(made, name))) for name, kind in types(made).items()] == [("c-4x-amd64-linux", 2)]


def test_a_replace_is_rejected_when_the_simulation_picks_different_instance_types():
    """ "should not consolidate if the action picks different instance types after the node TTL wait": pods that land
    on the node during the wait need a c-8x, which the command's c-4x replacement is not."""
    made, command = one_node_scaled_to(3)
    made.store.create(deployment("more", 4))
    made.advance(5)
    assert [len(pods_on(made, name)) for name in types(made)] == [7]
    made.advance(15)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] == "Rejected"
    assert command["status"]["message"].endswith(", reason: scheduling (scheduling simulation produced new results)")
    assert list(types(made).values()) == ["c-16x-amd64-linux"]


def commands(made: Lab) -> list[dict[str, Any]]:
    return sorted(made.store.list("DisruptionCommand"), key=lambda c: c["status"]["proposedAt"])


def test_a_multi_node_command_rejected_at_validation_is_followed_at_once_by_single_node_consolidation():
    """controller.go Reconcile tries each method in turn: when multi-node consolidation's command fails its
    validation, single-node consolidation runs in the same reconcile, on the cluster as it is 15 s on (before,
    karpui waited for its next 10 s poll and began again with emptiness)."""
    made = two_nodes()
    scale(made, "inflate", 2)  # two nodes with room: multi-node replaces both with one smaller node
    command = proposed(made)
    assert command["spec"]["method"] == "multi"
    assert command["spec"]["text"].endswith("-> [1 replacement] (savings: $0.33)")
    scale(made, "inflate", 9)  # pods land on the two nodes during the wait: the replacement is too small now
    made.advance(15)
    rejected, following = commands(made)
    assert rejected["status"]["phase"] == "Rejected"
    assert rejected["status"]["message"].endswith("reason: scheduling (scheduling simulation produced new results)")
    assert following["spec"]["method"] == "single"
    assert following["status"]["proposedAt"] == rejected["status"]["finishedAt"]
    assert following["spec"]["text"].endswith(
        " delete: nodepools=[default]: [" + node_of(made, "c-4x-amd64-linux") + "] (savings: $0.11)"
    )


def test_the_next_pass_comes_at_once_after_a_command_starts():
    """Reconcile returns RequeueImmediately once a method's command started: the node that became underutilized
    while an emptiness command waited out its validation is proposed as the command starts, not at the next 10 s
    poll."""
    made = two_nodes()
    big, small = node_of(made, "c-16x-amd64-linux"), node_of(made, "c-4x-amd64-linux")
    scale(made, "more", 0)
    empty = proposed(made)
    assert [c["node"] for c in empty["spec"]["candidates"]] == [small]
    made.advance(5)
    scale(made, "inflate", 2)
    made.advance(10)
    started, following = commands(made)
    assert started["status"]["phase"] == "Executing"
    assert following["status"]["proposedAt"] == started["status"]["validatedAt"]
    assert [c["node"] for c in following["spec"]["candidates"]] == [big]
    assert following["spec"]["text"].endswith("-> [1 replacement] (savings: $0.33)")


def test_an_emptiness_command_over_a_node_whose_pod_costs_nothing_holds_and_evicts_it():
    """EmptinessValidator re-runs Emptiness's ShouldDisrupt, whose IsEmpty is a reschedule cost of at most 1
    (types.go:145-147): a node whose only pod has priority -2^25 stays empty through validation, is deleted, and its
    pod is evicted (its Deployment makes it again elsewhere)."""
    pool = nodepool_doc(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"})
    made = lab(pool, deployment("free", 1, priority=-(2**25)))
    made.advance(5)
    [first] = made.store.list("Pod")
    node = first["spec"]["nodeName"]
    command = proposed(made)
    assert [c["node"] for c in command["spec"]["candidates"]] == [node]
    for _ in range(60):
        made.advance(1)
        command = made.store.get("DisruptionCommand", command["metadata"]["name"])
        if command["status"]["phase"] not in ("Proposed", "Executing"):
            break
    assert (command["spec"]["reason"], command["status"]["phase"]) == ("Empty", "Succeeded")
    assert made.store.get("Node", node) is None
    assert first["metadata"]["name"] not in [p["metadata"]["name"] for p in made.store.list("Pod")]
