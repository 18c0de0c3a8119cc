"""DeviceClass and request selectors in CEL, with Kubernetes' DRA semantics, behind one small wrapper.

The library is common-expression-language (Rust cel via PyO3: ~3 µs per evaluation, against ~470 µs for the
pure-Python celpy; see reference/reliability-ecosystem.md §6). What Kubernetes adds and this wrapper provides:
quantities (`quantity("40Gi")`, `.compareTo`, `.isGreaterThan`, `.isLessThan`, `.isInteger`, `.asInteger`, `.sign`,
`.asApproximateFloat`) as exact milli-unit integers; an unknown attribute or capacity domain is an empty map rather
than an error; the result must be a bool; expressions are capped at 10 Ki and compiled once.

Like the API server, `validate` refuses at apply time what cannot work: undeclared names and functions, a result
that is statically not a bool, and an estimated cost over Kubernetes' CELSelectorExpressionMaxCost (celcheck.py
says what the estimate bounds). At evaluation the estimate is made again for the device at hand, so a device
larger than Kubernetes allows cannot make a selector run long either. A selector that errors, or exceeds the
budget, does not match, and `evaluate` says why; nothing is raised to the caller.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from provisioner.dra.celcheck import KUBERNETES_BOUNDS, Analysis, CELCheckError, DeviceBounds, Node, analyse, parse
from provisioner.quantity import MILLI, QuantityError, parse_quantity

MAX_EXPRESSION = 10 * 1024
# Kubernetes' CELSelectorExpressionMaxCost. The most expensive selector it admits here takes ~0.1 s (a comprehension
# of 30 over 30 over 30 elements: ~0.02 s).
COST_LIMIT = 1_000_000
# Selectors estimated above this (~1 ms) have their verdict per device content remembered: the devices page and
# the scheduler ask about many identical devices (one declaration on 144 instance types).
_MEMO_COST = 10_000
_MEMO_SIZE = 65_536
_DOMAIN = re.compile(r"""(attributes|capacity)\s*\[\s*["']([^"']+)["']\s*\]""")


class CELError(ValueError):
    """An expression that does not compile, with the position cel reports."""


@dataclass(frozen=True)
class Device:
    """A device as selectors see it: attributes and capacity keyed by domain, then by name."""

    name: str
    driver: str
    pool: str = ""
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # milli-units
    allow_multiple_allocations: bool = False

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], driver: str, pool: str = "") -> Device:
        """A resource.k8s.io/v1 Device; unqualified names belong to the driver's domain."""
        attributes: dict[str, dict[str, Any]] = {}
        for name, value in (spec.get("attributes") or {}).items():
            domain, _, short = name.rpartition("/")
            attributes.setdefault(domain or driver, {})[short] = _attribute_value(value)
        capacity: dict[str, dict[str, int]] = {}
        for name, value in (spec.get("capacity") or {}).items():
            domain, _, short = name.rpartition("/")
            amount = value.get("value") if isinstance(value, Mapping) else value
            capacity.setdefault(domain or driver, {})[short] = parse_quantity(str(amount if amount is not None else 0))
        return cls(
            str(spec.get("name", "")), driver, pool, attributes, capacity, bool(spec.get("allowMultipleAllocations"))
        )

    @cached_property
    def bounds(self) -> DeviceBounds:
        """How large this device is, in the terms the cost estimate uses."""
        texts = [self.driver]
        for section in (self.attributes, self.capacity):
            for domain, values in section.items():
                texts.append(domain)
                texts.extend(str(k) for k in values)
                texts.extend(str(v) for v in values.values())
        return DeviceBounds(
            domains=max(len(self.attributes), len(self.capacity), 1),
            entries=max((len(v) for v in (*self.attributes.values(), *self.capacity.values())), default=1),
            text=max((len(t) for t in texts), default=1),
        )

    @cached_property
    def fingerprint(self) -> str:
        """What a selector sees of the device (not its name or pool): equal fingerprints, equal verdicts."""
        seen = [self.driver, self.attributes, self.capacity, self.allow_multiple_allocations]
        return json.dumps(seen, sort_keys=True, default=str)


def _attribute_value(value: Any) -> Any:
    """DRA attributes are typed objects ({int: 1}, {string: "a"}, {bool: true}, {version: "1.2.3"})."""
    if isinstance(value, Mapping) and len(value) == 1:
        return next(iter(value.values()))
    return value


def _quantity(text: str) -> int:
    try:
        return parse_quantity(text)
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _as_integer(quantity: int) -> int:
    if quantity % MILLI:
        raise ValueError("asInteger: the quantity is not a whole number")
    return quantity // MILLI


def _library() -> Any:
    """The CEL library, imported at its first use: its package imports its command line too (typer, prompt_toolkit,
    rich), which was 13 MiB of a bare `manage.py engine`'s 79, and a cluster without DRA selectors never needs it."""
    import cel

    return cel


def _context() -> Any:
    context = _library().Context()
    context.add_function("quantity", _quantity)
    context.add_function("compareTo", _compare)
    context.add_function("isGreaterThan", lambda a, b: a > b)
    context.add_function("isLessThan", lambda a, b: a < b)
    context.add_function("isInteger", lambda q: q % MILLI == 0)
    context.add_function("asInteger", _as_integer)
    context.add_function("sign", lambda q: _compare(q, 0))
    context.add_function("asApproximateFloat", lambda q: q / MILLI)
    return context


_local = threading.local()


def _thread_context() -> Any:
    """One context per thread, its functions registered once; each evaluation replaces `device`."""
    context = getattr(_local, "context", None)
    if context is None:
        context = _local.context = _context()
    return context


@dataclass(frozen=True)
class Selector:
    """A compiled selector: the library's program, the domains it names, and its static analysis for devices
    within Kubernetes' bounds."""

    program: Any
    domains: frozenset[tuple[str, str]]
    tree: Node
    analysis: Analysis


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a selector picks a device; `error` says why it could not decide (then it does not match)."""

    matched: bool
    error: str = ""


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compile and analyse once per expression text; CELError if the text is not a selector karpui can run."""
    if len(expression) > MAX_EXPRESSION:
        raise CELError(f"expression is longer than {MAX_EXPRESSION} characters")
    try:
        program = _library().compile(expression)
    except (ValueError, RuntimeError) as error:
        raise CELError(_tidy(str(error))) from None
    try:
        tree = parse(expression)
        analysis = analyse(expression, tree, KUBERNETES_BOUNDS)
    except CELCheckError as error:
        raise CELError(str(error)) from None
    domains = frozenset((m.group(1), m.group(2)) for m in _DOMAIN.finditer(expression))
    return Selector(program, domains, tree, analysis)


@lru_cache(maxsize=4096)
def _cost(expression: str, bounds: DeviceBounds) -> int:
    return analyse(expression, compile_selector(expression).tree, bounds).cost


_PROBE = Device(name="probe", driver="probe.karpui.dev")


def validate(expression: str) -> None:
    """What the API server checks at apply time: syntax, declared names, a bool result where the type is known, and
    the cost for any device Kubernetes allows. Then the expression runs on an empty device: one that evaluates to
    something else than a bool there (`device.attributes["x"]`) can never select a device, and one that does not
    read the device at all must not fail (`1 / 0 == 1`). Other errors on the empty device (a missing attribute)
    are normal and say nothing about the expression."""
    selector = compile_selector(expression)
    analysis = selector.analysis
    if analysis.type not in ("bool", "dyn"):
        raise CELError(f"must evaluate to bool, got {analysis.type}")
    if analysis.cost > COST_LIMIT:
        raise CELError(f"too complex, exceeds cost limit: estimated cost {analysis.cost}, limit {COST_LIMIT}")
    try:
        result = _evaluate(selector, _PROBE)
    except Exception as error:  # any error of the evaluator is the expression's
        if not analysis.reads_device:
            raise CELError(f"evaluation error: {_runtime_error(error)}") from None
        return
    if not isinstance(result, bool):
        raise CELError(f"must evaluate to bool, got {_CEL_TYPES.get(type(result), type(result).__name__)}")


_CEL_TYPES = {str: "string", int: "int", float: "double", dict: "map", list: "list", bytes: "bytes", type(None): "null"}


def matches(expression: str, device: Device) -> bool:
    """True only if the selector evaluates to true; errors and non-bool results do not match."""
    return evaluate(expression, device).matched


_verdicts: dict[tuple[str, str], Verdict] = {}


def evaluate(expression: str, device: Device) -> Verdict:
    """The selector's verdict on `device`, never raising: a CEL runtime error (overflow, division by zero, a
    missing field), a non-bool result or a cost over the budget is a non-match with its reason."""
    try:
        selector = compile_selector(expression)
    except CELError as error:
        return Verdict(False, f"invalid CEL expression: {error}")
    cost = selector.analysis.cost
    if cost > COST_LIMIT or not _within(device.bounds, KUBERNETES_BOUNDS):
        cost = _cost(expression, device.bounds)
        if cost > COST_LIMIT:
            return Verdict(False, f"CEL cost limit exceeded: estimated cost {cost} on this device, limit {COST_LIMIT}")
    if cost < _MEMO_COST:
        return _verdict(selector, device)
    memo = (expression, device.fingerprint)
    verdict = _verdicts.get(memo)
    if verdict is None:
        if len(_verdicts) >= _MEMO_SIZE:
            _verdicts.clear()
        verdict = _verdicts[memo] = _verdict(selector, device)
    return verdict


def _within(bounds: DeviceBounds, limit: DeviceBounds) -> bool:
    return bounds.domains <= limit.domains and bounds.entries <= limit.entries and bounds.text <= limit.text


def _verdict(selector: Selector, device: Device) -> Verdict:
    try:
        result = _evaluate(selector, device)
    except Exception as error:  # any error of the evaluator is the selector's, and means no match
        return Verdict(False, f"CEL runtime error: {_runtime_error(error)}")
    if not isinstance(result, bool):
        return Verdict(False, f"must evaluate to bool, got {_CEL_TYPES.get(type(result), type(result).__name__)}")
    return Verdict(result)


def _runtime_error(error: Exception) -> str:
    if isinstance(error, KeyError) and error.args:  # a missing attribute: KeyError's text is the bare key
        return f"no such key: {error.args[0]!r}"
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 200 else f"{text[:200]}…"


def _evaluate(selector: Selector, device: Device) -> Any:
    """Run a compiled selector on `device` in this thread's context; the library's errors propagate."""
    context = _thread_context()
    context.add_variable("device", _variables(device, selector.domains))
    return selector.program.execute(context)


def _variables(device: Device, domains: frozenset[tuple[str, str]]) -> dict[str, Any]:
    """`device` as CEL sees it; every domain the expression names exists (empty) so a lookup is a miss, not an
    error about the domain."""
    attributes = {domain: dict(values) for domain, values in device.attributes.items()}
    capacity = {domain: dict(values) for domain, values in device.capacity.items()}
    for section, domain in domains:
        (attributes if section == "attributes" else capacity).setdefault(domain, {})
    return {
        "driver": device.driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }


def _tidy(message: str) -> str:
    """cel's message starts with the whole expression; keep the position and the reason."""
    match = re.search(r"<input>:(\d+):(\d+): (.*?)(?:\n|$)", message)
    if match:
        return f"line {match.group(1)}, column {match.group(2)}: {match.group(3)}"
    return message.splitlines()[0] if message else "invalid expression"
