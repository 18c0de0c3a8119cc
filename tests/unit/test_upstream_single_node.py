"""Karpenter v1.15.0's single-node consolidation suite (pkg/controllers/disruption/singlenodeconsolidation_test.go,
Describe "SingleNodeConsolidation" / Context "Candidate Shuffling") ported onto karpui's single-node walk.

createCandidates makes, in each of nodepool-1..3 (WhenEmptyOrUnderutilized, consolidateAfter 0s), NodeClaims of the
least expensive type (allocatable cpu 32) with one pod each. Karpenter bounds a walk by a 3-minute timeout and, when
it hits it, puts the NodePools it did not reach first in the next walk (PreviouslyUnseenNodePools); karpui bounds it
by MAX_SINGLE_SIMULATIONS simulations, and a pass's `unseen_nodepools` is that set as the pass leaves it (the next
pass's `unseen_nodepools` argument). A negative timeout (nothing evaluated) is a bound of 0. Go orders the NodePools
of each group (first those not reached, then the others) at random; karpui by name.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.disruption import methods
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.methods import PassResult, disruption_pass, single_node_order
from provisioner.disruption.types import Candidate
from provisioner.objects import Budget, NodePool
from provisioner.pods import OwnerReference, Pod
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling.scheduler import PoolOffer
from tests.builders import assorted_catalog, nodepool, pod
from tests.disruption_builders import NOW, claimed

LEAST_EXPENSIVE = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"
POOLS = ("nodepool-1", "nodepool-2", "nodepool-3")


def pools(nodes: int = 100) -> dict[str, NodePool]:
    """nodePool1..3: WhenEmptyOrUnderutilized, consolidateAfter 0s; a budget of `nodes` (the budget mapping)."""
    return {name: nodepool(name, budgets=[Budget(nodes=str(nodes))]) for name in POOLS}


def rs_pod(cpu: str | None = None) -> Pod:
    return pod(cpu=cpu, owner=OwnerReference("ReplicaSet", "rs"))


def create_candidates(per_pool: int, pods: int = 1, cpu: str | None = None, suffix: str = "") -> list:
    """createCandidates: `per_pool` NodeClaims in each NodePool, each with `pods` pods (allocatable cpu 32)."""
    made = []
    for name in POOLS:
        for i in range(per_pool):
            node_name = f"{name}-{i}{suffix}"
            node = claimed(
                node_name,
                LEAST_EXPENSIVE,
                types=assorted_catalog(),
                pool=name,
                pods=[rs_pod(cpu) for _ in range(pods)],
            )
            allocatable = {"cpu": parse_quantity("32"), "pods": 100 * MILLI}
            made.append(replace(node, node=replace(node.node, allocatable=allocatable, capacity=dict(allocatable))))
    return made


def as_candidates(nodes, nodepools: dict[str, NodePool]) -> list[Candidate]:
    return [Candidate.with_costs(n, nodepools[n.nodepool], n.node.pods, 1.0) for n in nodes]


def single_node_pass(nodes, nodepools: dict[str, NodePool], unseen: frozenset[str] = frozenset()) -> PassResult:
    """ComputeCommands of single-node consolidation alone (the pass goes on after multi-node consolidation), with
    PreviouslyUnseenNodePools `unseen`."""
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes],
        pending=[],
        pools=[PoolOffer(p, assorted_catalog()) for p in nodepools.values()],
        now=NOW,
    )
    return disruption_pass(view, nodepools, unseen_nodepools=unseen, after="multi")


def simulated(result: PassResult) -> list[str]:
    """The candidates the walk simulated and could not act on, in the order it tried them."""
    return [name for name, notes in result.notes.items() if any("cheaper" in note for note in notes)]


def test_candidates_are_sorted_by_savings_ratio_descending():
    """SingleNodeConsolidation / Candidate Shuffling / should sort candidates by savings ratio descending"""
    candidates = as_candidates(create_candidates(3), pools())
    ordered = single_node_order(candidates)
    assert len(ordered) == 9
    ratios = [c.price / c.reschedule_cost for c in ordered]
    assert ratios == sorted(ratios, reverse=True)
    # Equal ratios: one of each NodePool in turn.
    assert [c.name for c in ordered] == [f"{p}-{i}" for i in range(3) for p in POOLS]


def test_nodepools_that_timed_out_in_previous_runs_go_first():
    """SingleNodeConsolidation / Candidate Shuffling / should prioritize nodepools that timed out in previous runs:
    with nodepool-2 in PreviouslyUnseenNodePools, its candidates lead each round of the interweave"""
    candidates = as_candidates(create_candidates(3), pools())
    ordered = single_node_order(candidates, {"nodepool-2"})
    assert len(ordered) == 9
    assert ordered[0].claimed.nodepool == "nodepool-2"
    assert [c.name for c in ordered] == [
        f"{p}-{i}" for i in range(3) for p in ("nodepool-2", "nodepool-1", "nodepool-3")
    ]


def test_a_walk_stopped_by_its_bound_puts_the_nodepools_it_did_not_reach_first_in_the_next(monkeypatch):
    """singlenodeconsolidation.go:63-75 and 145-172: the walk stopped after nodepool-1's first candidate; nodepool-2
    and nodepool-3 were not reached, so the next pass (over new inputs: it walks afresh) starts with them."""
    nodes, nodepools = create_candidates(3, cpu="20"), pools()
    monkeypatch.setattr(methods, "MAX_SINGLE_SIMULATIONS", 1)
    first = single_node_pass(nodes, nodepools)
    assert (first.commands, simulated(first)) == ([], ["nodepool-1-0"])
    assert first.unseen_nodepools == frozenset({"nodepool-2", "nodepool-3"})
    second = single_node_pass(nodes, nodepools, first.unseen_nodepools)
    assert simulated(second) == ["nodepool-2-0"]
    assert second.unseen_nodepools == frozenset({"nodepool-3", "nodepool-1"})
    monkeypatch.setattr(methods, "MAX_SINGLE_SIMULATIONS", 3)
    third = single_node_pass(nodes, nodepools, frozenset({"nodepool-3"}))
    assert simulated(third) == ["nodepool-3-0", "nodepool-1-0", "nodepool-2-0"]
    assert third.unseen_nodepools == frozenset()  # stopped, but after a candidate of each


def test_candidates_are_sorted_by_savings_ratio_with_different_disruption_costs():
    """SingleNodeConsolidation / Candidate Shuffling / should sort candidates by savings ratio with different
    disruption costs: reschedule costs 1, 5 and 20 (no pods, 4 pods, 19 pods) in each NodePool"""
    low = create_candidates(1, pods=0, suffix="-cost-1")
    medium = create_candidates(1, pods=4, suffix="-cost-5")
    high = create_candidates(1, pods=19, suffix="-cost-20")
    ordered = single_node_order(as_candidates(high + medium + low, pools()))
    assert len(ordered) == 9
    assert [c.reschedule_cost for c in ordered] == [1.0] * 3 + [5.0] * 3 + [20.0] * 3
    assert [c.claimed.nodepool for c in ordered] == list(POOLS) * 3


def test_a_walk_through_every_nodepool_leaves_none_to_go_first():
    """SingleNodeConsolidation / Candidate Shuffling / should reset timed out nodepools when all nodepools are
    evaluated: a walk with nodepool-2 marked timed out (it goes first) tries all three, and leaves none marked"""
    nodes = create_candidates(1, cpu="20")  # no node can take another's pod, and no cheaper type holds it
    result = single_node_pass(nodes, pools(1), frozenset({"nodepool-2"}))
    assert result.commands == []
    assert simulated(result) == ["nodepool-2-0", "nodepool-1-0", "nodepool-3-0"]
    assert result.unseen_nodepools == frozenset()


@pytest.mark.parametrize("movable", [True, False])
def test_a_walk_stopped_before_any_candidate_marks_every_nodepool_timed_out(monkeypatch, movable):
    """SingleNodeConsolidation / Candidate Shuffling / should mark nodepools as timed out when timeout occurs: a
    timeout before the first candidate evaluates none, movable pods or not, and marks all three NodePools"""
    monkeypatch.setattr(methods, "MAX_SINGLE_SIMULATIONS", 0)
    nodes = create_candidates(10, cpu=None if movable else "20")
    result = single_node_pass(nodes, pools(30))
    assert (result.commands, simulated(result)) == ([], [])
    assert result.unseen_nodepools == frozenset(POOLS)


def test_a_walk_that_finds_a_command_leaves_the_nodepools_timed_out_as_they_were():
    """singlenodeconsolidation.go:104-110: ComputeCommands returns the command before it sets
    PreviouslyUnseenNodePools, so the set stays as the last timed-out walk left it (None: unchanged)."""
    nodes = create_candidates(1, cpu="100m")  # each pod fits beside another's: the first candidate goes
    result = single_node_pass(nodes, pools(1), frozenset({"nodepool-3"}))
    [command] = result.commands
    assert [c.name for c in command.candidates] == ["nodepool-3-0"]
    assert result.unseen_nodepools is None
