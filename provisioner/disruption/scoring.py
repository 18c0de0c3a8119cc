"""Karpenter v1.14's Balanced consolidation score: a move's share of its NodePool's cost saved over its share of the
NodePool's disruption cost, approved at 1/k or more (`balanced.go`, `types.go` ScoreResult, k = 2).

Kept in one place so the Balanced policy (which refuses moves below the threshold) and the human gate (which shows
every command's score beside its risks) read the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from provisioner.catalog import InstanceType
from provisioner.disruption.types import Candidate, ClaimedNode, Command, eviction_cost
from provisioner.pods import Pod

# Karpenter's BalancedK (pkg/apis/v1/nodepool.go): approved when score >= 1/k = 0.5.
BALANCED_K = 2
# PerNodeBaseDisruptionCost: every node costs 1 to disrupt before its pods are counted.
NODE_BASE_DISRUPTION_COST = 1.0


@dataclass(frozen=True)
class NodePoolTotals:
    """What a NodePool's scores are normalised by: the $/h of all its nodes and the disruption cost of all of them
    (candidates or not: "non-candidate nodes still contribute to the denominators")."""

    total_cost: float
    total_disruption_cost: float


@dataclass(frozen=True)
class ScoreResult:
    """One NodePool's view of a move: the fractions of its cost saved and of its disruption caused."""

    savings_fraction: float
    disruption_fraction: float
    k: int = BALANCED_K

    @property
    def score(self) -> float:
        """savings/disruption, 0 for a move that saves nothing, infinite for one that disrupts nothing."""
        if self.savings_fraction <= 0:
            return 0.0
        if self.disruption_fraction == 0:
            return math.inf
        return self.savings_fraction / self.disruption_fraction

    @property
    def threshold(self) -> float:
        return 1.0 / self.k

    @property
    def approved(self) -> bool:
        return self.score >= self.threshold

    def to_spec(self) -> dict[str, object]:
        """As a command stores it (JSON has no infinity: an undisrupting move's score is null)."""
        score = self.score
        return {
            "score": None if math.isinf(score) else round(score, 6),
            "threshold": self.threshold,
            "savingsFraction": round(self.savings_fraction, 6),
            "disruptionFraction": round(self.disruption_fraction, 6),
            "approved": self.approved,
        }


def resolve_offering_price(instance_type: InstanceType | None, zone: str, capacity_type: str) -> float:
    """Karpenter's ResolveOfferingPrice (utils/disruption/disruption.go:39-48): what a running node costs, the price
    of its type's first offering in its zone and capacity type, available or not (it runs already); 0 for a type
    not in the catalog, no such offering, or a NaN price, so one unpriceable node cannot poison its pool's totals."""
    if instance_type is None:
        return 0.0
    for offering in instance_type.offerings:
        if offering.zone == zone and offering.capacity_type == capacity_type:
            return 0.0 if math.isnan(offering.price) else offering.price
    return 0.0


def node_disruption_cost(pods: Iterable[Pod]) -> float:
    """Karpenter's StateNode.DisruptionCost: 1 plus the positive eviction costs of the node's non-DaemonSet pods."""
    return NODE_BASE_DISRUPTION_COST + sum(max(0.0, eviction_cost(p)) for p in pods if not p.is_daemonset_pod())


def nodepool_totals(claimed: Sequence[ClaimedNode], candidates: Sequence[Candidate]) -> dict[str, NodePoolTotals]:
    """computeNodePoolTotals: per NodePool, the price of every node in it, and the disruption cost of every node (a
    candidate's RescheduleDisruptionCost, any other node's own DisruptionCost)."""
    by_name = {c.name: c for c in candidates}
    cost: dict[str, float] = {}
    disruption: dict[str, float] = {}
    for node in claimed:
        if not node.nodepool:
            continue
        cost[node.nodepool] = cost.get(node.nodepool, 0.0) + node.price
        candidate = by_name.get(node.name)
        node_cost = candidate.reschedule_cost if candidate is not None else node_disruption_cost(node.node.pods)
        disruption[node.nodepool] = disruption.get(node.nodepool, 0.0) + node_cost
    return {pool: NodePoolTotals(cost[pool], disruption.get(pool, 0.0)) for pool in cost}


def score_move(savings: float, disruption_cost: float, totals: NodePoolTotals, k: int = BALANCED_K) -> ScoreResult:
    """ScoreMove: with nothing to normalise against (an empty pool), the move scores 0."""
    if totals.total_cost <= 0 or totals.total_disruption_cost <= 0:
        return ScoreResult(0.0, 0.0, k)
    return ScoreResult(savings / totals.total_cost, disruption_cost / totals.total_disruption_cost, k)


def command_scores(command: Command, totals: Mapping[str, NodePoolTotals]) -> dict[str, ScoreResult]:
    """EvaluateBalancedMove's per-NodePool scores of a command, whatever the pools' policy: a move across pools
    credits each pool with the net savings in proportion to its share of the candidates' price."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in command.candidates:
        by_pool.setdefault(candidate.claimed.nodepool, []).append(candidate)
    savings = command.savings
    source = sum(c.price for c in command.candidates)
    result = {}
    for pool, members in sorted(by_pool.items()):
        share = savings * (sum(c.price for c in members) / source) if source > 0 and len(by_pool) > 1 else savings
        disruption = sum(c.reschedule_cost for c in members)
        result[pool] = score_move(share, disruption, totals.get(pool, NodePoolTotals(0.0, 0.0)))
    return result


def can_pass_threshold(candidate: Candidate, totals: Mapping[str, NodePoolTotals]) -> bool:
    """CanPassThreshold: whether even deleting the candidate outright (the best any move on it can score) passes;
    a pool with no cost to normalise against lets every candidate through."""
    pool = totals.get(candidate.claimed.nodepool)
    if pool is None or pool.total_cost <= 0:
        return True
    return score_move(candidate.price, candidate.reschedule_cost, pool).approved
