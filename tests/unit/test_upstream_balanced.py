"""Karpenter v1.15.0's Balanced consolidation suites (pkg/controllers/disruption: balanced_test.go,
balanced_scoring_test.go, balanced_adversarial_test.go, balanced_integration_test.go) ported onto karpui's scoring and disruption passes, each
test naming the Describe/Context/It it follows.

The scoring specs build candidates by hand as makeCandidate does: a price (its type's offering, 0 for a nil instance
type) and 1 + one per pod of reschedule cost. The integration specs run a disruption pass over the fake provider's
InstanceTypesAssorted() as tests/unit/test_upstream_disruption.py does, the amd64/linux/test-zone-1 type standing for
each of onDemandInstances' equally priced ones.

Already ported, not repeated: tests/unit/test_balanced_scoring.py has "should produce totals from ALL candidates",
"should approve a delete command for a single Balanced NodePool" and the ScoreMove table; test_balanced_consolidation.py
has the integration suite's Single-Node (both), Multi-Node and Budgets specs. balanced_test.go's three
"ConsolidationPolicy.IsBalanced" specs test a Go method karpui has no counterpart of (it compares the policy string
with BALANCED where it reads it).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.catalog.kwok import kwok_catalog
from provisioner.controllers.consolidation_events import APPROVED, CANDIDATE, computed
from provisioner.controllers.snapshot import _price, cluster_view
from provisioner.disruption.candidates import consolidation_blockers, consolidation_order
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.methods import balanced_verdict, disruption_pass
from provisioner.disruption.scoring import (
    NodePoolTotals,
    ScoreResult,
    nodepool_totals,
    resolve_offering_price,
    score_move,
)
from provisioner.disruption.types import UNDERUTILIZED, Candidate, Command
from provisioner.objects import Budget, NodePool
from provisioner.pods import OwnerReference, Pod
from provisioner.quantity import MILLI, parse_quantity
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from provisioner.scheduling.scheduler import PoolOffer
from tests.builders import assorted_catalog, nodepool, pod
from tests.disruption_builders import NOW, claimed
from tests.lab_builders import deployment, lab, nodepool_doc, reconfigure

ZONE, CAPACITY = "topology.kubernetes.io/zone", "karpenter.sh/capacity-type"


def pool(name: str, policy: str = "Balanced") -> NodePool:
    """makeNodePool / makeBalancedNodePool (k is BalancedK, 2, whatever threshold the spec passes)."""
    return replace(nodepool(name), consolidation_policy=policy)


def make_pod(name: str, deletion_cost: str = "") -> Pod:
    """makePod: a bare pod, with a pod-deletion-cost annotation when given."""
    made = pod(name=name)
    return (
        replace(made, annotations={"controller.kubernetes.io/pod-deletion-cost": deletion_cost})
        if deletion_cost
        else made
    )


def candidate(name: str, nodepool_: NodePool, price: float, pods: list[Pod] | int = 0) -> Candidate:
    """makeCandidate: `price` is what ResolveOfferingPrice gives its instance type (0 for a nil one)."""
    if isinstance(pods, int):
        pods = [make_pod(f"{name}-pod-{i}") for i in range(pods)]
    made = claimed(name, pods=pods, price=price, pool=nodepool_.name)
    return Candidate.with_costs(made, nodepool_, made.node.pods, 1.0)


def totals_of(candidates: list[Candidate]) -> dict[str, NodePoolTotals]:
    """computeNodePoolTotals(ctx, candidates, candidateNodes(candidates), nil)."""
    return nodepool_totals([c.claimed for c in candidates], candidates)


def delete(*candidates: Candidate) -> Command:
    return Command(UNDERUTILIZED, tuple(candidates))


def offering_type(name: str, *offerings: Offering) -> InstanceType:
    return InstanceType(name, {"cpu": 4 * MILLI}, tuple(offerings))


def plan(it: InstanceType, *requirements: Requirement) -> NodeClaimPlan:
    """A replacement NodeClaim launching from `it` alone under `requirements`."""
    return NodeClaimPlan("default", (), {}, Requirements(requirements), (InstanceTypeOption(it, 0.0),), {}, (), ())


# Balanced Scoring: computeNodePoolTotals -----------------------------------------------------------------------------


def test_totals_accumulate_disruption_from_zero_priced_candidates():
    """Balanced Scoring / computeNodePoolTotals / should accumulate disruption from zero-priced candidates"""
    np = pool("pool-b")
    candidates = [
        candidate("node-good-1", np, 4.84, 1),
        candidate("node-nil", np, 0.0, 1),  # nil instanceType: Price 0
        candidate("node-good-2", np, 4.84, 1),
    ]
    totals = totals_of(candidates)["pool-b"]
    assert totals.total_cost == pytest.approx(2 * 4.84)
    assert totals.total_disruption_cost == 6.0


# Balanced Scoring: EvaluateBalancedMove ------------------------------------------------------------------------------


def test_a_command_with_no_candidates_is_rejected():
    """Balanced Scoring / EvaluateBalancedMove / should reject when command has zero candidates"""
    assert balanced_verdict(delete(), {"pool-a": NodePoolTotals(100.0, 50.0)}) == (False, {})


def test_non_balanced_pools_are_not_scored_and_approve_unconditionally():
    """Balanced Scoring / EvaluateBalancedMove / should skip non-Balanced pools and approve unconditionally"""
    np = pool("pool-nobalanced", "WhenEmptyOrUnderutilized")
    candidates = [candidate(f"node-{i}", np, 4.84, 1) for i in range(5)]
    assert balanced_verdict(delete(candidates[0], candidates[1]), totals_of(candidates)) == (True, {})


def test_a_pool_missing_from_the_totals_scores_zero_and_is_rejected():
    """Balanced Scoring / EvaluateBalancedMove / should reject when candidate NodePool is missing from totals map"""
    approved, scores = balanced_verdict(delete(candidate("node-0", pool("pool-missing"), 4.84, 1)), {})
    assert (approved, scores["pool-missing"].score, scores["pool-missing"].approved) == (False, 0.0, False)


def test_a_balanced_pool_in_a_cross_pool_move_is_credited_its_share_of_the_savings():
    """Balanced Scoring / EvaluateBalancedMove / should attribute savings proportionally in cross-NodePool scenarios"""
    balanced = [candidate(f"b-node-{i}", pool("pool-balanced"), 4.84, 1) for i in range(5)]
    other = [candidate(f"e-node-{i}", pool("pool-empty", "WhenEmptyOrUnderutilized"), 4.84, 1) for i in range(5)]
    approved, scores = balanced_verdict(delete(balanced[0], other[0]), totals_of(balanced + other))
    assert (approved, sorted(scores)) == (True, ["pool-balanced"])
    # Half the command's $9.68 is the balanced pool's: 4.84 of its 24.20, for 2 of its 10 disruption.
    assert scores["pool-balanced"].savings_fraction == pytest.approx(0.2)
    assert scores["pool-balanced"].score == pytest.approx(1.0)


def test_every_balanced_pool_of_a_cross_pool_move_is_scored_on_its_own_share():
    """Balanced Scoring / EvaluateBalancedMove / AllPoolsMustApprove / should reject when any Balanced pool rejects:
    pool B's heavy node saves half its pool for 21/23 of its disruption (0.548), with 40 pods 41/43 (0.524)"""
    pool_a, pool_b = pool("pool-a"), pool("pool-b")
    a = [candidate(f"a-node-{i}", pool_a, 4.84, 1) for i in range(10)]
    b = [candidate("b-node-0", pool_b, 1.0, 20), candidate("b-node-1", pool_b, 1.0, 1)]
    approved, scores = balanced_verdict(delete(a[0], b[0]), totals_of(a + b))
    assert approved is True
    assert scores["pool-a"].score == pytest.approx(1.0)
    assert (scores["pool-b"].savings_fraction, scores["pool-b"].disruption_fraction) == pytest.approx((0.5, 21 / 23))
    b2 = [candidate("b2-node-0", pool_b, 1.0, 40), candidate("b2-node-1", pool_b, 1.0, 1)]
    approved, scores = balanced_verdict(delete(a[0], b2[0]), totals_of(a + b2))
    assert approved is True
    assert scores["pool-b"].score == pytest.approx(0.5 / (41 / 43))
    # With pool B's light node at $3 the heavy one saves a quarter of its pool: pool B rejects, so the move is.
    b3 = [candidate("b3-node-0", pool_b, 1.0, 20), candidate("b3-node-1", pool_b, 3.0, 1)]
    approved, scores = balanced_verdict(delete(a[0], b3[0]), totals_of(a + b3))
    assert (approved, scores["pool-a"].approved, scores["pool-b"].approved) == (False, True, False)


# Balanced Scoring: sumCandidatePrices, Candidate.SavingsRatio --------------------------------------------------------


def test_a_nil_instance_type_prices_a_node_at_zero():
    """Balanced Scoring / sumCandidatePrices / should return 0 for nil instanceType"""
    assert resolve_offering_price(None, "test-zone-1", "on-demand") == 0.0
    assert (
        delete(candidate("node", pool("pool"), resolve_offering_price(None, "test-zone-1", "on-demand"))).savings == 0.0
    )


def test_a_node_is_priced_at_its_types_offering():
    """Balanced Scoring / sumCandidatePrices / should return the offering price for a valid instanceType"""
    it = offering_type("m7i.xlarge", Offering("test-zone-1", "on-demand", 4.84))
    price = resolve_offering_price(it, "test-zone-1", "on-demand")
    assert price == 4.84
    assert delete(candidate("node2", pool("pool"), price)).savings == 4.84


def test_the_savings_ratio_is_price_over_reschedule_cost():
    """Balanced Scoring / Candidate.SavingsRatio / should compute expected ratios for different configurations"""
    np = pool("pool")
    empty, busy, untyped = candidate("node", np, 4.84), candidate("node2", np, 4.84, 3), candidate("node3", np, 0.0, 3)
    assert [c.price / c.reschedule_cost for c in (empty, busy, untyped)] == [4.84, 4.84 / 4.0, 0.0]
    assert busy.reschedule_cost == 4.0


# Balanced Scoring: ScoreMove ----------------------------------------------------------------------------------------


def test_a_spot_offering_does_not_price_the_replacement_of_an_on_demand_only_nodeclaim():
    """Balanced Scoring / ScoreMove (SavingsRatio) / should REJECT a move when EstimatedSavings excludes spot offerings
    for an on-demand-only NodePool"""
    source = candidate("source-node", pool("pool-onDemand-only"), 0.50, 3)
    dest = offering_type("dest-type", Offering("test-zone-1", "spot", 0.10), Offering("test-zone-1", "on-demand", 0.40))
    command = replace(delete(source), replacements=(plan(dest, Requirement.in_values(CAPACITY, "on-demand")),))
    assert command.savings == pytest.approx(0.10)
    result = score_move(command.savings, source.reschedule_cost, NodePoolTotals(1.0, 10.0))
    assert (result.score, result.approved) == (pytest.approx(0.25), False)


# Balanced Scoring: ShouldDisrupt ------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["Balanced", "WhenEmptyOrUnderutilized"])
def test_consolidation_accepts_candidates_of_either_policy(policy):
    """Balanced Scoring / ShouldDisrupt / should accept Balanced candidates; should accept WhenEmptyOrUnderutilized
    candidates (consolidateAfter 0s, Consolidatable, not empty)"""
    made = claimed("test-node", pods=[make_pod("p")])
    assert consolidation_blockers(made, pool("test-pool", policy), empty=False) == []


def test_a_node_whose_type_its_nodepools_catalog_lacks_is_not_consolidated():
    """consolidation.go:110-113 (ShouldDisrupt): a candidate with a nil instanceType is Unconsolidatable; Emptiness
    (emptiness.go:42-58) does not ask"""
    made = replace(claimed("test-node", pods=[make_pod("p")]), type_known=False)
    np = pool("test-pool")
    assert consolidation_blockers(made, np, empty=False) == ['Instance Type "default-instance-type" not found']
    assert consolidation_blockers(made, np, empty=True) == []


# Balanced Scoring: sortCandidates -----------------------------------------------------------------------------------


def test_balanced_candidates_are_sorted_by_savings_ratio_highest_first():
    """Balanced Scoring / sortCandidates / should sort Balanced candidates by savings ratio (highest first): the
    lifetime disruption cost, set the other way round, does not count"""
    np = pool("balanced")
    a, b, c = candidate("node-a", np, 10.0, 1), candidate("node-b", np, 1.0, 8), candidate("node-c", np, 5.0, 3)
    a, b, c = replace(a, disruption_cost=100.0), replace(b, disruption_cost=1.0), replace(c, disruption_cost=50.0)
    assert [x.name for x in consolidation_order([b, c, a])] == ["node-a", "node-c", "node-b"]


def test_non_balanced_candidates_are_sorted_by_savings_ratio_descending():
    """Balanced Scoring / sortCandidates / should sort non-Balanced candidates by savings ratio descending"""
    np = pool("default", "WhenEmptyOrUnderutilized")
    # Reschedule costs 10, 1 and 5: ratios 0.484, 4.84 and 0.968.
    a, b, c = candidate("node-a", np, 4.84, 9), candidate("node-b", np, 4.84), candidate("node-c", np, 4.84, 4)
    assert [x.reschedule_cost for x in (a, b, c)] == [10.0, 1.0, 5.0]
    assert [x.name for x in consolidation_order([a, b, c])] == ["node-b", "node-c", "node-a"]


def test_all_candidates_are_sorted_by_savings_ratio_when_any_uses_balanced():
    """Balanced Scoring / sortCandidates / should sort all candidates by savings ratio when any uses Balanced"""
    balanced = candidate("node-balanced", pool("balanced"), 10.0, 1)
    default = candidate("node-default", pool("default", "WhenEmptyOrUnderutilized"), 1.0, 1)
    assert [x.name for x in consolidation_order([default, balanced])] == ["node-balanced", "node-default"]


# Balanced Scoring: EmitBalancedMultiNodeEvents ----------------------------------------------------------------------


class Recorder:
    """mockRecorder: the events consolidation_events publishes, on stand-ins for the Node, NodeClaim and NodePool."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []
        self.api = self

    def get(self, kind: str, name: str) -> dict[str, object]:
        return {"kind": kind, "metadata": {"name": name}}

    def nodepool_object(self, name: str) -> dict[str, object]:
        return {"kind": "NodePool", "metadata": {"name": name}}

    def event(self, involved: dict, kind: str, reason: str, message: str) -> None:
        self.events.append((involved["kind"], involved["metadata"]["name"], reason, message))

    def approved(self) -> list[tuple[str, str, str]]:
        return [(kind, name, message) for kind, name, reason, message in self.events if reason == APPROVED]


def emit(command: Command, scores: dict[str, ScoreResult]) -> Recorder:
    recorder = Recorder()
    computed(recorder, command, "cmd", scores)  # type: ignore[arg-type]
    return recorder


def test_an_approved_multi_node_pool_result_is_told_on_its_nodepool():
    """Balanced Scoring / EmitBalancedMultiNodeEvents / should emit approved event for approved pool results"""
    np = pool("pool-emit-a")
    command = delete(candidate("emit-node-0", np, 4.84, 1), candidate("emit-node-1", np, 4.84, 1))
    recorder = emit(command, {"pool-emit-a": ScoreResult(0.15, 0.10, 2)})
    assert recorder.approved() == [
        ("NodePool", "pool-emit-a", "score 1.50 >= threshold 0.50 (k: 2, savings 15.0%, disruption 10.0%)")
    ]


def test_a_rejected_pool_result_is_not_told():
    """Balanced Scoring / EmitBalancedMultiNodeEvents / should not emit events for rejected pool results"""
    command = delete(candidate("emit-node-0", pool("pool-emit-b"), 4.84, [make_pod("pod", "1000")]))
    recorder = emit(command, {"pool-emit-b": ScoreResult(0.03, 0.10, 1)})
    assert recorder.approved() == []
    assert [reason for _, _, reason, _ in recorder.events] == [CANDIDATE, CANDIDATE]


def test_a_pool_without_a_result_is_not_told():
    """Balanced Scoring / EmitBalancedMultiNodeEvents / should skip pools missing from perPoolResults"""
    command = delete(
        candidate("emit-node-0", pool("pool-a-emit"), 4.84), candidate("emit-node-1", pool("pool-b-emit"), 4.84)
    )
    recorder = emit(command, {"pool-a-emit": ScoreResult(0.10, 0.05, 2)})
    assert [(kind, name) for kind, name, _ in recorder.approved()] == [("NodePool", "pool-a-emit")]


# Adversarial ---------------------------------------------------------------------------------------------------------


def test_a_nan_price_does_not_poison_the_pools_totals():
    """Adversarial / should not allow NaN price to poison NodePool totals"""
    nan_type = offering_type("nan-instance", Offering("test-zone-1", "on-demand", math.nan))
    price = resolve_offering_price(nan_type, "test-zone-1", "on-demand")
    assert price == 0.0
    np = pool("pool-nan")
    candidates = [
        candidate("node-good-1", np, 4.84, 1),
        candidate("node-nan", np, price, 1),
        candidate("node-good-2", np, 4.84, 1),
    ]
    totals = totals_of(candidates)["pool-nan"]
    assert totals == NodePoolTotals(pytest.approx(9.68), 6.0)
    assert score_move(4.84, 2.0, totals).score == pytest.approx(1.5)


def test_a_nan_offering_prices_a_running_node_at_zero():
    """Adversarial / should not allow NaN price to poison NodePool totals: as the snapshot prices a node"""
    nan_type = offering_type("nan-instance", Offering("test-zone-1", "on-demand", math.nan))
    labels = {"node.kubernetes.io/instance-type": "nan-instance", ZONE: "test-zone-1", CAPACITY: "on-demand"}
    assert _price({"pool-nan": {"nan-instance": [nan_type]}}, pool("pool-nan"), labels) == 0.0


def test_every_pool_of_a_move_has_a_score_with_its_k():
    """Adversarial / should populate perPool entries for all pools even on early return"""
    pool_a, pool_b = pool("pool-a"), pool("pool-b")
    a = [
        candidate("a-0", pool_a, 1.0, [make_pod("heavy", "1000") for _ in range(20)]),
        candidate("a-1", pool_a, 1.0, 1),
    ]
    b = [candidate(f"b-{i}", pool_b, 1.0, 1) for i in range(10)]
    _, scores = balanced_verdict(delete(a[0], b[0]), totals_of(a + b))
    assert {name: score.k for name, score in scores.items()} == {"pool-a": 2, "pool-b": 2}


def test_candidate_prices_sum_with_a_nil_instance_type_at_zero():
    """Adversarial / should sum candidate costs correctly with nil instanceType"""
    np = pool("pool-mixed")
    command = delete(
        candidate("node-good-1", np, 4.84, 1), candidate("node-nil", np, 0.0, 1), candidate("node-good-2", np, 4.84, 1)
    )
    assert command.savings == pytest.approx(9.68)


def test_a_running_node_is_priced_at_its_offering_available_or_not():
    """Adversarial / should use source pricing that ignores availability"""
    source = offering_type(
        "source-type",
        Offering("test-zone-1", "on-demand", 1.00, available=False),  # ICE'd: no new launch, but the node runs
        Offering("test-zone-2", "on-demand", 5.00),
    )
    assert resolve_offering_price(source, "test-zone-1", "on-demand") == 1.00
    labels = {"node.kubernetes.io/instance-type": "source-type", ZONE: "test-zone-1", CAPACITY: "on-demand"}
    assert _price({"pool-avail": {"source-type": [source]}}, pool("pool-avail"), labels) == 1.00


def test_deleting_the_only_node_of_a_pool_scores_one():
    """Adversarial / should approve single-node pool DELETE with expected scoring"""
    only = candidate("only-node", pool("pool-single"), 4.84, 1)
    approved, scores = balanced_verdict(delete(only), totals_of([only]))
    assert (approved, scores["pool-single"].savings_fraction, scores["pool-single"].score) == (True, 1.0, 1.0)


def test_a_type_missing_from_the_catalog_or_its_place_prices_a_node_at_zero():
    """ResolveOfferingPrice (utils/disruption/disruption.go:39-48): no type, or no offering in the node's zone and
    capacity type, is 0, not the price the NodeClaim launched at"""
    it = offering_type("m7i.xlarge", Offering("test-zone-1", "on-demand", 4.84))
    labels = {"node.kubernetes.io/instance-type": "m7i.xlarge", ZONE: "test-zone-2", CAPACITY: "on-demand"}
    assert _price({"p": {"m7i.xlarge": [it]}}, pool("p"), labels) == 0.0
    assert _price({"p": {}}, pool("p"), {**labels, ZONE: "test-zone-1"}) == 0.0
    assert _price({"p": {"m7i.xlarge": [it]}}, pool("p"), {**labels, ZONE: "test-zone-1"}) == 4.84


# Balanced Consolidation (integration) ---------------------------------------------------------------------------------

ASSORTED = list(assorted_catalog())
# onDemandInstances, cheapest first: of equally priced types, the amd64/linux/test-zone-1 one.
ON_DEMAND = sorted(
    (t for t in ASSORTED if t.offerings[0].capacity_type == "on-demand" and "amd64-linux-test-zone-1" in t.name),
    key=lambda t: t.offerings[0].price,
)
LEAST, MIDDLE, MOST = ON_DEMAND[0], ON_DEMAND[len(ON_DEMAND) // 2], ON_DEMAND[-1]


def balanced_pool(name: str = "default", budgets: tuple[Budget, ...] = (Budget(nodes="100%"),)) -> NodePool:
    """The suite's NodePool: Balanced, budget 100%, consolidateAfter 0s."""
    return replace(nodepool(name, budgets=budgets), consolidation_policy="Balanced")


def rs_pod(name: str, cpu: str) -> Pod:
    return pod(name=name, cpu=cpu, owner=OwnerReference("ReplicaSet", "rs"))


def nc(name: str, it: InstanceType, pods: list[Pod], *, cpu: str = "32", nodepool_: str = "default"):
    """test.NodeClaimAndNode of `it`'s first offering, Consolidatable, with allocatable cpu and 100 pods only."""
    offering = it.offerings[0]
    made = claimed(
        name,
        it.name,
        types=ASSORTED,
        capacity_type=offering.capacity_type,
        zone=offering.zone,
        pods=pods,
        pool=nodepool_,
    )
    allocatable = {"cpu": parse_quantity(cpu), "pods": 100 * MILLI}
    return replace(made, node=replace(made.node, allocatable=allocatable, capacity=dict(allocatable)))


def pass_over(nodes, pools):
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes],
        pending=[],
        pools=[PoolOffer(p, ASSORTED) for p in pools],
        now=NOW,
    )
    return disruption_pass(view, {p.name: p for p in pools})


def test_an_empty_node_goes_before_an_underutilized_one_under_a_budget_of_one():
    """Balanced Consolidation / Priority Ordering / should consolidate empty nodes before non-empty nodes when budget
    is limited"""
    nodes = [nc("empty", MOST, []), nc("underutilized", MOST, [rs_pod("p", "500m")])]
    result = pass_over(nodes, [balanced_pool(budgets=(Budget(nodes="1"),))])
    assert [(c.reason, c.decision, [x.name for x in c.candidates]) for c in result.commands] == [
        ("Empty", "delete", ["empty"])
    ]


def test_a_node_whose_pods_fit_on_another_is_deleted_saving_its_whole_price():
    """Balanced Consolidation / Decision and Savings / should choose delete when pods fit on existing nodes"""
    a = nc("node-a", MIDDLE, [rs_pod("a-0", "1")])
    b = nc("node-b", MIDDLE, [rs_pod(f"b-{i}", "1") for i in range(30)])
    result = pass_over([a, b], [balanced_pool()])
    [command] = result.commands
    assert (command.decision, [c.name for c in command.candidates]) == ("delete", ["node-a"])
    assert command.savings == MIDDLE.offerings[0].price
    score = result.approved["default"]
    assert (score.savings_fraction, score.disruption_fraction) == pytest.approx((0.5, 2 / 33))


def test_a_node_whose_pod_needs_a_new_node_is_replaced_by_a_cheaper_one():
    """Balanced Consolidation / Decision and Savings / should choose replace when pods need a new cheaper node"""
    result = pass_over([nc("node-a", MOST, [rs_pod("a-0", "2")])], [balanced_pool()])
    [command] = result.commands
    assert command.decision == "replace"
    assert 0 < command.savings < MOST.offerings[0].price
    # The cheapest type that fits 2 CPU and launches as spot, the capacity type the replacement is pinned to.
    cheapest = command.replacements[0].options[0]
    assert (cheapest.instance_type.name, cheapest.price) == ("4-cpu-1-mem-amd64-linux-test-zone-1-spot", 0.5073741824)
    assert command.savings == pytest.approx(MOST.offerings[0].price - 0.5073741824)


def by_name(name: str) -> InstanceType:
    return next(t for t in ON_DEMAND if t.name == f"{name}-amd64-linux-test-zone-1-on-demand")


def test_multi_node_consolidation_takes_the_highest_ratio_candidates_first():
    """Balanced Consolidation / Ratio Sort in Multi-Node / should select highest-ratio candidates first when nodes
    have heterogeneous prices and pod counts (the types the spec's comments name: 32cpu/128mem, 16cpu/64mem,
    4cpu/8mem)"""
    a = nc("node-a", by_name("32-cpu-128-mem"), [rs_pod(f"a-{i}", "100m") for i in range(10)])  # 16.94 / 11
    b = nc("node-b", by_name("16-cpu-64-mem"), [rs_pod("b-0", "100m")])  # 8.47 / 2
    c = nc("node-c", by_name("4-cpu-8-mem"), [rs_pod(f"c-{i}", "100m") for i in range(8)], cpu="4")  # 1.26 / 9
    result = pass_over([a, b, c], [balanced_pool()])
    [command] = result.commands
    assert (command.method, command.decision, [x.name for x in command.candidates]) == (
        "multi",
        "delete",
        ["node-b", "node-a"],
    )


def test_balanced_pools_are_scored_while_other_pools_consolidate_as_ever():
    """Balanced Consolidation / Mixed-Policy NodePools / should apply scoring to Balanced pools while non-Balanced
    pools consolidate normally"""
    balanced = nc("balanced-node", MOST, [rs_pod("balanced-pod", "500m")], nodepool_="balanced")
    default = nc("default-node", MOST, [rs_pod("default-pod", "500m")], nodepool_="default")
    pools = [
        balanced_pool("balanced"),
        replace(balanced_pool("default"), consolidation_policy="WhenEmptyOrUnderutilized"),
    ]
    result = pass_over([balanced, default], pools)
    [command] = result.commands
    assert sorted(c.name for c in command.candidates) == ["balanced-node", "default-node"]
    # One 2-cpu spot node for both: the balanced pool is credited half the net savings, all of its disruption.
    assert (command.method, command.decision, command.replacements[0].options[0].instance_type.name) == (
        "multi",
        "replace",
        "2-cpu-1-mem-amd64-linux-test-zone-1-spot",
    )
    assert command.savings == pytest.approx(2 * MOST.offerings[0].price - 0.3073741824)
    assert sorted(result.approved) == ["balanced"]
    score = result.approved["balanced"]
    assert (score.savings_fraction, score.disruption_fraction, score.k) == (
        pytest.approx(command.savings / 2 / MOST.offerings[0].price),
        1.0,
        2,
    )


def test_the_snapshot_prices_a_node_whose_type_left_the_catalog_at_zero_and_marks_it_unknown():
    """NewCandidate (types.go:193, 223): a type missing from the NodePool's instance types is a nil instanceType,
    priced 0 by ResolveOfferingPrice and not consolidated"""
    made = lab(nodepool_doc(), deployment("inflate", 1, "1"))
    made.advance(60)
    [before] = cluster_view(made.ctx)[0].claimed
    assert (before.instance_type, before.zone, before.capacity_type, before.type_known) == (
        "c-2x-amd64-linux",
        "test-zone-c",
        "spot",
        True,
    )
    assert before.price == pytest.approx(0.0380064771072)
    reconfigure(made, nodepool_doc(), types=[t for t in kwok_catalog().instance_types if t.name != "c-2x-amd64-linux"])
    [after] = cluster_view(made.ctx)[0].claimed
    assert (after.name, after.price, after.type_known) == (before.name, 0.0, False)


# ScoreMove (balanced_test.go) ----------------------------------------------------------------------------------------

# The RFC example pool: eight m7i.xlarge ($4.84/day) and two m7i.2xlarge ($9.68/day), 80 pods: 10 + 80 disruption.
DEFAULT_TOTALS = NodePoolTotals(58.08, 90.0)


def test_score_move_approves_an_oversized_node_consolidation():
    """ScoreMove / when the move has clear savings / should approve an oversized node consolidation"""
    result = score_move(7.26, 4.0, DEFAULT_TOTALS)  # m7i.2xlarge - m7i.large; 1 per node + 3 pods
    assert result.savings_fraction == pytest.approx(0.125)
    assert result.disruption_fraction == pytest.approx(4.0 / 90.0)
    assert result.score == pytest.approx(2.8125)
    assert result.approved is True


def test_score_move_approves_a_spare_capacity_delete():
    """ScoreMove / when the move has clear savings / should approve a spare capacity delete"""
    result = score_move(4.84, 5.0, DEFAULT_TOTALS)
    assert result.score == pytest.approx(1.5)
    assert result.approved is True


def test_score_move_rejects_a_marginal_move():
    """ScoreMove / when the move is marginal or harmful / should reject a marginal move"""
    result = score_move(2.42, 9.0, DEFAULT_TOTALS)
    assert result.score == pytest.approx(5.0 / 12.0)
    assert result.approved is False


def test_score_move_rejects_a_well_packed_node_with_zero_savings():
    """ScoreMove / when the move is marginal or harmful / should reject a well-packed node with zero savings"""
    result = score_move(0.0, 11.0, DEFAULT_TOTALS)
    assert (result.score, result.approved) == (0.0, False)


def test_score_move_approves_a_replace_in_a_uniform_pool():
    """ScoreMove / when the pool is uniform / should approve a replace in a uniform pool: 0.05 of the cost for 0.1 of
    the disruption sits exactly on the 1/2 threshold, and >= approves it"""
    result = score_move(2.42, 9.0, NodePoolTotals(48.40, 90.0))
    assert result.score == pytest.approx(0.5)
    assert result.approved is True


def test_score_move_approves_low_disruption_nodes_and_rejects_high_disruption_nodes():
    """ScoreMove / when disruption costs vary across nodes / should approve low-disruption nodes and reject
    high-disruption nodes"""
    het = NodePoolTotals(58.08, 117.0)
    a, b = score_move(4.84, 5.0, het), score_move(4.84, 32.0, het)
    assert (a.score, a.approved) == (pytest.approx((4.84 / 58.08) / (5.0 / 117.0)), True)
    assert a.score == pytest.approx(1.95)
    assert (b.score, b.approved) == (pytest.approx((4.84 / 58.08) / (32.0 / 117.0)), False)
    assert b.score == pytest.approx(0.3046875)


def test_score_move_gives_the_same_score_whatever_the_pool_size():
    """ScoreMove / scale invariance / should produce the same score regardless of pool size"""
    ten, hundred = score_move(7.26, 4.0, DEFAULT_TOTALS), score_move(7.26, 4.0, NodePoolTotals(580.80, 900.0))
    assert ten.score == pytest.approx(hundred.score)
    assert hundred.score == pytest.approx(2.8125)


@pytest.mark.parametrize(
    ("savings", "disruption", "totals", "score", "approved"),
    [
        # should approve with +Inf score when move disruption is zero and savings positive
        (4.84, 0.0, DEFAULT_TOTALS, math.inf, True),
        # should reject when both savings and disruption are zero
        (0.0, 0.0, DEFAULT_TOTALS, 0.0, False),
        # should reject when nodepool cost is zero
        (4.84, 5.0, NodePoolTotals(0.0, 90.0), 0.0, False),
    ],
)
def test_score_move_edge_cases_with_zero_values(savings, disruption, totals, score, approved):
    """ScoreMove / edge cases with zero values / +Inf score, both zero, nodepool cost zero; "should approve when move
    disruption is zero (division by zero guard)" is the first row again"""
    result = score_move(savings, disruption, totals)
    assert (result.score, result.approved) == (score, approved)


@pytest.mark.parametrize(("k", "threshold", "approved"), [(2, 0.5, False), (3, 1 / 3, True), (1, 1.0, False)])
def test_score_move_threshold_follows_k(k, threshold, approved):
    """ScoreMove / consolidation threshold tuning / should reject at k=2 for a marginal move; should approve at k=3
    for the same move; should reject at k=1 for the same move"""
    result = score_move(2.42, 9.0, DEFAULT_TOTALS, k)
    assert (result.threshold, result.approved) == (pytest.approx(threshold), approved)
    assert result.score == pytest.approx(5.0 / 12.0)


def test_score_move_scores_proportionally_equivalent_moves_across_nodepools_alike():
    """ScoreMove / cross-NodePool scoring / should produce identical scores for proportionally equivalent moves"""
    on_demand = score_move(4.84, 4.0, NodePoolTotals(48.40, 90.0))
    spot = score_move(1.45, 4.0, NodePoolTotals(14.50, 90.0))
    assert on_demand.score == pytest.approx(spot.score)
    assert spot.score == pytest.approx(2.25)
    assert (on_demand.approved, spot.approved) == (True, True)
