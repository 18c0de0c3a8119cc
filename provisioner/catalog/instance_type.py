"""InstanceType and Offering: what a node of a type offers, where, at what price, and its allocatable."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from provisioner import labels as wk
from provisioner.quantity import Resources, add, subtract
from provisioner.requirements import Requirement, Requirements

# Resource names of pre-allocated huge pages (corev1.ResourceHugePagesPrefix).
HUGEPAGES_PREFIX = "hugepages-"


@dataclass(frozen=True, slots=True)
class Offering:
    """One place and purchase option for a type: zone × capacity type, with an hourly price. A reserved offering
    belongs to a capacity reservation (its id, its type, and how many instances it can still launch)."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    reservation_id: str = ""
    reservation_capacity: int = 0
    reservation_type: str = ""
    price_overlaid: bool = False  # a NodeOverlay set this price

    @property
    def reserved(self) -> bool:
        return self.capacity_type == wk.CAPACITY_TYPE_RESERVED

    @property
    def launchable(self) -> bool:
        """Whether a node can be launched into it now (Karpenter's Offering.Launchable, cloudprovider/types.go:623):
        available, and for a reservation some capacity left, since a full reservation can be healthy (available)
        and still fail every launch."""
        return self.available and (not self.reserved or self.reservation_capacity > 0)

    def labels(self) -> dict[str, str]:
        """The labels a node launched into this offering carries for it."""
        labels = {wk.ZONE: self.zone, wk.CAPACITY_TYPE: self.capacity_type}
        if self.reservation_id:
            labels[wk.RESERVATION_ID] = self.reservation_id
        if self.reservation_type:
            labels[wk.RESERVATION_TYPE] = self.reservation_type
        return labels

    def requirements(self) -> Requirements:
        return Requirements.from_labels(self.labels())

    def compatible(
        self, zone: Requirement | None, capacity_type: Requirement | None, reservation: Requirement | None = None
    ) -> bool:
        """Whether requirements on zone, capacity type and reservation id allow this offering (an offering that is
        not a reservation leaves the reservation id undefined, which a NotIn or DoesNotExist allows)."""
        if zone is not None and not zone.has(self.zone):
            return False
        if capacity_type is not None and not capacity_type.has(self.capacity_type):
            return False
        if reservation is None:
            return True
        if self.reservation_id:
            return reservation.has(self.reservation_id)
        return reservation.operator in ("NotIn", "DoesNotExist")


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
    """A machine shape. `labels` are its single-valued requirements (arch, os, family, ...); `extra_requirements`
    the ones a label cannot say, as Karpenter's InstanceType.Requirements holds them: a key with several values
    (`In`, such as the OSes an image family boots) or with none (`DoesNotExist`: a label other types carry and
    this one never will, so a pod requiring it to exist cannot land here)."""

    name: str
    capacity: Resources
    offerings: tuple[Offering, ...]
    labels: dict[str, str] = field(default_factory=dict)
    overhead: Overhead = field(default_factory=Overhead)
    devices: tuple[dict[str, object], ...] = ()  # DRA declarations: {driver, pool, devices: [...]}
    capacity_overlaid: bool = False  # a NodeOverlay added capacity
    extra_requirements: tuple[Requirement, ...] = ()  # In or DoesNotExist only; intersected with the labels'
    # How many volumes of each CSI driver a node of the type can attach (cloudprovider/types.go:182); a driver not
    # named is unlimited. A node's CSINode, once published, overrides these.
    volume_attachment_limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def price_overlaid(self) -> bool:
        return any(o.price_overlaid for o in self.offerings)

    @cached_property
    def allocatable(self) -> Resources:
        """Capacity minus overhead, per resource present in capacity, floored at zero; hugepages are carved out of
        memory, so their capacity comes off allocatable memory too (computeAllocatable, cloudprovider/types.go:342)."""
        remaining = subtract(self.capacity, self.overhead.total())
        allocatable = {name: max(remaining[name], 0) for name in self.capacity}
        hugepages = [amount for name, amount in self.capacity.items() if name.startswith(HUGEPAGES_PREFIX)]
        if hugepages:
            allocatable["memory"] = max(allocatable.get("memory", 0) - sum(hugepages), 0)
        return allocatable

    @cached_property
    def requirements(self) -> Requirements:
        """The labels as `In` requirements, the extra requirements, and the zones and capacity types of its
        offerings."""
        return Requirements(
            [
                Requirement.in_values(wk.INSTANCE_TYPE, self.name),
                *(Requirement.in_values(key, value) for key, value in self.labels.items()),
                *self.extra_requirements,
                Requirement(wk.ZONE, frozenset(o.zone for o in self.offerings)),
                Requirement(wk.CAPACITY_TYPE, frozenset(o.capacity_type for o in self.offerings)),
            ]
        )

    def compatible_offerings(self, requirements: Requirements) -> list[Offering]:
        """Available offerings whose zone, capacity type and reservation the requirements allow."""
        zone, capacity_type = requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE)
        reservation = requirements.get(wk.RESERVATION_ID)
        return [o for o in self.offerings if o.available and o.compatible(zone, capacity_type, reservation)]

    def cheapest_price(self, requirements: Requirements) -> float | None:
        prices = [o.price for o in self.compatible_offerings(requirements)]
        return min(prices) if prices else None


def order_by_price(instance_types: Sequence[InstanceType], requirements: Requirements) -> list[InstanceType]:
    """Karpenter's InstanceTypes.OrderByPrice (cloudprovider/types.go:396): cheapest launchable offering the
    requirements allow first, a type with none last; stable, as Go's sort.Slice is not but its tests never tie.
    Launchable, not available: a full reservation's near-zero price must not rank a type cheap."""

    def cheapest(it: InstanceType) -> float:
        zone, capacity_type = requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE)
        reservation = requirements.get(wk.RESERVATION_ID)
        prices = [o.price for o in it.offerings if o.launchable and o.compatible(zone, capacity_type, reservation)]
        return min(prices, default=math.inf)

    return sorted(instance_types, key=cheapest)


@dataclass(frozen=True)
class Catalog:
    """A named set of instance types, used by NodePools whose node class is one of `node_class_kinds`."""

    name: str
    instance_types: tuple[InstanceType, ...]
    node_class_kinds: tuple[str, ...] = ()
    description: str = ""

    def by_name(self) -> dict[str, InstanceType]:
        return {it.name: it for it in self.instance_types}
