"""The cluster port over a real Kubernetes API server (`api.ClusterAPI`), through the official client.

Reads come from a cache the informers keep (one per kind: list, then watch), brought up to date only at `sync()`, so
a reconcile step reads one consistent state; `synced()` is the gate before any decision: every informer has listed.
Writes go to the server at once, and what the server answers goes into the cache too, so the engine reads its own
writes before their watch events come back:

* `update` is a PUT carrying the object's resourceVersion (409 Conflict when it is stale: the controller reads again
  and decides again at its next run); a kind with a status subresource gets a second PUT of `/status` when the
  status changed, as the API server ignores the status in a PUT of the object itself;
* `create` is a POST; a taken name is `AlreadyExists` (callers that name objects deterministically take it as done);
* `delete` is a DELETE; an object its finalizers (or a pod's grace period) hold comes back with deletionTimestamp;
* `remove_finalizer` is a merge patch with the resourceVersion as precondition;
* `evict` is the Eviction API: 429 from a PodDisruptionBudget is `TooManyRequests`, a pod already gone is done.
"""

from __future__ import annotations

import builtins
import queue
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from provisioner.adapters.cache import Cache, Event, Replace
from provisioner.adapters.informer import RESYNC_SECONDS, Informer
from provisioner.adapters.kinds import INFORMED, Kind, Resource, listed_in_core, resolve, served_versions
from provisioner.adapters.transport import MERGE_PATCH, Transport
from provisioner.cluster.api import evict_each
from provisioner.cluster.objects import APIError, Key, NotFound, Obj, is_deleting, key_of
from provisioner.selectors import LabelSelector

# Evictions in flight at once: the transport's connection pool holds them beside the informers' watches.
EVICTION_WORKERS = 16


class KubeCluster:
    """A real cluster behind the port. `start()` discovers which kinds it serves and starts their informers."""

    def __init__(
        self,
        transport: Transport,
        *,
        kinds: Iterable[Kind] = INFORMED,
        resync_seconds: float = RESYNC_SECONDS,
        watch_seconds: tuple[int, int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.transport = transport
        self.kinds = tuple(kinds)
        self.resync_seconds = resync_seconds
        self.watch_seconds = watch_seconds
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not secrets
        self.cache = Cache()
        self.resources: dict[str, Resource] = {}
        self.informers: dict[str, Informer] = {}
        self._deltas: queue.SimpleQueue[Replace | Event] = queue.SimpleQueue()
        self._started = False
        self.applied = 0  # deltas applied by sync, for tests and metrics

    # Lifecycle ------------------------------------------------------------------------------------------------

    def discover(self) -> dict[str, Resource]:
        core = self.transport.request("GET", "/api")
        groups = self.transport.request("GET", "/apis")
        resources = resolve(self.kinds, served_versions(core, groups))
        if any(not r.kind.group for r in resources.values()):  # every core kind the engine reads is v1
            resources = listed_in_core(resources, self.transport.request("GET", "/api/v1"))
        self.resources = resources
        return self.resources

    def start(self) -> None:
        if self._started:
            return
        self.discover()
        for name, resource in self.resources.items():
            options: dict[str, Any] = {"resync_seconds": self.resync_seconds, "rng": random.Random(self.rng.random())}  # noqa: S311
            if self.watch_seconds is not None:
                options["watch_seconds"] = self.watch_seconds
            self.informers[name] = Informer(resource, self.transport, self._deltas.put, **options)
        for informer in self.informers.values():
            informer.start()
        self._started = True

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def sync(self) -> int:
        """Apply every delta the informers handed over since the last sync; how many."""
        count = 0
        while True:
            try:
                delta = self._deltas.get_nowait()
            except queue.Empty:
                break
            if isinstance(delta, Replace):
                self.cache.replace(delta)
            else:
                self.cache.apply(delta)
            count += 1
        self.applied += count
        return count

    def synced(self) -> bool:
        """Every kind the cluster serves has been listed into the cache: decisions may be made."""
        return self._started and all(kind in self.cache.listed for kind in self.informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self.sync()
            if self.synced():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def failing(self) -> dict[str, dict[str, Any]]:
        """The kinds whose informer has gone without a working list or watch (refused with 429, failing, cut at
        once), for how long, and the last error's kind: what the engine's readiness reports."""
        return {
            kind: {
                "failing_seconds": round(informer.failing_for(), 1),
                "failures": informer.failures,
                "error": informer.last_error.split(":", 1)[0],
            }
            for kind, informer in sorted(self.informers.items())
            if informer.failing_since is not None
        }

    def serves(self, kind: str) -> bool:
        return kind in self.resources

    # Reads (ClusterReader) ------------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self.cache.get(kind, name, namespace)

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
        return self.cache.list(kind, namespace, selector, fields)

    def scan(self, kind: str) -> builtins.list[Obj]:
        return builtins.list(self.cache.peek_all(kind).values())

    def kind_version(self, kind: str) -> int:
        return self.cache.kind_version(kind)

    def peek_all(self, kind: str) -> Mapping[Key, Obj]:
        """The kind's cached objects themselves (not copies): what the engine's mirror compares and writes out,
        without copying every object of the cluster each step to read its resourceVersion."""
        return self.cache.peek_all(kind)

    def served(self, obj: Obj) -> Obj:
        """A cached object (from `peek_all`) as the server sent it, with the managedFields the cache keeps apart."""
        return self.cache.served(obj)

    # Writes ---------------------------------------------------------------------------------------------------

    def _resource(self, kind: str) -> Resource:
        resource = self.resources.get(kind)
        if resource is None:
            raise NotFound(f"the server could not find the requested resource (kind {kind} is not served)")
        return resource

    def _body(self, resource: Resource, obj: Obj) -> Obj:
        body = {**obj, "apiVersion": resource.api_version, "kind": resource.kind.kind}
        if not resource.kind.namespaced:
            body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "namespace"}
        return body

    def _stored(self, answer: Obj, resource: Resource) -> Obj:
        answer = {**answer, "kind": resource.kind.kind, "apiVersion": resource.api_version}
        if resource.kind.status:
            answer.setdefault("status", {})  # as a typed client reads it (see Informer._typed)
        if is_deleting(answer) and not answer["metadata"].get("finalizers") and resource.kind.kind != "Pod":
            self.cache.remove(answer)  # the last finalizer went: the server has removed it
        else:
            self.cache.store(answer)
        return answer  # the caller's own: the cache keeps a copy of its own (a change in place would leave its pickle stale)

    def create(self, obj: Obj) -> Obj:
        """POST the object; where status is a subresource (the server starts it afresh on create) and `obj` has
        one, a merge patch of `/status` follows, so the object is stored as given, as the port promises."""
        resource = self._resource(obj["kind"])
        namespace = (obj["metadata"].get("namespace") or "default") if resource.kind.namespaced else None
        answer = self.transport.request("POST", resource.collection(namespace), body=self._body(resource, obj))
        if resource.kind.status and "status" in obj and obj["status"] != answer.get("status"):
            if obj["status"]:
                # A merge patch, not a PUT at the version just created: on a real cluster a controller may have
                # written the object in between (kube-scheduler marks a new pod Unschedulable), and a PUT would be a
                # 409 for a write nobody else's touched.
                name = answer["metadata"]["name"]
                answer = self.transport.request(
                    "PATCH",
                    resource.item(name, namespace or "", "status"),
                    body={"status": obj["status"]},
                    content_type=MERGE_PATCH,
                )
            else:
                answer = {**answer, "status": {}}  # the server leaves an empty status out; the object has one
        return self._stored(answer, resource)

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        """PUT the object (and its status, if that changed and is a subresource); `obj` gets the new
        resourceVersion, so the caller may change it again and update again. `spec_changed` is the server's to
        decide (it bumps the generation when the spec changes)."""
        resource = self._resource(obj["kind"])
        kind, namespace, name = key_of(obj)
        cached = self.cache.peek(kind, name, namespace)
        same_version = cached is not None and cached["metadata"].get("resourceVersion") == obj["metadata"].get(
            "resourceVersion"
        )
        status_changed = not same_version or (obj.get("status") or {}) != ((cached or {}).get("status") or {})
        rest_changed = not same_version or _without_status(obj) != _without_status(cached or {})
        split = resource.kind.status
        answer: Obj | None = None
        if rest_changed or not split:
            answer = self.transport.request("PUT", resource.item(name, namespace), body=self._body(resource, obj))
            obj["metadata"]["resourceVersion"] = answer["metadata"].get("resourceVersion")
        if split and status_changed:
            answer = self.transport.request(
                "PUT", resource.item(name, namespace, "status"), body=self._body(resource, obj)
            )
        if answer is None:
            return obj  # nothing to write
        obj["metadata"]["resourceVersion"] = answer["metadata"].get("resourceVersion")
        if "generation" in answer["metadata"]:
            obj["metadata"]["generation"] = answer["metadata"]["generation"]
        self._stored(answer, resource)
        return obj

    def patch(self, kind: str, name: str, namespace: str, patch: Mapping[str, Any]) -> Obj:
        """A JSON merge patch; its `status` part goes to the status subresource where there is one."""
        resource = self._resource(kind)
        rest = {k: v for k, v in patch.items() if k != "status" or not resource.kind.status}
        answer = None
        if rest or "status" not in patch:
            answer = self.transport.request(
                "PATCH", resource.item(name, namespace), body=rest, content_type=MERGE_PATCH
            )
        if resource.kind.status and "status" in patch:
            answer = self.transport.request(
                "PATCH",
                resource.item(name, namespace, "status"),
                body={"status": patch["status"]},
                content_type=MERGE_PATCH,
            )
        assert answer is not None
        return self._stored(answer, resource)

    def delete(self, kind: str, name: str, namespace: str = "", *, grace_period_seconds: int | None = None) -> Obj:
        resource = self._resource(kind)
        cached = self.cache.get(kind, name, namespace)
        answer = self.transport.request(
            "DELETE", resource.item(name, namespace), body=delete_options(grace_period_seconds)
        )
        if answer.get("kind") == "Status" or not answer.get("metadata"):
            # Deleted at once: the answer is a Status, or the object as it last was.
            gone = cached or {"kind": kind, "metadata": {"name": name, "namespace": namespace}}
            uid = ((answer.get("details") or {}).get("uid")) or gone["metadata"].get("uid")
            self.cache.remove({**gone, "metadata": {**gone["metadata"], "uid": uid}})
            return gone
        answer = {**answer, "kind": kind, "apiVersion": resource.api_version}
        if is_deleting(answer) and (answer["metadata"].get("finalizers") or (kind == "Pod" and _graceful(answer))):
            self.cache.store(answer)  # held by finalizers, or a pod ending gracefully
        else:
            self.cache.remove(answer)
        return answer  # the caller's own: the cache keeps a copy of its own

    def remove_finalizer(self, obj: Obj, finalizer: str) -> None:
        resource = self._resource(obj["kind"])
        _, namespace, name = key_of(obj)
        remaining = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        patch = {"metadata": {"finalizers": remaining, "resourceVersion": obj["metadata"].get("resourceVersion")}}
        answer = self.transport.request("PATCH", resource.item(name, namespace), body=patch, content_type=MERGE_PATCH)
        obj["metadata"]["finalizers"] = remaining
        obj["metadata"]["resourceVersion"] = answer.get("metadata", {}).get("resourceVersion")
        if answer.get("metadata"):
            self._stored(answer, resource)

    def evict(self, pod: Obj) -> None:
        resource = self._resource("Pod")
        name, namespace = pod["metadata"]["name"], pod["metadata"].get("namespace") or "default"
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        try:
            self.transport.request("POST", resource.item(name, namespace, "eviction"), body=body, eviction=True)
        except NotFound:
            return  # already gone: what the eviction was for

    def evict_all(self, pods: Sequence[Obj]) -> builtins.list[APIError | None]:
        """Many evictions at once, as Karpenter's eviction queue sends them (at least 100 in flight): a node's
        hundreds of pods drain at the client's QPS, not one round trip after another. Evictions touch no cache."""
        if len(pods) < 2:
            return evict_each(self, pods)
        with ThreadPoolExecutor(max_workers=min(EVICTION_WORKERS, len(pods)), thread_name_prefix="evict") as pool:
            return [outcome for batch in pool.map(lambda pod: evict_each(self, [pod]), pods) for outcome in batch]


def _without_status(obj: Obj) -> Obj:
    """The object but its status, and its managedFields: the cache keeps none (a write's answer handed back has them),
    and an object that differs from the cached one only there has nothing to write."""
    rest = {k: v for k, v in obj.items() if k != "status"}
    meta = rest.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        rest["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return rest


def delete_options(grace_period_seconds: int | None) -> dict[str, Any] | None:
    """A DELETE's body: DeleteOptions with gracePeriodSeconds (what the official client's V1DeleteOptions(
    grace_period_seconds=...) serializes to), or none, the object's own grace period then applying."""
    if grace_period_seconds is None:
        return None
    return {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": grace_period_seconds}


def _graceful(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionGracePeriodSeconds"))
