"""Karpenter's scheduling simulation: place each pending pod on an existing node, a planned NodeClaim or a new one.

The loop keeps Karpenter's shape: pods are tried largest first; a pod that fails is retried at the back of the
queue, because it may depend on a later pod (affinity), until a whole cycle makes no progress. Each attempt
relaxes the pod's preferences in a fixed order until it fits or nothing is left to relax.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass
from provisioner.nodes import DaemonSet, Node
from provisioner.objects import NodePool
from provisioner.options import RESPECT, STRICT
from provisioner.pods import Pod, validation_errors
from provisioner.quantity import Resources, format_resources
from provisioner.scheduling import finalize
from provisioner.scheduling import limits as pool_limits
from provisioner.scheduling import results as r
from provisioner.scheduling.existing import CLASS_VERDICTS, ExistingNode, never_fits
from provisioner.scheduling.improve import Simulation, improve
from provisioner.scheduling.improve import enabled as improve_enabled
from provisioner.scheduling.nodeclaim import PERMANENT, UNDEFINED_KEY, NodeClaimTemplate, PlannedNodeClaim, Unfit
from provisioner.scheduling.poddata import PodData, PodState
from provisioner.scheduling.reservations import RESERVATION_FALLBACK, ReservationManager
from provisioner.scheduling.results import NodeClaimPlan, PodFailure, Reason, SchedulingResult
from provisioner.scheduling.topology import Topology, TopologyError
from provisioner.scheduling.topologydomains import DomainGroup
from provisioner.scheduling.topologygroup import TopologyGroup
from provisioner.taints import PREFER_NO_SCHEDULE
from provisioner.volumes import node_usage

MAX_INSTANCE_TYPES = 600


@dataclass(frozen=True)
class PoolOffer:
    """A NodePool and the instance types its node class offers (from its catalog)."""

    nodepool: NodePool
    instance_types: Sequence[InstanceType]


@dataclass(frozen=True)
class SchedulingInput:
    pods: Sequence[Pod]
    pools: Sequence[PoolOffer]
    nodes: Sequence[Node] = ()
    daemonsets: Sequence[DaemonSet] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    preference_policy: str = RESPECT
    min_values_policy: str = STRICT
    max_instance_types: int = MAX_INSTANCE_TYPES
    device_classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    node_devices: Mapping[str, Sequence[Device]] = field(default_factory=dict)  # free devices per existing node
    # Karpenter (v1.4+) stops a provisioning simulation after a minute and launches what it planned so far; the pods
    # it never reached stay pending for the next batch. None: no cap (disruption's simulations have their own).
    time_limit: float | None = None
    clock: Callable[[], float] = time.monotonic
    # Karpenter's ReservedCapacity gate and ReservedOfferingMode (provisioning is Strict, disruption falls back).
    reserved_capacity: bool = True
    reservation_mode: str = RESERVATION_FALLBACK


def queue_order(pod: Pod) -> tuple[int, int, float, str]:
    """Karpenter's queue: CPU descending, memory descending, older first, then UID."""
    return (-pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), pod.created, pod.uid or pod.key)


def solve(request: SchedulingInput) -> SchedulingResult:
    return Scheduler(request).solve()


class _PlannedOrder:
    """Planned NodeClaims by pod count ascending (Karpenter tries the emptiest first), then by when they got there.

    The scheduler keeps one order over all planned NodeClaims and one per pinned value of each topology key, all
    sharing the claims' stamps, so merging a few of them lazily yields exactly the global order.
    """

    def __init__(self) -> None:
        self._buckets: dict[int, dict[int, PlannedNodeClaim]] = {}
        self._counts: list[int] = []
        self._where: dict[int, int] = {}  # claim seq -> bucket

    def __len__(self) -> int:
        return len(self._where)

    def add(self, claim: PlannedNodeClaim) -> None:
        count = len(claim.pods)
        if count not in self._buckets:
            self._buckets[count] = {}
            bisect.insort(self._counts, count)
        self._buckets[count][claim.seq] = claim
        self._where[claim.seq] = count

    def remove(self, claim: PlannedNodeClaim) -> None:
        count = self._where.pop(claim.seq)
        bucket = self._buckets[count]
        del bucket[claim.seq]
        if not bucket:
            del self._buckets[count]
            self._counts.pop(bisect.bisect_left(self._counts, count))

    def __iter__(self) -> Iterator[PlannedNodeClaim]:
        for count in self._counts:
            yield from self._buckets[count].values()


def _order_key(claim: PlannedNodeClaim) -> tuple[int, int]:
    return (len(claim.pods), claim.stamp)


class Scheduler:
    def __init__(self, request: SchedulingInput) -> None:
        self.request = request
        self.started = request.clock()
        self.result = SchedulingResult()
        self.templates: list[NodeClaimTemplate] = []
        for offer in sorted(request.pools, key=lambda o: o.nodepool.ordering_key(), reverse=True):
            template = _template(offer, request.daemonsets, request.min_values_policy)
            if len(template.index) == 0:
                self.result.skipped_nodepools[offer.nodepool.name] = _why_no_types(offer, template)
            self.templates.append(template)
        self.reservations = (
            ReservationManager(offer.instance_types for offer in request.pools) if request.reserved_capacity else None
        )
        self.remaining: dict[str, Resources] = {}
        self.limits_version: dict[str, int] = {}
        self._limits_cache: dict[tuple[str, int], tuple[int, str | None]] = {}
        for template in self.templates:
            limits = template.nodepool.limits
            if limits:
                self.remaining[template.name] = pool_limits.limited_subtract(
                    limits, pool_limits.pool_usage(template.name, request.nodes)
                )
            self.limits_version[template.name] = 0
        self.limits_before = {name: dict(remaining) for name, remaining in self.remaining.items()}
        schedulable = [n for n in request.nodes if not n.marked_for_deletion and not n.unschedulable]
        # Existing nodes in the order pods try them; a node's place in it (its seq) names it in `dead` and `live`.
        self.nodes = sorted(schedulable, key=lambda n: (not n.initialized, n.name))
        # seq -> the node as a place for pods, built when a pod first gets that far: a consolidation simulation
        # moves a dozen pods among 1,818 nodes, and building every node for each of a pass's simulations was half
        # of each simulation at 20,000 pods.
        self.places: dict[int, ExistingNode] = {}
        self._seqs_by_hostname: dict[str, list[int]] | None = None
        self.deleting = {n.name for n in request.nodes if n.marked_for_deletion}
        # Existing pods' anti-affinity keeps matching pods out of domains too, so their keys need every domain.
        guards = [p for n in request.nodes for p in n.anti_affinity_pods]
        universe = _universe(self.templates, [*request.pods, *guards])
        moving = frozenset(p.id for p in request.pods if p.node_name)
        self.topology = Topology(universe, request.nodes, request.namespace_labels, moving)
        self.planned = _PlannedOrder()
        self.planned_by_hostname: dict[str, PlannedNodeClaim] = {}
        # (namespace, ResourceClaim) -> the planned NodeClaim whose template devices it was allocated on this round
        self.claim_homes: dict[tuple[str, str], PlannedNodeClaim] = {}
        # topology key -> pinned value (None: not pinned to one value) -> planned NodeClaims in global order
        self.pinned: dict[str, dict[str | None, _PlannedOrder]] = {key: {} for key in universe}
        self.pins: dict[int, dict[str, str | None]] = {}
        self.stamps = itertools.count()
        self.seq = itertools.count(1)
        self.tolerate_prefer_no_schedule = any(
            t.effect == PREFER_NO_SCHEDULE for tmpl in self.templates for t in tmpl.nodepool.taints
        )
        # pod class -> places (("e", seq) existing, ("n", seq) planned) known never to fit pods of that class
        self.dead: dict[tuple[object, ...], set[tuple[str, int]]] = {}
        self.fresh_dead: dict[tuple[object, ...], Unfit] = {}
        # pod class -> existing nodes not (yet) dead for it, in order: the places only grow dead, so each pod of a
        # class need not walk past every full node again (a consolidation probe moves hundreds of pods of one class)
        self.live: dict[tuple[object, ...], Sequence[int]] = {}
        self._fresh: dict[str, tuple[PodState, PodData]] = {}

    # The loop -----------------------------------------------------------------------------------------------------

    def solve(self) -> SchedulingResult:
        states: dict[str, PodState] = {}
        queue: list[Pod] = []
        for pod in sorted(self.request.pods, key=queue_order):
            errors = validation_errors(pod)
            if errors:
                self.result.failures[pod.id] = PodFailure(pod, tuple(Reason("", r.VALIDATION, e) for e in errors))
                continue
            states[pod.id] = PodState.of(pod, self.request.preference_policy)
            queue.append(pod)
        self.result.pods_considered = list(queue)
        # Register every pod's topology groups up front; the first attempt reuses this unrelaxed state.
        for pod_id, state in states.items():
            data = state.data()
            self.topology.update(state, data)
            self._fresh[pod_id] = (state, data)
        if not self.templates and not self.nodes:
            for pod in queue:
                self.result.failures[pod.id] = PodFailure(
                    pod, (Reason("", r.NO_NODEPOOL, "no NodePool is ready to provision nodes"),)
                )
            return self.result

        # Retry until a full pass over the queue places nothing: later pods can unblock earlier ones.
        last_pushed: dict[str, int] = {}
        head = 0
        while head < len(queue):
            pod = queue[head]
            if last_pushed.get(pod.id) == len(queue) - head:
                break
            if self._out_of_time():
                # What was planned so far is launched; the pods not reached keep no verdict and wait for the next
                # batch, as Karpenter's Solve returns its results with the context's DeadlineExceeded.
                self.result.timed_out = True
                break
            head += 1
            failure = self._try_schedule(pod)
            if failure is None:
                self.result.failures.pop(pod.id, None)
                continue
            self.result.failures[pod.id] = failure
            queue.append(pod)
            last_pushed[pod.id] = len(queue) - head
        self._finalize()
        return self.result

    def _out_of_time(self) -> bool:
        limit = self.request.time_limit
        return limit is not None and self.request.clock() - self.started >= limit

    def _try_schedule(self, pod: Pod) -> PodFailure | None:
        fresh = self._fresh.pop(pod.id, None)
        if fresh is not None:
            state, data = fresh
        else:
            # A retry starts unrelaxed again: a pod placed since may now satisfy a preference.
            state = PodState.of(pod, self.request.preference_policy)
            data = state.data()
            self.topology.update(state, data)
        while True:
            reasons = self._add(state, data)
            if reasons is None:
                if state.relaxations:
                    self.result.relaxations[pod.id] = list(state.relaxations)
                return None
            if any(reason.kind == r.RESERVED for reason in reasons):
                # Reserved capacity may free up later in this simulation or the next: relaxing would give it up.
                return PodFailure(pod, tuple(reasons))
            relaxed = state.relax(self.tolerate_prefer_no_schedule)
            if relaxed is None:
                return PodFailure(pod, tuple(reasons))
            state.relaxations.append(relaxed)
            data = state.data()
            self.topology.update(state, data)

    def _add(self, state: PodState, data: PodData) -> list[Reason] | None:
        pod = state.pod
        groups = self.topology.matching(pod)
        class_key = data.class_key()
        dead = self.dead.setdefault(class_key, set())
        hostnames = None
        narrowed: tuple[str, set[str]] | None = None
        if groups:
            try:
                allowed = self.topology.allowed_domains(pod, data, groups)
            except TopologyError as error:
                return [Reason(t.name, r.TOPOLOGY, error.reason) for t in self.templates] or [
                    Reason("", r.TOPOLOGY, error.reason)
                ]
            hostnames = self.topology.hostname_candidates(groups, pod)
            narrowed = self._narrowest(allowed)

        home = self._claim_home(pod)
        if home is not None:
            return self._add_at_home(state, data, groups, home)

        for seq in self._existing_candidates(hostnames, class_key, dead):
            if ("e", seq) in dead:
                continue
            existing = self.nodes[seq]
            if existing.under_consolidate_after and pod.node_name and pod.node_name not in self.deleting:
                continue  # a pod moving off a candidate may not land on a node inside its consolidateAfter window
            node = self.places.get(seq)
            if (node is None or not node.pods) and class_key in never_fits(existing, self.request.daemonsets):
                # An earlier simulation over the same node found the class cannot go there: single-node
                # consolidation solves once per candidate, and would otherwise try every pod on every full node.
                dead.add(("e", seq))
                continue
            if node is None:
                devices = self.request.node_devices.get(existing.name, ())
                node = self.places[seq] = ExistingNode(
                    seq, existing, self.request.daemonsets, devices, self._volume_limits
                )
            try:
                requirements = node.fit(state, data, self.topology, groups, self.request.device_classes)
            except Unfit as unfit:
                if unfit.kind in PERMANENT:
                    dead.add(("e", node.seq))
                    if not node.pods and unfit.kind in CLASS_VERDICTS:
                        node.never.add(class_key)
                continue
            node.commit(state, data, requirements, self.topology, self.request.device_classes)
            self.result.placements.setdefault(node.name, []).append(pod)
            return None

        for claim in self._planned_candidates(hostnames, narrowed):
            if ("n", claim.seq) in dead:
                continue
            try:
                fit = claim.fit(
                    state, data, self.topology, groups, self.request.min_values_policy, self.request.device_classes
                )
            except Unfit as unfit:
                if unfit.kind in PERMANENT:
                    dead.add(("n", claim.seq))
                continue
            self._unindex(claim)
            claim.commit(state, data, fit, self.topology)
            self._index(claim)
            self._home_claims(pod, claim)
            return None

        return self._new_nodeclaim(state, data, groups, class_key)

    def _volume_limits(self, node: Node) -> Mapping[str, int]:
        """A node's volume attachment limits: its CSINode's drivers, and for those it has not published (an in-flight
        node's CSINode comes after it registers) its instance type's limits, the type found by name among its
        NodePool's (instanceTypeForNode, dra.go:130; NewExistingNode, existingnode.go:48)."""
        name, pool = node.labels.get(wk.INSTANCE_TYPE, ""), node.labels.get(wk.NODEPOOL, "")
        fallback = None
        if name and pool:
            offer = next((o for o in self.request.pools if o.nodepool.name == pool), None)
            it = next((t for t in offer.instance_types if t.name == name), None) if offer is not None else None
            fallback = it.volume_attachment_limits if it is not None else None
        return node_usage(node.csi_drivers, fallback).limits

    def _claim_home(self, pod: Pod) -> PlannedNodeClaim | None:
        """The planned NodeClaim a ResourceClaim of the pod was allocated on this round, from its instance types'
        declared devices: Karpenter's allocator keeps such a claim on that NodeClaim (allocator.go:439-445,
        ClassifyClaims), so every later pod sharing it goes there or nowhere."""
        if not self.claim_homes:
            return None
        for request in pod.device_requests:
            home = self.claim_homes.get((pod.namespace, request.claim))
            if home is not None:
                return home
        return None

    def _add_at_home(
        self, state: PodState, data: PodData, groups: list[TopologyGroup], home: PlannedNodeClaim
    ) -> list[Reason] | None:
        try:
            fit = home.fit(
                state, data, self.topology, groups, self.request.min_values_policy, self.request.device_classes
            )
        except Unfit:
            # Every other node fails ClassifyClaims: existing ones and a new NodeClaim alike say the claim is bound.
            pod = state.pod
            claim = next(q.claim for q in pod.device_requests if self.claim_homes.get((pod.namespace, q.claim)))
            message = f"claim is bound to a different in-flight NodeClaim (ResourceClaim={pod.namespace}/{claim})"
            return [Reason(t.name, r.DEVICES, message) for t in self.templates]
        self._unindex(home)
        home.commit(state, data, fit, self.topology)
        self._index(home)
        return None

    def _home_claims(self, pod: Pod, claim: PlannedNodeClaim) -> None:
        for request in pod.device_requests:
            self.claim_homes.setdefault((pod.namespace, request.claim), claim)

    def _within_limits(self, template: NodeClaimTemplate, remaining: Resources) -> tuple[int, str | None]:
        key = (template.name, self.limits_version[template.name])
        cached = self._limits_cache.get(key)
        if cached is None:
            cached = self._limits_cache[key] = pool_limits.within_limits(template, remaining)
        return cached

    def _existing_candidates(
        self, hostnames: set[str] | None, class_key: tuple[object, ...], dead: set[tuple[str, int]]
    ) -> Sequence[int]:
        """The seqs of the existing nodes a pod of the class may still go to, in order."""
        if hostnames is None:
            known = self.live.get(class_key)
            live = [s for s in known if ("e", s) not in dead] if known is not None else range(len(self.nodes))
            self.live[class_key] = live
            return live
        if not self.nodes:
            return ()  # a provisioning batch without nodes: `hostnames` may be thousands of planned NodeClaims
        if self._seqs_by_hostname is None:
            self._seqs_by_hostname = {}
            for seq, node in enumerate(self.nodes):
                self._seqs_by_hostname.setdefault(node.hostname, []).append(seq)
        if len(hostnames) >= len(self._seqs_by_hostname):
            return sorted(seq for host, seqs in self._seqs_by_hostname.items() if host in hostnames for seq in seqs)
        return sorted(seq for h in hostnames for seq in self._seqs_by_hostname.get(h, ()))

    def _narrowest(self, allowed: dict[str, set[str]]) -> tuple[str, set[str]] | None:
        """The topology key whose allowed domains rule out the largest share of its domains, if any."""
        best: tuple[str, set[str]] | None = None
        best_share = 1.0
        for key, domains in allowed.items():
            if key not in self.pinned:
                continue
            share = len(domains) / max(self.topology.universe_size(key), 1)
            if share < best_share:
                best, best_share = (key, domains), share
        return best

    def _planned_candidates(
        self, hostnames: set[str] | None, narrowed: tuple[str, set[str]] | None
    ) -> Iterator[PlannedNodeClaim]:
        if hostnames is not None:
            if len(hostnames) * 8 < len(self.planned):
                # A few allowed hostnames: sort just those.
                claims = [self.planned_by_hostname[h] for h in hostnames if h in self.planned_by_hostname]
                yield from sorted(claims, key=_order_key)
                return
            # Many: walk the full order and skip the rest.
            for claim in self.planned:
                if claim.hostname in hostnames:
                    yield claim
            return
        if narrowed is not None:
            key, domains = narrowed
            by_value = self.pinned[key]
            sources = [by_value[v] for v in (*sorted(domains), None) if v in by_value]
            yield from heapq.merge(*sources, key=_order_key)
            return
        yield from self.planned

    def _unindex(self, claim: PlannedNodeClaim) -> None:
        """Take a planned NodeClaim out of every order before it changes (pod count, pinned domains)."""
        self.planned.remove(claim)
        for key, value in self.pins.pop(claim.seq).items():
            self.pinned[key][value].remove(claim)

    def _index(self, claim: PlannedNodeClaim) -> None:
        """Put a planned NodeClaim into every order, behind the claims already at its pod count."""
        claim.stamp = next(self.stamps)
        self.planned.add(claim)
        pins: dict[str, str | None] = {}
        for key, by_value in self.pinned.items():
            requirement = claim.requirements.get(key)
            single = requirement is not None and requirement.operator == "In" and len(requirement.values) == 1
            value = next(iter(requirement.values)) if single and requirement is not None else None
            by_value.setdefault(value, _PlannedOrder()).add(claim)
            pins[key] = value
        self.pins[claim.seq] = pins

    def _new_nodeclaim(
        self, state: PodState, data: PodData, groups: list[TopologyGroup], class_key: tuple[object, ...]
    ) -> list[Reason] | None:
        reasons = []
        for template in self.templates:
            name = template.name
            if len(template.index) == 0:
                reasons.append(Reason(name, r.NO_INSTANCE_TYPES, self.result.skipped_nodepools[name]))
                continue
            mask = template.index.all
            remaining = self.remaining.get(name)
            if remaining is not None:
                mask, limit_reason = self._within_limits(template, remaining)
                if limit_reason is not None:
                    # Raising the limits is the fix only if nothing else would stop the pod: a taint or a label
                    # the pool cannot offer blocks it first, and the dashboard's "nearest fix" follows the reason.
                    blocked = template.never_fits(data)
                    if blocked is not None:
                        reasons.append(Reason(name, blocked.kind, blocked.message, blocked.details))
                    else:
                        reasons.append(Reason(name, r.LIMITS, limit_reason, {"remaining": format_resources(remaining)}))
                    continue
            fresh_key = (class_key, name, self.limits_version[name])
            known = self.fresh_dead.get(fresh_key)
            if known is not None:
                reasons.append(Reason(name, known.kind, known.message, known.details))
                continue
            claim = PlannedNodeClaim(
                next(self.seq), template, mask, self.topology, self.reservations, self.request.reservation_mode
            )
            try:
                fit = claim.fit(
                    state, data, self.topology, groups, self.request.min_values_policy, self.request.device_classes
                )
            except Unfit as unfit:
                if unfit.kind == r.RESOURCES and remaining is not None and mask != template.index.all:
                    unfit = pool_limits.blamed_on_limits(template, data, remaining, unfit)
                if unfit.kind in PERMANENT:
                    self.fresh_dead[fresh_key] = unfit
                reasons.append(Reason(name, unfit.kind, unfit.message, unfit.details))
                if unfit.kind == r.RESERVED:
                    break  # Karpenter never falls back to a lower-weight NodePool past reserved capacity
                continue
            claim.commit(state, data, fit, self.topology)
            self._index(claim)
            self.planned_by_hostname[claim.hostname] = claim
            self._home_claims(state.pod, claim)
            if remaining is not None:
                # Pessimistic: the NodeClaim may launch as its largest remaining option.
                self.remaining[name] = pool_limits.limited_subtract(remaining, template.index.max_capacity(claim.mask))
                self.limits_version[name] += 1
            return None
        if not self.templates:
            reasons.append(Reason("", r.NO_NODEPOOL, "no NodePool is ready to provision nodes"))
        return _not_selected(reasons, data)

    # After the loop ---------------------------------------------------------------------------------------------

    def _finalize(self) -> None:
        for _, node in sorted(self.places.items()):
            if node.pods:
                self.result.placements[node.name] = list(node.pods)
        claims = sorted(self.planned, key=lambda c: c.seq)
        if self._improvable():
            claims = improve(
                claims,
                Simulation(
                    pod_state=self._placed_state,
                    independent=self.topology.independent,
                    remaining=self.limits_before,
                    seq=self.seq,
                    plan=self._plan,
                    min_values_policy=self.request.min_values_policy,
                    device_classes=self.request.device_classes,
                ),
            )
        for claim in claims:
            plan = self._plan(claim)
            if isinstance(plan, NodeClaimPlan):
                self.result.new_nodeclaims.append(plan)
            else:
                for pod in claim.pods:
                    self.result.failures[pod.id] = PodFailure(pod, (plan,))

    def _improvable(self) -> bool:
        """A NodePool asked for plan improvement, and this is a provisioning batch: a disruption simulation moves
        running pods and accepts at most one replacement NodeClaim, priced against the candidates, which a re-pack
        into several cheaper nodes would turn from a saving into a refusal."""
        return (
            any(improve_enabled(t.nodepool) for t in self.templates)
            and not any(p.node_name for p in self.request.pods)
            # A re-pack would give up the reservations the planned NodeClaims hold.
            and not any(t.index.reserved for t in self.templates)
        )

    def _placed_state(self, pod: Pod) -> tuple[PodState, PodData]:
        """The pod as it was placed: relaxation is deterministic, so replaying as many steps gives the same state
        (recomputed rather than kept for every pod, which would cost the whole simulation garbage-collector time)."""
        state = PodState.of(pod, self.request.preference_policy)
        for _ in self.result.relaxations.get(pod.id, ()):
            state.relax(self.tolerate_prefer_no_schedule)
        return state, state.data()

    def _plan(self, claim: PlannedNodeClaim) -> NodeClaimPlan | Reason:
        return finalize.plan(
            claim,
            max_instance_types=self.request.max_instance_types,
            min_values_policy=self.request.min_values_policy,
        )


def _not_selected(reasons: list[Reason], data: PodData) -> list[Reason]:
    """Karpenter's reasons, with those of the NodePools the pod's own karpenter.sh/nodepool selection leaves out
    marked NOT_SELECTED (whatever stopped the pod there first, a taint say): nothing on them is the fix, and the
    dashboard folds them into one line."""
    selected = data.requirements.get(wk.NODEPOOL)
    if selected is None:
        return reasons
    return [
        Reason(reason.nodepool, r.NOT_SELECTED, reason.message, {"selection": str(selected)})
        if reason.nodepool and not selected.has(reason.nodepool)
        else reason
        for reason in reasons
    ]


def _why_no_types(offer: PoolOffer, template: NodeClaimTemplate) -> str:
    if not offer.instance_types:
        return "the NodePool's node class offers no instance types"
    drifting = sorted({reason for reason in template.excluded.values() if reason.startswith(UNDEFINED_KEY)})
    if drifting:
        # The types the requirements allowed all lack a key the NodePool requires: name it, and say why no node
        # is launched all the same.
        key = drifting[0].removeprefix(UNDEFINED_KEY).split(",", 1)[0]
        return (
            f"no instance type of the NodePool's node class defines {key}, which the NodePool requires: "
            "a node would be Drifted the moment it launched"
        )
    if len(template.excluded) < len(offer.instance_types):
        # Types met the requirements, but too few distinct values for a minValues (MIN_VALUES_POLICY=Strict).
        short = [
            f"{key} has {template.min_values_short[key][0]} distinct values, minValues {template.min_values_short[key][1]}"
            for key in sorted(template.min_values_short)
        ]
        return f"{MIN_VALUES_UNMET}: {', '.join(short)}"
    return "no instance type satisfies the NodePool's requirements"


# How the reason for a NodePool whose minValues no set of its instance types meets begins.
MIN_VALUES_UNMET = "the instance types that meet the NodePool's requirements cannot meet its minValues"


def _template(offer: PoolOffer, daemonsets: Sequence[DaemonSet], min_values: str) -> NodeClaimTemplate:
    """The offer's NodeClaimTemplate for these daemonsets. Single-node consolidation solves once per candidate with
    the same offers, and building the template's type index each time was a tenth of a simulation at 1,819 nodes.
    Kept on the (immutable) offer, as existing nodes keep what they derive; a template is never changed by a solve
    (its type index only caches what it computes)."""
    kept: dict[tuple[int, str], tuple[Sequence[DaemonSet], NodeClaimTemplate]] = offer.__dict__.setdefault(
        "_template", {}
    )
    hit = kept.get((id(daemonsets), min_values))
    if hit is not None and hit[0] is daemonsets:
        return hit[1]
    template = NodeClaimTemplate.build(offer.nodepool, list(offer.instance_types), list(daemonsets), min_values)
    kept.clear()  # one set of daemonsets at a time, as for existing nodes
    kept[(id(daemonsets), min_values)] = (daemonsets, template)
    return template


def _universe(templates: Sequence[NodeClaimTemplate], pods: Sequence[Pod]) -> dict[str, DomainGroup]:
    """Every domain a topology key can take on nodes the NodePools could launch, with the taints of the NodePools
    offering it: a spread under NodeTaintsPolicy=Honor skips domains only untolerated NodePools offer
    (topology.go buildDomainGroups)."""
    keys = {c.topology_key for p in pods for c in p.spread}
    keys |= {
        t.topology_key
        for p in pods
        for t in (*p.affinity, *p.anti_affinity, *p.preferred_affinity, *p.preferred_anti_affinity)
    }
    keys.discard(wk.HOSTNAME)
    universe = {key: DomainGroup() for key in keys}
    for template in templates:
        taints = template.nodepool.taints
        for key in keys:
            domains: set[str] = set()
            pool_requirement = template.requirements.get(key)
            for it in template.index.types:
                type_requirement = it.requirements.get(key)
                if type_requirement is None:
                    continue
                allowed = type_requirement if pool_requirement is None else type_requirement.intersect(pool_requirement)
                domains.update(allowed.values)
            # Karpenter adds a NodePool's In values whether or not an instance type offers them: a zone the pool
            # names and no type has is a domain with no pods, which holds the others' skew (topology.go:128-140).
            if pool_requirement is not None and pool_requirement.operator == "In":
                domains.update(pool_requirement.values)
            for domain in sorted(domains):
                universe[key].insert(domain, taints)
    return universe
