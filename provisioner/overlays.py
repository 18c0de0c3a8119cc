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
# Karpenter's v1.SupportedNodeSelectorOps (Go lists the set unordered; this is its declaration order).
SUPPORTED_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
# v1.WellKnownValuesForRequirements: an In on these keys needs at least one of the values.
WELL_KNOWN_VALUES = {wk.CAPACITY_TYPE: frozenset({"on-demand", "spot", "reserved"})}
_ATOI = re.compile(r"^[+-]?\d+$")  # what Go's strconv.Atoi parses
_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(f"^{_NAME_FORMAT}$")
_LABEL_VALUE = re.compile(f"^({_NAME_FORMAT})?$")
_DNS_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS_SUBDOMAIN = re.compile(f"^{_DNS_FORMAT}$")
_LABEL_KEY_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character"
)
_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character"
)


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
    """NodeOverlay.RuntimeValidate (v1alpha1/nodeoverlay_validation.go:28): each requirement through Karpenter's
    v1.ValidateRequirement, NotIn without values, then each well-known resource in capacity; Go's messages, joined
    as multierr joins them."""
    problems = []
    for requirement in overlay.requirements:
        errors = requirement_problems(requirement)
        if errors:
            problems.append(f"invalid value: {'; '.join(errors)} in requirements, restricted")
        if requirement.operator == "NotIn" and not requirement.values:
            problems.append(f"key {requirement.key} with operator NotIn must have a value defined")
    for name in overlay.capacity:
        if name in RESTRICTED_RESOURCES:
            problems.append(f"invalid capacity: {name} in resource, restricted")
    return "; ".join(problems) or None


def requirement_problems(requirement: NodeSelectorRequirement) -> list[str]:
    """Karpenter's v1.ValidateRequirement (apis/v1/nodeclaim_validation.go:117), on the normalized key."""
    key, operator, values = wk.normalize_key(requirement.key), requirement.operator, requirement.values
    errors = []
    if operator not in SUPPORTED_OPERATORS:
        errors.append(f"key {key} has an unsupported operator {operator} not in [{' '.join(SUPPORTED_OPERATORS)}]")
    if key not in wk.WELL_KNOWN_LABELS and wk.is_restricted_label(key):
        errors.append(
            f"using label {key} is not allowed as it might interfere with the internal provisioning logic; specify a "
            f"well known label: [{' '.join(sorted(wk.WELL_KNOWN_LABELS))}], or a custom label that does not use a "
            f"restricted domain: [{' '.join(sorted(wk.RESTRICTED_LABEL_DOMAINS))}]"
        )
    known = WELL_KNOWN_VALUES.get(key)
    if known is not None and operator == "In" and not set(values) & known:
        # Go prints the set as a map and the values as a slice.
        known_text = " ".join(f"{value}:{{}}" for value in sorted(known))
        errors.append(
            f"no valid values found in [{' '.join(values)}] for {key}, expected one of: map[{known_text}], got: "
            f"[{' '.join(v for v in values if v not in known)}]"
        )
    errors += [f"key {key} is not a qualified name, {problem}" for problem in label_key_problems(key)]
    for value in values:
        errors += [f"invalid value {value} for key {key}, {problem}" for problem in label_value_problems(value)]
    if operator == "In" and not values:
        errors.append(f"key {key} with operator In must have a value defined")
    if operator in ("Gt", "Lt", "Gte", "Lte") and (
        len(values) != 1 or not _ATOI.fullmatch(values[0]) or int(values[0]) < 0
    ):
        errors.append(f"key {key} with operator {operator} must have a single positive integer value")
    return errors


def label_key_problems(key: str) -> list[str]:
    """apimachinery's IsQualifiedName (validate/content/kube.go IsLabelKey, v0.36.1): its messages for `key`."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            f"a valid label key {_regex_error(_LABEL_KEY_MESSAGE, _NAME_FORMAT, 'MyName', 'my.name', '123-abc')} "
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    problems = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 bytes")
            if not _DNS_SUBDOMAIN.fullmatch(prefix):
                problems.append(f"prefix part {_regex_error(_DNS_SUBDOMAIN_MESSAGE, _DNS_FORMAT, 'example.com')}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 bytes")
    if not _NAME.fullmatch(name):
        problems.append(f"name part {_regex_error(_LABEL_KEY_MESSAGE, _NAME_FORMAT, 'MyName', 'my.name', '123-abc')}")
    return problems


def label_value_problems(value: str) -> list[str]:
    """apimachinery's IsValidLabelValue (validate/content/kube.go IsLabelValue, v0.36.1)."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 bytes")
    if not _LABEL_VALUE.fullmatch(value):
        problems.append(_regex_error(_LABEL_VALUE_MESSAGE, f"({_NAME_FORMAT})?", "MyValue", "my_value", "12345"))
    return problems


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    # Go's RegexError: each example is followed by ", " and joined by " or ".
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


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
    # The NodePools whose types were evaluated (Karpenter's evaluatedNodePools): one left out (its provider failed,
    # or it came after this evaluation) gets no instance types until an evaluation includes it.
    evaluated: frozenset[str] = frozenset()

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
    result = OverlayResult(evaluated=frozenset(pool.name for pool, _ in pools))
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
