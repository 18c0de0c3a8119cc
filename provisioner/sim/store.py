"""Kubernetes-shaped objects in memory, with uid, resourceVersion, generation, finalizers and deletion.

The store is the lab's API server. It remembers which objects changed so the database layer writes back only
those, in one transaction.
"""

from __future__ import annotations

import builtins
import copy
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from provisioner.selectors import LabelSelector

Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name

CLUSTER_SCOPED = frozenset(
    {"Node", "NodeClaim", "Namespace", "DeviceClass", "ResourceSlice", "DRAConfig", "NodePool", "KWOKNodeClass"}
)


class NotFound(LookupError):
    pass


class AlreadyExists(Exception):
    pass


class Conflict(Exception):
    """An update based on a stale resourceVersion."""


# kube-apiserver's default --event-ttl: Events are kept an hour after they were last seen.
EVENT_TTL_SECONDS = 3600.0


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    kind = obj["kind"]
    return (kind, "" if kind in CLUSTER_SCOPED else meta.get("namespace") or "default", meta["name"])


class ObjectStore:
    def __init__(self, objects: Iterable[Obj] = (), *, resource_version: int = 0, clock: Callable[[], float]) -> None:
        self._by_kind: dict[str, dict[Key, Obj]] = {}
        self._clock = clock
        self.resource_version = resource_version
        for obj in objects:
            self._by_kind.setdefault(obj["kind"], {})[key_of(obj)] = obj
        self.changed: set[Key] = set()
        self.removed: set[Key] = set()
        # Bumped on every write of a kind, so an observer can tell cheaply whether, say, NodeClaims changed.
        self.kind_versions: dict[str, int] = {}

    # Reads ----------------------------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        namespace = "" if kind in CLUSTER_SCOPED else namespace or "default"
        return self._by_kind.get(kind, {}).get((kind, namespace, name))

    def must_get(self, kind: str, name: str, namespace: str = "") -> Obj:
        obj = self.get(kind, name, namespace)
        if obj is None:
            raise NotFound(f'{kind} "{name}" not found')
        return obj

    def list(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> builtins.list[Obj]:
        objects = self._by_kind.get(kind, {}).values()
        result = []
        for obj in objects:
            meta = obj["metadata"]
            if (
                namespace is not None
                and kind not in CLUSTER_SCOPED
                and (meta.get("namespace") or "default") != namespace
            ):
                continue
            if selector is not None and not selector.matches(meta.get("labels") or {}):
                continue
            result.append(obj)
        return sorted(result, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def kinds(self) -> builtins.list[str]:
        return sorted(self._by_kind)

    # Writes ---------------------------------------------------------------------------------------------------

    def _bump(self, obj: Obj) -> None:
        self.resource_version += 1
        self.kind_versions[obj["kind"]] = self.kind_versions.get(obj["kind"], 0) + 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        self.changed.add(key_of(obj))

    def create(self, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if obj["kind"] not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        key = key_of(obj)
        if key in self._by_kind.get(obj["kind"], {}):
            raise AlreadyExists(f'{obj["kind"]} "{meta["name"]}" already exists')
        # Deterministic: the same lab history gives the same uids (names alone repeat after deletions).
        meta.setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, f"{'/'.join(key)}#{self.resource_version + 1}")))
        meta.setdefault("creationTimestamp", timestamp(self._clock()))
        meta["generation"] = 1
        self._by_kind.setdefault(obj["kind"], {})[key] = obj
        self.removed.discard(key)
        self._bump(obj)
        return obj

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        """Store a modified object (the dict itself, usually fetched from this store)."""
        key = key_of(obj)
        if key not in self._by_kind.get(obj["kind"], {}):
            raise NotFound(f'{obj["kind"]} "{obj["metadata"]["name"]}" not found')
        self._by_kind[obj["kind"]][key] = obj
        if spec_changed:
            obj["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        self._bump(obj)
        return obj

    def apply(self, obj: Obj) -> tuple[Obj, str]:
        """Create or replace spec/metadata from a manifest, keeping identity and status: kubectl apply."""
        existing = self.get(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
        if existing is None:
            return self.create(obj), "created"
        changed = False
        for field in ("spec", "data"):
            if field in obj and obj[field] != existing.get(field):
                existing[field] = copy.deepcopy(obj[field])
                changed = True
        for field in ("labels", "annotations"):
            given = obj["metadata"].get(field) or {}
            if given != (existing["metadata"].get(field) or {}):
                existing["metadata"][field] = copy.deepcopy(given)
                changed = True
        if obj["kind"] == "Node" and obj.get("status") and obj["status"] != existing.get("status"):
            existing["status"] = copy.deepcopy(obj["status"])  # static nodes: the manifest is their status
            changed = True
        if not changed:
            return existing, "unchanged"
        self.update(existing, spec_changed=True)
        return existing, "configured"

    def delete(self, kind: str, name: str, namespace: str = "") -> Obj:
        """Delete, or mark for deletion while finalizers remain (as the API server does)."""
        obj = self.must_get(kind, name, namespace)
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = timestamp(self._clock())
                self._bump(obj)
            return obj
        key = key_of(obj)
        del self._by_kind[kind][key]
        self.changed.discard(key)
        self.removed.add(key)
        self.resource_version += 1
        self.kind_versions[kind] = self.kind_versions.get(kind, 0) + 1
        return obj

    def remove_finalizer(self, obj: Obj, finalizer: str) -> None:
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        obj["metadata"]["finalizers"] = finalizers
        if not finalizers and obj["metadata"].get("deletionTimestamp"):
            obj["metadata"]["finalizers"] = []
            self.delete(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
        else:
            self.update(obj)

    def expire_events(self, ttl: float = EVENT_TTL_SECONDS) -> int:
        """Delete Events last seen more than `ttl` ago, as the API server does (--event-ttl); how many went."""
        cutoff = self._clock() - ttl
        stale = [
            (event["metadata"]["name"], event["metadata"].get("namespace", ""))
            for event in self._by_kind.get("Event", {}).values()
            if parse_timestamp(event.get("lastTimestamp") or event["metadata"]["creationTimestamp"]) < cutoff
        ]
        for name, namespace in stale:
            self.delete("Event", name, namespace)
        return len(stale)

    def all_objects(self) -> builtins.list[Obj]:
        return [obj for kind in sorted(self._by_kind) for obj in self._by_kind[kind].values()]
