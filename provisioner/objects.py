"""Frozen domain types for the Karpenter API objects the engine reasons about (NodePool, node classes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner import labels as wk
from provisioner.durations import parse_duration
from provisioner.quantity import Resources
from provisioner.requirements import Requirement, Requirements
from provisioner.taints import Taint

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
# Karpenter v1.14: consolidates as WhenEmptyOrUnderutilized, but a move must score at least 1/k (k = 2).
BALANCED = "Balanced"
CONSOLIDATION_POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)
DISRUPTION_REASONS = ("Underutilized", "Empty", "Drifted", "Unhealthy")  # the CRD's enum, in its order


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """A requirement in the API's operator form, kept as written so manifests round-trip."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None

    def to_requirement(self) -> Requirement:
        return Requirement.from_operator(self.operator, self.key, self.values, self.min_values)

    def to_spec(self) -> dict[str, object]:
        spec: dict[str, object] = {"key": self.key, "operator": self.operator}
        if self.values:
            spec["values"] = list(self.values)
        if self.min_values is not None:
            spec["minValues"] = self.min_values
        return spec


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Budget:
    """A disruption budget: `nodes` is a count ("5") or a percentage ("10%")."""

    nodes: str = "10%"
    schedule: str | None = None
    duration: str | None = None
    reasons: tuple[str, ...] | None = None  # None: applies to every reason

    def allowed(self, total_nodes: int) -> int:
        """How many nodes this budget allows to be disrupted; percentages round up, as Karpenter's do."""
        if self.nodes.endswith("%"):
            percent = int(self.nodes[:-1])
            return -(-total_nodes * percent // 100)
        return int(self.nodes)


DEFAULT_BUDGETS = (Budget(nodes="10%"),)


@dataclass(frozen=True, slots=True)
class NodePool:
    """A karpenter.sh/v1 NodePool after defaulting; durations kept as written (e.g. "720h", "Never")."""

    name: str
    node_class_ref: NodeClassRef
    requirements: tuple[NodeSelectorRequirement, ...] = ()
    template_labels: dict[str, str] = field(default_factory=dict)
    template_annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    expire_after: str = "720h"
    termination_grace_period: str | None = None
    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: str = "0s"
    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS
    limits: Resources = field(default_factory=dict)
    weight: int | None = None
    # A static NodePool (Karpenter v1.8+, gate StaticCapacity): this many NodeClaims, whatever the pods need.
    replicas: int | None = None
    labels: dict[str, str] = field(default_factory=dict)  # the NodePool object's own metadata
    annotations: dict[str, str] = field(default_factory=dict)
    generation: int = 1  # metadata.generation: conditions record the one they were set at

    @property
    def expire_after_seconds(self) -> int | None:
        return parse_duration(self.expire_after, allow_never=True)

    @property
    def consolidate_after_seconds(self) -> int | None:
        return parse_duration(self.consolidate_after, allow_never=True)

    def template_requirements(self) -> Requirements:
        """Requirements ∩ template labels ∩ `karpenter.sh/nodepool In [name]`: what every NodeClaim carries."""
        return Requirements(
            [
                *(r.to_requirement() for r in self.requirements),
                *(Requirement.in_values(k, v) for k, v in self.template_labels.items()),
                Requirement.in_values(wk.NODEPOOL, self.name),
            ]
        )

    @property
    def static(self) -> bool:
        return self.replicas is not None

    def ordering_key(self) -> tuple[int, str]:
        """Sort key for Karpenter's order: weight descending, then name descending."""
        return (self.weight or 0, self.name)


@dataclass(frozen=True, slots=True)
class NodeClass:
    """A provider node class (KWOKNodeClass, EC2NodeClass); its spec is kept as given."""

    api_version: str
    kind: str
    name: str
    spec: dict[str, object] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    generation: int = 1

    @property
    def group(self) -> str:
        return self.api_version.split("/", 1)[0]
