"""Form fields for every field of a custom resource's spec, read from its published OpenAPI schema (the CRD's), so
a field Karpenter adds to the NodePool shows up in the editor once its schema is vendored, with no code here.

A scalar is an input (a select for an enum), a map of strings or quantities is `key=value` lines, a list of strings
a comma-separated line, and a list of objects (requirements, taints, budgets) a table of rows with one blank row to
add another. Each field is named by its path in the manifest (`spec.disruption.budgets[0].nodes`), so an error the
manifest's checks name (`spec.template.spec.requirements[1].operator: ...`) lands on the input it is about.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django import forms

from karpui.kinds.schemas import crd_schema

# Fields the system writes and a person does not: left as the manifest has them.
NOT_EDITED = frozenset({"timeAdded"})
HELP_CHARACTERS = 160

Kind = Literal["text", "integer", "choice", "map", "strings"]


@dataclass(frozen=True)
class Leaf:
    """One input: its path below the row or group it is in, what it holds, and what the schema says of it."""

    path: str
    label: str
    kind: Kind
    help: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rows:
    """A list of objects: a table whose columns are the items' fields."""

    path: str
    label: str
    help: str
    columns: tuple[Leaf, ...]
    max_items: int | None = None


@dataclass(frozen=True)
class Group:
    """An object: its fields, in the schema's order (which Karpenter's CRDs keep alphabetical)."""

    path: str
    label: str
    help: str
    children: tuple[Leaf | Rows | Group, ...] = field(default_factory=tuple)


def _help(node: Mapping[str, Any]) -> str:
    """The schema's description, its first sentence, short enough to read beside an input."""
    text = " ".join(str(node.get("description") or "").split())
    sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return sentence if len(sentence) <= HELP_CHARACTERS else f"{sentence[: HELP_CHARACTERS - 1]}…"


def _label(key: str) -> str:
    """`consolidateAfter` -> `consolidate after`."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: " " + m.group(1).lower(), key)


def _leaf(path: str, key: str, node: Mapping[str, Any]) -> Leaf | None:
    kind = node.get("type")
    if node.get("enum"):
        return Leaf(path, _label(key), "choice", _help(node), tuple(str(v) for v in node["enum"]))
    if kind == "integer":
        return Leaf(path, _label(key), "integer", _help(node))
    if kind == "string" or node.get("x-kubernetes-int-or-string"):
        return Leaf(path, _label(key), "text", _help(node))
    if kind == "object" and "additionalProperties" in node and not node.get("properties"):
        return Leaf(path, _label(key), "map", _help(node))
    if kind == "array" and (node.get("items") or {}).get("type") == "string":
        return Leaf(path, _label(key), "strings", _help(node))
    return None


def tree(schema: Mapping[str, Any], path: str, key: str) -> Leaf | Rows | Group | None:
    """The form for a schema node at `path`; None for what a form cannot hold (left to the YAML)."""
    kind = schema.get("type")
    if kind == "object" and schema.get("properties"):
        children = [
            child
            for name, node in schema["properties"].items()
            if name not in NOT_EDITED and (child := tree(node, f"{path}.{name}", name)) is not None
        ]
        return Group(path, _label(key), _help(schema), tuple(children))
    if kind == "array" and ((schema.get("items") or {}).get("properties")):
        columns = tuple(
            leaf
            for name, node in schema["items"]["properties"].items()
            if name not in NOT_EDITED and (leaf := _leaf(name, name, node)) is not None
        )
        return Rows(path, _label(key), _help(schema), columns, schema.get("maxItems"))
    return _leaf(path, key, schema)


@functools.cache
def nodepool_tree() -> Group:
    """The form of a karpenter.sh/v1 NodePool's spec, from the CRD schema the Kubernetes API serves."""
    built = tree(crd_schema("NodePool", "v1")["properties"]["spec"], "spec", "spec")
    assert isinstance(built, Group)
    return built


# Reading and writing values at a path ------------------------------------------------------------------------------

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def steps(path: str) -> list[str | int]:
    return [int(index) if index else key for key, index in _STEP.findall(path)]


def get(obj: Any, path: str) -> Any:
    for step in steps(path):
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def put(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set (or, for None, remove) the value at `path`, making the objects on the way."""
    *parents, last = steps(path)
    target: Any = doc
    for step in parents:
        target = target[step] if isinstance(step, int) else target.setdefault(step, {})
    if value is None:
        if isinstance(target, dict):
            target.pop(str(last), None)
    else:
        target[last] = value


def shown(leaf: Leaf, value: Any) -> str:
    """A value as its input holds it."""
    if value is None:
        return ""
    if leaf.kind == "map":
        return "\n".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else ""
    if leaf.kind == "strings":
        return ", ".join(str(v) for v in value) if isinstance(value, list) else ""
    return str(value)


def read(leaf: Leaf, text: str) -> Any:
    """An input's text as the manifest holds it (None: leave the field out). ValueError names what is wrong."""
    text = text.strip()
    if not text:
        return None
    if leaf.kind == "integer":
        if not re.fullmatch(r"-?[0-9]{1,18}", text):
            raise ValueError(f"must be a whole number, got {text[:40]!r}")
        return int(text)
    if leaf.kind == "map":
        mapping: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            key, equals, value = line.partition("=")
            if not equals or not key.strip():
                raise ValueError(f"line {number}: expected key=value, got {line.strip()[:40]!r}")
            mapping[key.strip()] = value.strip()
        return mapping or None
    if leaf.kind == "strings":
        return [part.strip() for part in text.split(",") if part.strip()] or None
    if leaf.kind == "choice" and text not in leaf.choices:
        raise ValueError(f"must be one of {', '.join(leaf.choices)}, got {text[:40]!r}")
    return text


def django_field(leaf: Leaf, label: str) -> forms.Field:
    if leaf.kind == "choice":
        # Text, checked by `read` as the manifest's checks word it (a ChoiceField would say "Select a valid choice").
        return forms.CharField(
            required=False,
            label=label,
            help_text=leaf.help,
            widget=forms.Select(choices=[("", "—"), *((c, c) for c in leaf.choices)]),
        )
    if leaf.kind == "map":
        return forms.CharField(
            required=False,
            label=label,
            help_text=f"{leaf.help} One key=value a line.",
            widget=forms.Textarea(attrs={"rows": 2, "cols": 32, "spellcheck": "false"}),
        )
    attrs = {"size": 12 if leaf.kind == "integer" else 24}
    hint = " Separated by commas." if leaf.kind == "strings" else ""
    return forms.CharField(required=False, label=label, help_text=f"{leaf.help}{hint}", widget=forms.TextInput(attrs))


def leaves(node: Leaf | Rows | Group) -> Iterator[Leaf | Rows]:
    if isinstance(node, Group):
        for child in node.children:
            yield from leaves(child)
    else:
        yield node


def row_count(rows: Rows, manifest: Mapping[str, Any], data: Mapping[str, Any] | None) -> int:
    """The rows to show: the manifest's items, any more the form sent, and one blank one to add another."""
    items = get(manifest, rows.path)
    count = len(items) if isinstance(items, list) else 0
    if data is not None:
        prefix = f"{rows.path}["
        for name in data:
            if name.startswith(prefix):
                index = name[len(prefix) :].split("]")[0]
                if index.isdigit():
                    count = max(count, int(index) + 1)
    if rows.max_items is None or count < rows.max_items:
        count += 1
    return count
