"""Kubernetes resource quantities ("500m", "1Gi", "1e3") parsed strictly into exact integer milli-units."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

# The pattern of Kubernetes' resource.Quantity (and of Karpenter's CRDs); anything else is refused.
_QUANTITY = re.compile(
    r"^(?P<sign>[+-])?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Resources whose natural unit is bytes, printed with binary suffixes when exact.
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")

MILLI = 1000
# Every amount is held in milli-units, and Kubernetes reads quantities as int64 milli-values (MilliValue(), as the
# scheduler does for CPU), so a larger amount has no meaning there; nor would it fit the database's bigint columns.
MAX_MILLI = 2**63 - 1

Resources = dict[str, int]
"""A resource list: resource name -> exact amount in milli-units (cpu "1" is 1000, memory "1Ki" is 1_024_000)."""


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def parse_quantity(text: str | int) -> int:
    """Parse a quantity into milli-units, rounding sub-milli fractions up as Kubernetes does."""
    if isinstance(text, bool):
        raise QuantityError(f"quantities must be strings or integers, not {text!r}")
    if isinstance(text, int):
        return _bounded(text * MILLI, str(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantities must be strings or integers, not {type(text).__name__}")
    return _parse_text(text)


def _bounded(milli: int, text: str) -> int:
    if abs(milli) > MAX_MILLI:
        raise QuantityError(f"quantity {_echo(text)} is too large: at most {MAX_MILLI}m (an int64 of milli-units)")
    return milli


def _echo(text: str) -> str:
    return repr(text if len(text) <= 64 else f"{text[:64]}…")


# A cluster repeats a handful of quantities ("500m", "512Mi") across thousands of pods; exact Fraction arithmetic
# is the slow part, so each distinct string is parsed once. Errors are raised, never cached.
@functools.lru_cache(maxsize=8192)
def _parse_text(text: str) -> int:
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"quantities must match the regular expression of Kubernetes quantities: {_echo(text)}")
    if len(match["number"]) > 64:  # 2^63 has 19 digits: more only cost time in Fraction arithmetic
        raise QuantityError(f"quantity {_echo(text)} has more than 64 digits")
    value = Fraction(match["number"])
    if match["binary"]:
        value *= _BINARY[match["binary"]]
    elif match["decimal"]:
        value *= _DECIMAL[match["decimal"]]
    elif match["exponent"]:
        exponent = int(match["exponent"])
        if abs(exponent) > 30:
            raise QuantityError(f"quantity exponent out of range: {text!r}")
        value *= Fraction(10) ** exponent
    if match["sign"] == "-":
        value = -value
    milli = value * MILLI
    # Kubernetes rounds precision below a milli-unit up (away from zero for positive values).
    return _bounded(-((-milli.numerator) // milli.denominator), text)


def is_byte_resource(resource: str) -> bool:
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def format_quantity(milli: int, resource: str = "") -> str:
    """Render milli-units canonically: "7900m", "8", "16374Mi" (binary suffixes only for byte resources)."""
    if milli % MILLI:
        return f"{milli}m"
    value = milli // MILLI
    if value and is_byte_resource(resource):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if value % _BINARY[suffix] == 0:
                return f"{value // _BINARY[suffix]}{suffix}"
    return str(value)


def parse_resources(mapping: Mapping[str, str | int], *, field: str = "resources") -> Resources:
    """Parse a ResourceList; errors name the offending key as `field.key`."""
    if not isinstance(mapping, Mapping):
        raise QuantityError(f"{field}: expected a mapping of resource names to quantities")
    resources: Resources = {}
    for name, text in mapping.items():
        try:
            resources[str(name)] = parse_quantity(text)
        except QuantityError as error:
            raise QuantityError(f"{field}.{name}: {error}") from None
    return resources


def format_resources(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(amount, name) for name, amount in sorted(resources.items())}


def add(*lists: Mapping[str, int]) -> Resources:
    total: Resources = {}
    for resources in lists:
        for name, amount in resources.items():
            total[name] = total.get(name, 0) + amount
    return total


def subtract(minuend: Mapping[str, int], subtrahend: Mapping[str, int]) -> Resources:
    """Per-resource difference over the minuend's keys plus any key only the subtrahend has."""
    result = dict(minuend)
    for name, amount in subtrahend.items():
        result[name] = result.get(name, 0) - amount
    return result


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True if every requested amount is available; a resource absent from `available` fits only a zero request."""
    return all(amount <= available.get(name, 0) for name, amount in requests.items())


def exceeded(requests: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """The resource names whose request is larger than what is available, sorted."""
    return sorted(name for name, amount in requests.items() if amount > available.get(name, 0))


def maximum(lists: Iterable[Mapping[str, int]]) -> Resources:
    """Per-resource maximum over several resource lists."""
    result: Resources = {}
    for resources in lists:
        for name, amount in resources.items():
            if amount > result.get(name, amount - 1):
                result[name] = amount
    return result
