"""Kubernetes label selectors: the `-l` string syntax and `matchLabels`/`matchExpressions`, as requirement sets."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_TERM = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[^\s!=,()]+)"
    r"|(?P<key>[^\s!=,()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s!=,()]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?)\s*$"
)


class SelectorError(ValueError):
    """A label selector that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return labels.get(self.key) not in self.values  # NotIn matches an absent key too


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """All terms must match. An empty selector matches everything."""

    terms: tuple[SelectorTerm, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(term.matches(labels) for term in self.terms)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse kubectl's syntax: `app=web,tier!=db,env in (a,b),!legacy,team`."""
        terms = []
        for part in _split_top_level(text):
            match = _TERM.match(part)
            if not match:
                raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
            if match["absent"]:
                terms.append(SelectorTerm(match["absent"], "DoesNotExist"))
            elif match["op"]:
                operator = "NotIn" if match["op"] == "!=" else "In"
                terms.append(SelectorTerm(match["key"], operator, frozenset({match["value"]})))
            elif match["set"]:
                values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
                terms.append(SelectorTerm(match["key"], "In" if match["set"] == "in" else "NotIn", values))
            else:
                terms.append(SelectorTerm(match["key"], "Exists"))
        return cls(tuple(terms))

    @classmethod
    def from_spec(cls, spec: Mapping[str, object] | None) -> LabelSelector | None:
        """A metav1.LabelSelector; None stays None (selects nothing), {} selects everything."""
        if spec is None:
            return None
        match_labels: Mapping[str, object] = spec.get("matchLabels") or {}  # type: ignore[assignment]
        expressions: list[Mapping[str, object]] = spec.get("matchExpressions") or []  # type: ignore[assignment]
        terms = [SelectorTerm(str(k), "In", frozenset({str(v)})) for k, v in match_labels.items()]
        for expression in expressions:
            operator = str(expression.get("operator"))
            if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise SelectorError(f"{operator!r} is not a valid label selector operator")
            raw_values: list[object] = expression.get("values") or []  # type: ignore[assignment]
            values = frozenset(str(v) for v in raw_values)
            terms.append(SelectorTerm(str(expression["key"]), operator, values))
        return cls(tuple(terms))


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p for p in parts if p.strip()]
