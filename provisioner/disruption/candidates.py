"""Which nodes may be disrupted, and why the others may not (each blocker is a sentence for the dashboard)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner import labels as wk
from provisioner.disruption.types import Candidate, ClaimedNode, DisruptionBudgetPolicy, eviction_cost
from provisioner.durations import DurationError, parse_duration
from provisioner.objects import WHEN_EMPTY, NodePool
from provisioner.pods import Pod


def pod_blocks(pod: Pod, now: float) -> bool:
    """`karpenter.sh/do-not-disrupt` on an active pod: "true" always; a duration only while the pod is younger."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or pod.is_terminal() or pod.deleting:
        return False
    if value == "true":
        return True
    try:
        seconds = parse_duration(value)
    except DurationError:
        return False  # an invalid value is ignored, as Karpenter does (with an event)
    if not seconds:
        return False
    return pod.started is None or now - pod.started < seconds


def disruption_cost(claimed: ClaimedNode, nodepool: NodePool, pods: Sequence[Pod], now: float) -> float:
    """Karpenter's DisruptionCost: the pods' eviction costs times the share of the node's lifetime remaining."""
    return sum(eviction_cost(p) for p in pods) * _lifetime_remaining(claimed, nodepool, now)


def _lifetime_remaining(claimed: ClaimedNode, nodepool: NodePool, now: float) -> float:
    expire = nodepool.expire_after_seconds
    return 1.0 if not expire else max(0.0, min(1.0, (expire - (now - claimed.created)) / expire))


def blockers(
    claimed: ClaimedNode,
    nodepool: NodePool | None,
    pdbs: Sequence[DisruptionBudgetPolicy],
    now: float,
    eventual: bool = False,
) -> list[str]:
    """Why a node cannot be a candidate (empty: it can). `eventual` methods (drift) skip pod-level blockers
    on nodes with a terminationGracePeriod: the drain forces them out at its deadline."""
    reasons = []
    if not claimed.initialized:
        reasons.append("node is not initialized")
    if claimed.deleting or claimed.node.marked_for_deletion:
        reasons.append("node is being deleted")
    if claimed.nominated_until > now:
        reasons.append("node is nominated for a pending pod")
    if claimed.annotations.get(wk.DO_NOT_DISRUPT) == "true":
        reasons.append('node has "karpenter.sh/do-not-disrupt" annotation')
    if nodepool is None:
        reasons.append(f'nodepool "{claimed.nodepool}" not found')
    for pod in claimed.node.pods if not (eventual and claimed.grace_period) else ():
        if pod_blocks(pod, now):
            reasons.append(f'pod "{pod.key}" has "karpenter.sh/do-not-disrupt" annotation')
            continue
        # Without PDBs nothing below can block; asking each of 20,000 pods anyway was a tenth of a pass.
        if not pdbs or (not pod.is_reschedulable() and not pod.is_daemonset_pod()):
            continue
        covering = [pdb for pdb in pdbs if pdb.covers(pod)]
        if len(covering) > 1:
            reasons.append(f'pod "{pod.key}" is covered by multiple PDBs')
        elif covering and covering[0].disruptions_allowed <= 0 and not covering[0].always_allow_unhealthy:
            reasons.append(f'pdb "{covering[0].namespace}/{covering[0].name}" prevents pod evictions')
    return reasons


# Why a node's consolidateAfter keeps it out: said on the dashboard, never as an event (Karpenter's ShouldDisrupt
# returns false for a NodeClaim not yet Consolidatable without publishing anything).
NOT_CONSOLIDATABLE_YET = "has not elapsed since the last pod event"


def consolidation_blockers(claimed: ClaimedNode, nodepool: NodePool, empty: bool) -> list[str]:
    """The extra filters for Emptiness and consolidation (Karpenter's Unconsolidatable reasons)."""
    if nodepool.consolidate_after_seconds is None:
        return [f'NodePool "{nodepool.name}" has consolidation disabled']
    if not claimed.consolidatable:
        return [f"consolidateAfter ({nodepool.consolidate_after}) {NOT_CONSOLIDATABLE_YET}"]
    if not claimed.capacity_type or not claimed.zone:
        return ["node is missing its capacity-type or zone label"]
    if nodepool.consolidation_policy == WHEN_EMPTY and not empty:
        return [f'NodePool "{nodepool.name}" has consolidationPolicy WhenEmpty and the node is not empty']
    return []


def build_candidates(
    claimed: Sequence[ClaimedNode],
    nodepools: Mapping[str, NodePool],
    pdbs: Sequence[DisruptionBudgetPolicy],
    now: float,
    eventual: bool = False,
    problems: Mapping[str, str] | None = None,
) -> tuple[list[Candidate], dict[str, list[str]]]:
    """Candidates for graceful (or, with `eventual`, drift's) disruption, and why every other node is not one.
    `problems`: NodePools left out of `nodepools` because they cannot be evaluated, with why."""
    candidates, blocked = [], {}
    for node in claimed:
        nodepool = nodepools.get(node.nodepool)
        reasons = blockers(node, nodepool, pdbs, now, eventual)
        if nodepool is None and problems and node.nodepool in problems:
            reasons = [
                f'nodepool "{node.nodepool}": {problems[node.nodepool]}' if "not found" in r else r for r in reasons
            ]
        if reasons or nodepool is None:
            blocked[node.name] = reasons
            continue
        pods = tuple(p for p in node.node.pods if p.is_reschedulable())
        candidates.append(Candidate.with_costs(node, nodepool, pods, _lifetime_remaining(node, nodepool, now)))
    return candidates, blocked


def consolidation_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Karpenter v1.14+: most price per unit of rescheduling cost first (cheap-to-move, expensive nodes)."""
    return sorted(candidates, key=lambda c: (-c.price / c.reschedule_cost, c.name))
