"""The NodeClaim conditions initialization, termination and disruption keep (Initialized, Drained, VolumesDetached,
InstanceTerminating, DisruptionReason), in a lab over the kwok catalog.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/node/termination/suite_test.go ("should not delete nodes
until all pods are deleted", "should not finish draining until minDrainTime has passed"), nodeclaim/lifecycle
termination_test.go (InstanceTerminating) and disruption/suite_test.go ("should remove taints from NodeClaims that were
left tainted from a previous disruption action", "should add and remove taints from NodeClaims that fail to disrupt");
the initialization checks from sigs.k8s.io/karpenter@v1.15.0 nodeclaim/lifecycle/initialization_test.go.
"""

from provisioner.cluster.conditions import clear_condition, set_claim_condition, set_condition
from provisioner.controllers import lifecycle
from tests.lab_builders import KWOK_CLASS, condition, deployment, lab, nodepool_doc

PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "hold", "namespace": "default"},
    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "inflate"}}},
}


def _running(*extra):
    made = lab(nodepool_doc(disruption={"consolidateAfter": "Never"}), deployment(replicas=1), *extra)
    made.advance(60)
    [claim] = made.store.list("NodeClaim")
    return made, claim["metadata"]["name"]


def test_a_draining_nodeclaim_says_draining_until_its_pods_are_gone_then_drained_and_terminating():
    made, name = _running(PDB)
    made.store.delete("NodeClaim", name)
    made.advance(10)  # the PDB refuses every eviction
    claim = made.store.get("NodeClaim", name)
    assert condition(claim, "Drained") == ("Unknown", "Draining", "Draining")
    assert condition(claim, "VolumesDetached") is None
    made.store.delete("PodDisruptionBudget", "hold", "default")
    made.advance(30)
    assert made.store.get("NodeClaim", name) is None
    gone = made.store.removed[("NodeClaim", "", name)]
    assert condition(gone, "Drained") == ("True", "Drained", "")
    assert condition(gone, "VolumesDetached") == ("True", "VolumesDetached", "")
    assert condition(gone, "InstanceTerminating") == ("True", "InstanceTerminating", "")


def test_draining_takes_at_least_the_minimum_drain_time():  # "should not finish draining until minDrainTime ..."
    made = lab(nodepool_doc(disruption={"consolidateAfter": "Never"}), deployment(replicas=0))
    made.store.create(deployment("keep", replicas=1))
    made.advance(60)
    [claim] = made.store.list("NodeClaim")
    name = claim["metadata"]["name"]
    made.store.delete("Deployment", "keep", "default")  # the node is empty: only the 5 s minimum holds it
    made.store.delete("NodeClaim", name)
    made.advance(4)
    assert condition(made.store.get("NodeClaim", name), "Drained")[0] == "Unknown"
    made.advance(2)
    assert made.store.get("NodeClaim", name) is None


def test_a_node_left_tainted_by_an_earlier_command_is_given_back():
    """ "should remove taints from NodeClaims that were left tainted from a previous disruption action"."""
    made, name = _running()
    claim = made.store.get("NodeClaim", name)
    node = made.store.get("Node", claim["status"]["nodeName"])
    node["spec"]["taints"] = [
        *node["spec"].get("taints", []),
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
    ]
    made.store.update(node)
    claim["status"]["conditions"].append(
        {"type": "DisruptionReason", "status": "True", "reason": "DisruptionReason", "message": ""}
    )
    made.store.update(claim)
    made.advance(11)  # the next disruption pass
    node = made.store.get("Node", claim["status"]["nodeName"])
    assert [t["key"] for t in node["spec"].get("taints", [])] == []
    assert condition(made.store.get("NodeClaim", name), "DisruptionReason") is None


def test_a_command_marks_its_candidates_and_a_failed_one_gives_them_back():
    """ "should add and remove taints from NodeClaims that fail to disrupt": the replacement is deleted before it
    initializes, so the command fails and the candidate loses the taint and DisruptionReason."""
    on_demand = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    made = lab(
        nodepool_doc(disruption={"consolidateAfter": "0s"}, template_spec={"requirements": on_demand}),
        deployment(replicas=1, cpu="100m"),
        deployment("big", replicas=1, cpu="6"),
        # Nodes register 30 s after launch, so the replacement is still uninitialized when it is deleted.
        {**KWOK_CLASS, "spec": {"nodeRegistrationDelay": "30s"}},
    )
    made.advance(60)
    made.store.delete("Deployment", "big", "default")  # the 8x node's pod can now go to a smaller one
    for _ in range(20):
        made.advance(5)
        executing = made.store.list("DisruptionCommand", fields={"status.phase": "Executing"})
        if executing:
            break
    [command] = executing
    [candidate] = command["spec"]["candidates"]
    claim = made.store.get("NodeClaim", candidate["nodeclaim"])
    assert condition(claim, "DisruptionReason") == ("True", "Underutilized", "Underutilized")
    node = made.store.get("Node", candidate["node"])
    assert "karpenter.sh/disrupted" in [t["key"] for t in node["spec"]["taints"]]
    for replacement in command["status"]["replacementNodeClaims"]:
        made.store.get("NodeClaim", replacement)["metadata"]["finalizers"] = []
        made.store.delete("NodeClaim", replacement)
    made.advance(2)
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Failed"
    assert condition(made.store.get("NodeClaim", candidate["nodeclaim"]), "DisruptionReason") is None
    node = made.store.get("Node", candidate["node"])
    assert "karpenter.sh/disrupted" not in [t["key"] for t in node["spec"].get("taints", [])]


def _registered_not_initialized(made, name):
    """The NodeClaim as it was before its Node passed initialization (Registered, Initialized Unknown)."""
    claim = made.store.get("NodeClaim", name)
    set_condition(claim, "Initialized", "Unknown", made.now, "AwaitingReconciliation")
    set_condition(claim, "Ready", "Unknown", made.now, "AwaitingReconciliation")
    return made.store.update(claim)


def test_a_ready_node_still_tainted_not_ready_leaves_its_nodeclaim_uninitialized_until_the_taint_goes():
    """ "should not consider the Node to be initialized when all ephemeral taints aren't removed" (Karpenter's
    initialization_test.go): kube-controller-manager lifts the not-ready taint a moment after the Node is Ready."""
    made, name = _running()
    _registered_not_initialized(made, name)
    node = made.store.get("Node", made.store.get("NodeClaim", name)["status"]["nodeName"])
    node["spec"]["taints"] = [
        *node["spec"].get("taints", []),
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ]
    made.store.update(node)
    assert lifecycle.reconcile(made.ctx) is True
    assert condition(made.store.get("NodeClaim", name), "Initialized") == (
        "Unknown",
        "KnownEphemeralTaintsExist",
        'KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists',
    )
    assert lifecycle.reconcile(made.ctx) is False  # nothing new to say
    node = made.store.get("Node", node["metadata"]["name"])
    node["spec"]["taints"] = [t for t in node["spec"]["taints"] if t["key"] != "node.kubernetes.io/not-ready"]
    made.store.update(node)
    assert lifecycle.reconcile(made.ctx) is True
    assert condition(made.store.get("NodeClaim", name), "Initialized") == ("True", "Initialized", "")


def test_a_requested_resource_the_node_does_not_offer_leaves_its_nodeclaim_uninitialized():
    """ "should not consider the Node to be initialized when all requested resources aren't registered"."""
    made, name = _running()
    claim = _registered_not_initialized(made, name)
    claim["spec"]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    made.store.update(claim)
    assert lifecycle.reconcile(made.ctx) is True
    assert condition(made.store.get("NodeClaim", name), "Initialized") == (
        "Unknown",
        "ResourceNotRegistered",
        'Resource "nvidia.com/gpu" was requested but not registered',
    )
    node = made.store.get("Node", claim["status"]["nodeName"])
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    made.store.update(node)
    assert lifecycle.reconcile(made.ctx) is True
    assert condition(made.store.get("NodeClaim", name), "Initialized") == ("True", "Initialized", "")


def test_a_nodeclaims_conditions_are_kept_in_karpenters_order_by_transition_time_and_ready_last():
    # operatorpkg's ConditionSet.Set sorts on every change: by lastTransitionTime, stable for ties, the root last.
    # Karpenter's kwok NodeClaim reads, in `kubectl describe`: Launched, ConsistentStateFound, Registered,
    # Initialized, Consolidatable, Ready (its Node exists from launch; karpui's from registration).
    made = lab(nodepool_doc(disruption={"consolidateAfter": "30s"}), deployment(replicas=1))
    made.advance(120)
    [claim] = made.store.list("NodeClaim")
    kinds = [c["type"] for c in claim["status"]["conditions"]]
    assert kinds == ["Launched", "Registered", "Initialized", "ConsistentStateFound", "Consolidatable", "Ready"]
    times = [c["lastTransitionTime"] for c in claim["status"]["conditions"]]
    assert times[:-1] == sorted(times[:-1])


def test_set_claim_condition_sorts_by_transition_time_and_clear_condition_by_type():
    claim = {"status": {"conditions": []}}
    set_claim_condition(claim, "Ready", "Unknown", 100.0)
    set_claim_condition(claim, "Launched", "True", 100.0)
    set_claim_condition(claim, "Registered", "True", 102.0)
    set_claim_condition(claim, "Consolidatable", "True", 101.0)
    assert [c["type"] for c in claim["status"]["conditions"]] == ["Launched", "Consolidatable", "Registered", "Ready"]
    # Same status, new reason: the transition time stays, and so does the place.
    assert set_claim_condition(claim, "Consolidatable", "True", 105.0, "Other") is True
    assert [c["type"] for c in claim["status"]["conditions"]] == ["Launched", "Consolidatable", "Registered", "Ready"]
    assert set_claim_condition(claim, "Launched", "True", 106.0) is False
    # operatorpkg's Clear leaves the rest sorted by type; the next Set sorts them by time again.
    assert clear_condition(claim, "Consolidatable") is True
    assert [c["type"] for c in claim["status"]["conditions"]] == ["Launched", "Ready", "Registered"]
    assert clear_condition(claim, "Consolidatable") is False
    set_claim_condition(claim, "Initialized", "True", 103.0)
    assert [c["type"] for c in claim["status"]["conditions"]] == ["Launched", "Registered", "Initialized", "Ready"]
