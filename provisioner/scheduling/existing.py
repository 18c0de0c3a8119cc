"""Existing and in-flight nodes as places for pods: fixed capacity, labels as requirements, real taints."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceKey, DeviceRequest, allocate, key
from provisioner.nodes import DaemonSet, Node
from provisioner.pods import Pod
from provisioner.quantity import MILLI, Resources, add, exceeded, fits, subtract
from provisioner.requirements import Requirements
from provisioner.scheduling import results as r
from provisioner.scheduling.hostports import HostPortUsage
from provisioner.scheduling.nodeclaim import Unfit, first_fitting
from provisioner.scheduling.poddata import PodData, PodState
from provisioner.scheduling.topology import Topology, TopologyError
from provisioner.scheduling.topologygroup import TopologyGroup
from provisioner.taints import Taint, is_known_ephemeral, untolerated
from provisioner.volumes import limit_exceeded, node_usage, union

# Requirements, taints, free capacity, host ports in use, and the pod classes (PodData.class_key) known not to fit
# the node as derived: filled in as simulations find them, for the next simulation over the same node to skip.
Derived = tuple[Requirements, tuple[Taint, ...], Resources, HostPortUsage, set[tuple[object, ...]]]

# Verdicts that follow from the pod class and the node as derived alone (not from host ports, which a simulation's
# own placements take, nor from devices), so they hold for every pod of the class on the untouched node in every
# simulation.
CLASS_VERDICTS = frozenset({r.REQUIREMENTS, r.TAINTS, r.RESOURCES})


def _derived(node: Node, daemonsets: Sequence[DaemonSet]) -> Derived:
    """A node's requirements, taints, free capacity and host ports in use: what every simulation over the same
    node starts from. Single-node consolidation solves once per candidate over the same snapshot's nodes, so
    deriving these again for each solve made a pass at 20,000 pods take 24 minutes. Kept on the (immutable) node
    itself, for the daemonsets it was derived with."""
    kept: dict[int, tuple[Sequence[DaemonSet], Derived]] = node.__dict__.setdefault("_existing", {})
    hit = kept.get(id(daemonsets))
    if hit is not None and hit[0] is daemonsets:
        return hit[1]
    # Every pod not terminal holds its room and ports, a terminating one too until it is gone: Karpenter's cluster
    # state drops a pod's requests only once it is terminal or deleted (cluster.go:451 UpdatePod, :932).
    running = [p for p in node.pods if not p.is_terminal()]
    used = _requested(running)
    requirements = Requirements.from_labels(node.labels)
    taints = _effective_taints(node)
    derived: Derived = (
        requirements,
        taints,
        subtract(node.allocatable, add(used, _missing_daemons(taints, requirements, running, daemonsets))),
        HostPortUsage(tuple(port for p in running for port in p.host_ports)),
        set(),
    )
    kept.clear()  # one set of daemonsets at a time: a new snapshot comes with new nodes anyway
    kept[id(daemonsets)] = (daemonsets, derived)
    return derived


def never_fits(node: Node, daemonsets: Sequence[DaemonSet]) -> set[tuple[object, ...]]:
    """The pod classes known not to fit the node as derived: the scheduler asks before it builds the node as a place."""
    return _derived(node, daemonsets)[4]


class ExistingNode:
    # Single-node consolidation builds one per node for every candidate it simulates (1,819 nodes x 20), so each is
    # one object (slots) and its state starts as shared immutable values: at 20,000 pods the six containers each
    # used to allocate made the pass's garbage collections (a full one walks the whole warm cluster) cost as much
    # as the simulations.
    __slots__ = (
        "available",
        "claimed",
        "devices",
        "hostname",
        "limits",
        "limits_of",
        "name",
        "never",
        "node",
        "pods",
        "ports",
        "requests",
        "requirements",
        "seq",
        "taints",
        "taken",
        "volumes",
    )

    def __init__(
        self,
        seq: int,
        node: Node,
        daemonsets: Sequence[DaemonSet],
        devices: Sequence[Device] = (),
        limits_of: Callable[[Node], Mapping[str, int]] | None = None,
    ) -> None:
        self.seq = seq
        self.node = node
        self.name = node.name
        self.hostname = node.hostname
        self.requirements, taints, available, self.ports, self.never = _derived(node, daemonsets)
        self.taints = taints
        self.available: Resources = available
        self.requests: Resources = {}
        self.pods: tuple[Pod, ...] = ()
        self.devices = devices  # free devices: published (or, before initialization, declared)
        self.taken: frozenset[DeviceKey] = frozenset()
        # (claim, request) allocated here this round: a later pod of the same claim is served by that allocation
        # (allocator.go ClassifyClaims, in-memory allocated claims).
        self.claimed: frozenset[tuple[str, str]] = frozenset()
        # PVCs per CSI driver its pods attach, and the drivers' limits, read only once a pod with volumes (or a node
        # with them) gets here: the scheduler resolves the fallback limits from the node's instance type.
        self.volumes: Mapping[str, frozenset[str]] = node.csi_volumes
        self.limits: Mapping[str, int] | None = None
        self.limits_of = limits_of

    def fit(
        self,
        state: PodState,
        data: PodData,
        topology: Topology,
        groups: list[TopologyGroup],
        classes: Mapping[str, DeviceClass] | None = None,
    ) -> Requirements:
        pod = state.pod
        wanted = self._unclaimed(pod.device_requests) if pod.device_requests else ()
        if wanted:
            outcome = allocate(wanted, self.devices, classes or {}, self.taken)
            if isinstance(outcome, str):
                raise Unfit(r.DEVICES, outcome)
        blocking = untolerated(self.taints, data.tolerations)
        if blocking:
            raise Unfit(r.TAINTS, f"did not tolerate taint {blocking[0]}")
        if pod.csi_volumes or self.volumes:
            # Karpenter checks the node's usage united with the pod's even for a pod without volumes: a node already
            # past a limit (its CSINode published a lower one) takes no pod (existingnode.go:93).
            self._check_volume_limits(pod)
        conflict = self.ports.conflict(pod.host_ports)
        if conflict is not None:
            raise Unfit(r.HOST_PORTS, f"host port {conflict.port}/{conflict.protocol} is already in use")
        # Capacity first: an existing node cannot grow, so this is the likeliest reason to move on.
        needed = add(self.requests, data.requests)
        if not fits(needed, self.available):
            # Built only if read: a pod moving in a consolidation simulation is tried against every full node
            # first, and the scheduler skips these failures without explaining them.
            raise Unfit(r.RESOURCES, lambda: f"exceeds node resources ({', '.join(exceeded(needed, self.available))})")
        requirements = self.requirements
        if data.requirements:
            if not requirements.compatible(data.requirements, allow_undefined=frozenset()):
                error = requirements.compatibility_error(data.requirements, allow_undefined=frozenset())
                raise Unfit(r.REQUIREMENTS, f"incompatible requirements, {error}")
            requirements = requirements.merged(data.requirements)
        return first_fitting(
            data.volumes, lambda volume: self._with_topology(pod, data, topology, groups, requirements, volume)
        )

    def _check_volume_limits(self, pod: Pod) -> None:
        limits = self.limits
        if limits is None:
            limits = self.limits = (
                self.limits_of(self.node) if self.limits_of is not None else node_usage(self.node.csi_drivers).limits
            )
        if not limits:
            return
        error = limit_exceeded(union(self.volumes, dict(pod.csi_volumes)), limits)
        if error is not None:
            raise Unfit(r.VOLUME_LIMITS, f"checking volume usage, {error}")

    def _unclaimed(self, requests: tuple[DeviceRequest, ...]) -> tuple[DeviceRequest, ...]:
        return tuple(r for r in requests if (r.claim, r.name) not in self.claimed) if self.claimed else requests

    @staticmethod
    def _with_topology(
        pod: Pod,
        data: PodData,
        topology: Topology,
        groups: list[TopologyGroup],
        requirements: Requirements,
        volume: Requirements,
    ) -> Requirements:
        """One volume alternative on this node, then topology, which counts the pod by its own requirements."""
        if volume:
            if not requirements.compatible(volume, allow_undefined=frozenset()):
                error = requirements.compatibility_error(volume, allow_undefined=frozenset())
                raise Unfit(r.REQUIREMENTS, f"incompatible volume requirements, {error}")
            requirements = requirements.merged(volume)
        if groups:
            try:
                added = topology.add_requirements(pod, data, requirements, groups)
            except TopologyError as error:
                raise Unfit(r.TOPOLOGY, error.reason) from None
            if not requirements.compatible(added, allow_undefined=frozenset()):
                raise Unfit(r.TOPOLOGY, "incompatible topology requirements")
            requirements = requirements.merged(added)
        return requirements

    def commit(
        self,
        state: PodState,
        data: PodData,
        requirements: Requirements,
        topology: Topology,
        classes: Mapping[str, DeviceClass] | None = None,
    ) -> None:
        wanted = self._unclaimed(state.pod.device_requests) if state.pod.device_requests else ()
        if wanted:
            outcome = allocate(wanted, self.devices, classes or {}, self.taken)
            if not isinstance(outcome, str):
                self.taken = self.taken.union(key(device) for _, device in outcome)
                self.claimed = self.claimed.union((r.claim, r.name) for r in wanted)
        self.pods = (*self.pods, state.pod)
        self.requests = add(self.requests, data.requests)
        self.requirements = requirements
        self.ports = self.ports.added(state.pod.host_ports)
        if state.pod.csi_volumes:
            self.volumes = union(self.volumes, dict(state.pod.csi_volumes))
        topology.record(state.pod, requirements, self.taints)


def _requested(pods: Sequence[Pod]) -> Resources:
    """The pods' requests as the scheduler counts them (PodData.requests: the pod's own plus `pods: 1`), summed in
    the same order. Building each pod's PodState and PodData only for this was most of the first consolidation
    simulation over a new snapshot: 20,000 pods at 20,000 pods."""
    used: Resources = {}
    for pod in pods:
        for name, amount in pod.requests.items():
            used[name] = used.get(name, 0) + amount
        used["pods"] = used.get("pods", 0) + MILLI
    return used


def _effective_taints(node: Node) -> tuple[Taint, ...]:
    """An uninitialised Karpenter node will shed its startup and ephemeral taints; pods need not tolerate them."""
    if node.initialized or not node.managed:
        return node.taints
    # Karpenter's StateNode.Taints (statenode.go:425) matches startup taints with MatchTaint: key and effect, so a
    # startup taint whose value the node's agent has changed is still shed.
    startup = {(t.key, t.effect) for t in node.startup_taints}
    return tuple(t for t in node.taints if (t.key, t.effect) not in startup and not is_known_ephemeral(t))


def _missing_daemons(
    taints: Sequence[Taint], labels: Requirements, running: Sequence[Pod], daemonsets: Sequence[DaemonSet]
) -> Resources:
    """Requests of DaemonSets that will run on this node but have no pod there yet; `labels` are the node's labels
    as requirements (what _derived has already built from them). `taints` are the node's taints as the scheduler
    holds them (an uninitialized node's without its startup and ephemeral ones), which Karpenter checks daemons
    against (scheduler.go:826 calculateExistingNodeClaims)."""
    if not daemonsets:
        return {}
    present = {(p.namespace, p.owner.name) for p in running if p.owner is not None and p.owner.kind == "DaemonSet"}
    missing: Resources = {}
    for daemonset in daemonsets:
        if (daemonset.namespace, daemonset.name) in present:
            continue
        daemon = daemonset.template
        if untolerated(taints, daemon.tolerations):
            continue
        state = PodState.of(daemon)
        data = state.data()
        terms = state.required_terms or [Requirements()]
        base = Requirements.from_labels(daemon.node_selector)
        if any(labels.compatible(base.merged(t), allow_undefined=frozenset()) for t in terms):
            missing = add(missing, data.requests)
    return missing
