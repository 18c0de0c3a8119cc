"""What a person should weigh before approving a disruption command: the pods it evicts per owner and namespace
against each PodDisruptionBudget's headroom (and so how many eviction rounds the drain takes), pods that
`karpenter.sh/do-not-disrupt` holds and for how long, workloads it takes every running replica of, pods that lose
local storage, what its replacements launch as and where that leaves their NodePools' limits, and the disruption
cost as Karpenter's Balanced policy scores it. Every sentence in `risks` is a fact about this command on this
cluster; what is merely information (a score, a single eviction round) is in the assessment but not a risk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner import labels as wk
from provisioner.disruption.candidates import pod_blocks
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.scoring import NodePoolTotals, ScoreResult, command_scores, nodepool_totals
from provisioner.disruption.types import Command
from provisioner.durations import DurationError, parse_duration
from provisioner.nodes import Node
from provisioner.objects import NodePool
from provisioner.pods import Pod
from provisioner.quantity import MILLI, Resources, add, format_quantity
from provisioner.scheduling.limits import pool_usage
from provisioner.scheduling.results import NodeClaimPlan

SPOT_NOTICE = "a spot replacement can be reclaimed with two minutes' notice"


@dataclass(frozen=True)
class Evictions:
    """The pods of one owner (or of no controller) that the command evicts, and how many of that owner run."""

    namespace: str
    kind: str  # "" for pods without a controller
    name: str
    count: int
    running: int  # the owner's running pods in the whole cluster

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}" if self.kind else f"{self.namespace} (no controller)"

    @property
    def every_replica(self) -> bool:
        return bool(self.kind) and self.count >= self.running


@dataclass(frozen=True)
class BudgetHeadroom:
    """One PodDisruptionBudget over the evicted pods: how many it covers, how many it lets go at once, and so how
    many rounds of evictions the drain takes (None: it allows none now, and the drain waits until it does)."""

    namespace: str
    name: str
    pods: int
    allowed: int

    @property
    def rounds(self) -> int | None:
        return math.ceil(self.pods / self.allowed) if self.allowed > 0 else None


@dataclass(frozen=True)
class Protected:
    """An evicted node's pod that `karpenter.sh/do-not-disrupt` holds: for `seconds` more, or (None) for good."""

    pod: str
    seconds: float | None


@dataclass(frozen=True)
class Launch:
    """A replacement the command launches: the type it will most likely be, the capacity types it may take, and
    each limited resource of its NodePool after it launches (while the nodes it replaces still run)."""

    nodepool: str
    instance_type: str
    price: float
    capacity_types: tuple[str, ...]
    limits: tuple[tuple[str, int, int], ...]  # (resource, in use after the launch, limit)

    @property
    def over(self) -> list[str]:
        return [
            f"{resource} {format_quantity(used, resource)} of its limit {format_quantity(limit, resource)}"
            for resource, used, limit in self.limits
            if used > limit
        ]


@dataclass(frozen=True)
class Assessment:
    evicted: int
    evictions: tuple[Evictions, ...]
    budgets: tuple[BudgetHeadroom, ...]
    protected: tuple[Protected, ...]
    local_storage: tuple[tuple[str, tuple[str, ...]], ...]
    launches: tuple[Launch, ...]
    disruption_cost: float  # Karpenter's RescheduleDisruptionCost of the candidates together
    scores: Mapping[str, ScoreResult] = field(default_factory=dict)

    @property
    def eviction_rounds(self) -> int | None:
        """The most rounds any budget needs (1 with no budget in the way; None if one allows no eviction now)."""
        rounds = [b.rounds for b in self.budgets]
        if any(r is None for r in rounds):
            return None
        return max([1, *(r for r in rounds if r is not None)]) if self.evicted else 0

    @property
    def risks(self) -> list[str]:
        """The sentences the queue shows under Risks (and auto-below's "no risks" reads)."""
        sentences = []
        for budget in self.budgets:
            if budget.rounds is None:
                sentences.append(
                    f"PDB {budget.namespace}/{budget.name} allows no evictions now, and {budget.pods} of its pods "
                    "are evicted: the drain waits until it allows one"
                )
            elif budget.rounds > 1:
                sentences.append(
                    f"PDB {budget.namespace}/{budget.name} allows {budget.allowed} of its {budget.pods} evicted pods "
                    f"at a time: {budget.rounds} eviction rounds"
                )
        for group in self.evictions:
            if not group.kind:
                sentences.append(
                    f"{group.count} pod(s) in {group.namespace} have no controller: they are not recreated"
                )
            elif group.every_replica and group.running == 1:
                sentences.append(f"{group.label} has a single running replica, evicted")
            elif group.every_replica:
                sentences.append(f"{group.label}: all {group.running} running replicas are evicted")
        for protected in self.protected:
            held = "indefinitely" if protected.seconds is None else f"for another {_duration(protected.seconds)}"
            sentences.append(
                f'{protected.pod} has "{wk.DO_NOT_DISRUPT}" {held}: the drain waits for it (or for the NodeClaim\'s '
                "terminationGracePeriod)"
            )
        for pod, volumes in self.local_storage:
            sentences.append(f"{pod} loses local storage ({', '.join(volumes)})")
        for launch in self.launches:
            for over in launch.over:
                sentences.append(f'replacement takes NodePool "{launch.nodepool}" to {over}')
            if launch.capacity_types == (wk.CAPACITY_TYPE_SPOT,):
                sentences.append(f"replacement in {launch.nodepool} is spot only: {SPOT_NOTICE}")
        return sentences

    def to_spec(self) -> dict[str, object]:
        return {
            "evicted": self.evicted,
            "evictionRounds": self.eviction_rounds,
            "evictions": [
                {"namespace": e.namespace, "kind": e.kind, "name": e.name, "count": e.count, "running": e.running}
                for e in self.evictions
            ],
            "budgets": [
                {"namespace": b.namespace, "name": b.name, "pods": b.pods, "allowed": b.allowed, "rounds": b.rounds}
                for b in self.budgets
            ],
            "doNotDisrupt": [{"pod": p.pod, "seconds": p.seconds} for p in self.protected],
            "localStorage": [{"pod": pod, "volumes": list(volumes)} for pod, volumes in self.local_storage],
            "launches": [
                {
                    "nodepool": launch.nodepool,
                    "instanceType": launch.instance_type,
                    "price": round(launch.price, 6),
                    "capacityTypes": list(launch.capacity_types),
                    "limits": [
                        {
                            "resource": resource,
                            "after": format_quantity(used, resource),
                            "limit": format_quantity(limit, resource),
                            "over": used > limit,
                        }
                        for resource, used, limit in launch.limits
                    ],
                }
                for launch in self.launches
            ],
            "disruptionCost": round(self.disruption_cost, 6),
            "balanced": {pool: score.to_spec() for pool, score in sorted(self.scores.items())},
        }


def assess(
    command: Command,
    view: ClusterView,
    local_volumes: Mapping[str, tuple[str, ...]] | None = None,
    totals: Mapping[str, NodePoolTotals] | None = None,
) -> Assessment:
    """The assessment of `command` on the cluster `view` shows. `local_volumes` names each pod's emptyDir and
    hostPath volumes by pod uid (the scheduler's Pod does not carry volumes); `totals` are the Balanced score's
    denominators when the caller has them already."""
    evicted = [p for c in command.candidates for p in c.pods]
    if totals is None:
        totals = nodepool_totals(view.claimed, command.candidates)
    return Assessment(
        evicted=len(evicted),
        evictions=_evictions(evicted, view.nodes),
        budgets=_budgets(evicted, view),
        protected=_protected(command, view.now),
        local_storage=tuple((p.key, (local_volumes or {})[p.uid]) for p in evicted if (local_volumes or {}).get(p.uid)),
        launches=tuple(_launch(plan, view, command) for plan in command.replacements),
        disruption_cost=sum(c.reschedule_cost for c in command.candidates),
        scores=command_scores(command, totals) if command.candidates else {},
    )


def _evictions(evicted: Sequence[Pod], nodes: Iterable[Node]) -> tuple[Evictions, ...]:
    running: dict[str, int] = {}
    for node in nodes:
        for pod in node.pods:
            if pod.owner is not None and pod.phase == "Running" and not pod.deleting:
                running[pod.owner.uid or pod.owner.name] = running.get(pod.owner.uid or pod.owner.name, 0) + 1
    groups: dict[tuple[str, str, str, str], int] = {}
    for pod in evicted:
        owner = pod.owner
        key = (pod.namespace, owner.kind, owner.name, owner.uid or owner.name) if owner else (pod.namespace, "", "", "")
        groups[key] = groups.get(key, 0) + 1
    return tuple(
        Evictions(namespace, kind, name, count, running.get(uid, 0))
        for (namespace, kind, name, uid), count in sorted(groups.items(), key=lambda item: (-item[1], item[0]))
    )


def _budgets(evicted: Sequence[Pod], view: ClusterView) -> tuple[BudgetHeadroom, ...]:
    result = []
    movable = [p for p in evicted if not pod_blocks(p, view.now)]
    for pdb in view.pdbs:
        covering = [p for p in movable if pdb.covers(p)]
        if covering:
            # Pods the PDB lets go whatever it allows (AlwaysAllow and not Ready) take nothing from its budget.
            free = sum(1 for p in covering if pdb.lets_go(p))
            allowed = min(len(covering), max(pdb.disruptions_allowed, 0) + free)
            result.append(BudgetHeadroom(pdb.namespace, pdb.name, len(covering), allowed))
    return tuple(sorted(result, key=lambda b: (b.rounds is not None, -(b.rounds or 0), b.namespace, b.name)))


def _protected(command: Command, now: float) -> tuple[Protected, ...]:
    """Pods on the command's nodes that do-not-disrupt holds now (a graceful method never picks such a node; drift
    past a terminationGracePeriod and a person's request may)."""
    result = []
    for candidate in command.candidates:
        for pod in candidate.claimed.node.pods:
            if not pod_blocks(pod, now):
                continue
            value = pod.annotations.get(wk.DO_NOT_DISRUPT, "true")
            seconds: float | None = None
            if value != "true":
                try:
                    seconds = max((pod.started or now) + (parse_duration(value) or 0) - now, 0.0)
                except DurationError:
                    seconds = None
            result.append(Protected(pod.key, seconds))
    return tuple(result)


def limits_after(pool: NodePool | None, usage: Resources, launched: Resources) -> tuple[tuple[str, int, int], ...]:
    """Each limited resource of `pool` after `launched` joins `usage`: (resource, in use, limit)."""
    if pool is None or not pool.limits:
        return ()
    total = add(usage, launched, {"nodes": MILLI})
    return tuple((resource, total.get(resource, 0), limit) for resource, limit in sorted(pool.limits.items()))


def _launch(plan: NodeClaimPlan, view: ClusterView, command: Command) -> Launch:
    pool = next((offer.nodepool for offer in view.pools if offer.nodepool.name == plan.nodepool), None)
    cheapest = plan.cheapest.instance_type if plan.options else None
    # Replacements launch before the nodes they replace go: the pool holds both for a while, so the nodes being
    # replaced still count (view.nodes has them, unless a caller removed them already).
    usage = pool_usage(plan.nodepool, view.nodes)
    capacity = dict(cheapest.capacity) if cheapest is not None else dict(plan.requests)
    offered = sorted(
        {o.capacity_type for option in plan.options for o in option.instance_type.offerings if o.available}
        & (set(plan.capacity_types) or set(wk.KNOWN_CAPACITY_TYPES))
    )
    return Launch(
        nodepool=plan.nodepool,
        instance_type=cheapest.name if cheapest is not None else "",
        price=plan.cheapest.price if plan.options else 0.0,
        capacity_types=tuple(offered),
        limits=limits_after(pool, usage, capacity),
    )


def _duration(seconds: float) -> str:
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v) or "0s"
