"""Simulate removing candidates and decide: delete (pods fit elsewhere), replace (one cheaper node), or nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.disruption.candidates import pod_blocks
from provisioner.disruption.types import Candidate, ClaimedNode, Command, DisruptionBudgetPolicy
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass
from provisioner.nodes import DaemonSet, Node
from provisioner.pods import Pod
from provisioner.requirements import Requirement
from provisioner.scheduling.results import NodeClaimPlan, SchedulingResult
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve

SPOT_TO_SPOT_MIN_OPTIONS = 15
CAPACITY_TIERS = (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)


@dataclass(frozen=True)
class ClusterView:
    """Everything disruption reads, as of one moment."""

    claimed: Sequence[ClaimedNode]
    nodes: Sequence[Node]  # every node, Karpenter's or not, plus in-flight NodeClaims
    pending: Sequence[Pod]
    pools: Sequence[PoolOffer]
    now: float
    pdbs: Sequence[DisruptionBudgetPolicy] = ()
    daemonsets: Sequence[DaemonSet] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    spot_to_spot: bool = False
    device_classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    node_devices: Mapping[str, Sequence[Device]] = field(default_factory=dict)  # free devices per node


def simulate(candidates: Sequence[Candidate], view: ClusterView) -> SchedulingResult:
    """Schedule the candidates' movable pods (and pending pods) on the cluster without the candidates."""
    removed = {c.name for c in candidates}
    nodes = [n for n in view.nodes if n.name not in removed]
    moving = [
        p for c in candidates for p in c.pods if not pod_blocks(p, view.now) and not _fully_protected(p, view.pdbs)
    ]
    request = SchedulingInput(
        pods=[*moving, *view.pending],
        pools=view.pools,
        nodes=nodes,
        daemonsets=view.daemonsets,
        namespace_labels=view.namespace_labels,
        device_classes=view.device_classes,
        node_devices=view.node_devices,
    )
    return solve(request)


def _fully_protected(pod: Pod, pdbs: Sequence[DisruptionBudgetPolicy]) -> bool:
    return any(pdb.fully_blocking and pdb.covers(pod) for pdb in pdbs)


def simulation_problems(result: SchedulingResult, candidates: Sequence[Candidate], view: ClusterView) -> list[str]:
    """Why removing the candidates would strand pods: one fails to schedule, or it would land on a node that is
    not initialized yet (Karpenter will not count on capacity that may never come)."""
    moving = {p.uid for c in candidates for p in c.pods}
    failed = [f for uid, f in result.failures.items() if uid in moving]
    if failed:
        listed = ", ".join(f"{f.pod.key} => {f.message}" for f in failed[:5])
        return [f"not all pods would schedule, {listed}"]
    uninitialized = {n.name for n in view.nodes if not n.initialized}
    onto = sorted(
        name for name, pods in result.placements.items() if name in uninitialized and any(p.uid in moving for p in pods)
    )
    if onto:
        return [f"not all pods would schedule, would schedule against uninitialized nodeclaim/{onto[0]}"]
    return []


def worst_launch_price(
    instance_type: InstanceType, zone: Requirement | None, capacity: Requirement | None
) -> float | None:
    """The most expensive compatible offering in the first capacity tier that has one (reserved, spot, on-demand)."""
    for tier in CAPACITY_TIERS:
        if capacity is not None and not capacity.has(tier):
            continue
        prices = [
            o.price
            for o in instance_type.offerings
            if o.available and o.capacity_type == tier and (zone is None or zone.has(o.zone))
        ]
        if prices:
            return max(prices)
    return None


def compute(candidates: Sequence[Candidate], view: ClusterView, method: str, reason: str) -> Command | list[str]:
    """A delete or replace command for removing all `candidates`, or the reasons none makes sense."""
    result = simulate(candidates, view)
    problems = simulation_problems(result, candidates, view)
    if problems:
        return problems
    if not result.new_nodeclaims:
        return Command(reason, tuple(candidates), (), method)
    if len(result.new_nodeclaims) > 1:
        return [f"Can't remove without creating {len(result.new_nodeclaims)} candidates"]
    replacement = _cheaper_replacement(result.new_nodeclaims[0], candidates, view, single=method == "single")
    if isinstance(replacement, list):
        return replacement
    return Command(reason, tuple(candidates), (replacement,), method)


def _cheaper_replacement(
    plan: NodeClaimPlan, candidates: Sequence[Candidate], view: ClusterView, *, single: bool
) -> NodeClaimPlan | list[str]:
    current = sum(c.price for c in candidates)
    zone = plan.requirements.get(wk.ZONE)
    capacity = plan.requirements.get(wk.CAPACITY_TYPE)
    all_spot = all(c.claimed.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)
    may_spot = capacity is None or capacity.has(wk.CAPACITY_TYPE_SPOT)
    spot_to_spot = all_spot and may_spot
    if spot_to_spot and not view.spot_to_spot:
        return ["SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"]
    if spot_to_spot or (may_spot and capacity is not None and capacity.has(wk.CAPACITY_TYPE_ON_DEMAND)):
        # Pin to spot: no pricier on-demand fallback may sneak into the launch.
        capacity = Requirement.in_values(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_SPOT)
    options = [
        option
        for option in plan.options
        if (worst := worst_launch_price(option.instance_type, zone, capacity)) is not None and worst < current
    ]
    if not options:
        return [f"Can't replace with a cheaper node (current ${current:.4f}/h)"]
    if spot_to_spot and single:
        if len(options) < SPOT_TO_SPOT_MIN_OPTIONS:
            return [
                "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to "
                f"consolidate, got {len(options)}"
            ]
        options = options[:SPOT_TO_SPOT_MIN_OPTIONS]
    requirements = plan.requirements.merged(
        [Requirement(wk.INSTANCE_TYPE, frozenset(o.instance_type.name for o in options))]
    )
    if capacity is not None:
        requirements = type(requirements)([*(r for k, r in requirements.items() if k != wk.CAPACITY_TYPE), capacity])
    return replace(plan, options=tuple(options), requirements=requirements)


def without_same_types(command: Command) -> Command | None:
    """Multi-node: merging N nodes into one of a type they already run is just deleting the others, so drop
    options priced at or above a candidate running the same type."""
    if command.decision != "replace":
        return command
    plan = command.replacements[0]
    same = {c.claimed.instance_type: c.price for c in command.candidates}
    ceiling = min(
        (price for name, price in same.items() if name in {o.instance_type.name for o in plan.options}), default=None
    )
    if ceiling is None:
        return command
    options = tuple(o for o in plan.options if o.price < ceiling)
    if not options:
        return None
    return replace(command, replacements=(replace(plan, options=options),))
