"""Karpenter v1.14's Balanced score (balanced_scoring_test.go), as the gate shows it beside each command."""

import math

import pytest

from provisioner.disruption.scoring import (
    NodePoolTotals,
    can_pass_threshold,
    command_scores,
    nodepool_totals,
    score_move,
)
from provisioner.disruption.types import Candidate, Command
from tests.builders import nodepool, pod
from tests.disruption_builders import claimed


def candidate(name, pool="pool-a", pods=1, price=4.84):
    node = claimed(name, pods=[pod(name=f"{name}-p{i}") for i in range(pods)], price=price, pool=pool)
    return Candidate.with_costs(node, nodepool(pool), node.node.pods, 1.0)


def test_totals_count_every_node_of_the_pool_with_a_base_cost_of_one_each():
    """should produce totals from ALL candidates, not just a filtered subset"""
    candidates = [candidate(f"node-{i}") for i in range(5)]
    totals = nodepool_totals([c.claimed for c in candidates], candidates)
    assert totals["pool-a"].total_cost == pytest.approx(5 * 4.84)
    assert totals["pool-a"].total_disruption_cost == 10.0


def test_a_node_that_is_not_a_candidate_still_counts_its_pods():
    candidates = [candidate(f"node-{i}") for i in range(2)]
    other = claimed("busy", pods=[pod(name=f"busy-{i}") for i in range(3)], price=1.0, pool="pool-a")
    totals = nodepool_totals([*(c.claimed for c in candidates), other], candidates)
    assert totals["pool-a"] == NodePoolTotals(2 * 4.84 + 1.0, 2 * 2.0 + 4.0)


def test_deleting_one_of_ten_uniform_nodes_scores_one_and_is_approved():
    """should approve a delete command for a single Balanced NodePool"""
    candidates = [candidate(f"node-{i}") for i in range(10)]
    totals = nodepool_totals([c.claimed for c in candidates], candidates)
    [score] = command_scores(Command("Underutilized", (candidates[0],)), totals).values()
    assert (score.savings_fraction, score.disruption_fraction) == pytest.approx((0.1, 0.1))
    assert score.score == pytest.approx(1.0)
    assert score.approved


def test_a_move_across_pools_credits_each_pool_its_share_of_the_candidates_price():
    """should attribute savings proportionally in cross-NodePool scenarios"""
    a = [candidate(f"a-{i}", "pool-a") for i in range(5)]
    b = [candidate(f"b-{i}", "pool-b") for i in range(5)]
    totals = nodepool_totals([c.claimed for c in a + b], a + b)
    scores = command_scores(Command("Underutilized", (a[0], b[0])), totals)
    assert sorted(scores) == ["pool-a", "pool-b"]
    assert scores["pool-a"].savings_fraction == pytest.approx(4.84 / (5 * 4.84))
    assert scores["pool-a"].score == pytest.approx(1.0)


def test_the_busy_node_of_a_two_node_pool_passes_only_while_it_is_half_the_pools_cost():
    """AllPoolsMustApprove: 20 pods against 1 on two $1 nodes scores 0.5/(21/23), just above one half; once the
    quiet node costs $3 the busy one saves a quarter of the pool for most of its disruption, and is rejected"""
    heavy = candidate("b-0", "pool-b", pods=20, price=1.0)
    light = candidate("b-1", "pool-b", pods=1, price=1.0)
    totals = nodepool_totals([heavy.claimed, light.claimed], [heavy, light])
    [score] = command_scores(Command("Underutilized", (heavy,)), totals).values()
    assert score.score == pytest.approx(0.5 / (21 / 23))
    assert score.approved
    pricier = candidate("b-1", "pool-b", pods=1, price=3.0)
    totals = nodepool_totals([heavy.claimed, pricier.claimed], [heavy, pricier])
    [score] = command_scores(Command("Underutilized", (heavy,)), totals).values()
    assert score.score == pytest.approx(0.25 / (21 / 23))
    assert not score.approved


@pytest.mark.parametrize(
    ("savings", "disruption", "score", "approved"),
    [
        (20.0, 5.0, 4.0, True),  # high savings low disruption
        (10.0, 10.0, 1.0, True),  # equal fractions
        (5.0, 50.0, 0.10, False),  # low savings high disruption
        (10.0, 0.0, math.inf, True),  # zero disruption cost
        (0.0, 10.0, 0.0, False),  # zero savings
        (-5.0, 10.0, 0.0, False),  # negative savings
    ],
)
def test_score_move_is_savings_share_over_disruption_share(savings, disruption, score, approved):
    result = score_move(savings, disruption, NodePoolTotals(100.0, 100.0))
    assert result.score == pytest.approx(score)
    assert result.approved is approved
    assert result.threshold == 0.5


def test_a_pool_with_nothing_to_normalise_against_scores_zero():
    assert score_move(5.0, 1.0, NodePoolTotals(0.0, 10.0)).score == 0.0
    assert score_move(5.0, 1.0, NodePoolTotals(10.0, 0.0)).to_spec()["approved"] is False


def test_an_undisrupting_move_is_stored_with_a_null_score():
    assert score_move(10.0, 0.0, NodePoolTotals(100.0, 100.0)).to_spec() == {
        "score": None,
        "threshold": 0.5,
        "savingsFraction": 0.1,
        "disruptionFraction": 0.0,
        "approved": True,
    }


def test_can_pass_threshold_asks_whether_even_a_delete_would_pass():
    cheap_and_busy = candidate("busy", pods=30, price=0.1)
    others = [candidate(f"node-{i}") for i in range(9)]
    totals = nodepool_totals([c.claimed for c in [cheap_and_busy, *others]], [cheap_and_busy, *others])
    assert not can_pass_threshold(cheap_and_busy, totals)
    assert can_pass_threshold(others[0], totals)
    assert can_pass_threshold(candidate("x", pool="unknown"), totals)
