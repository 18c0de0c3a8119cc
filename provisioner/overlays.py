"""NodeOverlays (karpenter.sh/v1alpha1, Karpenter v1.7, gate NodeOverlay): what they change in each NodePool's
instance types, as Karpenter's nodeoverlay controller and InstanceTypeStore work it out.

Overlays apply in weight order (higher first; equal weights by name, descending). For each NodePool, an overlay
reaches the instance types whose requirements (with the NodePool's name and template labels) its requirements are
compatible with, and of those the offerings its requirements allow. The first overlay to set an offering's price
(`price`, or `priceAdjustment` such as `-10%` or `+0.5`) decides it; capacity (extended resources only) merges
per resource, the heavier overlay winning. Two overlays of the same weight that change the same offering's price or
the same resource of a type conflict: the later one is refused entirely (ValidationSucceeded=False, Conflict).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from provisioner import labels as wk
from provisioner.catalog import InstanceType, Offering
from provisioner.objects import NodePool, NodeSelectorRequirement
from provisioner.quantity import Resources
from provisioner.requirements import Requirement, Requirements

# Resources an overlay may not change (Karpenter's v1.WellKnownResources).
RESTRICTED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
PRICE = re.compile(r"^\d+(\.\d+)?$")
PRICE_ADJUSTMENT = re.compile(r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$")
CONFLICT_MESSAGE = "conflict with another overlay"


@dataclass(frozen=True)
class NodeOverlay:
    name: str
    requirements: tuple[NodeSelectorRequirement, ...]
    price: str | None = None
    price_adjustment: str | None = None
    capacity: Resources = field(default_factory=dict)
    weight: int | None = None
    generation: int = 1

    def requirement_set(self) -> Requirements:
        return Requirements(r.to_requirement() for r in self.requirements)

    @property
    def price_change(self) -> str | None:
        return self.price if self.price is not None else self.price_adjustment


def adjusted_price(price: float, change: str | None) -> float:
    """Karpenter's AdjustedPrice: an absolute price, or a signed amount or percentage added to it, never below 0."""
    if not change:
        return price
    if not change.startswith(("+", "-")):
        return float(change)
    percentage = change.endswith("%")
    adjusted = price * (1 + float(change[:-1]) / 100) if percentage else price + float(change)
    return adjusted if adjusted >= 0 else 0.0


def runtime_problems(overlay: NodeOverlay) -> str | None:
    """NodeOverlay.RuntimeValidate: a restricted requirement key, NotIn without values, a well-known resource."""
    problems = []
    for requirement in overlay.requirements:
        key = wk.normalize_key(requirement.key)
        if wk.is_restricted_label(key) and key not in wk.WELL_KNOWN_LABELS:
            problems.append(
                f"invalid value: using label {key} is not allowed as it might interfere with the internal "
                "provisioning logic in requirements, restricted"
            )
        if requirement.operator == "NotIn" and not requirement.values:
            problems.append(f"key {key} with operator NotIn must have a value defined")
    for name in overlay.capacity:
        if name in RESTRICTED_RESOURCES:
            problems.append(f"invalid capacity: {name} in resource, restricted")
    return "; ".join(problems) or None


def offering_key(offering: Offering) -> tuple[str, str, str]:
    """What identifies an offering across overlays (Karpenter keys them by their requirements)."""
    return (offering.zone, offering.capacity_type, offering.reservation_id)


@dataclass
class _TypeUpdate:
    prices: dict[tuple[str, str, str], tuple[str, int]] = field(default_factory=dict)  # offering -> change, weight
    capacity: dict[str, int] = field(default_factory=dict)
    capacity_weight: int | None = None
    capacity_resources: frozenset[str] = frozenset()  # the last (lowest-weight) overlay's resources


@dataclass
class OverlayResult:
    """What the overlays do: per NodePool and type the updates, and each overlay's verdict."""

    updates: dict[str, dict[str, _TypeUpdate]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)  # overlay -> runtime validation message
    conflicts: list[str] = field(default_factory=list)
    # overlay -> NodePool -> types it changes (for the dashboard)
    reach: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def apply(self, nodepool: str, types: Sequence[InstanceType]) -> list[InstanceType]:
        """The NodePool's types with the overlays' prices and capacities (types no overlay reaches are kept)."""
        by_type = self.updates.get(nodepool)
        if not by_type:
            return list(types)
        return [_applied(it, by_type[it.name]) if it.name in by_type else it for it in types]


def _applied(it: InstanceType, update: _TypeUpdate) -> InstanceType:
    offerings = it.offerings
    if update.prices:
        offerings = tuple(
            replace(o, price=adjusted_price(o.price, change[0]), price_overlaid=True)
            if (change := update.prices.get(offering_key(o))) is not None
            else o
            for o in it.offerings
        )
    capacity = {**it.capacity, **update.capacity} if update.capacity else it.capacity
    return replace(it, offerings=offerings, capacity=capacity, capacity_overlaid=bool(update.capacity))


def ordered(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """NodeOverlayList.OrderByWeight: heavier first, equal weights by name descending."""
    return sorted(overlays, key=lambda o: (o.weight or 0, o.name), reverse=True)


def evaluate(
    overlays: Iterable[NodeOverlay], pools: Sequence[tuple[NodePool, Sequence[InstanceType]]]
) -> OverlayResult:
    result = OverlayResult()
    for overlay in ordered(overlays):
        problem = runtime_problems(overlay)
        if problem is not None:
            result.invalid[overlay.name] = problem
            continue
        reached = {
            pool.name: [(it, offerings) for it in types if (offerings := _overlaid_offerings(pool, it, overlay))]
            for pool, types in pools
        }
        if any(
            _conflicts(result, pool, it, offerings, overlay) for pool, hits in reached.items() for it, offerings in hits
        ):
            result.conflicts.append(overlay.name)
            continue
        for pool, hits in reached.items():
            for it, offerings in hits:
                _record(result.updates.setdefault(pool, {}).setdefault(it.name, _TypeUpdate()), offerings, overlay)
            if hits:
                result.reach.setdefault(overlay.name, {})[pool] = [it.name for it, _ in hits]
    return result


def _overlaid_offerings(pool: NodePool, it: InstanceType, overlay: NodeOverlay) -> list[Offering]:
    """getOverlaidOfferings: the type (with the NodePool's name and template labels) must be compatible with the
    overlay's requirements (every key defined), then the offerings those requirements allow."""
    wanted = overlay.requirement_set()
    have = Requirements(
        [
            Requirement.in_values(wk.NODEPOOL, pool.name),
            *(Requirement.in_values(k, v) for k, v in pool.template_labels.items()),
            *it.requirements.values(),
        ]
    )
    if not have.compatible(wanted, allow_undefined=frozenset()):
        return []
    return [o for o in it.offerings if wanted.compatible(o.requirements())]


def _conflicts(
    result: OverlayResult, pool: str, it: InstanceType, offerings: list[Offering], overlay: NodeOverlay
) -> bool:
    update = result.updates.get(pool, {}).get(it.name)
    if update is None:
        return False
    weight = overlay.weight or 0
    if overlay.price_change is not None and any(
        (change := update.prices.get(offering_key(o))) is not None and change[1] == weight for o in offerings
    ):
        return True
    return bool(
        overlay.capacity and update.capacity_weight == weight and update.capacity_resources & set(overlay.capacity)
    )


def _record(update: _TypeUpdate, offerings: list[Offering], overlay: NodeOverlay) -> None:
    weight = overlay.weight or 0
    change = overlay.price_change
    if change is not None:
        for offering in offerings:
            key = offering_key(offering)
            current = update.prices.get(key)
            # A heavier overlay already priced it: keep its price, remember the lighter weight for conflicts.
            update.prices[key] = (current[0], weight) if current is not None else (change, weight)
    if overlay.capacity:
        for name, amount in overlay.capacity.items():
            update.capacity.setdefault(name, amount)
        update.capacity_resources = frozenset(overlay.capacity)
        update.capacity_weight = weight
