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
    """Allowed values of one label key: a finite set, or (complement) everything but a set, within inclusive integer
    bounds. As in Karpenter v1.9+, Gt N is held as Gte N+1 and Lt N as Lte N-1, so a NodeClaim written from it says
    Gte/Lte."""

    key: str
    values: frozenset[str] = frozenset()
    complement: bool = False
    gte: int | None = None  # inclusive: a value must be >= gte
    lte: int | None = None  # inclusive: a value must be <= lte
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
                if bound >= _UNBOUNDED:
                    return cls(key, frozenset(), False, min_values=min_values)  # Gt MaxInt matches nothing
                return cls(key, frozenset(), True, gte=bound + 1, min_values=min_values)
            if operator == GTE:
                return cls(key, frozenset(), True, gte=bound, min_values=min_values)
            if operator == LT:
                return cls(key, frozenset(), True, lte=bound - 1, min_values=min_values)
            return cls(key, frozenset(), True, lte=bound, min_values=min_values)
        raise RequirementError(f"unsupported operator {operator!r}, must be one of {', '.join(OPERATORS)}")

    @classmethod
    def in_values(cls, key: str, *values: str) -> Requirement:
        return cls(wk.normalize_key(key), frozenset(values))

    def _within(self, value: str) -> bool:
        return _within_bounds(value, self.gte, self.lte)

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
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        min_values = _max_opt(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, min_values=min_values)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if _within_bounds(v, gte, lte))
        if not complement:
            # A finite set has already been filtered by the bounds; they carry no more information.
            gte = lte = None
        return Requirement(self.key, values, complement, gte, lte, min_values)

    def any_value(self) -> str:
        """A deterministic allowed value (Karpenter picks one at random; we pick the smallest)."""
        if not self.complement:
            return min(self.values) if self.values else ""
        low = 0 if self.gte is None else self.gte
        high = _UNBOUNDED if self.lte is None else self.lte + 1
        for candidate in range(low, min(high, low + len(self.values) + 1)):
            if str(candidate) not in self.values:
                return str(candidate)
        return ""

    def to_specs(self) -> list[dict[str, object]]:
        """The NodeSelectorRequirement form(s), as Karpenter serialises them: a bound is Gte or Lte (a requirement
        with both is two), values sorted."""
        if self.gte is not None and self.lte is not None:
            return [self._spec(GTE, [str(self.gte)]), self._spec(LTE, [str(self.lte)])]
        return [self.to_spec()]

    def to_spec(self) -> dict[str, object]:
        """One NodeSelectorRequirement (with both bounds, the lower: `to_specs` gives both)."""
        if self.gte is not None:
            return self._spec(GTE, [str(self.gte)])
        if self.lte is not None:
            return self._spec(LTE, [str(self.lte)])
        return self._spec(self.operator, sorted(self.values))

    def _spec(self, operator: str, values: list[str]) -> dict[str, object]:
        spec: dict[str, object] = {"key": self.key, "operator": operator}
        if values:
            spec["values"] = values
        if self.min_values is not None:
            spec["minValues"] = self.min_values
        return spec

    def __str__(self) -> str:
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            text = f"{self.key} {operator}"
        else:
            values = sorted(self.values)
            if len(values) > 5:
                values = [*values[:5], f"and {len(values) - 5} others"]
            text = f"{self.key} {operator} [{' '.join(values)}]"  # as Go prints a slice, which Karpenter's messages use
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text


def _within_bounds(value: str, gte: int | None, lte: int | None) -> bool:
    """Bounds allow only integers between them; no bounds allow anything."""
    if gte is None and lte is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return (gte is None or number >= gte) and (lte is None or number <= lte)


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

    def __str__(self) -> str:
        """As Karpenter prints Requirements (requirements.go:287): sorted, comma-joined, without the hostname."""
        return ", ".join(sorted(str(r) for key, r in self._by_key.items() if key != wk.HOSTNAME))

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
            reasons.append(self._undefined(key, allow_undefined))
        return sorted(reasons) + self.intersection_errors(incoming)

    def compatibility_error(
        self, incoming: Requirements, allow_undefined: frozenset[str] = wk.WELL_KNOWN_LABELS
    ) -> str | None:
        """Karpenter's Compatible error text (requirements.go:163): the first undefined custom key alone, else every
        shared key without a common value, joined as multierr joins them; None when compatible."""
        for key in sorted(incoming._by_key):
            if key in allow_undefined or key in self._by_key or incoming._by_key[key].operator in _NEGATIVE:
                continue
            return self._undefined(key, allow_undefined)
        return "; ".join(self.intersection_errors(incoming)) or None

    def _undefined(self, key: str, allow_undefined: frozenset[str]) -> str:
        return f'label "{key}" does not have known values{self._label_hint(key, allow_undefined)}'

    def _label_hint(self, key: str, allow_undefined: frozenset[str]) -> str:
        """labelHint (requirements.go:189): a known key that contains `key`, or ends with its name part, is named as
        the likely intended one; keys allowed undefined first, then this set's own. Go visits each set in map order,
        so where two keys would do it names either; karpui names the first in sorted order."""
        suffix = key.split("/", 1)[1] if "/" in key else key
        for candidates in (sorted(allow_undefined), sorted(self._by_key)):
            for known in candidates:
                if key in known or known.endswith(suffix):
                    return f' (typo of "{known}"?)'
        return ""

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
        return [spec for key in sorted(self._by_key) for spec in self._by_key[key].to_specs()]
