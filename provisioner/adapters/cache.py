"""The engine's view of a real cluster: the objects its informers listed and watched, plus what its own writes
returned, by kind, with the reads the cluster port offers (get, list with selectors, kind versions).

Only the engine's thread touches it: informers hand their deltas over a queue, applied at `sync` points, so a
reconcile step reads one consistent state. Events can arrive after the engine's own write returned a newer
version of the same object (they were queued before it), so an event older than what is cached is ignored, and an
object the engine saw deleted never comes back from a late event (its uid is remembered).

Objects are kept compact, as copies of their own: without `metadata.managedFields`, which no reader in the engine looks
at and which, as Python dicts, were about 40 % of a kwok pod's memory (each object's are kept beside it as compact
JSON, for `served`: the mirror shows the objects as the server sent them; a PUT without managedFields leaves the
server's as they are), and with their keys and short strings interned, so that thousands of pods share one "metadata"
and one "Running" rather than each watch event's decoding bringing its own.
"""

from __future__ import annotations

import builtins
import json
import pickle
import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.memory import select
from provisioner.cluster.objects import Key, Obj, key_of, namespace_of
from provisioner.selectors import LabelSelector

DELETED_UIDS_KEPT = 50_000


@dataclass(frozen=True)
class Replace:
    """An informer's (re-)list: every object of `kind` as of `resource_version`."""

    kind: str
    items: tuple[Obj, ...]
    resource_version: str
    # Given when the informer made the items compact page by page as they came (`compact`), so that a relist never
    # holds every object of the kind as decoded beside the cache: each item's managedFields as JSON, in order.
    managed: tuple[bytes | None, ...] | None = None


@dataclass(frozen=True)
class Event:
    """One watch event: ADDED, MODIFIED or DELETED."""

    kind: str
    type: str
    obj: Obj
    # True when the informer made `obj` compact as it came (`compact`), so that the events queued while the engine
    # runs a step (thousands at once at a scale-up) are held as the cache keeps them, not as decoded; `managed` is
    # then its managedFields as JSON.
    compacted: bool = False
    managed: bytes | None = None


def _version(obj: Mapping[str, Any]) -> int | None:
    text = obj.get("metadata", {}).get("resourceVersion")
    return int(text) if isinstance(text, str) and text.isdigit() else None


def older(candidate: Mapping[str, Any], cached: Mapping[str, Any]) -> bool:
    """Whether `candidate` is an older version of the object than `cached`. resourceVersions are opaque to clients,
    but etcd's (and the lab's) are increasing integers; when one is not, nothing is taken to be older."""
    a, b = _version(candidate), _version(cached)
    return a is not None and b is not None and a < b


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("uid") or "")


SHORT_STRING = 40  # strings up to this long are interned: names of fields, phases, reasons, images, namespaces


def _interned(value: Any) -> Any:
    """A deep copy of JSON-shaped data with its keys and short strings interned."""
    kind = type(value)
    if kind is dict:
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if kind is list:
        return [_interned(v) for v in value]
    if kind is str and len(value) <= SHORT_STRING:
        return sys.intern(value)
    return value


def compact(obj: Obj) -> tuple[Obj, bytes | None]:
    """The object as the cache keeps it (a copy of its own, without metadata.managedFields, interned), and its
    managedFields as compact JSON (None when it had none)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return _interned(obj), None
    managed = json.dumps(meta["managedFields"], separators=(",", ":")).encode()
    return _interned({**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}), managed


class Cache:
    def __init__(self) -> None:
        self._objects: dict[str, dict[Key, Obj]] = {}
        self._sorted: dict[str, builtins.list[Key]] = {}
        self._pods_by_node: dict[str, set[Key]] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()  # uids seen deleted, oldest first
        # id of a cached object -> (the object, its pickle): a read's copy is unpickled, several times faster than
        # copying the dicts in Python, which was most of a busy step's time at 1,000 pods. Made at the object's first
        # read and dropped when it leaves the cache (the object is kept beside it, so its id is never reused).
        self._pickled: dict[int, tuple[Obj, bytes]] = {}
        self._managed: dict[str, dict[Key, bytes]] = {}  # kind -> key -> the cached object's managedFields as JSON
        self.kind_versions: dict[str, int] = {}
        self.listed: set[str] = set()  # kinds whose first list has been applied

    # Applying what the informers and the engine's writes saw -------------------------------------------------

    def replace(self, delta: Replace) -> None:
        """A (re-)list: the kind's objects become the listed ones, except that an object the engine wrote (or
        created) after the list was taken is kept, and one it deleted stays deleted."""
        current = self._objects.get(delta.kind, {})
        current_managed = self._managed.get(delta.kind, {})
        listed_version = {"metadata": {"resourceVersion": delta.resource_version}}
        fresh: dict[Key, Obj] = {}
        managed: dict[Key, bytes] = {}
        for index, item in enumerate(delta.items):
            if _uid(item) in self._deleted:
                continue
            if delta.managed is None:
                item, item_managed = compact(item)
            else:
                item_managed = delta.managed[index]
            item["kind"] = delta.kind
            key = key_of(item)
            cached = current.get(key)
            if cached is not None and older(item, cached):
                fresh[key] = cached
                item_managed = current_managed.get(key)
            else:
                fresh[key] = item
            if item_managed is not None:
                managed[key] = item_managed
        for key, cached in current.items():
            if key not in fresh and older(listed_version, cached):
                fresh[key] = cached  # created by the engine after the list was taken
                if key in current_managed:
                    managed[key] = current_managed[key]
        for key in list(current):
            self._unindex(key, current[key])
        self._objects[delta.kind] = fresh
        self._managed[delta.kind] = managed
        for key, obj in fresh.items():
            self._index(key, obj)
        self._sorted.pop(delta.kind, None)
        self.listed.add(delta.kind)
        self._bump(delta.kind)

    def apply(self, delta: Event) -> bool:
        """A watch event; False when it is older than what the cache holds (and so changes nothing)."""
        obj = delta.obj if delta.obj.get("kind") == delta.kind else {**delta.obj, "kind": delta.kind}
        if delta.type == "DELETED":
            return self.remove(obj)
        if delta.compacted:
            return self._keep(obj, delta.managed)
        return self.store(obj)

    def store(self, obj: Obj) -> bool:
        """An object as the server returned it (from a watch or a write): kept (as a compact copy; `obj` is left as it
        was) unless the cache has a newer one or saw the object deleted."""
        return self._keep(*compact(obj))

    def _keep(self, obj: Obj, managed: bytes | None) -> bool:
        """`store` of an object already compact, with its managedFields as JSON."""
        uid = _uid(obj)
        if uid and uid in self._deleted:
            return False
        key = key_of(obj)
        objects = self._objects.setdefault(obj["kind"], {})
        cached = objects.get(key)
        if cached is not None and _uid(cached) == uid and older(obj, cached):
            return False
        if cached is None:
            self._sorted.pop(obj["kind"], None)
        else:
            self._unindex(key, cached)
        objects[key] = obj
        managed_of_kind = self._managed.setdefault(obj["kind"], {})
        if managed is None:
            managed_of_kind.pop(key, None)
        else:
            managed_of_kind[key] = managed
        self._index(key, obj)
        self._bump(obj["kind"])
        return True

    def remove(self, obj: Obj) -> bool:
        """An object gone from the server; another object that has since taken its name is left alone."""
        uid = _uid(obj)
        if uid:
            self._deleted[uid] = None
            self._deleted.move_to_end(uid)
            while len(self._deleted) > DELETED_UIDS_KEPT:
                self._deleted.popitem(last=False)
        key = key_of(obj)
        objects = self._objects.get(obj["kind"], {})
        cached = objects.get(key)
        if cached is None or (uid and _uid(cached) != uid):
            return False
        del objects[key]
        self._managed.get(obj["kind"], {}).pop(key, None)
        self._unindex(key, cached)
        self._sorted.pop(obj["kind"], None)
        self._bump(obj["kind"])
        return True

    def _bump(self, kind: str) -> None:
        self.kind_versions[kind] = self.kind_versions.get(kind, 0) + 1

    def _index(self, key: Key, obj: Obj) -> None:
        if key[0] == "Pod":
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            self._pods_by_node.setdefault(node, set()).add(key)

    def _unindex(self, key: Key, obj: Obj) -> None:
        self._pickled.pop(id(obj), None)
        if key[0] == "Pod":
            node = str((obj.get("spec") or {}).get("nodeName") or "")
            self._pods_by_node.get(node, set()).discard(key)

    # Reads: copies, so a caller may change what it got and hand it back as a write -------------------------

    def peek(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        """The cached object itself (not a copy): for comparisons, never to change."""
        return self._objects.get(kind, {}).get((kind, namespace_of(kind, namespace), name))

    def peek_all(self, kind: str) -> Mapping[Key, Obj]:
        """The kind's cached objects themselves by key (not copies, in no order): for comparisons, never to change."""
        return self._objects.get(kind, {})

    def served(self, obj: Obj) -> Obj:
        """A cached object (from `peek` or `peek_all`) as the server sent it: with its managedFields again, in a new
        top-level dict and metadata (the rest is the cached object's own: never to change)."""
        key = key_of(obj)
        managed = self._managed.get(key[0], {}).get(key)
        if managed is None or self._objects.get(key[0], {}).get(key) is not obj:
            return obj
        return {**obj, "metadata": {**obj["metadata"], "managedFields": json.loads(managed)}}

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        obj = self.peek(kind, name, namespace)
        return self._copy(obj) if obj is not None else None

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> builtins.list[Obj]:
        objects = self._objects.get(kind, {})
        fields = dict(fields or {})
        keys: Iterable[Key]
        if kind == "Pod" and "spec.nodeName" in fields:
            keys = sorted(self._pods_by_node.get(fields.pop("spec.nodeName"), ()))
        else:
            keys = self._sorted.get(kind) or self._sorted.setdefault(kind, sorted(objects))
        return [self._copy(obj) for obj in select(objects, keys, kind, namespace, selector, fields)]

    def _copy(self, obj: Obj) -> Obj:
        """A deep copy of a cached object (JSON-shaped: dicts, lists, strings, numbers), from its pickle."""
        pickled = self._pickled.get(id(obj))
        if pickled is None or pickled[0] is not obj:
            pickled = self._pickled[id(obj)] = (obj, pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
        copied: Obj = pickle.loads(pickled[1])  # noqa: S301 - our own bytes, made from the cached object just above
        return copied

    def kind_version(self, kind: str) -> int:
        return self.kind_versions.get(kind, 0)

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))
