"""The part of kubectl's JSONPath that scripts use: `{.items[*].metadata.name}`, `{.status.allocatable.cpu}`,
`{.metadata.labels['kubernetes\\.io/arch']}`. Several results print space-separated, as kubectl does."""

from __future__ import annotations

import json
import re
from typing import Any

_TEMPLATE = re.compile(r"\{([^}]*)\}")
_STEP = re.compile(
    r"\.((?:\\\.|[^.\[])+)|\[\*\]|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]"
    r"|\[\?\(@((?:\.(?:\\\.|[^.\s=!)\]])+)+)\s*(?:(==|!=)\s*(?:\"([^\"]*)\"|'([^']*)'|(-?[0-9.]+|true|false)))?\s*\)\]"
)


class JSONPathError(ValueError):
    pass


def render(template: str, data: Any) -> str:
    def expand(match: re.Match[str]) -> str:
        values = evaluate(match.group(1), data)
        # A map or list prints as kubectl's JSON does: compact, keys sorted (Go marshals a map in key order).
        return " ".join(
            v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=True) for v in values
        )

    return _TEMPLATE.sub(expand, template)


def evaluate(expression: str, data: Any) -> list[Any]:
    expression = expression.strip()
    if expression.startswith("$"):
        expression = expression[1:]
    position, current = 0, [data]
    while position < len(expression):
        match = _STEP.match(expression, position)
        if match is None:
            raise JSONPathError(f"unrecognized JSONPath at {expression[position:]!r}")
        position = match.end()
        next_values: list[Any] = []
        for value in current:
            if match.group(0) == "[*]":
                next_values.extend(
                    value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
                )
            elif match.group(5) is not None:
                next_values.extend(_filtered(value, match))
            elif match.group(2) is not None:
                index = int(match.group(2))
                if isinstance(value, list) and index < len(value):
                    next_values.append(value[index])
            else:
                key = match.group(1) or match.group(3) or match.group(4) or ""
                key = key.replace("\\.", ".")
                if isinstance(value, dict) and key in value:
                    next_values.append(value[key])
        current = next_values
    return current


def _filtered(value: Any, match: re.Match[str]) -> list[Any]:
    """kubectl's filter `[?(@.type=="Ready")]` (or `!=`, or `[?(@.field)]` for presence) over a list's items."""
    items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    path, operator = match.group(5), match.group(6)
    literal = match.group(7) if match.group(7) is not None else match.group(8)
    if literal is None and match.group(9) is not None:
        literal = match.group(9)
    kept = []
    for item in items:
        found = evaluate(path, item)
        if operator is None:
            if found:
                kept.append(item)
            continue
        text = [v if isinstance(v, str) else json.dumps(v) for v in found]
        equal = bool(text) and text[0] == literal
        if equal == (operator == "=="):
            kept.append(item)
    return kept
