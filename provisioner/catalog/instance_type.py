"""InstanceType and Offering: what a node of a type offers, where, at what price, and its allocatable."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from provisioner import labels as wk
from provisioner.quantity import Resources, add, subtract
from provisioner.requirements import Requirement, Requirements


@dataclass(frozen=True, slots=True)
class Offering:
    """One place and purchase option for a type: zone × capacity type, with an hourly price."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True

    def requirements(self) -> Requirements:
        return Requirements(
            [Requirement.in_values(wk.ZONE, self.zone), Requirement.in_values(wk.CAPACITY_TYPE, self.capacity_type)]
        )


@dataclass(frozen=True, slots=True)
class Overhead:
    """Resources held back from pods: kube-reserved, system-reserved and the eviction threshold."""

    kube_reserved: Resources = field(default_factory=dict)
    system_reserved: Resources = field(default_factory=dict)
    eviction_threshold: Resources = field(default_factory=dict)

    def total(self) -> Resources:
        return add(self.kube_reserved, self.system_reserved, self.eviction_threshold)


@dataclass(frozen=True)
class InstanceType:
    """A machine shape. `labels` are its single-valued requirements (arch, os, family, ...)."""

    name: str
    capacity: Resources
    offerings: tuple[Offering, ...]
    labels: dict[str, str] = field(default_factory=dict)
    overhead: Overhead = field(default_factory=Overhead)
    devices: tuple[dict[str, object], ...] = ()  # DRA declarations: {driver, pool, devices: [...]}

    @cached_property
    def allocatable(self) -> Resources:
        """Capacity minus overhead, per resource present in capacity, floored at zero."""
        remaining = subtract(self.capacity, self.overhead.total())
        return {name: max(remaining[name], 0) for name in self.capacity}

    @cached_property
    def requirements(self) -> Requirements:
        """The labels as `In` requirements plus the zones and capacity types of its offerings."""
        return Requirements(
            [
                Requirement.in_values(wk.INSTANCE_TYPE, self.name),
                *(Requirement.in_values(key, value) for key, value in self.labels.items()),
                Requirement(wk.ZONE, frozenset(o.zone for o in self.offerings)),
                Requirement(wk.CAPACITY_TYPE, frozenset(o.capacity_type for o in self.offerings)),
            ]
        )

    def compatible_offerings(self, requirements: Requirements) -> list[Offering]:
        """Available offerings whose zone and capacity type the requirements allow."""
        zone = requirements.get_or_exists(wk.ZONE)
        capacity_type = requirements.get_or_exists(wk.CAPACITY_TYPE)
        return [o for o in self.offerings if o.available and zone.has(o.zone) and capacity_type.has(o.capacity_type)]

    def cheapest_price(self, requirements: Requirements) -> float | None:
        prices = [o.price for o in self.compatible_offerings(requirements)]
        return min(prices) if prices else None


@dataclass(frozen=True)
class Catalog:
    """A named set of instance types, used by NodePools whose node class is one of `node_class_kinds`."""

    name: str
    instance_types: tuple[InstanceType, ...]
    node_class_kinds: tuple[str, ...] = ()
    description: str = ""

    def by_name(self) -> dict[str, InstanceType]:
        return {it.name: it for it in self.instance_types}
