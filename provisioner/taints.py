"""Node taints and pod tolerations with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
EQUAL, EXISTS = "Equal", "Exists"
LT, GT = "Lt", "Gt"  # Kubernetes 1.35's TaintTolerationComparisonOperators
_INT64 = 2**63

DISRUPTED = "karpenter.sh/disrupted"


def has_disrupted_taint(node: Mapping[str, Any]) -> bool:
    """Whether a Node object carries `karpenter.sh/disrupted` (a disruption or termination has taken it)."""
    return any(t.get("key") == DISRUPTED for t in (node.get("spec") or {}).get("taints") or [])


UNREGISTERED = "karpenter.sh/unregistered"
# Taints a node sheds on its own while it starts (Karpenter's KnownEphemeralTaints, matched by key and effect as
# Taint.MatchTaint does, and its KnownEphemeralTaintKeyPrefixes): ignored on uninitialised Karpenter nodes, and a
# NodeClaim is not Initialized while its Node still has one.
KNOWN_EPHEMERAL_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", NO_SCHEDULE),
        ("node.kubernetes.io/not-ready", NO_EXECUTE),
        ("node.kubernetes.io/unreachable", NO_SCHEDULE),
        ("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE),
        (UNREGISTERED, NO_EXECUTE),
    }
)
EPHEMERAL_TAINT_KEY_PREFIXES = ("readiness.k8s.io/",)  # the Node Readiness Controller's, one key per rule


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> Taint:
        return cls(key=str(spec["key"]), effect=str(spec["effect"]), value=str(spec.get("value") or ""))

    @classmethod
    def parse(cls, text: str) -> Taint:
        """Parse kubectl's `key=value:Effect` / `key:Effect` form."""
        body, _, effect = text.rpartition(":")
        if not body or effect not in EFFECTS:
            raise ValueError(f"invalid taint spec {text!r}: expected key[=value]:Effect with Effect in {EFFECTS}")
        key, _, value = body.partition("=")
        return cls(key=key, effect=effect, value=value)

    def to_spec(self) -> dict[str, str]:
        spec = {"key": self.key, "effect": self.effect}
        if self.value:
            spec["value"] = self.value
        return spec

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def is_known_ephemeral(taint: Taint | None) -> bool:
    """Whether a node is expected to shed `taint` once it has started (Karpenter's IsKnownEphemeralTaint; no taint
    is not one)."""
    if taint is None:
        return False
    return (taint.key, taint.effect) in KNOWN_EPHEMERAL_TAINTS or taint.key.startswith(EPHEMERAL_TAINT_KEY_PREFIXES)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> Toleration:
        seconds = spec.get("tolerationSeconds")
        return cls(
            key=str(spec.get("key") or ""),
            operator=str(spec.get("operator") or EQUAL),
            value=str(spec.get("value") or ""),
            effect=str(spec.get("effect") or ""),
            toleration_seconds=int(seconds) if isinstance(seconds, int) else None,
        )

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint: empty effect/key match all; Exists ignores the value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == EXISTS:
            return True
        if self.operator in (EQUAL, ""):
            return self.value == taint.value
        if self.operator in (LT, GT):
            # Karpenter's Taints.Tolerates enables the comparison operators (taints.go:79): both values decimal
            # integers, the taint's below (Lt) or above (Gt) the toleration's.
            mine, theirs = _decimal_integer(self.value), _decimal_integer(taint.value)
            if mine is None or theirs is None:
                return False
            return theirs < mine if self.operator == LT else theirs > mine
        return False


def _decimal_integer(text: str) -> int | None:
    """apimachinery's IsDecimalInteger then ParseInt(64): an optional '-', no leading zero (but "0"), digits, within
    int64."""
    digits = text[1:] if text.startswith("-") else text
    if not digits.isascii() or not digits.isdigit() or (digits.startswith("0") and text != "0"):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


TOLERATE_PREFER_NO_SCHEDULE = Toleration(operator=EXISTS, effect=PREFER_NO_SCHEDULE)


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> list[Taint]:
    """The taints no toleration matches (every effect counts, PreferNoSchedule included, as in Karpenter)."""
    tolerations = tuple(tolerations)
    return [taint for taint in taints if not any(t.tolerates(taint) for t in tolerations)]


def tolerates_all(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> bool:
    return not untolerated(taints, tolerations)
