"""Simulate removing candidates and decide: delete (pods fit elsewhere), replace (one cheaper node), or nothing."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.disruption.candidates import evictable, pod_blocks
from provisioner.disruption.types import Candidate, ClaimedNode, Command, DisruptionBudgetPolicy
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass
from provisioner.nodes import DaemonSet, Node, state_node_name
from provisioner.options import RESPECT, STRICT
from provisioner.pods import Pod, TopologySpreadConstraint
from provisioner.quantity import MILLI, Resources, add, format_quantity
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.limits import pool_usage
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan, SchedulingResult, min_values_unmet
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
    preference_policy: str = RESPECT  # Karpenter's PREFERENCE_POLICY and MIN_VALUES_POLICY, as provisioning uses
    min_values_policy: str = STRICT
    reserved_capacity: bool = True  # the ReservedCapacity gate
    # Nodes the last provisioning pass put CapacityBuffer virtual pods on: not empty (the pods are in `pending`).
    buffer_nodes: frozenset[str] = frozenset()
    # Pod uid -> where its volumes let its node be (provisioner.volumes): a pod moves only where its PV can follow.
    volume_requirements: Mapping[str, tuple[Requirements, ...]] = field(default_factory=dict)
    # Pod uid -> the SCHEDULER_CONFIG default spread it is simulated with (provisioner.scheduling.defaultspread).
    default_spread: Mapping[str, tuple[TopologySpreadConstraint, ...]] = field(default_factory=dict)


def departing_pods(view: ClusterView, removed: Collection[str] = ()) -> list[Pod]:
    """The pods that must find a place because their node is on its way out (being deleted, or the candidate of a
    command already approved or executing; `in_flight` marks those): Karpenter's SimulateScheduling schedules the
    reschedulable pods of deleting nodes with the candidates', so a command never counts on room those pods need."""
    return [
        p
        for n in view.nodes
        if n.marked_for_deletion and n.name not in removed
        for p in n.pods
        if currently_reschedulable(p, view.now, view.pdbs)
    ]


def currently_reschedulable(pod: Pod, now: float, pdbs: Sequence[DisruptionBudgetPolicy]) -> bool:
    """Karpenter's IsCurrentlyReschedulable: a pod that would move if its node went, now (not a DaemonSet's or a
    mirror pod, no active do-not-disrupt, no PDB that allows no eviction at all)."""
    return pod.is_reschedulable() and not pod_blocks(pod, now) and not _fully_protected(pod, pdbs, now)


def in_flight(view: ClusterView, departing: Collection[str]) -> ClusterView:
    """The view with `departing` nodes marked for deletion: no candidates, no destinations, their pods moving."""
    if not departing:
        return view
    gone = set(departing)
    nodes = {n.name: replace(n, marked_for_deletion=True) for n in view.nodes if n.name in gone}
    if not nodes:
        return view
    return replace(
        view,
        nodes=[nodes.get(n.name, n) for n in view.nodes],
        claimed=[replace(c, node=nodes[c.name]) if c.name in nodes else c for c in view.claimed],
    )


def simulate(candidates: Sequence[Candidate], view: ClusterView, *, include_blocked: bool = False) -> SchedulingResult:
    """Schedule the candidates' movable pods (and pending pods) on the cluster without the candidates; with
    `include_blocked` (repair's IncludeBlockedCandidatePods), their do-not-disrupt and PDB-held pods too."""
    removed = {c.name for c in candidates}
    nodes = [n for n in view.nodes if n.name not in removed]
    moving = [
        p
        for c in candidates
        for p in c.pods
        if include_blocked or (not pod_blocks(p, view.now) and not _fully_protected(p, view.pdbs, view.now))
    ]
    # As Karpenter's SimulateScheduling, which gets every pod's volume topology as provisioning does.
    pods = [*moving, *departing_pods(view, removed), *view.pending]
    if view.volume_requirements:
        volumes = view.volume_requirements
        pods = [replace(p, volume_requirements=volumes[p.uid]) if p.uid in volumes else p for p in pods]
    if view.default_spread:  # NewScheduler injects the defaults for the simulation too (provisioner.go:336)
        spread = view.default_spread
        pods = [replace(p, spread=spread[p.uid]) if p.uid in spread else p for p in pods]
    request = SchedulingInput(
        pods=pods,
        pools=view.pools,
        nodes=nodes,
        daemonsets=view.daemonsets,
        namespace_labels=view.namespace_labels,
        device_classes=view.device_classes,
        node_devices=view.node_devices,
        preference_policy=view.preference_policy,
        min_values_policy=view.min_values_policy,
        reserved_capacity=view.reserved_capacity,
    )
    return solve(request)


def _fully_protected(pod: Pod, pdbs: Sequence[DisruptionBudgetPolicy], now: float) -> bool:
    """Karpenter's isFullyBlocked (pdb.go:86-130): a pod the drain evicts is kept where it is by two PDBs (the
    eviction API refuses such a pod whatever they allow), or by one that allows no eviction ever, unless that one
    always lets unhealthy pods go and this one is not Ready."""
    if not pdbs or not evictable(pod, now):
        return False
    covering = [pdb for pdb in pdbs if pdb.covers(pod)]
    return len(covering) > 1 or any(pdb.fully_blocking and not pdb.lets_go(pod) for pdb in covering)


def simulation_problems(result: SchedulingResult, candidates: Sequence[Candidate], view: ClusterView) -> list[str]:
    """Why removing the candidates would strand pods: one fails to schedule, or it would land on a node that is
    not initialized yet (Karpenter will not count on capacity that may never come; a deleting node's pod may, as the
    node it lands on is likely an earlier command's replacement). Said in Karpenter's words
    (NonPendingPodSchedulingErrors), pods of nodes being deleted among them."""
    moving = {p.uid for c in candidates for p in c.pods}
    leaving = {p.uid for p in departing_pods(view, {c.name for c in candidates})}
    errors = [(f.pod.key, f.message) for uid, f in result.failures.items() if uid in moving or uid in leaving]
    uninitialized = {n.name: n for n in view.nodes if not n.initialized}
    claims = {c.name: c.nodeclaim for c in view.claimed}
    for name, pods in sorted(result.placements.items()):
        if name not in uninitialized:
            continue
        claim = uninitialized[name].nodeclaim  # a NodeClaim no Node stands for yet is named alone, as Karpenter does
        where = state_node_name(claim, None) if claim else state_node_name(claims.get(name), name)
        errors += [(p.key, f"would schedule against uninitialized {where}") for p in pods if p.uid in moving]
    if not errors:
        return []
    said = "".join(f"{key} => {error} " for key, error in errors[:MAX_SCHEDULING_ERRORS])
    if len(errors) >= MAX_SCHEDULING_ERRORS:
        said += f" and {len(errors) - MAX_SCHEDULING_ERRORS} other(s)"
    return [f"Not all pods would schedule, {said}"]


# How many pods' scheduling errors an Unconsolidatable event names (Karpenter's MaxErrors).
MAX_SCHEDULING_ERRORS = 5


def worst_launch_price(
    instance_type: InstanceType,
    zone: Requirement | None,
    capacity: Requirement | None,
    reservation: Requirement | None = None,
) -> float | None:
    """The most expensive compatible launchable offering in the first capacity tier that has one (reserved, spot,
    on-demand). Launchable, as RemoveInstanceTypeOptionsByPriceAndMinValues prices it (scheduling/nodeclaim.go:470): a
    full reservation is available at a near-zero price, but the node would launch at spot or on-demand price."""
    for tier in CAPACITY_TIERS:
        if capacity is not None and not capacity.has(tier):
            continue
        prices = [
            o.price
            for o in instance_type.offerings
            if o.launchable and o.capacity_type == tier and o.compatible(zone, None, reservation)
        ]
        if prices:
            return max(prices)
    return None


def compute(
    candidates: Sequence[Candidate],
    view: ClusterView,
    method: str,
    reason: str,
    result: SchedulingResult | None = None,
) -> Command | list[str]:
    """A delete or replace command for removing all `candidates`, or the reasons none makes sense (`result`: their
    simulation, when it has been run already)."""
    if result is None:
        result = simulate(candidates, view)
    problems = simulation_problems(result, candidates, view)
    if problems:
        return problems
    where = destinations(result, candidates)
    if not result.new_nodeclaims:
        return Command(reason, tuple(candidates), (), method, destinations=where)
    if len(result.new_nodeclaims) > 1:
        return [f"Can't remove without creating {len(result.new_nodeclaims)} candidates"]
    replacement = _cheaper_replacement(result.new_nodeclaims[0], candidates, view, single=method == "single")
    if isinstance(replacement, list):
        return replacement
    over = launch_limit_problems([replacement], view)
    if over:
        return over
    return Command(reason, tuple(candidates), (replacement,), method, destinations=where)


def destinations(result: SchedulingResult, candidates: Sequence[Candidate]) -> dict[str, int]:
    """Where the candidates' pods land in the simulation: each existing node's name, or "replacement-N" for the
    N-th new NodeClaim, with how many of them go there."""
    moving = {p.uid for c in candidates for p in c.pods}
    where: dict[str, int] = {}
    for node, pods in result.placements.items():
        count = sum(1 for p in pods if p.uid in moving)
        if count:
            where[node] = count
    for index, plan in enumerate(result.new_nodeclaims):
        count = sum(1 for p in plan.pods if p.uid in moving)
        if count:
            where[f"replacement-{index}"] = count
    return where


def launch_limit_problems(replacements: Sequence[NodeClaimPlan], view: ClusterView) -> list[str]:
    """Karpenter creates each replacement through Provisioner.Create, which refuses it when its NodePool's usage
    already exceeds a limit (provisioner.go:485, Limits.ExceededBy): the usage of the pool's nodes not marked for
    deletion, the nodes being replaced among them (they are marked only after their replacements launch, queue.go:
    414-425), and of the replacements created before it. The launch itself may take the pool past a limit while the
    nodes it replaces still run: the simulation held its instance types to what the limits leave without the
    candidates (helpers.go:70-72, scheduler.go:738-745), as `simulate` does."""
    added: dict[str, Resources] = {}
    problems = []
    limits = {offer.nodepool.name: offer.nodepool.limits for offer in view.pools}
    for plan in replacements:
        pool_limits = limits.get(plan.nodepool)
        if not pool_limits or not plan.options:
            continue
        used = add(pool_usage(plan.nodepool, view.nodes), added.get(plan.nodepool, {}))
        over = [
            f"{name} {format_quantity(used.get(name, 0), name)} of its limit {format_quantity(limit, name)}"
            for name, limit in sorted(pool_limits.items())
            if used.get(name, 0) > limit
        ]
        if over:
            problems.append(
                f'NodePool "{plan.nodepool}" is already over its limits ({", ".join(over)}): the replacement cannot '
                "be created"
            )
        added[plan.nodepool] = add(added.get(plan.nodepool, {}), plan.cheapest.instance_type.capacity, {"nodes": MILLI})
    return problems


def _cheaper_replacement(
    plan: NodeClaimPlan, candidates: Sequence[Candidate], view: ClusterView, *, single: bool
) -> NodeClaimPlan | list[str]:
    """Karpenter's computeConsolidation after the simulation, in its order: the options ordered by price, then
    spot-to-spot's own path, or the price filter under the NodeClaim's requirements and the pin to spot."""
    current = sum(c.price for c in candidates)
    # Ordered before anything truncates them or counts how many meet minValues (consolidation.go:262).
    plan = replace(plan, options=tuple(sorted(plan.options, key=lambda o: o.price)))
    capacity = plan.requirements.get(wk.CAPACITY_TYPE)
    all_spot = all(c.claimed.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)
    if all_spot and _allows(capacity, wk.CAPACITY_TYPE_SPOT):
        return _spot_to_spot(plan, current, view, single=single)
    # Priced under the NodeClaim's own capacity types, [spot, on-demand] most often: a type offered only on-demand
    # stays an option at its on-demand price (consolidation.go:278), so multi-node consolidation still sees a
    # candidate's own type among them and turns a merge into that type into a plain delete.
    filtered = _cheaper_than(plan, current)
    if isinstance(filtered, list):
        return filtered
    if _allows(capacity, wk.CAPACITY_TYPE_SPOT) and _allows(capacity, wk.CAPACITY_TYPE_ON_DEMAND):
        # Priced as if spot launches, so only spot may: short of spot capacity the launch fails and the node stays,
        # rather than an on-demand node pricier than the one it replaces coming up (consolidation.go:298-301).
        filtered = _pinned_to_spot(filtered)
        # Of equally priced options, those spot can launch first: EstimatedSavings prices the first option under the
        # pinned requirements and takes an on-demand-only one as free (types.go:421-429), and Go's unstable sort
        # leaves the order of ties to chance.
        spot = filtered.requirements
        filtered = replace(
            filtered,
            options=tuple(
                sorted(filtered.options, key=lambda o: (o.price, not o.instance_type.compatible_offerings(spot)))
            ),
        )
    return filtered


def _spot_to_spot(plan: NodeClaimPlan, current: float, view: ClusterView, *, single: bool) -> NodeClaimPlan | list[str]:
    """Karpenter's computeSpotToSpotConsolidation: spot nodes replaced by spot only, and a single node only from
    among at least 15 cheaper types, launched from the cheapest of them so the new node is not consolidated again."""
    if not view.spot_to_spot:
        return ["SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"]
    # The requirements say spot from here on, and only types with an available spot offering are options.
    plan = _pinned_to_spot(plan)
    spot = tuple(o for o in plan.options if o.instance_type.compatible_offerings(plan.requirements))
    filtered = _cheaper_than(replace(plan, options=spot), current)
    if isinstance(filtered, list) or not single:
        return filtered
    options = filtered.options
    if len(options) < SPOT_TO_SPOT_MIN_OPTIONS:
        return [
            f"SpotToSpotConsolidation requires {SPOT_TO_SPOT_MIN_OPTIONS} cheaper instance type options than the "
            f"current candidate to consolidate, got {len(options)}"
        ]
    # minValues may need more types than 15: launch from as many as it takes (consolidation.go:326-331).
    needed, _ = min_values_shortfall(options, filtered.requirements)
    return _narrowed(filtered, options[: max(SPOT_TO_SPOT_MIN_OPTIONS, needed)])


def _cheaper_than(plan: NodeClaimPlan, ceiling: float) -> NodeClaimPlan | list[str]:
    """Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues: the options whose worst launch price under the
    NodeClaim's requirements is below `ceiling`, or why none will do (minValues no longer met, or none cheaper)."""
    zone, capacity, reservation = _offering_requirements(plan)
    options = tuple(
        o
        for o in plan.options
        if (worst := worst_launch_price(o.instance_type, zone, capacity, reservation)) is not None and worst < ceiling
    )
    _, short = min_values_shortfall(options, plan.requirements)
    if short:
        return [f"Filtering by price: {min_values_unmet(short)}"]
    if not options:
        return ["Can't replace with a cheaper node"]
    return _narrowed(plan, options)


def min_values_shortfall(options: Sequence[InstanceTypeOption], requirements: Requirements) -> tuple[int, list[str]]:
    """Karpenter's SatisfiesMinValues over `options` in their order: how many of the first options it takes to meet
    every minValues (all of them when they cannot), and the keys they leave short."""
    floors = [r for r in requirements.values() if r.min_values is not None]
    if not floors:
        return 0, []
    seen: dict[str, set[str]] = {r.key: set() for r in floors}
    short = [r.key for r in floors if r.min_values]
    for count, option in enumerate(options, start=1):
        offered = option.instance_type.requirements
        for floor in floors:
            if floor.key in offered:
                seen[floor.key].update(v for v in offered[floor.key].values if floor.has(v))
        short = [r.key for r in floors if len(seen[r.key]) < (r.min_values or 0)]
        if not short:
            return count, []
    return len(options), sorted(short)


def _allows(requirement: Requirement | None, value: str) -> bool:
    # A key the NodeClaim does not constrain allows every value, as Karpenter's Requirements.Get(key).Has does.
    return requirement is None or requirement.has(value)


def _offering_requirements(plan: NodeClaimPlan) -> tuple[Requirement | None, Requirement | None, Requirement | None]:
    requirements = plan.requirements
    return requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE), requirements.get(wk.RESERVATION_ID)


def _pinned_to_spot(plan: NodeClaimPlan) -> NodeClaimPlan:
    """The plan with its capacity type narrowed to spot (Requirements.Add intersects), its options left as they are."""
    return replace(
        plan, requirements=plan.requirements.merged([Requirement.in_values(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_SPOT)])
    )


def _narrowed(plan: NodeClaimPlan, options: Sequence[InstanceTypeOption]) -> NodeClaimPlan:
    """The plan launching from `options` only: the NodeClaim it creates names just those types."""
    names = frozenset(o.instance_type.name for o in options)
    return replace(
        plan, options=tuple(options), requirements=plan.requirements.merged([Requirement(wk.INSTANCE_TYPE, names)])
    )


def without_same_types(command: Command) -> Command | None:
    """Karpenter's filterOutSameInstanceType for multi-node consolidation: merging N nodes into one of a type they
    already run is just deleting the others, so the replacement must cost less than the cheapest candidate running
    a type it offers (priced under its requirements, pinned to spot or not), and still meet minValues; None when
    nothing is left."""
    if command.decision != "replace":
        return command
    plan = command.replacements[0]
    offered = {o.instance_type.name for o in plan.options}
    ceiling = min((c.price for c in command.candidates if c.claimed.instance_type in offered), default=math.inf)
    # Even with no type in common, an option with no offering under the requirements goes: its worst launch price
    # is MaxFloat64 upstream, never below the ceiling.
    filtered = _cheaper_than(plan, ceiling)
    if isinstance(filtered, list):
        return None
    return replace(command, replacements=(filtered,))
