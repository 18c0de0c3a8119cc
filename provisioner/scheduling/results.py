"""What a simulation returns: NodeClaim plans, placements on existing nodes, and structured reasons for the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.pods import Pod
from provisioner.quantity import Resources, format_resources
from provisioner.requirements import Requirements
from provisioner.taints import Taint

# Reason kinds, for the dashboard's verdicts and for filtering.
VALIDATION = "validation"
NO_NODEPOOL = "no-nodepool"
REQUIREMENTS = "requirements"
# The pod's own karpenter.sh/nodepool selection leaves this NodePool out: nothing to fix on the NodePool.
NOT_SELECTED = "not-selected"
TAINTS = "taints"
RESOURCES = "resources"
LIMITS = "limits"
TOPOLOGY = "topology"
HOST_PORTS = "host-ports"
MIN_VALUES = "min-values"
NO_INSTANCE_TYPES = "no-instance-types"
DEVICES = "devices"
# A PVC kube-scheduler would refuse (missing, deleting, unbound without a WaitForFirstConsumer StorageClass): the pod is
# left out of provisioning, as Karpenter's Validate leaves it.
VOLUMES = "volumes"
# The pod's volumes would exceed a CSI driver's attachment limit on a node, or on every instance type a NodeClaim may
# still launch as: never permanent for a pod class, as which PVCs a pod uses is not part of it.
VOLUME_LIMITS = "volume-limits"
# Reserved capacity that exists but is held by other NodeClaims: the pod waits for the next simulation (never relaxed,
# never a FailedScheduling, as Karpenter's ReservedOfferingError).
RESERVED = "reserved-capacity"
# The pod's only option in a NodePool is a reservation that is full (Available, no instance left) and the simulation
# may fall back (disruption's): a plain error, so the pod falls through to a lower-weight NodePool.
RESERVATION_FULL = "reservation-full"


def min_values_unmet(keys: Sequence[str]) -> str:
    """Karpenter's SatisfiesMinValues error (cloudprovider/types.go:495): every unmet key, as serrors.Wrap prints it."""
    return f"minValues requirement is not met for label(s) (label(s)=[{' '.join(keys)}])"


@dataclass(frozen=True)
class Reason:
    """Why a pod cannot go to one NodePool (nodepool is empty for pod-level reasons)."""

    nodepool: str
    kind: str
    message: str
    details: Mapping[str, object] = field(default_factory=dict)
    # Karpenter words a few errors whole, naming the NodePool itself (TruncateInstanceTypes), not "incompatible with".
    whole: bool = False

    def __str__(self) -> str:
        if self.nodepool and not self.whole:
            return f'incompatible with nodepool "{self.nodepool}", {self.message}'
        return self.message


@dataclass(frozen=True)
class PodFailure:
    pod: Pod
    reasons: tuple[Reason, ...]

    @property
    def message(self) -> str:
        return "; ".join(str(r) for r in self.reasons)


class InstanceTypeOption(NamedTuple):
    """A candidate type of a planned NodeClaim with its cheapest compatible offering price."""

    instance_type: InstanceType
    price: float


@dataclass(frozen=True)
class NodeClaimPlan:
    """A NodeClaim the simulation decided to create."""

    nodepool: str
    pods: tuple[Pod, ...]
    requests: Resources  # pods' requests + daemon overhead, incl. `pods`
    requirements: Requirements  # final: with instance-type and capacity-type lists, without the hostname
    options: tuple[InstanceTypeOption, ...]  # cheapest first, truncated
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    min_values_relaxed: bool = False
    hostname: str = ""  # the placeholder used during the simulation
    excluded: Mapping[str, str] = field(default_factory=dict)  # type name -> why the NodePool's type was dropped
    static: bool = False  # a static NodePool's NodeClaim: the cloud provider picks among the template's types

    @property
    def instance_type_names(self) -> list[str]:
        return sorted(o.instance_type.name for o in self.options)

    @property
    def launch_price(self) -> float:
        """What the cheapest option costs an hour; 0 for a static NodeClaim, priced only once launched."""
        return self.options[0].price if self.options else 0.0

    @property
    def cheapest(self) -> InstanceTypeOption:
        return self.options[0]

    def requests_text(self) -> dict[str, str]:
        return format_resources(self.requests)

    def spec_requirements(self) -> list[dict[str, object]]:
        return self.requirements.to_specs()

    def explanation(self) -> dict[str, object]:
        """Why this NodeClaim launches as it will: the cheapest option, what it beat, and what was left out."""
        cheapest = self.options[0]
        runner_up = next((o for o in self.options[1:] if o.price > cheapest.price), None)
        return {
            "chosen": cheapest.instance_type.name,
            "price": round(cheapest.price, 6),
            "reason": f"cheapest compatible offering among {len(self.options)} instance types that fit the pods",
            "runner_up": {"name": runner_up.instance_type.name, "price": round(runner_up.price, 6)}
            if runner_up
            else None,
            "candidates": [{"name": o.instance_type.name, "price": round(o.price, 6)} for o in self.options],
            "excluded_by_nodepool_requirements": len(self.excluded),
        }

    @property
    def capacity_types(self) -> frozenset[str]:
        requirement = self.requirements.get(wk.CAPACITY_TYPE)
        return requirement.values if requirement is not None else frozenset()


@dataclass
class SchedulingResult:
    new_nodeclaims: list[NodeClaimPlan] = field(default_factory=list)
    placements: dict[str, list[Pod]] = field(default_factory=dict)  # existing node name -> pods
    failures: dict[str, PodFailure] = field(default_factory=dict)  # pod id -> why not
    relaxations: dict[str, list[str]] = field(default_factory=dict)  # pod id -> preferences relaxed
    pods_considered: list[Pod] = field(default_factory=list)  # in queue order
    skipped_nodepools: dict[str, str] = field(default_factory=dict)  # nodepool -> why it cannot launch anything
    timed_out: bool = False  # the simulation hit its time limit: pods after the last one tried were not tried

    def scheduled_count(self) -> int:
        return sum(len(nc.pods) for nc in self.new_nodeclaims) + sum(len(p) for p in self.placements.values())
