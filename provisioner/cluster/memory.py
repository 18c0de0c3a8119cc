"""The in-memory API server store: Kubernetes-shaped objects with uid, resourceVersion, generation, finalizers
and deletion, implementing the cluster port (`api.ClusterAPI`).

It is the lab's API server, and the shape of the cache a real cluster's adapter keeps. It remembers which objects
changed (and the last body of each removed one) so persistence writes back only those, in one transaction.
"""

from __future__ import annotations

import builtins
import copy
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from provisioner.apimachinery.apply import applied, with_last_applied
from provisioner.apimachinery.mergepatch import merge_patch
from provisioner.cluster import pdb
from provisioner.cluster.api import evict_each
from provisioner.cluster.objects import (
    CLUSTER_SCOPED,
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    AlreadyExists,
    APIError,
    Conflict,
    Key,
    NotFound,
    Obj,
    TooManyRequests,
    controller_of,
    desired,
    key_of,
    namespace_of,
    parse_timestamp,
    timestamp,
)
from provisioner.cluster.views import Views
from provisioner.selectors import LabelSelector

# kube-apiserver's default --event-ttl: Events are kept an hour after they were last seen.
EVENT_TTL_SECONDS = 3600.0


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars): several times faster than copy.deepcopy, which
    matters when a batch creates thousands of pods and events."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def field_value(obj: Obj, path: str) -> str:
    """A field selector's value: `spec.nodeName` of the object, as a string ("" when absent)."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def select(
    objects: Mapping[Key, Obj],
    keys: Iterable[Key],
    kind: str,
    namespace: str | None,
    selector: LabelSelector | None,
    fields: Mapping[str, str],
) -> Iterator[Obj]:
    """The objects at `keys` (in that order) in `namespace` (None: any) that match the label selector and the
    exact-match field selectors: `list`'s filter, for every cache shaped like this store."""
    wanted = None if namespace is None else namespace_of(kind, namespace)
    for key in keys:
        if wanted is not None and key[1] != wanted:
            continue
        obj = objects[key]
        if selector is not None and not selector.matches(obj["metadata"].get("labels") or {}):
            continue
        if fields and any(field_value(obj, path) != value for path, value in fields.items()):
            continue
        yield obj


def _controller_uid(obj: Obj) -> str:
    owner = controller_of(obj)
    return str(owner.get("uid") or "") if owner is not None else ""


def _collector_finalizer(obj: Obj) -> str:
    """The garbage collector's finalizer of an object marked for deletion (`orphan`, `foregroundDeletion`), if any."""
    if not obj["metadata"].get("deletionTimestamp"):
        return ""
    finalizers = obj["metadata"].get("finalizers") or []
    return next((f for f in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER) if f in finalizers), "")


# Fields kept indexed per kind (value -> keys), as an informer cache's indexers: field selectors on them and the
# lab's owner lookups cost the size of the answer, not of the cluster. "owner" is the controller's uid; "collector"
# the garbage collector's finalizer of an owner being deleted, so the collector finds them among 20,000 pods cheaply.
INDEXERS: dict[str, dict[str, Callable[[Obj], str]]] = {
    "Pod": {
        "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
        "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
        "owner": _controller_uid,
        "collector": _collector_finalizer,
    },
    "ReplicaSet": {"owner": _controller_uid, "collector": _collector_finalizer},
    "Deployment": {"collector": _collector_finalizer},
    "DaemonSet": {"collector": _collector_finalizer},
    "Node": {
        "collector": _collector_finalizer,
        # Registration finds a NodeClaim's Node by its providerID, once per NodeClaim being registered.
        "spec.providerID": lambda o: str((o.get("spec") or {}).get("providerID") or ""),
    },
    "ResourceClaim": {"owner": _controller_uid},
    "ResourceSlice": {
        "owner": _controller_uid,
        "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
    },
    "DisruptionCommand": {"status.phase": lambda o: str((o.get("status") or {}).get("phase") or "")},
    "NodeClaim": {"status.nodeName": lambda o: str((o.get("status") or {}).get("nodeName") or "")},
}


# Kinds kube-apiserver keeps no metadata.generation for (their strategies never set one).
UNGENERATED = frozenset({"Namespace", "Node", "Event", "Lease"})


class ObjectStore:
    """The cluster's objects by kind, with the API server's write semantics (see `api.ClusterAPI`)."""

    def __init__(self, objects: Iterable[Obj] = (), *, resource_version: int = 0, clock: Callable[[], float]) -> None:
        self.views = Views()
        self._by_kind: dict[str, dict[Key, Obj]] = {}
        # (kind, indexed field, value) -> a counter bumped whenever an object with that value is written
        self._bucket_versions: dict[tuple[str, str, str], int] = {}
        self._next_event_expiry = 0.0
        self._sorted: dict[
            str, builtins.list[Key]
        ] = {}  # each kind's keys in list order, rebuilt after a create/delete
        self._index: dict[tuple[str, str], dict[str, set[Key]]] = {}
        self._indexed: dict[tuple[str, str], dict[Key, str]] = {}
        self._uids: set[str] = set()
        self._clock = clock
        self.resource_version = resource_version
        for obj in objects:
            self._add(obj)
        self.changed: set[Key] = set()
        # The last body of each object removed since the last save, for the watch's DELETED events.
        self.removed: dict[Key, Obj] = {}
        # Bumped on every write of a kind, so an observer can tell cheaply whether, say, NodeClaims changed.
        self.kind_versions: dict[str, int] = {}
        # Bumped when objects are put back to versions a cache keyed by resourceVersion may have seen with other
        # bodies (a warm engine's run rebased over writes made meanwhile): such caches key by it too.
        self.cache_epoch = 0

    # Bookkeeping ----------------------------------------------------------------------------------------------

    def _add(self, obj: Obj) -> Key:
        key = key_of(obj)
        kind = obj["kind"]
        objects = self._by_kind.setdefault(kind, {})
        if key not in objects:
            self._sorted.pop(kind, None)
        objects[key] = obj
        uid = obj["metadata"].get("uid")
        if uid:
            self._uids.add(uid)
        self._reindex(key, obj)
        return key

    def _drop(self, key: Key) -> Obj:
        obj = self._by_kind[key[0]].pop(key)
        self._sorted.pop(key[0], None)
        self._uids.discard(obj["metadata"].get("uid", ""))
        if key[0] == "Pod":
            self.views.forget(obj["metadata"].get("uid", ""))
        for path in INDEXERS.get(key[0], {}):
            old = self._indexed[key[0], path].pop(key, None)
            if old is not None:
                self._index[key[0], path][old].discard(key)
                self._touch(key[0], path, old)
        return obj

    def _reindex(self, key: Key, obj: Obj) -> None:
        for path, indexer in INDEXERS.get(key[0], {}).items():
            value = indexer(obj)
            values = self._indexed.setdefault((key[0], path), {})
            old = values.get(key)
            self._touch(key[0], path, value)
            if old == value:
                continue
            if old is not None:
                self._touch(key[0], path, old)
            buckets = self._index.setdefault((key[0], path), {})
            if old is not None:
                buckets[old].discard(key)
            buckets.setdefault(value, set()).add(key)
            values[key] = value

    def _touch(self, kind: str, path: str, value: str) -> None:
        bucket = (kind, path, value)
        self._bucket_versions[bucket] = self._bucket_versions.get(bucket, 0) + 1

    def _keys(self, kind: str) -> builtins.list[Key]:
        keys = self._sorted.get(kind)
        if keys is None:
            keys = self._sorted[kind] = sorted(self._by_kind.get(kind, {}))
        return keys

    # Reads ----------------------------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._by_kind.get(kind, {}).get((kind, namespace_of(kind, namespace), name))

    def must_get(self, kind: str, name: str, namespace: str = "") -> Obj:
        obj = self.get(kind, name, namespace)
        if obj is None:
            raise NotFound(f'{kind} "{name}" not found')
        return obj

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> builtins.list[Obj]:
        objects = self._by_kind.get(kind, {})
        fields = dict(fields or {})
        indexed = next((path for path in fields if path in INDEXERS.get(kind, {})), None)
        if indexed is not None:
            keys: Iterable[Key] = sorted(self._index.get((kind, indexed), {}).get(fields.pop(indexed), ()))
        else:
            keys = self._keys(kind)
        return builtins.list(select(objects, keys, kind, namespace, selector, fields))

    def scan(self, kind: str) -> builtins.list[Obj]:
        return builtins.list(self._by_kind.get(kind, {}).values())

    def owned_by(self, kind: str, uid: str) -> builtins.list[Obj]:
        """Objects of `kind` whose controller is the object with `uid`, in list order."""
        return self.list(kind, fields={"owner": uid})

    def owner_uids(self, kind: str) -> builtins.list[str]:
        """The uids of every controller that owns an object of `kind` (not checked to exist)."""
        return [uid for uid, keys in self._index.get((kind, "owner"), {}).items() if uid and keys]

    def index_values(self, kind: str, path: str) -> builtins.list[str]:
        """The values an indexed field has among objects of `kind` now (e.g. every node a pod is bound to)."""
        return [value for value, keys in self._index.get((kind, path), {}).items() if keys]

    def bucket_version(self, kind: str, path: str, value: str) -> int:
        """A number that changes whenever an object of `kind` whose indexed `path` is (or was) `value` is written:
        e.g. ("Pod", "owner", uid) moves when any pod of that ReplicaSet is created, changed or deleted."""
        return self._bucket_versions.get((kind, path, value), 0)

    def has_uid(self, uid: str) -> bool:
        return uid in self._uids

    def kind_version(self, kind: str) -> int:
        """A number that changes whenever an object of `kind` is written: cheap change detection."""
        return self.kind_versions.get(kind, 0)

    def size(self) -> int:
        """How many objects the store holds."""
        return sum(len(objects) for objects in self._by_kind.values())

    def kinds(self) -> builtins.list[str]:
        return sorted(self._by_kind)

    def all_objects(self) -> builtins.list[Obj]:
        return [obj for kind in sorted(self._by_kind) for obj in self._by_kind[kind].values()]

    # Writes made elsewhere -------------------------------------------------------------------------------------

    def observe(self, obj: Obj) -> None:
        """Take `obj` as someone else wrote it (a watch event, a row of the change log): stored as given, with its
        resourceVersion, not marked changed, and seen at once by every reader (indexes, kind versions, views)."""
        key = key_of(obj)
        old = self._by_kind.get(obj["kind"], {}).get(key)
        if old is not None and old["metadata"].get("uid") != obj["metadata"].get("uid"):
            self._drop(key)  # deleted and made again under the same name: a new object
        self._add(obj)
        self.removed.pop(key, None)
        self.kind_versions[obj["kind"]] = self.kind_versions.get(obj["kind"], 0) + 1
        self.resource_version = max(self.resource_version, int(obj["metadata"].get("resourceVersion") or 0))

    def observe_deleted(self, key: Key, resource_version: int) -> None:
        """Forget an object someone else deleted (without recording a removal of ours)."""
        if key in self._by_kind.get(key[0], {}):
            self._drop(key)
            self.kind_versions[key[0]] = self.kind_versions.get(key[0], 0) + 1
        self.resource_version = max(self.resource_version, resource_version)

    def forget_writes(self) -> None:
        """The writes so far are persisted: start recording afresh (a warm engine's next run)."""
        self.changed = set()
        self.removed = {}

    # Writes ---------------------------------------------------------------------------------------------------

    def _bump(self, obj: Obj) -> None:
        self.resource_version += 1
        self.kind_versions[obj["kind"]] = self.kind_versions.get(obj["kind"], 0) + 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        key = key_of(obj)
        self.changed.add(key)
        self._reindex(key, obj)

    def create(self, obj: Obj) -> Obj:
        obj = copy_json(obj)
        meta = obj.setdefault("metadata", {})
        if obj["kind"] not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        key = key_of(obj)
        if key in self._by_kind.get(obj["kind"], {}):
            raise AlreadyExists(f'{obj["kind"]} "{meta["name"]}" already exists')
        # Deterministic: the same lab history gives the same uids (names alone repeat after deletions).
        meta.setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, f"{'/'.join(key)}#{self.resource_version + 1}")))
        meta.setdefault("creationTimestamp", timestamp(self._clock()))
        if obj["kind"] in UNGENERATED:
            meta.pop("generation", None)
        else:
            meta["generation"] = 1
        self._add(obj)
        self.removed.pop(key, None)
        self._bump(obj)
        return obj

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        """Store a modified object: the dict itself (fetched from this store), or a copy carrying the stored
        resourceVersion (a stale one raises Conflict, as the API server answers 409)."""
        key = key_of(obj)
        stored = self._by_kind.get(obj["kind"], {}).get(key)
        if stored is None:
            raise NotFound(f'{obj["kind"]} "{obj["metadata"]["name"]}" not found')
        given = obj["metadata"].get("resourceVersion")
        if stored is not obj and given and given != stored["metadata"].get("resourceVersion"):
            raise Conflict(
                f'Operation cannot be fulfilled on {obj["kind"].lower()}s "{obj["metadata"]["name"]}": '
                "the object has been modified; please apply your changes to the latest version and try again"
            )
        self._by_kind[obj["kind"]][key] = obj
        if spec_changed and obj["kind"] not in UNGENERATED:
            obj["metadata"]["generation"] = int(stored["metadata"].get("generation", 1)) + 1
        self._bump(obj)
        return obj

    def patch(self, kind: str, name: str, namespace: str, patch: Mapping[str, Any]) -> Obj:
        stored = self.must_get(kind, name, namespace)
        patched = merge_patch(stored, patch)
        patched["metadata"] = {**patched.get("metadata", {}), "resourceVersion": stored["metadata"]["resourceVersion"]}
        return self.update(patched, spec_changed=desired(patched) != desired(stored))

    def apply(self, obj: Obj) -> tuple[Obj, str]:
        """kubectl apply: create, or three-way merge the manifest into the stored object (the fields it last
        applied are its own; fields other writers set stay), keeping identity and status. A static Node's
        manifest carries its status, which is how it registers."""
        existing = self.get(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
        if existing is None:
            return self.create(with_last_applied(obj)), "created"
        merged = applied(existing, obj)
        if obj["kind"] == "Node" and obj.get("status") and obj["status"] != existing.get("status"):
            merged = merged or copy.deepcopy(existing)
            merged["status"] = copy.deepcopy(obj["status"])
        if merged is None:
            return existing, "unchanged"
        if obj["kind"] != "Node":
            merged["status"] = copy.deepcopy(existing.get("status") or {}) if "status" in existing else None
            if merged["status"] is None:
                merged.pop("status")
        merged["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")
        if merged == existing:
            return existing, "unchanged"
        return self.update(merged, spec_changed=desired(merged) != desired(existing)), "configured"

    def delete(self, kind: str, name: str, namespace: str = "", *, grace_period_seconds: int | None = None) -> Obj:
        """Delete, or mark for deletion while finalizers remain (as the API server does). A grace period given is
        kept as the API server keeps it (deletionGracePeriodSeconds); the store's pods stop at once all the same."""
        obj = self.must_get(kind, name, namespace)
        if grace_period_seconds is not None and not obj["metadata"].get("deletionTimestamp"):
            obj["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = timestamp(self._clock())
                self._bump(obj)
            return obj
        key = key_of(obj)
        self._drop(key)
        self.changed.discard(key)
        self.removed[key] = obj
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

    def evict(self, pod: Obj) -> None:
        """POST pods/eviction: the pod is deleted, unless a PodDisruptionBudget forbids it now (429)."""
        refusal = pdb.eviction_refusal(self, self.views, pod)
        if refusal is not None:
            raise TooManyRequests(refusal)
        self.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])

    def evict_all(self, pods: Sequence[Obj]) -> builtins.list[APIError | None]:
        return evict_each(self, pods)

    def expire_events(self, ttl: float = EVENT_TTL_SECONDS) -> int:
        """Delete Events last seen more than `ttl` ago, as the API server does (--event-ttl); how many went. The
        scan runs only once the oldest Event can have expired (Events only ever get newer)."""
        now = self._clock()
        if now < self._next_event_expiry:
            return 0
        cutoff = now - ttl
        stale, oldest = [], None
        for event in self._by_kind.get("Event", {}).values():
            seen = parse_timestamp(event.get("lastTimestamp") or event["metadata"]["creationTimestamp"])
            if seen < cutoff:
                stale.append((event["metadata"]["name"], event["metadata"].get("namespace", "")))
            elif oldest is None or seen < oldest:
                oldest = seen
        for name, namespace in stale:
            self.delete("Event", name, namespace)
        # No kept Event expires before the oldest of them does; a new one is newer still.
        self._next_event_expiry = (oldest + ttl) if oldest is not None else now + ttl
        return len(stale)
