"""Pods as the scheduler sees them: requests, node constraints, tolerations, pod (anti-)affinity, spread, ports."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from provisioner import labels as wk
from provisioner.dra.claims import DeviceRequest
from provisioner.quantity import Resources
from provisioner.requirements import Requirement, Requirements
from provisioner.selectors import LabelSelector
from provisioner.taints import Toleration

DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of required node affinity: its expressions are ANDed; terms are ORed."""

    requirements: Requirements


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    requirements: Requirements


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term; `namespaces` empty and no selector means the pod's own namespace."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None
    weight: int = 0  # only for preferred terms
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"  # noqa: S104 - the Kubernetes default meaning "all addresses"

    def conflicts(self, other: HostPort) -> bool:
        """Karpenter's HostPort.Matches (hostportusage.go:50): same port and protocol, and the same address unless
        either is unspecified, IPv4's 0.0.0.0 or IPv6's ::."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        mine, theirs = _address(self.host_ip), _address(other.host_ip)
        if mine is None or theirs is None:  # not an address: Go's nil IP, which equals only another nil IP
            return (mine is None and theirs is None) or _unspecified(mine) or _unspecified(theirs)
        return mine == theirs or mine.is_unspecified or theirs.is_unspecified

    def __str__(self) -> str:
        """As Karpenter prints a HostPort (hostportusage.go:46)."""
        return f"IP={self.host_ip} Port={self.port} Proto={self.protocol}"


@functools.cache  # a pod's few host IPs are compared against every node's ports in each simulation
def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address net.ParseIP reads: an IPv4-mapped IPv6 address is the IPv4 one (net.IP.Equal holds them equal);
    "" is 0.0.0.0, the Kubernetes default."""
    try:
        address = ipaddress.ip_address(text or "0.0.0.0")  # noqa: S104
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _unspecified(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return address is not None and address.is_unspecified


@dataclass(frozen=True, slots=True)
class OwnerReference:
    kind: str
    name: str
    uid: str = ""
    controller: bool = True
    # "" when not known: the kind's usual group (apps/v1 for workloads, v1 for a Node). Which kind of that name:
    # default topology spread reads only v1 and apps/v1 controllers, a DaemonSet is apps/v1's alone.
    api_version: str = ""

    def is_kind(self, kind: str, api_version: str) -> bool:
        """Karpenter's IsOwnedBy match: the kind under that apiVersion, so a CRD's own "DaemonSet" (OpenKruise's
        apps.kruise.io one) is not the apps/v1 kind (utils/pod/scheduling.go:200-209)."""
        return self.kind == kind and self.api_version in ("", api_version)


# Slots: past 30 fields CPython stops sharing instance-dict keys, and each pod carried a 1.5 KB dict of its own
# (20,000 pods: 31 MiB instead of 6).
@dataclass(frozen=True, slots=True)
class Pod:
    """A pod's scheduling-relevant spec and state. `requests` are Kubernetes' effective pod requests."""

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: float = 0.0  # seconds since the epoch
    requests: Resources = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[PreferredSchedulingTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owner: OwnerReference | None = None
    node_name: str = ""
    nominated_node_name: str = ""
    unschedulable: bool = False  # PodScheduled=False with reason Unschedulable
    phase: str = "Pending"
    deleting: bool = False
    # Its Ready condition is False: a PDB with unhealthyPodEvictionPolicy AlwaysAllow never holds it (pdb.go:109-116).
    unready: bool = False
    priority: int = 0
    resource_claims: tuple[str, ...] = ()  # names of ResourceClaims (DRA)
    started: float | None = None  # status.startTime, seconds since the epoch
    device_requests: tuple[DeviceRequest, ...] = ()  # of claims not allocated yet (DRA)
    # Where the pod's volumes let its node be, as alternatives (provisioner.volumes): they narrow the node's
    # requirements only, never the pod's own, so topology spread counts the pod as before.
    volume_requirements: tuple[Requirements, ...] = ()
    # Its PVCs by the CSI driver attaching them, sorted (provisioner.volumes.pod_volumes): what counts against a
    # node's volume attachment limits.
    csi_volumes: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def id(self) -> str:
        return self.uid or self.key

    def is_daemonset_pod(self) -> bool:
        return self.owner is not None and self.owner.is_kind("DaemonSet", "apps/v1")

    def is_mirror_pod(self) -> bool:
        return self.owner is not None and self.owner.is_kind("Node", "v1")

    def is_reschedulable(self) -> bool:
        """Would move if its node went (Karpenter's IsReschedulable): active, or a StatefulSet's terminating pod (made
        again only once it is gone, so it needs a place meanwhile); not a DaemonSet or mirror pod."""
        active = not self.is_terminal() and not self.deleting
        terminating_stateful = self.deleting and self.owner is not None and self.owner.is_kind("StatefulSet", "apps/v1")
        return (active or terminating_stateful) and not self.is_daemonset_pod() and not self.is_mirror_pod()

    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def is_provisionable(self) -> bool:
        """Karpenter's IsProvisionable: marked unschedulable, unbound, not nominated, not a DaemonSet or mirror pod."""
        return (
            self.unschedulable
            and not self.node_name
            and not self.nominated_node_name
            and not self.is_daemonset_pod()
            and not self.is_mirror_pod()
            and not self.deleting
            and not self.is_terminal()
        )


def effective_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]] = (),
    overhead: Mapping[str, int] | None = None,
    pod_level: Mapping[str, int] | None = None,
) -> Resources:
    """Kubernetes' pod requests (resourcehelper.PodRequests): max(sum of app containers + sidecars, each init
    container's peak), each resource the pod-level requests set replaced by theirs, + overhead.

    `init_containers` are (requests, is_sidecar) in spec order; a sidecar (restartPolicy Always) keeps running,
    so it adds to everything that starts after it. `pod_level` is spec.resources.requests as the API server
    defaults them (`pod_level_requests`).
    """
    sidecars: Resources = {}
    init_peak: Resources = {}
    for requests, is_sidecar in init_containers:
        if is_sidecar:
            for name, amount in requests.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            _raise_to(init_peak, sidecars)
        else:
            running = dict(sidecars)
            for name, amount in requests.items():
                running[name] = running.get(name, 0) + amount
            _raise_to(init_peak, running)
    total = dict(sidecars)
    for requests in containers:
        for name, amount in requests.items():
            total[name] = total.get(name, 0) + amount
    _raise_to(total, init_peak)
    # Pod-level resources (PodLevelResources, Kubernetes 1.32+) bound the whole pod, so for the resources they name
    # they are what the scheduler reserves, whatever the containers ask (applyPodLevelResources).
    total.update((name, amount) for name, amount in (pod_level or {}).items() if is_pod_level_resource(name))
    for name, amount in (overhead or {}).items():
        total[name] = total.get(name, 0) + amount
    return total


def pod_level_requests(
    requests: Mapping[str, int], limits: Mapping[str, int], containers: Mapping[str, int]
) -> Resources:
    """spec.resources.requests as the API server defaults them when pod-level limits are set (defaultPodRequests):
    a resource with no pod-level request takes the containers' aggregate if they ask for it, else its pod-level
    limit. `containers` is the containers' aggregate requests (no overhead)."""
    defaulted = dict(requests)
    for name, amount in containers.items():
        if name not in defaulted and is_pod_level_resource(name) and not name.startswith("hugepages-"):
            defaulted[name] = amount  # IsOvercommitAllowed: native, and not hugepages
    for name, amount in limits.items():
        if name not in defaulted and is_pod_level_resource(name):
            defaulted[name] = amount
    return defaulted


def is_pod_level_resource(name: str) -> bool:
    """Kubernetes' IsSupportedPodLevelResource: cpu, memory and hugepages; others are only counted per container."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _raise_to(target: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > target.get(name, 0):
            target[name] = amount


def validation_errors(pod: Pod) -> list[str]:
    """Why Karpenter refuses to consider a pod (restricted keys, empty `In`); it is not scheduled."""
    errors = []
    selectors = [Requirements.from_labels(pod.node_selector)] + [t.requirements for t in pod.required_terms]
    for requirements in selectors:
        for key, requirement in requirements.items():
            if key == wk.NODE_NAME_FIELD:
                errors.append("node selector term with matchFields is not supported")
            elif key == wk.NODEPOOL and requirement.operator == "DoesNotExist":
                errors.append(f'requirement "{key}" DoesNotExist excludes every NodePool')
            elif wk.is_restricted_label(key) and key not in (wk.NODEPOOL, wk.HOSTNAME):
                errors.append(f'label "{key}" is restricted')
            elif key == wk.HOSTNAME:
                errors.append(f'label "{key}" is restricted; pods cannot be scheduled to a specific new node')
    return errors


def in_requirement(key: str, *values: str) -> Requirement:
    return Requirement.in_values(key, *values)
