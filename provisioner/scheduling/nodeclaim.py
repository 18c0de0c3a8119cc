"""NodeClaim templates (one per NodePool) and the NodeClaims a simulation plans from them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from provisioner import labels as wk
from provisioner.catalog import InstanceType, Offering
from provisioner.dra.claims import DeviceClass, DeviceRequest, allocate, merged
from provisioner.nodes import DaemonSet
from provisioner.objects import NodePool
from provisioner.options import STRICT
from provisioner.pods import HostPort, Pod
from provisioner.quantity import Resources, add, exceeded, format_resources, maximum
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling import results as r
from provisioner.scheduling.hostports import HostPortUsage
from provisioner.scheduling.poddata import PodData, PodState
from provisioner.scheduling.reservations import (
    ALL_FULL,
    CANNOT_RESERVE,
    FALLING_THROUGH,
    RESERVATION_FALLBACK,
    RESERVATION_STRICT,
    WOULD_REMOVE,
    ReservationManager,
)
from provisioner.scheduling.satisfiable import type_labelled_keys
from provisioner.scheduling.topology import Topology, TopologyError
from provisioner.scheduling.topologygroup import TopologyGroup
from provisioner.scheduling.typeindex import TypeIndex, declared_devices
from provisioner.taints import PREFER_NO_SCHEDULE, TOLERATE_PREFER_NO_SCHEDULE, untolerated
from provisioner.volumes import Volumes, limit_error, union


class Unfit(Exception):
    """A pod does not fit a place; `kind` says whether the verdict can change later (topology) or not."""

    def __init__(
        self, kind: str, message: str | Callable[[], str], details: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(kind)
        self.kind = kind
        self._message = message
        self.details: Mapping[str, object] = details or {}

    @property
    def message(self) -> str:
        """Built on first use: most failed fits are skipped over and never explained."""
        if callable(self._message):
            self._message = self._message()
        return self._message


UNDEFINED_KEY = "defines no "


def drifts_at_once(key: str) -> str:
    """Why a type is left out for a NodePool that requires `key` on every node and gives it no value itself."""
    return f"{UNDEFINED_KEY}{key}, which the NodePool requires: its node would be Drifted the moment it launched"


# Failures that stay failures for the same pod class: requirements only narrow, capacity only shrinks.
PERMANENT = frozenset(
    {r.REQUIREMENTS, r.TAINTS, r.RESOURCES, r.HOST_PORTS, r.MIN_VALUES, r.NO_INSTANCE_TYPES, r.DEVICES}
)

Placed = TypeVar("Placed")
_ANYWHERE = Requirements()  # the one alternative of a pod whose volumes do not constrain its node


def first_fitting(volumes: Sequence[Requirements], attempt: Callable[[Requirements], Placed]) -> Placed:
    """Karpenter's loop over a pod's volume alternatives (tryVolumeAlternative): the first that fits the place wins.
    Else the last one's reason, as Karpenter's; but one that only failed for now (topology) wins over reasons that
    hold for good, or the scheduler would write the place off for the pod class."""
    if not volumes:
        return attempt(_ANYWHERE)
    failures: list[Unfit] = []
    for volume in volumes:
        try:
            return attempt(volume)
        except Unfit as unfit:
            failures.append(unfit)
    raise next((unfit for unfit in failures if unfit.kind not in PERMANENT), failures[-1])


@dataclass(frozen=True, slots=True)
class DaemonOverheadGroup:
    """Karpenter's DaemonOverheadGroup: the template's types (a mask over its index) that the same DaemonSets would
    run on, with those DaemonSets' requests and host ports."""

    mask: int
    overhead: Resources
    ports: HostPortUsage


@dataclass
class NodeClaimTemplate:
    nodepool: NodePool
    requirements: Requirements
    labels: dict[str, str]
    index: TypeIndex
    daemon_groups: tuple[DaemonOverheadGroup, ...]
    excluded: dict[str, str] = field(default_factory=dict)
    # Strict minValues no set of the types meets: key -> (distinct values they give, its minValues); no types left.
    min_values_short: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, nodepool: NodePool, instance_types: list[InstanceType], daemonsets: list[DaemonSet], min_values: str
    ) -> NodeClaimTemplate:
        node_class_key = f"{nodepool.node_class_ref.group}/{nodepool.node_class_ref.kind.lower()}"
        labels = {**nodepool.template_labels, wk.NODEPOOL: nodepool.name, node_class_key: nodepool.node_class_ref.name}
        # Every template label is a requirement too, the node class's among them (nodeclaimtemplate.go:79-84), so the
        # NodeClaim's spec.requirements name its node class as Karpenter's do.
        requirements = nodepool.template_requirements().merged(
            [Requirement.in_values(node_class_key, nodepool.node_class_ref.name)]
        )
        everything = TypeIndex(instance_types)
        mask = everything.compatible(requirements)
        excluded = {
            it.name: "does not satisfy the NodePool's requirements"
            for i, it in enumerate(instance_types)
            if not mask >> i & 1
        }
        # A type that leaves a required key undefined passes the index (a well-known key may be undefined), but a
        # node of it would be Drifted the moment it launched and replaced by another such node, over and over.
        needed = type_labelled_keys(nodepool)
        for i, it in enumerate(instance_types):
            missing = sorted(key for key in needed if key not in it.requirements)
            if missing and mask >> i & 1:
                mask &= ~(1 << i)
                excluded[it.name] = drifts_at_once(missing[0])
        survivors = everything.members(mask)
        index = TypeIndex(survivors)
        short: dict[str, tuple[int, int]] = {}  # key -> (distinct values the types give, its minValues)
        if min_values == STRICT:
            for requirement in requirements.values():
                distinct = index.distinct_values(index.all, requirement) if requirement.min_values else 0
                if requirement.min_values and distinct < requirement.min_values:
                    short[requirement.key] = (distinct, requirement.min_values)
            if short:
                index = TypeIndex([])
        groups = daemon_overhead_groups(index, nodepool, requirements, daemonsets)
        return cls(nodepool, requirements, labels, index, groups, excluded, short)

    @property
    def name(self) -> str:
        return self.nodepool.name

    def fitting(self, requests: Resources, ports: Sequence[HostPort] = ()) -> int:
        """Types whose allocatable covers `requests` plus the overhead of the DaemonSets that would run on them, and
        whose DaemonSets hold none of `ports` (Karpenter's filterInstanceTypesByRequirements, nodeclaim.go:619-630)."""
        mask = 0
        for group in self.daemon_groups:
            if ports and group.ports.conflict(ports) is not None:
                continue
            mask |= group.mask & self.index.fitting(add(requests, group.overhead) if group.overhead else requests)
        return mask

    def daemon_overhead(self, mask: int) -> Resources:
        """The smallest DaemonSet overhead among the groups with types in `mask`, per resource (Karpenter's
        addDaemonRequests puts it in the NodeClaim's requests). A resource some group lacks is dropped, as
        MinResources does, so a group without DaemonSets makes it empty; Karpenter's own result there depends on
        map order, since it skips an empty group met first."""
        overheads = [g.overhead for g in self.daemon_groups if g.mask & mask]
        if not overheads:
            return {}
        least = dict(overheads[0])
        for overhead in overheads[1:]:
            least = {name: min(amount, overhead[name]) for name, amount in least.items() if name in overhead}
        return least

    def daemon_overheads(self, mask: int) -> list[Resources]:
        """The distinct DaemonSet overheads of the types in `mask`."""
        distinct: list[Resources] = []
        for group in self.daemon_groups:
            if group.mask & mask and group.overhead not in distinct:
                distinct.append(group.overhead)
        return distinct

    def never_fits(self, data: PodData) -> Unfit | None:
        """Why the pod cannot go to this NodePool whatever its limits or its NodeClaims' contents: an untolerated
        taint, then requirements no instance type of the pool meets. None when only capacity could stop it."""
        blocking = untolerated(self.nodepool.taints, data.tolerations)
        if blocking:
            return Unfit(r.TAINTS, f"did not tolerate taint {blocking[0]}", {"taint": str(blocking[0])})
        if not data.requirements:
            return None
        if not self.requirements.compatible(data.requirements):
            return Unfit(
                r.REQUIREMENTS, f"incompatible requirements, {self.requirements.compatibility_error(data.requirements)}"
            )
        merged = self.requirements.merged(data.requirements)
        if not self.index.compatible(merged):
            return Unfit(r.REQUIREMENTS, lambda: "no instance type satisfied the requirements " + _summary(merged))
        return None


def daemon_overhead_groups(
    index: TypeIndex, nodepool: NodePool, requirements: Requirements, daemonsets: Sequence[DaemonSet]
) -> tuple[DaemonOverheadGroup, ...]:
    """Karpenter's buildDaemonOverheadGroups (scheduler.go:1001): the template's types split by the set of
    DaemonSets that would run on them, so a DaemonSet only for large types weighs on large types alone."""
    split: dict[tuple[int, ...], int] = {(): index.all} if index.all else {}  # DaemonSets -> their types
    for n, daemonset in enumerate(daemonsets):
        runs_on = daemon_types(index, daemonset.template, nodepool, requirements)
        if not runs_on:
            continue
        for members, mask in list(split.items()):
            if mask & runs_on:
                split[(*members, n)] = mask & runs_on
                if mask & ~runs_on:
                    split[members] = mask & ~runs_on
                else:
                    del split[members]
    requests = {n: PodState.of(daemonsets[n].template).data().requests for members in split for n in members}
    return tuple(
        DaemonOverheadGroup(
            mask,
            add(*(requests[n] for n in members)),
            HostPortUsage(tuple(port for n in members for port in daemonsets[n].template.host_ports)),
        )
        for members, mask in split.items()
    )


def daemon_types(index: TypeIndex, daemon: Pod, nodepool: NodePool, requirements: Requirements) -> int:
    """The types a DaemonSet's pod would run on (Karpenter's isDaemonPodCompatible, scheduler.go:1049): it tolerates
    the pool's taints (PreferNoSchedule aside; startup taints are gone by the time daemons matter), and one of its
    required node affinity terms is compatible with the pool's requirements and intersects the type's own."""
    tolerations = (*daemon.tolerations, TOLERATE_PREFER_NO_SCHEDULE)
    if untolerated([t for t in nodepool.taints if t.effect != PREFER_NO_SCHEDULE], tolerations):
        return 0
    state = PodState.of(daemon)
    terms = state.required_terms or [Requirements()]
    base = Requirements.from_labels(daemon.node_selector)
    mask = 0
    for term in terms:
        wanted = base.merged(term)
        if requirements.compatible(wanted):
            # Intersects, not compatible: the type's requirements never carry the pool's custom keys.
            mask |= index.intersecting(wanted)
    return mask


Fit = tuple[Requirements, int, bool, tuple[Offering, ...]]  # requirements, options, minValues relaxed, reserved


class PlannedNodeClaim:
    """A NodeClaim being filled during one simulation: its options shrink as pods are added, and while any of them
    can launch into a capacity reservation it holds one instance of each such reservation."""

    def __init__(
        self,
        seq: int,
        template: NodeClaimTemplate,
        mask: int,
        topology: Topology,
        reservations: ReservationManager | None = None,
        reservation_mode: str = RESERVATION_FALLBACK,
    ) -> None:
        self.seq = seq
        self.template = template
        self.hostname = f"hostname-placeholder-{seq:04d}"
        topology.register(wk.HOSTNAME, self.hostname)
        self.requirements = template.requirements.merged([Requirement.in_values(wk.HOSTNAME, self.hostname)])
        self.requests: Resources = {}
        self.mask = mask
        self.pods: list[Pod] = []
        self.ports = HostPortUsage()  # the pods' own; each daemon group's ports are checked in the template's fitting
        self.min_values_relaxed = False
        self.stamp = 0  # position in the scheduler's orders; refreshed whenever the claim moves
        self.device_requests: list[DeviceRequest] = []
        self.reservations = reservations
        self.reservation_mode = reservation_mode
        self.reserved: tuple[Offering, ...] = ()  # the reserved offerings it holds
        self.volumes: Volumes = {}  # PVCs per CSI driver its pods attach

    def copy(self) -> PlannedNodeClaim:
        """A copy to try more pods on, leaving this one as it is (its reservation manager is shared)."""
        clone = copy.copy(self)
        clone.pods = list(self.pods)
        clone.device_requests = list(self.device_requests)
        return clone

    def fit(
        self,
        state: PodState,
        data: PodData,
        topology: Topology,
        groups: list[TopologyGroup],
        min_values: str,
        classes: Mapping[str, DeviceClass] | None = None,
    ) -> Fit:
        """Check the pod against this NodeClaim; the new requirements, options, minValues flag and the reserved
        offerings it would hold, or Unfit."""
        mask, limited = self._volume_mask(state.pod) if state.pod.csi_volumes else (self.mask, None)
        return first_fitting(
            data.volumes,
            lambda volume: self._fit(state, data, topology, groups, min_values, classes, volume, mask, limited),
        )

    def _volume_mask(self, pod: Pod) -> tuple[int, Unfit | None]:
        """The options that can attach the pod's volumes besides those of the pods already here
        (filterInstanceTypesByVolumeAttachmentLimits, nodeclaim.go:699), or why none can."""
        prospective = union(self.volumes, dict(pod.csi_volumes))
        index = self.template.index
        mask = 0
        for position in index.positions(self.mask):
            limits = index.types[position].volume_attachment_limits
            if not any(len(claims) > limits.get(driver, len(claims)) for driver, claims in prospective.items()):
                mask |= 1 << position
        if mask:
            return mask, None
        return 0, Unfit(r.VOLUME_LIMITS, _volume_limit_error(index.members(self.mask), prospective))

    def _fit(
        self,
        state: PodState,
        data: PodData,
        topology: Topology,
        groups: list[TopologyGroup],
        min_values: str,
        classes: Mapping[str, DeviceClass] | None,
        volume: Requirements,
        options: int,
        limited: Unfit | None,
    ) -> Fit:
        pod, template = state.pod, self.template
        blocking = untolerated(template.nodepool.taints, data.tolerations)
        if blocking:
            raise Unfit(r.TAINTS, f"did not tolerate taint {blocking[0]}", {"taint": str(blocking[0])})
        if limited is not None:
            raise limited
        conflict = self.ports.conflict(pod.host_ports)
        if conflict is not None:
            raise Unfit(r.HOST_PORTS, f"host port {conflict.port}/{conflict.protocol} is already in use")
        requirements = self.requirements
        if data.requirements:
            if not requirements.compatible(data.requirements):
                current = requirements
                raise Unfit(
                    r.REQUIREMENTS,
                    lambda: f"incompatible requirements, {current.compatibility_error(data.requirements)}",
                )
            requirements = requirements.merged(data.requirements)
        if volume:
            # On the NodeClaim only: topology below still counts the pod by its own requirements.
            if not requirements.compatible(volume):
                current = requirements
                raise Unfit(
                    r.REQUIREMENTS,
                    lambda: f"incompatible volume requirements, {current.compatibility_error(volume)}",
                )
            requirements = requirements.merged(volume)
        if groups:
            try:
                added = topology.add_requirements(pod, data, requirements, groups)
            except TopologyError as error:
                raise Unfit(r.TOPOLOGY, error.reason) from None
            if not requirements.compatible(added):
                current = requirements
                raise Unfit(
                    r.TOPOLOGY, lambda: f"incompatible topology requirements, {current.compatibility_error(added)}"
                )
            requirements = requirements.merged(added)
        index = template.index
        needed = add(self.requests, data.requests)
        compatible = options & index.compatible(requirements) if requirements is not self.requirements else options
        if not compatible:
            raise Unfit(r.REQUIREMENTS, lambda: "no instance type satisfied the requirements " + _summary(requirements))
        mask = compatible & template.fitting(needed, pod.host_ports)
        if not mask:
            raise self._unfit_for_resources(needed, compatible, pod.host_ports)
        if pod.device_requests:
            # Devices already promised to this NodeClaim's pods count: one device serves one request (and a claim
            # two pods share, once).
            wanted = merged(self.device_requests, pod.device_requests)
            fitting = mask
            mask &= index.device_mask(wanted, classes or {})
            if not mask:
                claimed = len(self.device_requests)
                raise Unfit(
                    r.DEVICES,
                    lambda: _device_reason(pod.device_requests, classes or {}, claimed, index.members(fitting)),
                )
        relaxed = self.min_values_relaxed
        lowered = []
        unmet: dict[str, str] = {}  # key -> "distinct values < minValues", for the dashboard
        for requirement in requirements.values():
            achievable = index.distinct_values(mask, requirement) if requirement.min_values else 0
            if requirement.min_values and achievable < requirement.min_values:
                unmet[requirement.key] = f"{achievable} < {requirement.min_values}"
                # BestEffort: the NodeClaim asks for what its types can give, as Karpenter's CanAdd lowers it.
                lowered.append(replace(requirement, min_values=achievable))
                relaxed = True
        if unmet and min_values == STRICT:
            # Karpenter's SatisfiesMinValues names every unmet key at once (cloudprovider/types.go:495).
            raise Unfit(r.MIN_VALUES, r.min_values_unmet(sorted(unmet)), unmet)
        if lowered:
            keys = {requirement.key for requirement in lowered}
            requirements = Requirements([*(v for k, v in requirements.items() if k not in keys), *lowered])
        return requirements, mask, relaxed, self._offerings_to_reserve(mask, requirements)

    def _unfit_for_resources(self, needed: Resources, compatible: int, ports: Sequence[HostPort]) -> Unfit:
        """Why no compatible type has room: a DaemonSet's host port wherever one is held on every compatible type,
        else the requests with the DaemonSet overhead (its range, as Karpenter's resourcesString, where types
        differ) against the largest compatible type."""
        template, index = self.template, self.template.index
        groups = [g for g in template.daemon_groups if g.mask & compatible]
        clashes = [c for c in (g.ports.conflict(ports) for g in groups) if c is not None] if ports else []
        if clashes and len(clashes) == len(groups):
            return Unfit(r.HOST_PORTS, f"host port {clashes[0].port}/{clashes[0].protocol} is already in use")
        overheads = template.daemon_overheads(compatible)
        least = template.daemon_overhead(compatible)
        total = add(needed, least)
        if len(overheads) > 1:
            most = maximum(overheads)
            requests = f"min={_json(format_resources(total))}, max={_json(format_resources(add(needed, most)))}"
            overhead = f"min={_json(format_resources(least))}, max={_json(format_resources(most))}"
        else:
            requests, overhead = _json(format_resources(total)), _json(format_resources(least))
        details = {
            "requests": format_resources(total),
            "exceeds": exceeded(total, _max_allocatable(index, compatible)),
        }
        return Unfit(
            r.RESOURCES,
            f"no instance type has enough resources for requests {requests} (daemonset overhead {overhead}; "
            f"largest compatible type capacity {_json(format_resources(index.max_capacity(compatible)))})",
            details,
        )

    def _offerings_to_reserve(self, mask: int, requirements: Requirements) -> tuple[Offering, ...]:
        """Karpenter's offeringsToReserve (scheduling/nodeclaim.go:321): every compatible reserved offering of the
        surviving types that a reservation still has an instance for. A full reservation (Available, capacity 0) is
        no such offering: it has nothing to wait for. Strict (provisioning) refuses the pod when reservations with
        capacity exist but none can be held, when the pod's only option is a full reservation, or when the pod
        would take away every reservation this NodeClaim held; Fallback (disruption) fails only the pod's only
        option being full, with a plain error so the pod falls through to a lower-weight NodePool."""
        index = self.template.index
        strict = self.reservation_mode == RESERVATION_STRICT
        chosen: tuple[Offering, ...] = ()
        if self.reservations is not None and mask & index.reserved:
            zone, capacity = requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE)
            reservation = requirements.get(wk.RESERVATION_ID)
            offered = [
                o
                for it in index.members(mask & index.reserved)
                for o in it.offerings
                if o.reserved and o.available and o.compatible(zone, capacity, reservation)
            ]
            with_capacity = [o for o in offered if o.reservation_capacity > 0]
            chosen = tuple(o for o in with_capacity if self.reservations.can_reserve(self.hostname, o))
            if strict and with_capacity and not chosen:
                raise Unfit(r.RESERVED, CANNOT_RESERVE)
            # Only full reservations, and no on-demand or spot offering of any surviving type to fall back to.
            if offered and not with_capacity and not self._unreserved_fallback(mask, zone, capacity, reservation):
                if strict:
                    raise Unfit(r.RESERVED, ALL_FULL)
                raise Unfit(r.RESERVATION_FULL, FALLING_THROUGH)
        if strict and self.reserved and not chosen:
            raise Unfit(r.RESERVED, WOULD_REMOVE)
        return chosen

    def _unreserved_fallback(
        self, mask: int, zone: Requirement | None, capacity: Requirement | None, reservation: Requirement | None
    ) -> bool:
        """Whether a surviving type has an available on-demand or spot offering the requirements allow."""
        return any(
            not o.reserved and o.available and o.compatible(zone, capacity, reservation)
            for it in self.template.index.members(mask)
            for o in it.offerings
        )

    def commit(self, state: PodState, data: PodData, fit: Fit, topology: Topology) -> None:
        requirements, mask, relaxed, offerings = fit
        if self.reservations is not None:
            self.reservations.reserve(self.hostname, offerings)
            kept = {o.reservation_id for o in offerings}
            self.reservations.release(self.hostname, [o for o in self.reserved if o.reservation_id not in kept])
        self.reserved = offerings
        self.pods.append(state.pod)
        self.device_requests = list(merged(self.device_requests, state.pod.device_requests))
        self.requests = add(self.requests, data.requests)
        self.requirements = requirements
        self.mask = mask
        self.min_values_relaxed = relaxed
        self.ports = self.ports.added(state.pod.host_ports)
        if state.pod.csi_volumes:
            self.volumes = union(self.volumes, dict(state.pod.csi_volumes))
        topology.record(state.pod, requirements, self.template.nodepool.taints)


def _volume_limit_error(types: Sequence[InstanceType], volumes: Volumes) -> str:
    """volumeAttachmentLimitError (nodeclaim.go:712): the first driver (by name) whose PVCs exceed the limit of
    every option, with the largest of those limits."""
    message = "would exceed volume limit for all instance type options"
    for driver in sorted(volumes):
        count = len(volumes[driver])
        limits = [it.volume_attachment_limits.get(driver) for it in types]
        if all(limit is not None and count > limit for limit in limits):
            return limit_error(message, driver, count, max((v for v in limits if v is not None), default=-1))
    return message


def _device_reason(
    requests: tuple[DeviceRequest, ...],
    classes: Mapping[str, DeviceClass],
    claimed: int,
    types: Sequence[InstanceType] = (),
) -> str:
    """Why no type's declared devices serve the requests; where a selector could not decide on a declared device
    (a CEL runtime error such as a division by zero), that error, since no device will ever match it."""
    missing = next((r for r in requests if r.device_class not in classes), None)
    if missing is not None:
        return f'DeviceClass "{missing.device_class}" not found ({missing.describe()})'
    already = f" beside the {claimed} device request(s) already on this NodeClaim" if claimed else ""
    reason = f"no instance type declares devices for {requests[0].describe()}{already}"
    for it in types:
        if not it.devices:
            continue
        why = allocate(requests, declared_devices(it), classes)
        if isinstance(why, str) and '; device "' in why:  # allocate's note of a selector's error on a device
            return f"{reason}; on {it.name}: {why}"
    return reason


def _max_allocatable(index: TypeIndex, mask: int) -> dict[str, int]:
    result: dict[str, int] = {}
    for it in index.members(mask):
        for name, amount in it.allocatable.items():
            result[name] = max(result.get(name, 0), amount)
    return result


def _summary(requirements: Requirements) -> str:
    return ", ".join(str(req) for key, req in sorted(requirements.items()) if key != wk.HOSTNAME)


def _json(resources: dict[str, str]) -> str:
    return "{" + ",".join(f'"{k}":"{v}"' for k, v in resources.items()) + "}"
