"""Server-side apply (`kubectl apply --server-side`): which manager owns which fields of an object
(`metadata.managedFields`, in the FieldsV1 format), the merge of an applied configuration into the live object, and
the conflicts kube-apiserver reports when an apply would change a field another manager set.

A field path is a tuple of FieldsV1 path elements: `f:<name>` for a field, `k:<json>` for an item of a list keyed
by its list-map keys (a pod's containers by name, a container's ports by port and protocol), `v:<json>` for a value
of a list of scalars merged as a set (finalizers). How each list merges comes from the built-in kinds' schema
(`x-kubernetes-list-type` and `x-kubernetes-list-map-keys`, kept in strategies.json); every other list, custom
resources' included, is atomic: one field, replaced whole, as structured-merge-diff treats it.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.apimachinery.strategic import Field, PatchError, field_of, list_rule

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
            **({"time": self.time} if self.time else {}),
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
    """FieldsV1 as a set of paths; a ValueError when it is not a FieldsV1 object (an element that is not `.`,
    `f:<name>`, `k:<JSON object>` or `v:<JSON>`, or children that are not objects)."""
    if not isinstance(fields_v1, Mapping):
        raise ValueError(f"fieldsV1: expected an object of path elements, got {type(fields_v1).__name__}")
    found: set[FieldPath] = set()
    for element, children in fields_v1.items():
        if element == ".":
            found.add(prefix)
            continue
        _check_element(element)
        if not isinstance(children, Mapping):
            raise ValueError(f"fieldsV1: {element}: expected an object, got {type(children).__name__}")
        if children:
            found |= decode(children, (*prefix, element))
        else:
            found.add((*prefix, element))
    return found


def _check_element(element: str) -> None:
    kind, colon, rest = element.partition(":")
    valid = bool(colon) and kind == "f" and bool(rest)
    if colon and kind in ("k", "v"):
        try:
            value = json.loads(rest)
        except ValueError:
            value = _MISSING
        valid = isinstance(value, dict) if kind == "k" else value is not _MISSING
    if not valid:
        raise ValueError(f"fieldsV1: {json.dumps(element)} is not a path element (f:<name>, k:<object>, v:<value>)")


def _read(entry: Any) -> ManagedEntry | str:
    """One managedFields entry as read, or why it cannot be read (the field and what is wrong)."""
    if not isinstance(entry, Mapping):
        return "must be an object"
    if entry.get("operation") not in (APPLY, UPDATE):
        return (
            f'operation: Unsupported value: {json.dumps(entry.get("operation"))}: supported values: "Apply", "Update"'
        )
    if entry.get("fieldsType", "FieldsV1") != "FieldsV1":
        return f'fieldsType: Unsupported value: {json.dumps(entry.get("fieldsType"))}: supported values: "FieldsV1"'
    try:
        fields = decode(entry.get("fieldsV1") or {})
    except ValueError as error:
        return str(error)
    return ManagedEntry(
        manager=str(entry.get("manager", "")),
        operation=str(entry["operation"]),
        api_version=str(entry.get("apiVersion", "")),
        time=str(entry.get("time", "")),
        fields=frozenset(fields),
        subresource=str(entry.get("subresource", "")),
    )


def entry_problem(entry: Any) -> str | None:
    """Why a managedFields entry a writer sent cannot be kept (the field and what is wrong), or None."""
    read = _read(entry)
    return read if isinstance(read, str) else None


def entries(obj: Mapping[str, Any]) -> list[ManagedEntry]:
    """An object's managedFields; entries that cannot be read are left out, as kube-apiserver ignores them."""
    read = [_read(entry) for entry in (obj.get("metadata") or {}).get("managedFields") or []]
    return [entry for entry in read if isinstance(entry, ManagedEntry)]


class ApplyInvalid(PatchError):
    """An applied configuration whose keyed list cannot be merged: an item without a key, or two with the same.
    `field` is the list (`.spec.template.spec.containers[name="app"].env`), `problem` what is wrong with it."""

    def __init__(self, path: FieldPath, problem: str) -> None:
        self.field, self.problem = dotted(path), problem
        super().__init__(f"{self.field}: {problem}")


def field_set(obj: Mapping[str, Any], root_type: str | None, *, strict: bool = False) -> set[FieldPath]:
    """Every field `obj` sets, as owned paths: leaves, list items keyed by their list's keys (and those keys), and
    set values; server-set metadata left out. With `strict` (an applied configuration), a keyed list's item that
    omits a key or repeats another's is an ApplyInvalid; otherwise (a stored object) such an item is not owned."""
    found: set[FieldPath] = set()
    _walk_map(obj, root_type or "", (), found, strict)
    return {path for path in found if path not in _SERVER_FIELDS}


def _walk_map(value: Mapping[str, Any], type_name: str, prefix: FieldPath, found: set[FieldPath], strict: bool) -> None:
    for name, child in value.items():
        field = field_of(type_name, name)
        _walk_value(child, type_name, name, field, (*prefix, f"f:{name}"), found, strict)


def _walk_value(
    value: Any,
    parent_type: str,
    name: str,
    field: Field | None,
    path: FieldPath,
    found: set[FieldPath],
    strict: bool,
) -> None:
    kind, keys = list_rule(parent_type, name)
    if isinstance(value, Mapping) and value:
        _walk_map(value, field.value_type if field is not None else "", path, found, strict)
    elif isinstance(value, list) and value and kind == "map":
        seen: set[str] = set()
        for index, item in enumerate(value):
            element = _item_key(item, keys, path, index, strict)
            if element is None:
                continue
            if element in seen:
                if strict:
                    raise ApplyInvalid(path, f"duplicate entries for key {dotted((element,))}")
                continue
            seen.add(element)
            found.add((*path, element))
            _walk_map(item, field.type if field is not None else "", (*path, element), found, strict)
    elif isinstance(value, list) and value and kind == "set" and not any(isinstance(i, (Mapping, list)) for i in value):
        found.update((*path, "v:" + _compact(item)) for item in value)
    else:
        found.add(path)


# List-map keys the API server defaults before it merges: an item that leaves one out is keyed by its default.
_KEY_DEFAULTS = {"protocol": "TCP"}


def _item_key(item: Any, keys: tuple[str, ...], path: FieldPath, index: int, strict: bool) -> str | None:
    """A keyed list item's path element (`k:{"name":"app"}`), or None (or ApplyInvalid) when it has no valid key."""
    values = {}
    for key in keys:
        value = item.get(key, _KEY_DEFAULTS.get(key)) if isinstance(item, Mapping) else None
        if value is None or isinstance(value, (Mapping, list)):
            if not strict:
                return None
            raise ApplyInvalid(
                path,
                f"element {index}: associative list with keys has an element that omits key field {json.dumps(key)} "
                "(and doesn't have default value)",
            )
        values[key] = value
    return "k:" + _compact(values)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


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
            node = next((i for i in node if _matches(i, keys)), _MISSING)
            if node is _MISSING:
                return _MISSING
        else:
            wanted = json.loads(rest)
            return wanted if isinstance(node, list) and wanted in node else _MISSING
    return node


def _matches(item: Any, keys: Mapping[str, Any]) -> bool:
    return isinstance(item, Mapping) and all(item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in keys.items())


def without_nulls(value: Any) -> Any:
    """An applied configuration without its null fields: a null is no value to set (kube-apiserver drops them)."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def merged(live: Mapping[str, Any], applied: Mapping[str, Any], root_type: str | None) -> dict[str, Any]:
    """`live` with the applied configuration merged in: objects key by key, keyed lists item by item (new items
    after the live ones), sets as a union, everything else replaced. Neither argument is changed."""
    return _merge_map(live, applied, root_type or "")


def _merge_map(live: Mapping[str, Any], applied: Mapping[str, Any], type_name: str) -> dict[str, Any]:
    result = dict(live)
    for name, value in applied.items():
        field = field_of(type_name, name)
        kind, keys = list_rule(type_name, name)
        current = result.get(name)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            result[name] = _merge_map(current, value, field.value_type if field is not None else "")
        elif isinstance(value, list) and isinstance(current, list) and kind == "map":
            result[name] = _merge_keyed(current, value, keys, field.type if field is not None else "")
        elif isinstance(value, list) and isinstance(current, list) and kind == "set":
            result[name] = [*current, *(v for v in value if v not in current)]
        else:
            result[name] = copy.deepcopy(value)
    return result


def _merge_keyed(live: list[Any], applied: list[Any], keys: tuple[str, ...], item_type: str) -> list[Any]:
    """Items matched on their keys (the applied ones are valid: field_set checked them); live items without a valid
    key are kept as they are."""
    by_key = {_item_key(item, keys, (), 0, strict=False): item for item in applied}
    result = []
    for item in live:
        key = _item_key(item, keys, (), 0, strict=False)
        result.append(_merge_map(item, by_key.pop(key), item_type) if key is not None and key in by_key else item)
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
        node[:] = [i for i in node if not _matches(i, keys)]
    elif kind == "v" and isinstance(node, list):
        wanted = json.loads(rest)
        node[:] = [i for i in node if i != wanted]


@dataclass(frozen=True)
class Applied:
    """The object an apply leaves, and its managedFields."""

    obj: dict[str, Any]
    managed: list[ManagedEntry]


# Who owns a stored object's fields when it has no managedFields (made before any apply, or by a writer that keeps
# none): kube-apiserver's name for them, so that the first apply's changes to them are conflicts.
BEFORE_FIRST_APPLY = "before-first-apply"


def apply(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    root_type: str | None,
    time: str,
    normalized: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    last_applied: Mapping[str, Any] | None = None,
) -> Applied:
    """Apply `config` as `manager` to `live` (None: the object does not exist yet).

    The fields it sets become the manager's (its Apply entry); a field another manager owns that the apply would
    change is a conflict (ApplyConflict), unless `force`, which takes the field over. A field the manager applied
    before and leaves out now is removed from the object unless another manager owns it too. Fields set to the
    value they already have are shared, not conflicts; `normalized` gives the object as it would be stored (a
    NodePool's quantities as its parser writes them), so that a value written differently is not a change. A keyed
    list item without its key, or repeated, is an ApplyInvalid. Null fields set nothing. `last_applied` is the
    object's kubectl.kubernetes.io/last-applied-configuration, whose fields "kubectl" may take over."""
    config = without_nulls(config)
    api_version = str(config.get("apiVersion", ""))
    wanted = field_set(config, root_type, strict=True)
    if live is None:
        return Applied(
            copy.deepcopy(dict(config)), [ManagedEntry(manager, APPLY, api_version, time, frozenset(wanted))]
        )
    stored = entries(live)
    if not stored:
        owned = frozenset(p for p in field_set(live, root_type) if p[0] != "f:status")
        stored = [ManagedEntry(BEFORE_FIRST_APPLY, UPDATE, str(live.get("apiVersion", "")), time, owned)]
    applied_before = [e for e in stored if e.manager == manager and e.operation == APPLY and not e.subresource]
    mine = applied_before[0] if applied_before else None
    others = [e for e in stored if e not in applied_before]
    obj = merged(live, config, root_type)
    target = obj
    if normalized is not None:
        target = normalized(obj)  # a merged object that cannot be stored is refused here, naming the field
        with contextlib.suppress(ValueError):  # stored before its rules changed: compared as it is
            live = normalized(dict(live))
    # Every other entry is another owner, the same manager's updates included (kube-apiserver keys owners by
    # manager, operation and subresource).
    conflicts = [
        (entry, path)
        for entry in others
        for path in sorted(wanted & entry.fields)
        if path[-1][0] == "f" and value_at(live, path) != value_at(target, path)
    ]
    if conflicts and not force:
        # kubectl moving an object from client-side to server-side apply takes over, without conflicts, the fields
        # its last client-side apply set (kube-apiserver's last-applied manager does the same, for "kubectl" only).
        allowed = field_set(last_applied, root_type) if last_applied is not None and manager == "kubectl" else set()
        blocking = [(entry, path) for entry, path in conflicts if path not in allowed]
        if blocking:
            raise ApplyConflict(blocking)
    taken = {path for _, path in conflicts}
    kept = [
        ManagedEntry(e.manager, e.operation, e.api_version, e.time, e.fields - taken, e.subresource) for e in others
    ]
    if mine is not None:
        _remove_dropped(obj, mine.fields, wanted, set().union(*(e.fields for e in kept)) if kept else set())
    entry = ManagedEntry(manager, APPLY, api_version, time, frozenset(wanted))
    if mine is not None and mine.fields == entry.fields and not taken and _unmanaged(target) == _unmanaged(live):
        entry = mine  # an apply that changes nothing writes nothing, its time included
    return Applied(obj, [e for e in (*kept, entry) if e.fields])


def _remove_dropped(
    obj: dict[str, Any], before: frozenset[FieldPath], wanted: set[FieldPath], others: set[FieldPath]
) -> None:
    """Remove from `obj` what the manager applied before and no longer applies, where no one else owns it: a whole
    list item at once (never its key fields alone, which would leave an item no one can name), and never a field
    that now holds applied ones (`resources: {}` applied before `resources: {requests: ...}`)."""
    owned = wanted | others
    holding = {path[:end] for path in owned for end in range(1, len(path))}
    dropped = sorted(before - owned - holding, key=lambda path: (len(path), path))  # items before their fields
    gone: list[FieldPath] = []
    for path in dropped:
        if any(path[: len(item)] == item for item in gone):
            continue  # inside an item already removed
        if len(path) >= 2 and path[-2].startswith("k:") and path[-1][2:] in json.loads(path[-2][2:]):
            continue  # a key field of an item that stays
        removed(obj, path)
        if path[-1][0] in "kv":
            gone.append(path)
        # A map left empty by the removal goes too, unless someone owns it as it is.
        for end in range(len(path) - 1, 0, -1):
            parent = path[:end]
            if parent in owned or parent in holding or value_at(obj, parent) not in ({}, []):
                break
            removed(obj, parent)


def _unmanaged(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def created(obj: Mapping[str, Any], *, manager: str, root_type: str | None, time: str) -> list[ManagedEntry]:
    """The managedFields of an object `manager` has just created by a POST (or a client-side apply): one Update
    entry owning every field it set but status, which is the status subresource's. kube-apiserver tracks an object
    from its creation (DefaultTrackOnCreateProbability 1), so that a later server-side apply knows who set what."""
    fields = frozenset(p for p in field_set(obj, root_type) if p[0] != "f:status")
    return [ManagedEntry(manager, UPDATE, str(obj.get("apiVersion", "")), time, fields)] if fields else []


def as_if_tracked(
    live: Mapping[str, Any], last_applied: Mapping[str, Any] | None, *, applier: str, root_type: str | None, time: str
) -> list[ManagedEntry]:
    """managedFields for an object stored without any, as kube-apiserver would have tracked it from its creation
    as far as can be told: the fields its last client-side apply set and it still holds, with that record itself,
    the applier's; everything else (others' writes, defaults) before-first-apply's. So kubectl's first server-side
    apply takes over what the file set, and never another writer's fields."""
    fields = {p for p in field_set(live, root_type) if p[0] != "f:status"}
    api_version = str(live.get("apiVersion", ""))
    applied: set[FieldPath] = set()
    if last_applied is not None:
        record = ("f:metadata", "f:annotations", "f:kubectl.kubernetes.io/last-applied-configuration")
        applied = {p for p in field_set(last_applied, root_type) if value_at(last_applied, p) == value_at(live, p)}
        applied = (applied & fields) | ({record} & fields)
    entries = [
        ManagedEntry(applier, UPDATE, api_version, time, frozenset(applied)),
        ManagedEntry(BEFORE_FIRST_APPLY, UPDATE, api_version, time, frozenset(fields - applied)),
    ]
    return [e for e in entries if e.fields]


# kube-apiserver keeps at most this many managers of updates; the oldest are merged into one per API version.
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"


def capped(managed: list[ManagedEntry]) -> list[ManagedEntry]:
    """`managed` with its update managers capped as kube-apiserver's capManagersManager caps them: past
    MAX_UPDATE_MANAGERS, the oldest (by time, then name) are merged, per API version, into "ancient-changes"."""
    updaters = sorted((e for e in managed if e.operation == UPDATE), key=lambda e: (e.time, e.manager))
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return managed
    result = list(managed)
    first: dict[str, ManagedEntry] = {}
    bucket: dict[str, ManagedEntry] = {}
    length = len(updaters)
    for entry in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        version = entry.api_version
        if version not in first:
            first[version] = entry
            continue
        if version not in bucket:
            oldest = first[version]
            index = result.index(oldest)
            bucket[version] = ManagedEntry(ANCIENT_CHANGES, UPDATE, version, oldest.time, oldest.fields)
            result[index] = bucket[version]
        merged_entry = ManagedEntry(ANCIENT_CHANGES, UPDATE, version, entry.time, bucket[version].fields | entry.fields)
        result[result.index(bucket[version])] = merged_entry
        bucket[version] = merged_entry
        result.remove(entry)
        length -= 1
    return result


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
    return capped([e for e in (*kept, entry) if e.fields])
