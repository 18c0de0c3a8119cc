"""The cloud provider port, as Karpenter's `cloudprovider.CloudProvider`: what launches and removes a NodeClaim's
instance, and which instance types a NodePool may use. Controllers call only this; kwok is one implementation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from provisioner.catalog import InstanceType
from provisioner.cluster.objects import Obj
from provisioner.objects import NodePool

# How long a launched NodeClaim may wait for its Node before the lifecycle deletes it (Karpenter's registration
# TTL); a provider need not register a Node after it.
REGISTRATION_TIMEOUT = 15 * 60.0


class CloudProviderError(Exception):
    """A launch or delete the provider could not do."""


class InsufficientCapacityError(CloudProviderError):
    """No offering of the NodeClaim's instance types can be launched: the NodeClaim is deleted and retried."""


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClaim's node class does not exist (or is not ready): the NodeClaim is deleted."""


class NodeClaimNotFoundError(CloudProviderError):
    """The instance is already gone: deleting it again is done."""


@dataclass(frozen=True)
class RepairPolicy:
    """Karpenter's cloudprovider.RepairPolicy (v1.15): a Node whose condition `condition_type` has had
    `condition_status` (and a reason `reason_regex` finds; "" is the set's one default fallback) for
    `toleration_seconds` is repaired by `action`, its drain bounded by `termination_grace_period_seconds` (None:
    the NodeClaim's own; 0: forceful), `priority` (0-100) ordering repairs."""

    condition_type: str
    condition_status: str
    toleration_seconds: float
    reason_regex: str = ""
    termination_grace_period_seconds: float | None = None
    priority: int = 0
    action: str = "ReplaceNode"


@dataclass(frozen=True)
class Launched:
    """A NodeClaim's instance as the provider launched it: what the lifecycle writes into the NodeClaim's status."""

    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    image_id: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)


class CloudProvider(Protocol):
    """What a provider guarantees: `create` is the launch (raising InsufficientCapacityError or
    NodeClassNotReadyError), idempotent for one NodeClaim; `delete` removes the instance (NodeClaimNotFoundError
    when it is already gone); `get`/`list` report instances that exist; `reconcile` does the provider's own
    background work (kwok: the Node appears after the node class's registration delay) and says whether it
    changed anything; `registered_by` is when the provider expects a launched NodeClaim's node to register."""

    name: str

    def instance_types(self, nodepool: NodePool) -> list[InstanceType] | None:
        """The NodePool's instance types, or None when its node class does not exist (the NodePool is not ready)."""
        ...

    def create(self, nodeclaim: Obj) -> Launched: ...

    def delete(self, nodeclaim: Obj) -> None: ...

    def get(self, provider_id: str) -> Launched | None: ...

    def list(self) -> list[Launched]: ...

    def registered_by(self, nodeclaim: Obj) -> float | None: ...

    def reconcile(self, now: float) -> bool: ...

    def repair_policies(self) -> tuple[RepairPolicy, ...]:
        """The Node conditions that make a node unhealthy, and for how long each is tolerated (none: no repair)."""
        ...

    def next_due(self, now: float) -> float | None: ...
