"""Karpenter's NodeClaim consistency controller (pkg/controllers/nodeclaim/consistency, suite_test.go): a launched
NodeClaim's Node is checked when first found and every 10 minutes after, ConsistentStateFound set True when it matches and False, with a
FailedConsistencyCheck warning per issue, when a requested resource is under 90 % of the launched capacity."""

from provisioner.cluster.conditions import condition
from provisioner.controllers.consistency import node_shape_issues
from tests.unit.test_engine_memos import deployment, lab


def initialized_claim(capacity: dict[str, str]) -> dict:
    return {
        "metadata": {"name": "claim"},
        "spec": {"resources": {"requests": {"cpu": "8", "memory": "64Gi", "pods": "5"}}},
        "status": {"capacity": capacity, "conditions": [{"type": "Initialized", "status": "True"}]},
    }


def test_a_node_with_half_the_launched_memory_is_an_issue_in_karpenters_words():
    """ "should detect issues that launch with much fewer resources than expected"."""
    claim = initialized_claim({"cpu": "16", "memory": "128Gi", "pods": "10"})
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "10"}}}
    assert node_shape_issues(claim, node) == ["expected 128Gi of resource memory, but found 64Gi (50.0% of expected)"]


def test_ninety_percent_is_enough_and_unrequested_or_uninitialized_is_not_checked():
    claim = initialized_claim({"cpu": "10", "memory": "128Gi", "pods": "10"})
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "9", "memory": "115Gi", "pods": "10"}}}
    assert node_shape_issues(claim, node) == ["expected 128Gi of resource memory, but found 115Gi (89.8% of expected)"]
    claim["spec"]["resources"]["requests"]["memory"] = "0"
    assert node_shape_issues(claim, node) == []
    claim["spec"]["resources"]["requests"]["memory"] = "64Gi"
    claim["status"]["conditions"] = [{"type": "Initialized", "status": "Unknown"}]
    assert node_shape_issues(claim, node) == []


def test_the_condition_turns_true_as_soon_as_the_node_is_there_and_scans_repeat_every_ten_minutes():
    """ "should set consistent state found condition to true if there are no consistency issues"; Karpenter v1.15
    with its kwok provider had ConsistentStateFound=True within 45 s of the launch (hack/kube, 2026-12-06)."""
    running = lab()
    running.store.create(deployment("web", 1, cpu="1"))
    running.advance(1)
    [claim] = running.store.list("NodeClaim")
    found = condition(claim, "ConsistentStateFound")
    assert (found["status"], found["reason"], found["message"]) == ("True", "ConsistentStateFound", "")
    node = running.store.get("Node", claim["status"]["nodeName"])
    node["status"]["capacity"]["cpu"] = "2"
    running.store.update(node)
    running.advance(590)
    assert condition(running.store.list("NodeClaim")[0], "ConsistentStateFound")["status"] == "True"
    running.advance(15)
    assert condition(running.store.list("NodeClaim")[0], "ConsistentStateFound")["status"] == "False"


def test_a_node_registered_short_of_its_cpu_is_told_on_the_nodeclaim_and_logged():
    running = lab()
    running.store.create(deployment("web", 1, cpu="1"))
    running.advance(60)
    [claim] = running.store.list("NodeClaim")
    node = running.store.get("Node", claim["status"]["nodeName"])
    launched = claim["status"]["capacity"]["cpu"]  # the pods ask for CPU only, so only CPU is checked
    node["status"]["capacity"]["cpu"] = "2"
    running.store.update(node)
    running.advance(600)

    [claim] = running.store.list("NodeClaim")
    found = condition(claim, "ConsistentStateFound")
    assert (found["status"], found["reason"], found["message"]) == (
        "False",
        "ConsistencyCheckFailed",
        "Consistency Check Failed",
    )
    assert launched == "8"
    issue = "expected 8 of resource cpu, but found 2 (25.0% of expected)"
    [event] = [e for e in running.store.list("Event") if e["reason"] == "FailedConsistencyCheck"]
    assert (event["type"], event["message"], event["involvedObject"]["kind"]) == ("Warning", issue, "NodeClaim")
    logged = [r.record.as_dict() for r in running.logs if r.record.message == "failed consistency check"]
    assert [(r["issue"], r["NodeClaim"]) for r in logged] == [(issue, {"name": claim["metadata"]["name"]})]
