"""The Balanced consolidation policy (Karpenter v1.14) in disruption passes, and the consolidation events.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/disruption/balanced_integration_test.go ("Balanced
Consolidation"), balanced.go's CanPassThreshold, and events/events.go's messages; each test names the It it follows.
The score itself is tests/unit/test_balanced_scoring.py's.
"""

from dataclasses import replace

from provisioner.controllers.consolidation_events import approved_message, for_node
from provisioner.disruption.methods import upper_bound
from provisioner.disruption.scoring import NodePoolTotals, ScoreResult
from provisioner.disruption.types import Candidate
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import Budget
from provisioner.pods import OwnerReference
from tests.builders import instance_type, nodepool, pod
from tests.disruption_builders import claimed, run
from tests.lab_builders import deployment, lab, nodepool_doc

ON_DEMAND = (("test-zone-1", "on-demand"),)
BIG = instance_type("big", "32", "64Gi", pods=100, zones=ON_DEMAND, price=4.0)
SMALL = instance_type("small", "4", "8Gi", pods=100, zones=ON_DEMAND, price=0.5)
NEAR = instance_type("near", "32", "64Gi", pods=100, zones=ON_DEMAND, price=3.4)  # 15% cheaper than BIG
TYPES = [BIG, SMALL, NEAR]


ALL_AT_ONCE = (Budget(nodes="100%"),)


def balanced(name="default", budgets=ALL_AT_ONCE, **options):
    """As the upstream suite's NodePool: Balanced, every node may go at once, consolidateAfter 0s."""
    return replace(nodepool(name, budgets=budgets, **options), consolidation_policy="Balanced")


def rs_pod(name, cpu="500m"):
    return pod(name=name, cpu=cpu, owner=OwnerReference("ReplicaSet", "rs"))


def big_node(name, pods, pool="default", instance="big"):
    return claimed(name, instance, types=TYPES, pods=[rs_pod(f"{name}-{i}") for i in range(pods)], pool=pool)


def test_the_crd_takes_balanced():
    """ConsolidationPolicy.IsBalanced (the v1.14 enum)"""
    doc = nodepool_doc(disruption={"consolidationPolicy": "Balanced", "consolidateAfter": "0s"})
    assert parse_nodepool(doc).consolidation_policy == "Balanced"


def test_an_oversized_node_is_replaced_with_an_approving_score():
    """Single-Node: should approve replacing an oversized node"""
    result = run([big_node("n1", 1)], pools=[balanced()], types=TYPES)
    [command] = result.commands
    assert (command.decision, [o.instance_type.name for o in command.replacements[0].options][:1]) == (
        "replace",
        ["small"],
    )
    score = result.approved["default"]
    assert (round(score.savings_fraction, 4), score.disruption_fraction, score.threshold) == (0.875, 1.0, 0.5)
    assert approved_message(score) == "score 0.88 >= threshold 0.50 (k: 2, savings 87.5%, disruption 100.0%)"


def test_a_marginal_move_is_refused_where_whenemptyorunderutilized_takes_it():
    """Mixed-Policy NodePools: should apply scoring to Balanced pools while non-Balanced pools consolidate normally"""
    # A node of 8 pods of 3.5 CPU on BIG: the only replacement, NEAR, saves 15% for all of the pool's disruption.
    packed = claimed("n1", "big", types=TYPES, pods=[rs_pod(f"p{i}", cpu="3500m") for i in range(8)])
    assert run([packed], pools=[nodepool()], types=TYPES).commands[0].decision == "replace"
    result = run([packed], pools=[balanced()], types=TYPES)
    assert result.commands == [] and result.approved == {}
    assert result.balanced_notes["n1"] == [
        "Balanced: this move scores 0.15 < threshold 0.50 (saves 15.0% of its cost for 100.0% of its disruption) "
        "in NodePool default"
    ]


def test_a_well_packed_cheapest_node_gives_no_command_and_no_approval():
    """Single-Node: should reject replacing a well-packed node"""
    packed = claimed("n1", "small", types=TYPES, pods=[rs_pod(f"p{i}", cpu="450m") for i in range(8)])
    result = run([packed], pools=[balanced()], types=TYPES)
    assert result.commands == [] and result.approved == {}


def test_several_underutilized_nodes_are_consolidated_together():
    """Multi-Node: should approve consolidating multiple underutilized nodes"""
    nodes = [big_node(f"n{i}", 1) for i in range(3)]
    result = run(nodes, pools=[balanced()], types=TYPES)
    [command] = result.commands
    assert command.method == "multi" and len(command.candidates) >= 2
    assert result.approved["default"].approved


def test_a_zero_budget_blocks_balanced_consolidation():
    """Budgets: should block disruption when budget is 0%"""
    nodes = [big_node(f"n{i}", 1) for i in range(3)]
    assert run(nodes, pools=[balanced(budgets=[Budget(nodes="0%")])], types=TYPES).commands == []


def test_only_balanced_pools_are_scored():
    """Mixed-Policy NodePools: the WhenEmptyOrUnderutilized pool's marginal move goes ahead"""
    packed = [rs_pod(f"p{i}", cpu="3500m") for i in range(8)]
    a = claimed("a1", "big", types=TYPES, pods=packed, pool="a")
    b = claimed(
        "b1", "big", types=TYPES, pods=[replace(p, name=f"b-{p.name}", uid=f"b-{p.uid}") for p in packed], pool="b"
    )
    result = run([a, b], pools=[balanced("a"), nodepool("b")], types=TYPES)
    [command] = result.commands
    assert [c.name for c in command.candidates] == ["b1"] and result.approved == {}
    assert "a1" in result.balanced_notes


def test_a_candidate_even_a_delete_of_which_fails_the_threshold_is_skipped():
    """CanPassThreshold: a DELETE is the upper bound of any move's score"""
    cheap = claimed("cheap", "small", types=TYPES, pods=[rs_pod(f"c{i}") for i in range(10)])
    pool = balanced()
    candidate = Candidate.with_costs(cheap, pool, cheap.node.pods, 1.0)
    totals = {"default": NodePoolTotals(total_cost=10.0, total_disruption_cost=12.0)}
    bound = upper_bound(candidate, totals)
    assert (round(bound.score, 4), bound.approved) == (round((0.5 / 10.0) / (11.0 / 12.0), 4), False)
    assert upper_bound(Candidate.with_costs(cheap, nodepool(), cheap.node.pods, 1.0), totals) is None


def test_an_undisrupting_move_scores_infinity_as_go_prints_it():
    """should approve with +Inf score when move disruption is zero and savings positive"""
    assert approved_message(ScoreResult(0.5, 0.0)) == (
        "score +Inf >= threshold 0.50 (k: 2, savings 50.0%, disruption 0.0%)"
    )


def test_a_multi_node_command_names_one_node_per_event():
    """Command.StringForNode"""
    text = "Underutilized/x: delete: nodepools=[default]: [a, b] (savings: $1.00)"
    assert for_node(text, "delete", "a", 2) == "delete: [a] (part of 2-node consolidation)"
    assert for_node(text, "delete", "a", 1) == text


# Events in the lab ---------------------------------------------------------------------------------------------------

OD = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]


def events_of(made, reason):
    return sorted(
        (e["involvedObject"]["kind"], e["message"])
        for e in made.store.list("Event", "default")
        if e["reason"] == reason
    )


def test_the_lab_tells_candidate_and_approved_events_with_the_savings():
    """ConsolidationCandidate (v1.9, with dollar savings) and ConsolidationApproved (v1.14) on Node and NodeClaim"""
    pool = nodepool_doc(
        disruption={"consolidationPolicy": "Balanced", "consolidateAfter": "0s"}, template_spec={"requirements": OD}
    )
    made = lab(pool, deployment("inflate", 10, "1"))
    made.advance(60)
    scaled = made.store.get("Deployment", "inflate", "default")
    scaled["spec"]["replicas"] = 1
    made.store.update(scaled)
    made.advance(60)
    [command] = made.store.list("DisruptionCommand")
    text = command["spec"]["text"]
    assert text.startswith("Underutilized/underutilized-") and text.endswith(" -> [1 replacement] (savings: $0.38)")
    message = f"Consolidation candidate: {text} (savings: $0.38)"
    assert events_of(made, "ConsolidationCandidate") == [("Node", message), ("NodeClaim", message)]
    approved = events_of(made, "ConsolidationApproved")
    assert [kind for kind, _ in approved] == ["Node", "NodeClaim"]
    assert approved[0][1].startswith("score 0.87 >= threshold 0.50 (k: 2, savings 87.")


def test_a_command_validation_refuses_is_told_as_consolidation_rejected():
    """EmitRejectedEvents: the reason is the validation error's kind (churn here: the node became do-not-disrupt)"""
    made = lab(nodepool_doc(template_spec={"requirements": OD}), deployment("inflate", 10, "1"))
    made.advance(60)
    scaled = made.store.get("Deployment", "inflate", "default")
    scaled["spec"]["replicas"] = 1
    made.store.update(scaled)
    while not made.store.list("DisruptionCommand"):
        made.advance(1)
    [command] = made.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "Proposed"
    node = made.store.get("Node", command["spec"]["candidates"][0]["node"])
    node["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    made.store.update(node)
    made.advance(20)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] == "Rejected"
    message = f"Consolidation rejected: {command['spec']['text']}, reason: churn (savings: $0.38)"
    assert events_of(made, "ConsolidationRejected") == [("Node", message), ("NodeClaim", message)]
    # karpui's own line for it names what the command would have done, its status message under a key of its own.
    [line] = [t.record.as_dict() for t in made.ctx.logs if t.record.message == "disruption command rejected"]
    candidate = command["spec"]["candidates"][0]
    assert {
        k: line[k] for k in ("message", "command", "decision", "disrupted-node-count", "replacement-node-count")
    } == {
        "message": "disruption command rejected",
        "command": command["spec"]["text"],
        "decision": "replace",
        "disrupted-node-count": 1,
        "replacement-node-count": 1,
    }
    assert line["status-message"].startswith(f"Consolidation rejected: {command['spec']['text']}, reason: churn (")
    assert line["disrupted-nodes"] == [
        {
            "Node": {"name": candidate["node"]},
            "NodeClaim": {"name": candidate["nodeclaim"]},
            "instance-type": candidate["instanceType"],
            "capacity-type": "on-demand",
        }
    ]
