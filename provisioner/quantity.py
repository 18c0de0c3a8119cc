"""Kubernetes resource quantities ("500m", "1Gi", "1e3") parsed strictly into exact integer milli-units, and written
in kube-apiserver's canonical form ("0.5" is served as "500m", "1.5Gi" as "1536Mi")."""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

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


def parse_quantity(text: str | int | float, *, numbers: bool = True) -> int:
    """Parse a quantity into milli-units, rounding sub-milli fractions up as Kubernetes does.

    A JSON or YAML number is a quantity too, as kube-apiserver reads it (`cpu: 0.5` is 500m); `numbers=False`
    refuses one with a fraction, as a custom resource's int-or-string field does (a NodePool's limits)."""
    if isinstance(text, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
    if isinstance(text, int):
        return _bounded(text * MILLI, str(text))
    if isinstance(text, float) and numbers:
        return _parse_text(number_text(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantities must be strings or integers, not {type(text).__name__}")
    return _parse_text(text)


def number_text(value: float) -> str:
    """The text a JSON number with a fraction stood for, which kube-apiserver parses as a quantity.

    The decoder has made it a binary float, so its text is gone; what comes back is the shortest decimal that
    reads as the same float (Python's repr), written as Go's encoder writes it (plain from 1e-6 up to 1e21,
    else with an exponent), which is the text kubectl sends. That decimal is the written one whenever the writer
    gave at most 15 significant digits (two such decimals never share a float), so 0.1 is exactly 100m, where
    the float's own binary value (0.1000000000000000055...) would round up to 101m."""
    if not math.isfinite(value):
        raise QuantityError(f"must be a finite number, got {value}")
    if value == 0:
        return "0"
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(repr(value)).normalize(), "f")
    mantissa, _, exponent = repr(value).partition("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


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
    milli = _exact(text)[1] * MILLI
    # Kubernetes rounds precision below a milli-unit up (away from zero for positive values).
    return _bounded(-((-milli.numerator) // milli.denominator), text)


def _exact(text: str) -> tuple[re.Match[str], Fraction]:
    """The quantity's parts and its exact value."""
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
    return match, -value if match["sign"] == "-" else value


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


_SI_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
NANO = 10**9


def canonical_quantity(value: str | int | float) -> str:
    """A quantity as kube-apiserver serves it: "0.5" -> "500m", "1.5Gi" -> "1536Mi", "2048Mi" -> "2Gi", "1000m"
    -> "1", 1000 -> "1k", "1e3" -> "1e3". A QuantityError for anything parse_quantity refuses.

    The rules of apimachinery's Quantity.CanonicalizeBytes: the value, exact to a nano-unit (finer precision
    rounded up, away from zero), keeps its suffix's family (binary Ki..Ei, decimal SI n..E, or a decimal exponent)
    with the largest suffix or exponent (a multiple of 3 for the decimal two) that leaves an integer mantissa. A
    binary amount under 1024 in magnitude or with a fraction is written in decimal SI instead ("0.5Ki" -> "512",
    "1.5Ki" is 1536 bytes -> "1536"). Zero is "0"."""
    parse_quantity(value)  # the same refusals and bounds as every other reader
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else number_text(value)
    return _canonical_text(text)


@functools.lru_cache(maxsize=8192)
def _canonical_text(text: str) -> str:
    match, exact = _exact(text)
    scaled = abs(exact) * NANO
    nanos = -(-scaled.numerator // scaled.denominator)  # rounded up to a whole nano-unit (the sign comes after)
    if nanos == 0:
        return "0"
    sign = "-" if match["sign"] == "-" else ""
    if match["binary"] and nanos % NANO == 0 and nanos // NANO >= 1024:
        mantissa, power = nanos // NANO, 0
        while mantissa % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            mantissa, power = mantissa // 1024, power + 1
        return f"{sign}{mantissa}{_BINARY_SUFFIXES[power]}"
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    if match["exponent"]:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_SI_SUFFIXES[exponent]}"


def parse_resources(
    mapping: Mapping[str, str | int | float], *, field: str = "resources", numbers: bool = True
) -> Resources:
    """Parse a ResourceList; errors name the offending key as `field.key`."""
    if not isinstance(mapping, Mapping):
        raise QuantityError(f"{field}: expected a mapping of resource names to quantities")
    resources: Resources = {}
    for name, text in mapping.items():
        try:
            resources[str(name)] = parse_quantity(text, numbers=numbers)
        except QuantityError as error:
            raise QuantityError(f"{field}.{name}: {error}") from None
    return resources


def format_resources(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(amount, name) for name, amount in sorted(resources.items())}


def _each(lists: Iterable[str], fields: Iterable[str]) -> tuple[str, ...]:
    """The paths to each field of each item of each list."""
    return tuple(f"{name}[].{field}" for name in lists for field in fields)


# Where the built-in kinds karpui stores hold a resource.Quantity, which kube-apiserver keeps and serves in canonical
# form (custom resources, NodePools and NodeClaims among them, keep what was written). A path's steps are field
# names; "[]" after one means each item of that list, "{}" each value of that map. tests/unit/test_quantity_paths.py
# keeps this in step with the OpenAPI document the API serves.
_RESOURCES = ("resources.limits{}", "resources.requests{}")
_CONTAINERS = _each(
    ("containers", "initContainers", "ephemeralContainers"), (*_RESOURCES, "env[].valueFrom.resourceFieldRef.divisor")
)
_POD_SPEC = (
    *_CONTAINERS,
    "overhead{}",
    *_RESOURCES,
    "volumes[].emptyDir.sizeLimit",
    "volumes[].downwardAPI.items[].resourceFieldRef.divisor",
    "volumes[].projected.sources[].downwardAPI.items[].resourceFieldRef.divisor",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.limits{}",
    "volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests{}",
)
_CONTAINER_STATUSES = _each(
    ("status.containerStatuses", "status.initContainerStatuses", "status.ephemeralContainerStatuses"),
    ("allocatedResources{}", *_RESOURCES),
)
_DEVICE_REQUESTS = (
    "devices.requests[].exactly.capacity.requests{}",
    "devices.requests[].firstAvailable[].capacity.requests{}",
)
_DEVICE_CAPACITY = tuple(
    f"spec.devices[].capacity{{}}.{field}"
    for field in (
        "value",
        "requestPolicy.default",
        "requestPolicy.validRange.min",
        "requestPolicy.validRange.max",
        "requestPolicy.validRange.step",
        "requestPolicy.validValues[]",
    )
)
QUANTITY_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (*(f"spec.{path}" for path in _POD_SPEC), *_CONTAINER_STATUSES),
    "Node": ("status.capacity{}", "status.allocatable{}"),
    **{
        kind: tuple(f"spec.template.spec.{path}" for path in _POD_SPEC)
        for kind in ("Deployment", "ReplicaSet", "DaemonSet")
    },
    "ResourceClaim": (
        *(f"spec.{path}" for path in _DEVICE_REQUESTS),
        "status.allocation.devices.results[].consumedCapacity{}",
    ),
    "ResourceClaimTemplate": tuple(f"spec.spec.{path}" for path in _DEVICE_REQUESTS),
    "PersistentVolumeClaim": (
        "spec.resources.requests{}",
        "spec.resources.limits{}",
        "status.capacity{}",
        "status.allocatedResources{}",
    ),
    "PersistentVolume": ("spec.capacity{}",),
    "ResourceSlice": (
        *_DEVICE_CAPACITY,
        "spec.devices[].consumesCounters[].counters{}.value",
        "spec.sharedCounters[].counters{}.value",
    ),
}


def canonical_quantities(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `obj` with every quantity its kind holds (QUANTITY_PATHS) in canonical form, as kube-apiserver
    stores and serves it: a Pod's `cpu: 0.5` is "500m", a Node's `memory: 2048Mi` "2Gi". What is not a quantity
    is left as it is, for validation to name."""
    result = copy.deepcopy(dict(obj))
    for path in QUANTITY_PATHS.get(str(obj.get("kind", "")), ()):
        _canonicalize(result, path.split("."))
    return result


def _canonicalize(node: Any, steps: list[str]) -> None:
    step, rest = steps[0], steps[1:]
    name, each = (step[:-2], step[-2:]) if step.endswith(("[]", "{}")) else (step, "")
    if not isinstance(node, dict) or node.get(name) is None:
        return
    value = node[name]
    if each == "[]" and isinstance(value, list):
        slots: list[tuple[Any, Any]] = [(value, index) for index in range(len(value))]
    elif each == "{}" and isinstance(value, dict):
        slots = [(value, key) for key in value]
    elif not each:
        slots = [(node, name)]
    else:
        return
    for holder, key in slots:
        if rest:
            _canonicalize(holder[key], rest)
        elif isinstance(holder[key], str | int | float) and not isinstance(holder[key], bool):
            with contextlib.suppress(QuantityError):  # not a quantity: validation says so, naming the field
                holder[key] = canonical_quantity(holder[key])


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
