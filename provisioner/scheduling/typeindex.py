"""A NodePool's instance types as bit positions, so "which types still fit" is a few integer ANDs.

A NodeClaim's options are a bitmask over its template's types. Resource fit uses, per resource, the types
sorted by allocatable and the mask of each suffix: the types with at least X of a resource are one binary
search away. Requirement and offering compatibility masks are cached by the requirement values they depend on.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceRequest, allocate
from provisioner.requirements import DOES_NOT_EXIST, NOT_IN, Requirement, Requirements


def declared_devices(instance_type: InstanceType) -> list[Device]:
    """The devices a type's drivers will publish once a node of it runs (its DRA declarations)."""
    devices = []
    for declaration in instance_type.devices:
        driver = str(declaration.get("driver", ""))
        pool = str(declaration.get("pool") or f"{instance_type.name}-pool")
        for spec in declaration.get("devices") or []:  # type: ignore[attr-defined]
            devices.append(Device.from_spec(spec, driver, pool))
    return devices


# What decides which of a type's offerings a NodeClaim can launch into: its zone, capacity type and reservation id.
_OfferingKey = tuple[Requirement | None, Requirement | None, Requirement | None]


def _offering_key(requirements: Requirements) -> _OfferingKey:
    return (requirements.get(wk.ZONE), requirements.get(wk.CAPACITY_TYPE), requirements.get(wk.RESERVATION_ID))


class PriceTable(NamedTuple):
    order: list[int]  # positions with a compatible offering, cheapest first
    prices: list[float]  # by position; inf where nothing is compatible
    capacity_types: list[frozenset[str]]  # by position


class TypeIndex:
    def __init__(self, instance_types: Sequence[InstanceType]) -> None:
        self.types = tuple(instance_types)
        self.all = (1 << len(self.types)) - 1
        # Types with reserved offerings: only then does a NodeClaim hold reservations (most catalogs have none).
        self.reserved = _or(1 << p for p, it in enumerate(self.types) if any(o.reserved for o in it.offerings))
        self._by_resource: dict[str, tuple[list[int], list[int]]] = {}
        self._by_capacity: dict[str, tuple[list[int], list[int], list[int]]] = {}
        for resource in {name for it in self.types for name in it.capacity}:
            order = sorted(range(len(self.types)), key=lambda i: self.types[i].capacity.get(resource, 0))
            values = [self.types[i].capacity.get(resource, 0) for i in order]
            prefix = [0] * (len(order) + 1)
            for j, position in enumerate(order):
                prefix[j + 1] = prefix[j] | (1 << position)
            self._by_capacity[resource] = (values, prefix, order)
        self._price_cache: dict[_OfferingKey, PriceTable] = {}
        self._device_cache: dict[tuple[object, ...], int] = {}
        resources = {name for it in self.types for name in it.allocatable}
        for resource in resources:
            order = sorted(range(len(self.types)), key=lambda i: self.types[i].allocatable.get(resource, 0))
            values = [self.types[i].allocatable.get(resource, 0) for i in order]
            suffix = [0] * (len(order) + 1)
            for j in range(len(order) - 1, -1, -1):
                suffix[j] = suffix[j + 1] | (1 << order[j])
            self._by_resource[resource] = (values, suffix)
        # key -> value -> mask of types whose requirement on key allows value
        self._values: dict[str, dict[str, int]] = {}
        # key -> mask of types that say the key does not exist on their nodes (a requirement with no values)
        self._absent: dict[str, int] = {}
        for position, it in enumerate(self.types):
            for key, requirement in it.requirements.items():
                if not requirement.values and not requirement.complement:
                    self._absent[key] = self._absent.get(key, 0) | (1 << position)
                for value in requirement.values:
                    by_value = self._values.setdefault(key, {})
                    by_value[value] = by_value.get(value, 0) | (1 << position)
        self.keys = frozenset(self._values) | frozenset(self._absent)
        self._with_key = {key: _or(self._values.get(key, {}).values()) | self._absent.get(key, 0) for key in self.keys}
        self._requirement_cache: dict[Requirement, int] = {}
        self._offering_cache: dict[_OfferingKey, int] = {}

    def __len__(self) -> int:
        return len(self.types)

    def fitting(self, requests: Mapping[str, int]) -> int:
        """Types whose allocatable covers every positive request (a resource a type lacks fits only zero)."""
        mask = self.all
        for resource, amount in requests.items():
            if amount <= 0:
                continue
            entry = self._by_resource.get(resource)
            if entry is None:
                return 0
            values, suffix = entry
            mask &= suffix[bisect_left(values, amount)]
            if not mask:
                return 0
        return mask

    def compatible(self, requirements: Requirements) -> int:
        """Types whose requirements intersect these (shared keys only) and that have a compatible available offering."""
        mask = self.intersecting(requirements)
        return mask & self._offering_mask(_offering_key(requirements)) if mask else 0

    def intersecting(self, requirements: Requirements) -> int:
        """Types whose own requirements intersect these on every key both define (Karpenter's
        Requirements.Intersects), whatever their offerings."""
        mask = self.all
        for key in self.keys:
            requirement = requirements.get(key)
            if requirement is not None:
                mask &= self._requirement_mask(requirement)
                if not mask:
                    return 0
        return mask

    def _requirement_mask(self, requirement: Requirement) -> int:
        cached = self._requirement_cache.get(requirement)
        if cached is not None:
            return cached
        key = requirement.key
        mask = self.all & ~self._with_key[key]  # types that leave the key undefined
        for value, value_mask in self._values.get(key, {}).items():
            if requirement.has(value):
                mask |= value_mask
        # Karpenter's Requirements.Intersects (scheduling/requirements.go:256-276): a type's DoesNotExist shares no
        # value with anything, and passes only a NotIn or DoesNotExist, which also hold where the key is absent.
        if requirement.operator in (NOT_IN, DOES_NOT_EXIST):
            mask |= self._absent.get(key, 0)
        self._requirement_cache[requirement] = mask
        return mask

    def _offering_mask(self, key: _OfferingKey) -> int:
        cached = self._offering_cache.get(key)
        if cached is not None:
            return cached
        mask = 0
        for position, it in enumerate(self.types):
            if any(o.available and o.compatible(*key) for o in it.offerings):
                mask |= 1 << position
        self._offering_cache[key] = mask
        return mask

    def within(self, limits: Mapping[str, int]) -> int:
        """Types whose capacity is at most `limits` for every limited resource they have."""
        mask = self.all
        for resource, amount in limits.items():
            entry = self._by_capacity.get(resource)
            if entry is not None:
                values, prefix, _ = entry
                mask &= prefix[bisect_right(values, amount)]
        return mask

    def priced(self, requirements: Requirements) -> PriceTable:
        """Positions with a compatible available offering, cheapest first (ties by name), with prices and the
        capacity types on offer. Only zone and capacity type decide which offerings count, so one table serves
        every NodeClaim pinned the same way."""
        key = _offering_key(requirements)
        cached = self._price_cache.get(key)
        if cached is not None:
            return cached
        prices = [float("inf")] * len(self.types)
        capacity_types: list[frozenset[str]] = [frozenset()] * len(self.types)
        for position, it in enumerate(self.types):
            compatible = [o for o in it.offerings if o.available and o.compatible(*key)]
            if compatible:
                prices[position] = min(o.price for o in compatible)
                capacity_types[position] = frozenset(o.capacity_type for o in compatible)
        order = sorted(
            (p for p in range(len(self.types)) if prices[p] != float("inf")),
            key=lambda p: (prices[p], self.types[p].name),
        )
        table = PriceTable(order, prices, capacity_types)
        self._price_cache[key] = table
        return table

    def bits(self, mask: int) -> str:
        """The mask as a string of "0"/"1" indexed by position, for fast membership tests in loops."""
        return format(mask, f"0{len(self.types)}b")[::-1] if self.types else ""

    def device_mask(self, requests: tuple[DeviceRequest, ...], classes: Mapping[str, DeviceClass]) -> int:
        """Types whose declared devices can satisfy every request at once (each device used once)."""
        key = (requests, tuple(sorted(classes)))
        cached = self._device_cache.get(key)
        if cached is None:
            cached = 0
            for position, it in enumerate(self.types):
                if it.devices and not isinstance(allocate(requests, declared_devices(it), classes), str):
                    cached |= 1 << position
            self._device_cache[key] = cached
        return cached

    def distinct_values(self, mask: int, requirement: Requirement) -> int:
        """How many values of `requirement.key` the types in `mask` offer within the requirement (for minValues)."""
        return sum(
            1
            for value, value_mask in self._values.get(requirement.key, {}).items()
            if value_mask & mask and requirement.has(value)
        )

    def positions(self, mask: int) -> Iterator[int]:
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def members(self, mask: int) -> list[InstanceType]:
        return [self.types[p] for p in self.positions(mask)]

    def max_capacity(self, mask: int) -> dict[str, int]:
        """Per-resource maximum capacity over the types in `mask` (for pessimistic limit accounting)."""
        result: dict[str, int] = {}
        if not mask:
            return result
        for resource, (values, _, order) in self._by_capacity.items():
            for j in range(len(order) - 1, -1, -1):
                if mask >> order[j] & 1:
                    if values[j] or self.types[order[j]].capacity.get(resource) is not None:
                        result[resource] = values[j]
                    break
        return result


def _or(masks: object) -> int:
    result = 0
    for mask in masks:  # type: ignore[attr-defined]
        result |= mask
    return result
