"""Node requirements as value sets: Karpenter's Requirement/Requirements algebra over label keys."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from provisioner import labels as wk

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
GT, LT, GTE, LTE = "Gt", "Lt", "Gte", "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
_NEGATIVE = (NOT_IN, DOES_NOT_EXIST)
_UNBOUNDED = sys.maxsize


class RequirementError(ValueError):
    """A requirement that cannot be built (unknown operator, missing or non-integer values)."""


def _as_int(value: str) -> int | None:
    try:
        return int(value, 10)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """Allowed values of one label key: a finite set, or (complement) everything but a set, within bounds."""

    key: str
    values: frozenset[str] = frozenset()
    complement: bool = False
    greater_than: int | None = None  # strict: a value must be > greater_than
    less_than: int | None = None  # strict: a value must be < less_than
    min_values: int | None = None

    @classmethod
    def from_operator(
        cls, operator: str, key: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        key = wk.normalize_key(key)
        values = tuple(str(v) for v in values)
        if operator == IN:
            return cls(key, frozenset(values), False, min_values=min_values)
        if operator == NOT_IN:
            return cls(key, frozenset(values), True, min_values=min_values)
        if operator == EXISTS:
            return cls(key, frozenset(), True, min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, frozenset(), False, min_values=min_values)
        if operator in (GT, LT, GTE, LTE):
            if len(values) != 1 or _as_int(values[0]) is None:
                raise RequirementError(f"operator {operator} needs exactly one integer value, got {list(values)}")
            bound = int(values[0])
            if operator == GT:
                return cls(key, frozenset(), True, greater_than=bound, min_values=min_values)
            if operator == GTE:
                return cls(key, frozenset(), True, greater_than=bound - 1, min_values=min_values)
            if operator == LT:
                return cls(key, frozenset(), True, less_than=bound, min_values=min_values)
            return cls(key, frozenset(), True, less_than=bound + 1, min_values=min_values)
        raise RequirementError(f"unsupported operator {operator!r}, must be one of {', '.join(OPERATORS)}")

    @classmethod
    def in_values(cls, key: str, *values: str) -> Requirement:
        return cls(wk.normalize_key(key), frozenset(values))

    def _within(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return self.less_than is None or number < self.less_than

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._within(value)
        return value in self.values and self._within(value)

    def __len__(self) -> int:
        return _UNBOUNDED - len(self.values) if self.complement else len(self.values)

    @property
    def operator(self) -> str:
        if self.complement:
            return NOT_IN if len(self) < _UNBOUNDED else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def intersect(self, other: Requirement) -> Requirement:
        complement = self.complement and other.complement
        greater_than = _max_opt(self.greater_than, other.greater_than)
        less_than = _min_opt(self.less_than, other.less_than)
        min_values = _max_opt(self.min_values, other.min_values)
        if greater_than is not None and less_than is not None and greater_than >= less_than:
            return Requirement(self.key, min_values=min_values)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        bounded = Requirement(self.key, frozenset(), True, greater_than, less_than)
        values = frozenset(v for v in values if bounded._within(v))
        if not complement:
            # A finite set has already been filtered by the bounds; they carry no more information.
            greater_than = less_than = None
        return Requirement(self.key, values, complement, greater_than, less_than, min_values)

    def any_value(self) -> str:
        """A deterministic allowed value (Karpenter picks one at random; we pick the smallest)."""
        if not self.complement:
            return min(self.values) if self.values else ""
        low = 0 if self.greater_than is None else self.greater_than + 1
        high = _UNBOUNDED if self.less_than is None else self.less_than
        for candidate in range(low, min(high, low + len(self.values) + 1)):
            if str(candidate) not in self.values:
                return str(candidate)
        return ""

    def to_spec(self) -> dict[str, object]:
        """The NodeSelectorRequirement form, values sorted as Karpenter serialises them."""
        spec: dict[str, object] = {"key": self.key}
        if self.complement and not self.values and (self.greater_than is not None or self.less_than is not None):
            if self.greater_than is not None and self.less_than is None:
                spec.update(operator=GT, values=[str(self.greater_than)])
            elif self.less_than is not None and self.greater_than is None:
                spec.update(operator=LT, values=[str(self.less_than)])
            else:
                spec.update(operator=GT, values=[str(self.greater_than)])
        else:
            spec["operator"] = self.operator
            if self.values:
                spec["values"] = sorted(self.values)
        if self.min_values is not None:
            spec["minValues"] = self.min_values
        return spec

    def __str__(self) -> str:
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            text = f"{self.key} {operator}"
        else:
            text = f"{self.key} {operator} {sorted(self.values)}"
        if self.greater_than is not None:
            text += f" >{self.greater_than}"
        if self.less_than is not None:
            text += f" <{self.less_than}"
        return text


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


class Incompatible(Exception):
    """Two requirement sets cannot be satisfied together; `reasons` say which keys and values."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class Requirements(Mapping[str, Requirement]):
    """An immutable set of requirements keyed by label key; adding a key intersects it."""

    __slots__ = ("_by_key", "_hash")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        by_key: dict[str, Requirement] = {}
        for requirement in requirements:
            existing = by_key.get(requirement.key)
            by_key[requirement.key] = requirement if existing is None else existing.intersect(requirement)
        self._by_key = by_key
        self._hash: int | None = None

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        return cls(Requirement.in_values(key, value) for key, value in labels.items())

    @classmethod
    def from_specs(cls, specs: Iterable[Mapping[str, object]]) -> Requirements:
        requirements = []
        for spec in specs:
            raw_values = spec.get("values") or []
            values = [str(v) for v in raw_values] if isinstance(raw_values, list | tuple) else []
            min_values = spec.get("minValues")
            requirements.append(
                Requirement.from_operator(
                    str(spec["operator"]),
                    str(spec["key"]),
                    values,
                    int(min_values) if isinstance(min_values, int) else None,
                )
            )
        return cls(requirements)

    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __repr__(self) -> str:
        return f"Requirements({', '.join(str(r) for r in self._by_key.values())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self._by_key == other._by_key

    def __hash__(self) -> int:
        # Kept: pod classes (PodData.class_key) hold requirements, and a consolidation simulation looks its class
        # up in every existing node's set of classes that never fit (1,818 lookups at 20,000 pods).
        if self._hash is None:
            self._hash = hash(frozenset(self._by_key.values()))
        return self._hash

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement on `key`; an undefined key allows any value (Exists)."""
        return self._by_key.get(key) or Requirement(key, frozenset(), True)

    def merged(self, other: Iterable[Requirement] | Requirements) -> Requirements:
        items = other.values() if isinstance(other, Requirements) else other
        return Requirements([*self._by_key.values(), *items])

    def intersection_errors(self, incoming: Requirements) -> list[str]:
        """Why shared keys have no common value (two negative requirements always intersect)."""
        reasons = []
        for key in self._by_key.keys() & incoming._by_key.keys():
            existing, other = self._by_key[key], incoming._by_key[key]
            if len(existing.intersect(other)) == 0:
                if other.operator in _NEGATIVE and existing.operator in _NEGATIVE:
                    continue
                reasons.append(f"key {key}, {other} not in {existing}")
        return sorted(reasons)

    def compatibility_errors(
        self, incoming: Requirements, allow_undefined: frozenset[str] = wk.WELL_KNOWN_LABELS
    ) -> list[str]:
        """Karpenter's Compatible: custom keys must be defined here, then all shared keys must intersect."""
        reasons = []
        for key, requirement in incoming._by_key.items():
            if key in allow_undefined or key in self._by_key or requirement.operator in _NEGATIVE:
                continue
            reasons.append(f'label "{key}" does not have known values')
        return sorted(reasons) + self.intersection_errors(incoming)

    def compatible(self, incoming: Requirements, allow_undefined: frozenset[str] = wk.WELL_KNOWN_LABELS) -> bool:
        """Same verdict as `compatibility_errors`, without building messages."""
        mine = self._by_key
        for key, requirement in incoming._by_key.items():
            existing = mine.get(key)
            if existing is None:
                if key in allow_undefined or requirement.operator in _NEGATIVE:
                    continue
                return False
            if len(existing.intersect(requirement)) == 0 and not (
                requirement.operator in _NEGATIVE and existing.operator in _NEGATIVE
            ):
                return False
        return True

    def intersects(self, incoming: Requirements) -> bool:
        return not self.intersection_errors(incoming)

    def labels(self) -> dict[str, str]:
        """Labels implied by the requirements: one value per key that has any, restricted keys excluded."""
        result = {}
        for key, requirement in self._by_key.items():
            if wk.is_restricted_label(key) and key != wk.NODEPOOL:
                continue
            value = requirement.any_value()
            if value:
                result[key] = value
        return result

    def to_specs(self) -> list[dict[str, object]]:
        return [self._by_key[key].to_spec() for key in sorted(self._by_key)]
