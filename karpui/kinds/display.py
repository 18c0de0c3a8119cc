"""Kubernetes values as people read them on a page: label selectors and node selector terms in kubectl's syntax,
durations as "2h" or "1h30m", quantities in Kubernetes form; never a Python repr."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from provisioner.quantity import QuantityError, format_quantity, parse_quantity

_OPERATORS = {"In": "{key} in ({values})", "NotIn": "{key} notin ({values})", "Exists": "{key}"}


def label_selector(spec: Mapping[str, Any] | None) -> str:
    """A LabelSelector as kubectl prints it: `app=web,tier in (a,b),!gone`; "<none>" when it selects everything."""
    spec = spec or {}
    terms = [f"{key}={value}" for key, value in sorted((spec.get("matchLabels") or {}).items())]
    terms += [_expression(e) for e in spec.get("matchExpressions") or [] if isinstance(e, Mapping)]
    return ",".join(terms) or "<none>"


def node_selector_terms(terms: Sequence[Mapping[str, Any]] | None) -> str:
    """nodeSelectorTerms (ORed; each term's expressions ANDed), in the same syntax: `a in (m),b=x or c`."""
    said = []
    for term in terms or ():
        expressions = [*(term.get("matchExpressions") or ()), *(term.get("matchFields") or ())]
        said.append(",".join(_expression(e) for e in expressions if isinstance(e, Mapping)) or "<every node>")
    return " or ".join(said) or "<every node>"


def _expression(expression: Mapping[str, Any]) -> str:
    operator, key = str(expression.get("operator", "")), str(expression.get("key", ""))
    values = [str(v) for v in expression.get("values") or ()]
    if operator in ("Gt", "Lt"):
        return f"{key}{'>' if operator == 'Gt' else '<'}{values[0] if values else ''}"
    return _OPERATORS.get(operator, "!{key}").format(key=key, values=",".join(values))


def duration(seconds: float) -> str:
    """A span as people say it, to the largest two units: 45s, 2m30s, 2h (not kubectl's "120m"), 1h30m, 3d4h."""
    left = int(max(seconds, 0))
    days, left = divmod(left, 86400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    first = next((i for i, (amount, _) in enumerate(units) if amount), len(units) - 1)
    shown = [f"{amount}{unit}" for amount, unit in units[first : first + 2] if amount]
    return "".join(shown) or "0s"


def quantity(resource: str, value: Any) -> str:
    """A quantity in Kubernetes form ("1500m", "2Gi", "3"), whatever form it came in (milli-units from the
    scheduler's sums, a string from a manifest); text that is no quantity is shown as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        milli = value
    else:
        try:
            milli = parse_quantity(str(value))
        except QuantityError:
            return str(value)
    return format_quantity(milli, resource)


# A resource list as Karpenter's messages print it: {"cpu":"4","pods":"1"}.
_RESOURCE_JSON = re.compile(r'\{("[a-zA-Z0-9./_-]+":"[^"]*"(?:,"[a-zA-Z0-9./_-]+":"[^"]*")*)?\}')


def readable(message: str) -> str:
    """A Karpenter message for a page: its JSON resource lists in the form people write them (`cpu 4, pods 1`)."""
    return _RESOURCE_JSON.sub(
        lambda match: resources(json.loads(match.group(0))) if match.group(1) else "nothing", message
    )


def resources(mapping: Mapping[str, Any] | None) -> str:
    """A resource list as people write it, in Kubernetes form: `cpu 1500m, memory 2Gi, pods 3`."""
    if not mapping:
        return "—"
    return ", ".join(f"{name} {quantity(name, value)}" for name, value in sorted(mapping.items()))
