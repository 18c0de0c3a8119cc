"""Disruption's values: nodes with their NodeClaim facts, PDBs, candidates and commands (decision derived)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from provisioner import labels as wk
from provisioner.nodes import Node
from provisioner.objects import NodePool
from provisioner.pods import Pod
from provisioner.scheduling.results import NodeClaimPlan
from provisioner.selectors import LabelSelector

EMPTY, DRIFTED, UNDERUTILIZED, EXPIRED = "Empty", "Drifted", "Underutilized", "Expired"
UNHEALTHY = "Unhealthy"  # node repair's reason: its budget is not used up by the NotReady nodes it repairs
DELETE, REPLACE, NOOP = "delete", "replace", "no-op"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
DISRUPTION_COST = "karpenter.sh/disruption-cost"
# Both annotations are int32s (strconv.ParseInt(value, 10, 32)): an optional sign and decimal digits, in range.
_INT32 = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class ClaimedNode:
    """A node Karpenter manages, with what its NodeClaim says about it."""

    node: Node
    nodeclaim: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float
    created: float
    initialized: bool = True
    registered: bool = True  # the Node carries karpenter.sh/registered (Karpenter's StateNode.Registered)
    ready: bool = True  # the Node's Ready condition is True: a node that is not uses up disruption budgets
    deleting: bool = False
    consolidatable: bool = True
    drifted: str | None = None  # the drift reason, when Drifted=True
    drifted_at: float = 0.0
    nominated_until: float = 0.0  # the provisioner chose this node for a pending pod (Karpenter: 20 s)
    grace_period: bool = False  # the NodeClaim has a terminationGracePeriod: drift may go ahead despite pods
    last_pod_event: str = ""  # the NodeClaim's status.lastPodEventTime: when its pods last changed
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The NodePool's catalog has the node's type: consolidation cannot price a node whose type it lacks (Karpenter's
    # Candidate.instanceType is nil).
    type_known: bool = True

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True)
class DisruptionBudgetPolicy:
    """A PodDisruptionBudget as eviction sees it."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    fully_blocking: bool = False  # maxUnavailable 0 / "0%" or minAvailable "100%"
    always_allow_unhealthy: bool = False

    def covers(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and self.selector is not None and self.selector.matches(pod.labels)

    def lets_go(self, pod: Pod) -> bool:
        """Eviction passes this PDB whatever it allows: unhealthyPodEvictionPolicy AlwaysAllow and a pod whose Ready
        condition is False (Karpenter's pdb.go:109-116, as the eviction API decides)."""
        return self.always_allow_unhealthy and pod.unready


def eviction_cost(pod: Pod) -> float:
    """Karpenter's EvictionCost (utils/disruption/disruption.go:97-131): 1 + the pod's cost annotation/2^27 +
    priority/2^25, clamped to [-10, 10]. The annotation is karpenter.sh/disruption-cost, or without it the
    pod-deletion-cost (karpui has no PodDeletionCostManagement gate: Karpenter's default, off, reads it); a value
    that is no int32 counts as none, as Karpenter logs it and goes on."""
    annotation = pod.annotations.get(DISRUPTION_COST)
    if annotation is None:
        annotation = pod.annotations.get(DELETION_COST)
    if annotation is None and not pod.priority:
        return 1.0  # what the formula gives most pods; asked of every pod on every node each pass
    return max(-10.0, min(10.0, 1 + _int32(annotation) / 2**27 + pod.priority / 2**25))


def _int32(value: str | None) -> int:
    """strconv.ParseInt(value, 10, 32), 0 where it fails (no value, not decimal, out of range)."""
    if value is None or not _INT32.fullmatch(value):
        return 0
    parsed = int(value)
    return parsed if _INT32_MIN <= parsed <= _INT32_MAX else 0


def reschedule_cost(eviction_costs: Iterable[float]) -> float:
    """Karpenter v1.14+'s RescheduleDisruptionCost: 1 + the positive eviction costs of the pods that would move."""
    return 1 + sum(max(0.0, cost) for cost in eviction_costs)


@dataclass(frozen=True)
class Candidate:
    claimed: ClaimedNode
    nodepool: NodePool
    pods: tuple[Pod, ...]  # reschedulable pods: they move if the node goes
    disruption_cost: float

    @classmethod
    def with_costs(cls, claimed: ClaimedNode, nodepool: NodePool, pods: tuple[Pod, ...], lifetime: float) -> Candidate:
        """A candidate whose costs share one eviction cost per pod: `lifetime` (Karpenter's lifetimeRemaining)
        times their sum is the disruption cost, and the reschedule cost is known before anything orders by it."""
        costs = [eviction_cost(p) for p in pods]
        candidate = cls(claimed, nodepool, pods, sum(costs) * lifetime)
        candidate.__dict__["reschedule_cost"] = reschedule_cost(costs)  # where cached_property keeps its value
        return candidate

    @cached_property
    def reschedule_cost(self) -> float:
        """Consolidation orders by price over this, once per method; the pods do not change in between."""
        return reschedule_cost(eviction_cost(p) for p in self.pods)

    @property
    def is_empty(self) -> bool:
        """Karpenter's IsEmpty (types.go:141-147): no pod adds to the base reschedule cost of 1. A node whose pods all
        cost nothing to evict (an eviction cost <= 0, say a priority of -2^25) is empty: Emptiness deletes it, under
        the Empty reason and budgets, and its pods are evicted as it drains."""
        return self.reschedule_cost <= 1

    @property
    def name(self) -> str:
        return self.claimed.name

    @property
    def price(self) -> float:
        return self.claimed.price


def candidate_state(candidate: Candidate) -> str:
    """A candidate's state as a person's denial remembers it: which pods it holds (by uid) and when they last
    changed (a node emptied again is not the node that was denied). A denial stands while the node is in that
    state; once its pods change, the node is a new question."""
    uids = ",".join(sorted(p.uid for p in candidate.pods))
    return hashlib.sha256(f"{uids}|{candidate.claimed.last_pod_event}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Command:
    """What a method decided: remove `candidates`, launching `replacements` first (none: a delete)."""

    reason: str
    candidates: tuple[Candidate, ...]
    replacements: tuple[NodeClaimPlan, ...] = ()
    method: str = ""  # empty, drift, multi, single
    notes: tuple[str, ...] = ()
    # Where the simulation put the candidates' pods: an existing node's name, or "replacement-N", with the count.
    destinations: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def decision(self) -> str:
        if not self.candidates:
            return NOOP
        return REPLACE if self.replacements else DELETE

    @property
    def savings(self) -> float:
        """Karpenter's EstimatedSavings (types.go:407-433): the candidates' prices less each replacement's estimated
        launch price ($/h)."""
        return sum(c.price for c in self.candidates) - sum(estimated_launch_price(r) for r in self.replacements)

    @property
    def pod_count(self) -> int:
        return sum(len(c.pods) for c in self.candidates)

    @property
    def nodepools(self) -> list[str]:
        return sorted({c.claimed.nodepool for c in self.candidates})


def estimated_launch_price(plan: NodeClaimPlan) -> float:
    """What EstimatedSavings takes a replacement to cost (types.go:421-429): the cheapest launchable offering of its
    first option that the NodeClaim's requirements allow, so a spot price cannot stand in for an on-demand-only
    NodeClaim; 0 with no option or no such offering. Launchable, not just available: a full reservation would launch
    at another price (cloudprovider/types.go:623-633)."""
    if not plan.options:
        return 0.0
    requirements = plan.requirements
    zone, capacity = requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE)
    reservation = requirements.get(wk.RESERVATION_ID)
    prices = [
        o.price
        for o in plan.options[0].instance_type.offerings
        if o.launchable and o.compatible(zone, capacity, reservation)
    ]
    return min(prices, default=0.0)
