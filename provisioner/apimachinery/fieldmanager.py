"""Server-side apply (`kubectl apply --server-side`): which manager owns which fields of an object
(`metadata.managedFields`, in the FieldsV1 format), the merge of an applied configuration into the live object, and
the conflicts kube-apiserver reports when an apply would change a field another manager set.

A field path is a tuple of FieldsV1 path elements: `f:<name>` for a field, `k:<json>` for an item of a list keyed
by its merge key (a pod's containers by name), `v:<json>` for a value of a list of scalars merged as a set
(finalizers). How each list merges comes from the built-in kinds' schema (strategies.json, the patch strategy
Kubernetes declares beside its list types); lists of custom resources, and built-in lists without a merge key, are
atomic: one field, replaced whole, as structured-merge-diff treats them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.apimachinery.strategic import Field, field_of

FieldPath = tuple[str, ...]
_MISSING = object()
# Fields the API server sets, never an applier's: they are neither owned nor merged.
_SERVER_FIELDS = {
    ("f:apiVersion",),
    ("f:kind",),
    ("f:metadata", "f:name"),
    ("f:metadata", "f:namespace"),
    ("f:metadata", "f:uid"),
    ("f:metadata", "f:resourceVersion"),
    ("f:metadata", "f:generation"),
    ("f:metadata", "f:creationTimestamp"),
    ("f:metadata", "f:deletionTimestamp"),
    ("f:metadata", "f:deletionGracePeriodSeconds"),
    ("f:metadata", "f:selfLink"),
    ("f:metadata", "f:managedFields"),
}
APPLY = "Apply"
UPDATE = "Update"


@dataclass(frozen=True)
class ManagedEntry:
    """One entry of `metadata.managedFields`: a manager's fields from one operation (Apply or Update)."""

    manager: str
    operation: str
    api_version: str
    time: str
    fields: frozenset[FieldPath]
    subresource: str = ""

    def to_json(self) -> dict[str, Any]:
        entry = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


class ApplyConflict(ValueError):
    """An apply would change fields other managers own: each conflict is the owner's entry and the field."""

    def __init__(self, conflicts: list[tuple[ManagedEntry, FieldPath]]) -> None:
        self.conflicts = conflicts
        count = len(conflicts)
        lines = "\n".join(f"conflict with {printed(entry)}: {dotted(path)}" for entry, path in conflicts)
        super().__init__(f"Apply failed with {count} conflict{'s' if count != 1 else ''}: {lines}")


def printed(entry: ManagedEntry) -> str:
    """A manager as kube-apiserver names it in a conflict: its name, with the subresource it wrote through, and for
    an update the version and time of its write (a manager's updates and applies are two owners)."""
    text = json.dumps(entry.manager)
    if entry.subresource:
        text += f" with subresource {json.dumps(entry.subresource)}"
    if entry.operation == UPDATE:
        text += f" using {entry.api_version}" + (f" at {entry.time}" if entry.time else "")
    return text


def dotted(path: FieldPath) -> str:
    """A path as kube-apiserver names it in a conflict: `.spec.replicas`, `.spec.containers[name="app"].image`."""
    text = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            keys = json.loads(rest)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        else:
            text += f"[={rest}]"
    return text


def encode(fields: Iterable[FieldPath]) -> dict[str, Any]:
    """A set of paths as FieldsV1: nested objects keyed by path element, `.` marking an owned element that also has
    owned children."""
    root: dict[str, Any] = {}
    owned = sorted(fields)
    for path in owned:
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in owned:
        node = root
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {key: _sorted(node[key]) for key in sorted(node)}


def decode(fields_v1: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    """FieldsV1 as a set of paths."""
    found: set[FieldPath] = set()
    for element, children in fields_v1.items():
        if element == ".":
            found.add(prefix)
        elif isinstance(children, Mapping) and children:
            found |= decode(children, (*prefix, element))
        else:
            found.add((*prefix, element))
    return found


def entries(obj: Mapping[str, Any]) -> list[ManagedEntry]:
    """An object's managedFields (entries that are not FieldsV1 are left out, as the API server does not read them)."""
    found = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping) or entry.get("fieldsType", "FieldsV1") != "FieldsV1":
            continue
        found.append(
            ManagedEntry(
                manager=str(entry.get("manager", "")),
                operation=str(entry.get("operation", UPDATE)),
                api_version=str(entry.get("apiVersion", "")),
                time=str(entry.get("time", "")),
                fields=frozenset(decode(entry.get("fieldsV1") or {})),
                subresource=str(entry.get("subresource", "")),
            )
        )
    return found


def field_set(obj: Mapping[str, Any], root_type: str | None) -> set[FieldPath]:
    """Every field `obj` sets, as owned paths: leaves, list items keyed by their merge key (and those keys), and
    set values; server-set metadata left out."""
    found: set[FieldPath] = set()
    _walk_map(obj, root_type or "", (), found)
    return {path for path in found if path not in _SERVER_FIELDS}


def _walk_map(value: Mapping[str, Any], type_name: str, prefix: FieldPath, found: set[FieldPath]) -> None:
    for name, child in value.items():
        field = field_of(type_name, name) if type_name else None
        _walk_value(child, field, (*prefix, f"f:{name}"), found)


def _walk_value(value: Any, field: Field | None, path: FieldPath, found: set[FieldPath]) -> None:
    if isinstance(value, Mapping) and value:
        _walk_map(value, field.value_type if field is not None else "", path, found)
    elif isinstance(value, list) and value and _keyed(field, value):
        assert field is not None
        for item in value:
            item_path = (*path, _key_element(field.key, item))
            found.add(item_path)
            _walk_map(item, field.type, item_path, found)
    elif isinstance(value, list) and value and _is_set(field, value):
        found.update((*path, "v:" + _compact(item)) for item in value)
    else:
        found.add(path)


def _keyed(field: Field | None, items: list[Any]) -> bool:
    """A list merged item by item on its merge key (every item an object that has the key)."""
    return (
        field is not None
        and field.merges
        and bool(field.key)
        and all(isinstance(i, Mapping) and field.key in i for i in items)
    )


def _is_set(field: Field | None, items: list[Any]) -> bool:
    return (
        field is not None and field.merges and not field.key and not any(isinstance(i, (Mapping, list)) for i in items)
    )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _key_element(key: str, item: Mapping[str, Any]) -> str:
    return "k:" + _compact({key: item[key]})


def value_at(obj: Any, path: FieldPath) -> Any:
    """The value at a path, or _MISSING."""
    node = obj
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            if not isinstance(node, Mapping) or rest not in node:
                return _MISSING
            node = node[rest]
        elif kind == "k":
            keys = json.loads(rest)
            if not isinstance(node, list):
                return _MISSING
            node = next(
                (i for i in node if isinstance(i, Mapping) and all(i.get(k) == v for k, v in keys.items())), _MISSING
            )
            if node is _MISSING:
                return _MISSING
        else:
            wanted = json.loads(rest)
            return wanted if isinstance(node, list) and wanted in node else _MISSING
    return node


def merged(live: Mapping[str, Any], applied: Mapping[str, Any], root_type: str | None) -> dict[str, Any]:
    """`live` with the applied configuration merged in: objects key by key, keyed lists item by item (new items
    after the live ones), sets as a union, everything else replaced. Neither argument is changed."""
    return _merge_map(live, applied, root_type or "")


def _merge_map(live: Mapping[str, Any], applied: Mapping[str, Any], type_name: str) -> dict[str, Any]:
    result = dict(live)
    for name, value in applied.items():
        field = field_of(type_name, name) if type_name else None
        current = result.get(name)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            result[name] = _merge_map(current, value, field.value_type if field is not None else "")
        elif isinstance(value, list) and isinstance(current, list) and _keyed(field, value) and _keyed(field, current):
            assert field is not None
            result[name] = _merge_keyed(current, value, field)
        elif isinstance(value, list) and isinstance(current, list) and _is_set(field, value):
            result[name] = [*current, *(v for v in value if v not in current)]
        else:
            result[name] = copy.deepcopy(value)
    return result


def _merge_keyed(live: list[Any], applied: list[Any], field: Field) -> list[Any]:
    by_key = {item[field.key]: item for item in applied}
    result = [
        _merge_map(item, by_key.pop(item[field.key]), field.type) if item[field.key] in by_key else item
        for item in live
    ]
    return [*result, *(copy.deepcopy(item) for item in by_key.values())]


def removed(obj: dict[str, Any], path: FieldPath) -> None:
    """Take the field, list item or set value at `path` out of `obj` (in place); nothing when it is not there."""
    *parents, last = path
    node: Any = obj
    for element in parents:
        node = value_at(node, (element,))
        if node is _MISSING:
            return
    kind, _, rest = last.partition(":")
    if kind == "f" and isinstance(node, dict):
        node.pop(rest, None)
    elif kind == "k" and isinstance(node, list):
        keys = json.loads(rest)
        node[:] = [i for i in node if not (isinstance(i, Mapping) and all(i.get(k) == v for k, v in keys.items()))]
    elif kind == "v" and isinstance(node, list):
        wanted = json.loads(rest)
        node[:] = [i for i in node if i != wanted]


@dataclass(frozen=True)
class Applied:
    """The object an apply leaves, and its managedFields."""

    obj: dict[str, Any]
    managed: list[ManagedEntry]


def apply(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    root_type: str | None,
    time: str,
) -> Applied:
    """Apply `config` as `manager` to `live` (None: the object does not exist yet).

    The fields it sets become the manager's (its Apply entry); a field another manager owns that the apply would
    change is a conflict (ApplyConflict), unless `force`, which takes the field over. A field the manager applied
    before and leaves out now is removed from the object unless another manager owns it too. Fields set to the
    value they already have are shared, not conflicts."""
    api_version = str(config.get("apiVersion", ""))
    wanted = field_set(config, root_type)
    if live is None:
        return Applied(
            copy.deepcopy(dict(config)), [ManagedEntry(manager, APPLY, api_version, time, frozenset(wanted))]
        )
    others = [e for e in entries(live) if not (e.manager == manager and e.operation == APPLY and not e.subresource)]
    mine = next((e for e in entries(live) if e.manager == manager and e.operation == APPLY and not e.subresource), None)
    # Every other entry is another owner, the same manager's updates included (kube-apiserver keys owners by
    # manager, operation and subresource).
    conflicts = [
        (entry, path)
        for entry in others
        for path in sorted(wanted & entry.fields)
        if path[-1][0] == "f" and value_at(live, path) != value_at(config, path)
    ]
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    taken = {path for _, path in conflicts}
    kept = [
        ManagedEntry(e.manager, e.operation, e.api_version, e.time, e.fields - taken, e.subresource) for e in others
    ]
    owned_elsewhere = set().union(*(e.fields for e in kept)) if kept else set()
    obj = merged(live, config, root_type)
    if mine is not None:
        owned = wanted | owned_elsewhere
        for path in sorted(mine.fields - owned, key=len, reverse=True):
            removed(obj, path)
            # A map or list left empty by the removal goes too, unless someone owns it as it is.
            for end in range(len(path) - 1, 0, -1):
                parent = path[:end]
                if parent in owned or value_at(obj, parent) not in ({}, []):
                    break
                removed(obj, parent)
    entry = ManagedEntry(manager, APPLY, api_version, time, frozenset(wanted))
    if mine is not None and mine.fields == entry.fields and not taken and _unmanaged(obj) == _unmanaged(live):
        entry = mine  # an apply that changes nothing writes nothing, its time included
    return Applied(obj, [e for e in (*kept, entry) if e.fields])


def _unmanaged(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def updated(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    manager: str,
    root_type: str | None,
    time: str,
    subresource: str = "",
) -> list[ManagedEntry]:
    """The managedFields after `manager` changed `before` into `after` by an update (PUT or a patch): the fields it
    changed become its (its Update entry) and no longer any other manager's."""
    old, new = field_set(before, root_type), field_set(after, root_type)
    # Fields added or taken away, and leaves given a new value (a list item whose contents changed is not itself
    # changed: its changed fields are).
    changed = (new ^ old) | {p for p in new & old if p[-1][0] == "f" and value_at(before, p) != value_at(after, p)}
    current = entries(before)
    if not changed:
        return current
    mine = next(
        (e for e in current if e.manager == manager and e.operation == UPDATE and e.subresource == subresource), None
    )
    kept = [
        ManagedEntry(e.manager, e.operation, e.api_version, e.time, e.fields - changed, e.subresource)
        for e in current
        if e is not mine
    ]
    fields = ((mine.fields if mine is not None else frozenset()) | (changed & new)) - (old - new)
    entry = ManagedEntry(manager, UPDATE, str(after.get("apiVersion", "")), time, frozenset(fields), subresource)
    return [e for e in (*kept, entry) if e.fields]
