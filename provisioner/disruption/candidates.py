"""Which nodes may be disrupted, and why the others may not (each blocker is a sentence for the dashboard)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from provisioner import labels as wk
from provisioner.disruption.types import Candidate, ClaimedNode, DisruptionBudgetPolicy, eviction_cost
from provisioner.durations import DurationError, parse_go_duration
from provisioner.objects import WHEN_EMPTY, NodePool
from provisioner.pods import Pod
from provisioner.taints import DISRUPTED, NO_SCHEDULE, Taint

_DISRUPTED_NO_SCHEDULE = Taint(DISRUPTED, NO_SCHEDULE)


def evictable(pod: Pod, now: float) -> bool:
    """Karpenter's IsEvictable (utils/pod/scheduling.go:57-62): a pod the drain evicts, so the only kind a PDB can
    hold: active, not tolerating karpenter.sh/disrupted:NoSchedule, not a mirror pod, no active do-not-disrupt."""
    return (
        not pod.is_terminal()
        and not pod.deleting
        and not pod.is_mirror_pod()
        and not any(t.tolerates(_DISRUPTED_NO_SCHEDULE) for t in pod.tolerations)
        and not pod_blocks(pod, now)
    )


def pod_blocks(pod: Pod, now: float) -> bool:
    """`karpenter.sh/do-not-disrupt` on an active pod: "true" always; a duration only while the pod is younger."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or pod.is_terminal() or pod.deleting:
        return False
    if value == "true":
        return True
    seconds = _timed_do_not_disrupt(value)
    if isinstance(seconds, str):
        return False  # an invalid value is ignored, as Karpenter does (with an event: do_not_disrupt_notice)
    return pod.started is None or now - pod.started < seconds


def _timed_do_not_disrupt(value: str) -> float | str:
    """The annotation's duration in seconds, or why it is invalid (Karpenter's parseDoNotDisrupt, in its words)."""
    try:
        seconds = parse_go_duration(value)
    except DurationError as error:
        return f'failed to parse "{value}" as a duration: {error}'
    if seconds <= 0:
        return f'duration "{value}" must be positive'
    return seconds


@dataclass(frozen=True)
class PodNotice:
    """An Event Karpenter tells on a pod as it reads the pod's do-not-disrupt annotation (IsDoNotDisruptActive)."""

    event_type: str
    reason: str
    message: str


def do_not_disrupt_notice(pod: Pod, now: float) -> PodNotice | None:
    """What reading a pod's timed or invalid `karpenter.sh/do-not-disrupt` tells (None for "true", no annotation,
    an inactive pod, or no startTime yet): invalid, still protected until a time, or protected no more."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or value == "true" or pod.is_terminal() or pod.deleting:
        return None
    seconds = _timed_do_not_disrupt(value)
    if isinstance(seconds, str):
        message = f"Invalid karpenter.sh/do-not-disrupt annotation: {seconds}, ignoring annotation"
        return PodNotice("Warning", "InvalidDoNotDisruptAnnotation", message)
    if pod.started is None:
        return None
    if now - pod.started < seconds:
        until = datetime.fromtimestamp(int(pod.started + seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return PodNotice(
            "Normal", "DoNotDisruptUntil", f"The karpenter.sh/do-not-disrupt grace period will elapse at {until}"
        )
    return PodNotice(
        "Normal",
        "DoNotDisruptGracePeriodElapsed",
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
    )


def disruption_cost(claimed: ClaimedNode, nodepool: NodePool, pods: Sequence[Pod], now: float) -> float:
    """Karpenter's DisruptionCost: the pods' eviction costs times the share of the node's lifetime remaining."""
    return sum(eviction_cost(p) for p in pods) * _lifetime_remaining(claimed, nodepool, now)


def _lifetime_remaining(claimed: ClaimedNode, nodepool: NodePool, now: float) -> float:
    expire = nodepool.expire_after_seconds
    return 1.0 if not expire else max(0.0, min(1.0, (expire - (now - claimed.created)) / expire))


def node_blockers(claimed: ClaimedNode, nodepool: NodePool | None, now: float) -> list[str]:
    """What keeps a node from being a candidate before its pods are looked at (ValidateNodeDisruptable, then
    NewCandidate's NodePool lookup), in that order."""
    reasons = []
    if claimed.deleting or claimed.node.marked_for_deletion:
        reasons.append("Node is deleting or marked for deletion")
    if not claimed.initialized:
        # Liveness's registration timeout owns a node until it registers (ValidateNodeDisruptable's two words).
        reasons.append("Node isn't initialized" if claimed.registered else "Node isn't initialized nor registered")
    if claimed.nominated_until > now:
        reasons.append("Node is nominated for a pending pod")
    if claimed.annotations.get(wk.DO_NOT_DISRUPT) == "true":
        reasons.append(f'Disruption is blocked through the "{wk.DO_NOT_DISRUPT}" annotation')
    if not claimed.nodepool:
        reasons.append(f"Node doesn't have required label (label={wk.NODEPOOL})")
    elif nodepool is None:
        reasons.append(f"NodePool not found (NodePool={claimed.nodepool})")
    return reasons


def blockers(
    claimed: ClaimedNode,
    nodepool: NodePool | None,
    pdbs: Sequence[DisruptionBudgetPolicy],
    now: float,
    eventual: bool = False,
) -> list[str]:
    """Why a node cannot be a candidate (empty: it can), in Karpenter v1.15's words and order (ValidateNodeDisruptable,
    NewCandidate, ValidatePodsDisruptable): Karpenter stops at the first and tells it as DisruptionBlocked; the
    dashboard shows them all. `eventual` methods (drift) skip pod-level blockers on nodes with a
    terminationGracePeriod: the drain forces them out at its deadline."""
    reasons = node_blockers(claimed, nodepool, now)
    if eventual and claimed.grace_period:
        return reasons
    pods = claimed.node.pods
    reasons.extend(f'Pod has "{wk.DO_NOT_DISRUPT}" annotation (Pod={p.key})' for p in pods if pod_blocks(p, now))
    # Without PDBs nothing below can block; asking each of 20,000 pods anyway was a tenth of a pass.
    for pod in pods if pdbs else ():
        # CanEvictPods passes by pods the drain never evicts (pdb.go:88-92): inactive (a terminating StatefulSet pod
        # too) and mirror pods, those that tolerate the disrupted taint, and those do-not-disrupt protects.
        if not evictable(pod, now):
            continue
        covering = [pdb for pdb in pdbs if pdb.covers(pod)]
        if len(covering) > 1:
            keys = " ".join(sorted(f"{pdb.namespace}/{pdb.name}" for pdb in covering))
            reasons.append(f"Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[{keys}])")
        elif covering and covering[0].disruptions_allowed <= 0 and not covering[0].lets_go(pod):
            reasons.append(
                f"Pdb prevents pod evictions (PodDisruptionBudget=[{covering[0].namespace}/{covering[0].name}])"
            )
    return list(dict.fromkeys(reasons))


# Why a node's consolidateAfter keeps it out: said on the dashboard, never as an event (Karpenter's ShouldDisrupt
# returns false for a NodeClaim not yet Consolidatable without publishing anything).
NOT_CONSOLIDATABLE_YET = "has not elapsed since the last pod event"


def consolidation_blockers(claimed: ClaimedNode, nodepool: NodePool, empty: bool) -> list[str]:
    """The extra filters for Emptiness and consolidation (Karpenter's Unconsolidatable reasons), the first that
    fails, in their ShouldDisrupt's order: consolidation prices a node by its type, capacity type and zone, so it
    asks those first (consolidation.go:100-135); Emptiness deletes an empty node without asking (emptiness.go:42-58).
    Both ask last whether consolidateAfter has passed, which Karpenter tells no one."""
    if not empty:
        if not claimed.instance_type or not claimed.type_known:  # consolidation.go:110-113: instanceType == nil
            return [f'Instance Type "{claimed.instance_type}" not found']
        if not claimed.capacity_type:
            return [f'Node does not have label "{wk.CAPACITY_TYPE}"']
        if not claimed.zone:
            return [f'Node does not have label "{wk.ZONE}"']
    if nodepool.consolidate_after_seconds is None:
        return [f'NodePool "{nodepool.name}" has consolidation disabled']
    if nodepool.consolidation_policy == WHEN_EMPTY and not empty:
        return [f'NodePool "{nodepool.name}" has consolidation policy WhenEmpty, but node is not empty']
    if not claimed.consolidatable:
        return [f"consolidateAfter ({nodepool.consolidate_after}) {NOT_CONSOLIDATABLE_YET}"]
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
            missing = f"NodePool not found (NodePool={node.nodepool})"
            reasons = [f'NodePool "{node.nodepool}": {problems[node.nodepool]}' if r == missing else r for r in reasons]
        if reasons or nodepool is None:
            blocked[node.name] = reasons
            continue
        pods = tuple(p for p in node.node.pods if p.is_reschedulable())
        candidates.append(Candidate.with_costs(node, nodepool, pods, _lifetime_remaining(node, nodepool, now)))
    return candidates, blocked


def consolidation_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Karpenter v1.14+: most price per unit of rescheduling cost first (cheap-to-move, expensive nodes)."""
    return sorted(candidates, key=lambda c: (-c.price / c.reschedule_cost, c.name))
