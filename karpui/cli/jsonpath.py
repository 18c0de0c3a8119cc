"""The part of kubectl's JSONPath that scripts use: `{.items[*].metadata.name}`, `{.status.allocatable.cpu}`,
`{.metadata.labels['kubernetes\\.io/arch']}`, filters, and templates with `{range .items[*]}...{end}` and quoted
literals (`{"\\n"}`). Several results print space-separated, as kubectl does."""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

# One `{...}` action; a quoted literal inside may hold a brace.
_ACTION = re.compile(r"""\{((?:"(?:[^"\\]|\\.)*"|'[^']*'|[^}"'])*)\}""")
_STEP = re.compile(
    r"\.((?:\\\.|[^.\[])+)|\[\*\]|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]"
    r"|\[\?\(@((?:\.(?:\\\.|[^.\s=!)\]])+)+)\s*(?:(==|!=)\s*(?:\"([^\"]*)\"|'([^']*)'|(-?[0-9.]+|true|false)))?\s*\)\]"
)
_RANGE = re.compile(r"range\s+(.*)", re.DOTALL)

# A parsed template: literal text, an expression, or a range with its body.
Node = tuple[str, Any, Any]


class JSONPathError(ValueError):
    pass


def render(template: str, data: Any) -> str:
    nodes, _ = _parse(_actions(template), 0, in_range=False)
    return _render(nodes, data)


def _actions(template: str) -> list[tuple[str, str]]:
    """The template as ("text", literal) and ("action", inside the braces) pieces, in order."""
    pieces, position = [], 0
    for match in _ACTION.finditer(template):
        if match.start() > position:
            pieces.append(("text", template[position : match.start()]))
        pieces.append(("action", match.group(1).strip()))
        position = match.end()
    if position < len(template):
        pieces.append(("text", template[position:]))
    for kind, text in pieces:
        if kind == "text" and "{" in text:
            raise JSONPathError(f"unclosed action at {text[text.index('{') :]!r}")
    return pieces


def _parse(pieces: list[tuple[str, str]], start: int, *, in_range: bool) -> tuple[list[Node], int]:
    """Nodes from `start` up to the `{end}` that closes the range being parsed (or the template's end)."""
    nodes: list[Node] = []
    index = start
    while index < len(pieces):
        kind, text = pieces[index]
        if kind == "text":
            nodes.append(("text", text, None))
        elif text == "end":
            if not in_range:
                raise JSONPathError("not in range, nothing to end")
            return nodes, index
        elif (ranged := _RANGE.fullmatch(text)) is not None:
            body, index = _parse(pieces, index + 1, in_range=True)
            nodes.append(("range", ranged.group(1).strip(), body))
        elif text[:1] in "\"'":
            nodes.append(("text", _literal(text), None))
        else:
            nodes.append(("expression", text, None))
        index += 1
    if in_range:
        raise JSONPathError("unclosed action: range")
    return nodes, index


def _literal(text: str) -> str:
    """A quoted literal as kubectl reads it: Go's strconv.Unquote, so `"\\n"` is a newline."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an unknown escape (`"\\q"`) is an error, as it is to Go
            value = ast.literal_eval(text)
    except (SyntaxError, ValueError, Warning):
        raise JSONPathError(f"unrecognized string literal {text!r}") from None
    if not isinstance(value, str):
        raise JSONPathError(f"unrecognized string literal {text!r}")
    return value


def _render(nodes: list[Node], data: Any) -> str:
    out = []
    for kind, text, body in nodes:
        if kind == "text":
            out.append(text)
        elif kind == "range":
            out.extend(_render(body, item) for item in evaluate(text, data))
        else:
            # A map or list prints as kubectl's JSON does: compact, keys sorted (Go marshals a map in key order).
            out.append(
                " ".join(
                    v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=True)
                    for v in evaluate(text, data)
                )
            )
    return "".join(out)


def evaluate(expression: str, data: Any) -> list[Any]:
    expression = expression.strip()
    if expression.startswith(("$", "@")):  # the root, or inside a range the item at hand
        expression = expression[1:]
    position, current = 0, [data]
    while position < len(expression):
        match = _STEP.match(expression, position)
        if match is None:
            raise JSONPathError(f"unrecognized JSONPath at {expression[position:]!r}")
        position = match.end()
        next_values: list[Any] = []
        for value in current:
            if match.group(0) in ("[*]", ".*"):
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
