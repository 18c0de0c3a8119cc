"""What a reconcile step sees: the cluster (through the port), the cloud provider, the clock, the NodePools and
catalogs, and where logs go."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

from provisioner.catalog import InstanceType
from provisioner.cloudprovider.types import CloudProvider
from provisioner.cluster import events
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import Conflict, NotLeading, Obj, timestamp
from provisioner.cluster.views import Views
from provisioner.disruption import budgets
from provisioner.disruption.holds import HoldOptions
from provisioner.objects import NodeClass, NodePool
from provisioner.options import NODE_OVERLAY, KarpenterOptions
from provisioner.overlays import OverlayResult
from provisioner.scheduling.logs import LogRecord

T = TypeVar("T")

# Karpenter's recorder drops a repeat of an event for 2 minutes unless the event says otherwise (defaultDedupeTimeout).
RECORDER_DEDUPE_SECONDS = 120.0

# A failing object's Warning Event is repeated at most every five minutes, however often the reconcile retries.
ERROR_DEDUPE = 300.0
# controller-runtime's default per-item rate limiter: a reconcile that failed is retried after 5 ms, doubling with
# each failure in a row up to 1000 s, and forgotten once it succeeds.
RETRY_BASE_SECONDS, RETRY_MAX_SECONDS = 0.005, 1000.0


def doubling_delay(base: float, cap: float, failures: int) -> float:
    """A retry's delay after `failures` failures in a row: `base` doubled each time, at most `cap`; no jitter, so a
    lab driven by its own clock stays deterministic."""
    return float(min(base * 2 ** (failures - 1), cap))


@dataclass(frozen=True)
class Backoff:
    """A reconcile that failed `failures` times in a row, the last time on the object at `version`: not retried
    before `retry_at` unless the object changes (a watch event requeues an item at once in controller-runtime)."""

    failures: int
    version: str | None
    retry_at: float


@dataclass(frozen=True)
class TimedRecord:
    time: float
    record: LogRecord

    def as_dict(self) -> dict[str, object]:
        return {"time": timestamp(self.time), **self.record.as_dict()}


@dataclass
class TokenBucket:
    """client-go's token bucket rate limiter (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`) on the engine's
    clock: `burst` tokens, refilled at `qps` a second; what finds no token is not done."""

    qps: float
    burst: int
    tokens: float | None = None  # full until first used
    at: float | None = None  # when `tokens` was last counted

    def try_accept(self, now: float) -> bool:
        tokens = float(self.burst) if self.tokens is None or self.at is None else self.tokens
        if self.at is not None and now > self.at:
            tokens = min(float(self.burst), tokens + (now - self.at) * self.qps)
        self.at = now if self.at is None else max(self.at, now)
        accepted = tokens >= 1
        self.tokens = tokens - 1 if accepted else tokens
        return accepted

    def to_state(self) -> list[float | None]:
        return [self.tokens, self.at]

    @classmethod
    def from_state(cls, qps: float, burst: int, state: Any) -> TokenBucket:
        tokens, at = state if isinstance(state, list) and len(state) == 2 else (None, None)
        return cls(qps, burst, tokens, at)


# Karpenter's PodNominationRateLimiter: one bucket for every pod's Nominated event, so a batch of 20,000 pods
# records ten of them, then five a second, not 20,000 (which were 85 % of the objects that batch wrote).
NOMINATED_EVENTS_QPS, NOMINATED_EVENTS_BURST = 5.0, 10
# InsufficientCapacityErrorPodRateLimiter: one bucket for every pod told its NodeClaim found no capacity.
ICE_POD_EVENTS_QPS, ICE_POD_EVENTS_BURST = 5.0, 10


@dataclass
class ClusterContext:
    api: ClusterAPI
    cloud: CloudProvider
    now: float
    rng: random.Random
    nodepools: list[NodePool]
    nodepool_uids: Mapping[str, str]
    nodeclasses: Mapping[tuple[str, str], NodeClass]  # (kind, name) -> node class
    catalogs: Mapping[str, list[InstanceType]]  # node class kind -> instance types (with declared devices)
    options: KarpenterOptions = field(default_factory=KarpenterOptions)  # FEATURE_GATES, PREFERENCE_POLICY, ...
    paused_until: float = 0.0  # voluntary disruption is paused until then (a person said so)
    nominations: dict[str, float] = field(default_factory=dict)  # node -> until when a pending pod is headed there
    # node -> how many CapacityBuffer virtual pods the last provisioning pass put there (Karpenter's bufferPodCounts)
    buffer_nodes: dict[str, int] = field(default_factory=dict)
    # CapacityBuffer "namespace/name" -> (the buffer's identity and replicas, its pod template) as its last successful
    # reconcile left it ready: Karpenter's virtual pod cache entry, which a reconcile failing with a retryable error
    # leaves in place (capacitybuffer/controller.go:110-113). Such buffers are in `buffers_failing`.
    buffer_cache: dict[str, tuple[Obj, Mapping[str, Any]]] = field(default_factory=dict)
    buffers_failing: set[str] = field(default_factory=set)
    nominated_events: TokenBucket = field(
        default_factory=lambda: TokenBucket(NOMINATED_EVENTS_QPS, NOMINATED_EVENTS_BURST)
    )
    # "reason/kind/name" -> until when `publish` drops that object's next event of that reason, whatever it says.
    published: dict[str, float] = field(default_factory=dict)
    # NodeClaim not yet launched -> the pods ("namespace/name") its plan was made for (Karpenter's podToNodeClaim,
    # read the other way): each is told when the launch finds no capacity.
    nodeclaim_pods: dict[str, list[str]] = field(default_factory=dict)
    ice_pod_events: TokenBucket = field(default_factory=lambda: TokenBucket(ICE_POD_EVENTS_QPS, ICE_POD_EVENTS_BURST))
    views: Views = field(default_factory=Views)
    # Observe mode: Karpenter provisions, disrupts, drains and terminates; karpui proposes only for the NodePools it
    # gates, and an approved command is released to Karpenter (controllers/holds.py); a person's request for a node
    # is carried out by deleting its NodeClaim.
    observe: bool = False
    # Observe mode: how the gate holds Karpenter back (controllers/holds.py), and whose name karpui's own Events
    # carry (`karpui`, so they are never taken for Karpenter's, which the cluster's Events beside them are).
    holding: HoldOptions = field(default_factory=HoldOptions)
    event_source: str = "karpenter"
    # kwok mode: karpui is the cluster's Karpenter, so it writes NodePools' status (the lab keeps it in its rows).
    writes_nodepool_status: bool = False
    logs: list[TimedRecord] = field(default_factory=list)
    # Called with each log line as it is written (a real cluster's engine commits and prints it at once, so a step
    # cut short keeps the record of every write it made).
    on_log: Callable[[TimedRecord], None] | None = None
    # Errors `guard` caught so far, and reconciles held back after one (`backing_off`): a controller that skips
    # unchanged inputs must not skip a run that failed or left an object out (its next run retries, as Karpenter
    # requeues a failed reconcile).
    errors: int = 0
    # (controller, object) -> its reconcile's failures in a row: what `guard` caught, held back as controller-runtime
    # holds a failed item, so an object that keeps failing (the API server is down) is retried, and logged, ever
    # more rarely instead of at every step.
    backoffs: dict[tuple[str, str], Backoff] = field(default_factory=dict)
    # Derived views (a disruption snapshot, a command's validation) with the inputs they were computed from: a warm
    # engine asked again with unchanged inputs answers from here instead of rescanning the cluster.
    memos: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    # NodePool -> why disruption cannot evaluate it now (its ValidationSucceeded condition says so).
    nodepool_problems: dict[str, str] = field(default_factory=dict)
    # NodePool -> why its stored manifest no longer parses (left out of `nodepools` until fixed).
    unparsed_nodepools: dict[str, str] = field(default_factory=dict)
    _disruptable: tuple[Any, list[NodePool]] | None = field(default=None, repr=False)
    # What the NodeOverlays change (None: the NodeOverlay gate is off), and the overlaid types handed out.
    overlays: OverlayResult | None = None
    _overlaid: dict[tuple[str, int], tuple[Any, Any, list[InstanceType]]] = field(default_factory=dict, repr=False)

    def gate(self, name: str) -> bool:
        """Whether Karpenter's feature gate `name` is on for this cluster (its default when FEATURE_GATES is silent)."""
        return self.options.gate(name)

    @property
    def ignore_dra_requests(self) -> bool:
        """Karpenter's IGNORE_DRA_REQUESTS: pods with claims are never provisioned."""
        return self.options.ignore_dra_requests

    @property
    def paused(self) -> bool:
        """Whether a person has paused voluntary disruption: nothing is proposed and nothing approved starts."""
        return self.paused_until > self.now

    def memo(self, name: str, inputs: object, compute: Callable[[], T]) -> T:
        """`compute()`, or what it returned when last asked under `name` with equal `inputs`. It must read nothing
        that `inputs` leaves out, and write nothing."""
        cached = self.memos.get(name)
        if cached is not None and cached[0] == inputs:
            value: T = cached[1]
            return value
        value = compute()
        self.memos[name] = (inputs, value)
        return value

    def disruptable_nodepools(self) -> list[NodePool]:
        """The NodePools a disruption pass can evaluate now. One that raises (a budget whose window cannot be
        computed, or any other error) is left out with its nodes, and the error is its own: a Warning Event and a
        ValidationSucceeded=False condition on it, never a failed pass for the whole cluster."""
        key = (repr(self.nodepools), self.now)
        if self._disruptable is not None and self._disruptable[0] == key:
            return self._disruptable[1]
        pools = []
        for pool in self.nodepools:
            try:
                budgets.evaluate(pool, self.now)
            except Exception as error:
                self._nodepool_failed(
                    pool, f"disruption cannot evaluate this NodePool: {type(error).__name__}: {error}"
                )
                continue
            self.nodepool_problems.pop(pool.name, None)
            pools.append(pool)
        self._disruptable = (key, pools)
        return pools

    def _nodepool_failed(self, pool: NodePool, message: str) -> None:
        self.nodepool_problems[pool.name] = message
        fields: dict[str, object] = {
            "controller": "disruption",
            "NodePool": {"name": pool.name, "namespace": ""},
            "error": message,
        }
        self.log(LogRecord("Reconciler error", fields, level="ERROR", logger="controller.disruption"))
        with suppress(Exception):
            self.event(
                self.nodepool_object(pool.name),
                "Warning",
                "NodePoolValidationFailed",
                message,
                dedupe_seconds=ERROR_DEDUPE,
            )

    def nodepool_object(self, name: str) -> Obj:
        """What an Event about a NodePool names: NodePools are the lab's configuration, not stored objects, so the
        reference is made as kube would write it."""
        return {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name, "uid": self.nodepool_uids.get(name, "")},
        }

    def log(self, record: LogRecord) -> None:
        entry = TimedRecord(self.now, record)
        self.logs.append(entry)
        if self.on_log is not None:
            self.on_log(entry)

    def instance_types_for(self, nodepool: NodePool) -> list[InstanceType] | None:
        """The pool's instance types, or None when its node class does not exist (the NodePool is not Ready) or the
        NodeOverlays have not been evaluated for it yet, with the NodeOverlays' prices and capacities when the
        NodeOverlay gate is on (Karpenter's overlay-decorated cloud provider). The same list comes back while nothing
        changed, so what is keyed on it stays warm."""
        types = self.cloud.instance_types(nodepool)
        if types is None or not self.gate(NODE_OVERLAY):
            return types
        overlays = self.overlays
        if overlays is None or nodepool.name not in overlays.evaluated:
            return None  # awaiting_overlays
        if nodepool.name not in overlays.updates:
            return types
        key = (nodepool.name, id(types))
        cached = self._overlaid.get(key)
        if cached is None or cached[0] is not types or cached[1] is not overlays:
            cached = (types, overlays, overlays.apply(nodepool.name, types))
            self._overlaid[key] = cached
        return cached[2]

    def awaiting_overlays(self, nodepool: NodePool) -> bool:
        """Whether the NodeOverlay gate is on and the overlays in force were not evaluated for this NodePool: Karpenter's
        store answers UnevaluatedNodePoolError (nodeoverlay/store.go:64), and the provisioner and disruption skip the
        NodePool meanwhile (provisioning/provisioner.go:305, disruption/helpers.go:324)."""
        return self.gate(NODE_OVERLAY) and (self.overlays is None or nodepool.name not in self.overlays.evaluated)

    def nodepool(self, name: str) -> NodePool | None:
        return next((np for np in self.nodepools if np.name == name), None)

    def event(self, involved: Obj, kind: str, reason: str, message: str, *, dedupe_seconds: float = 0.0) -> None:
        events.record(
            self.api,
            involved,
            kind,
            reason,
            message,
            self.now,
            dedupe_seconds=dedupe_seconds,
            component=self.event_source,
        )

    def publish(
        self,
        involved: Obj,
        kind: str,
        reason: str,
        message: str,
        *,
        dedupe_seconds: float = RECORDER_DEDUPE_SECONDS,
        dedupe_values: Sequence[str] | None = None,
    ) -> None:
        """An Event as Karpenter's recorder publishes one with the object as its dedupe value: dropped while an event
        of the same reason on the same object was published less than `dedupe_seconds` ago, whatever either says.
        `dedupe_values` are the Event's own DedupeValues where they are not the object (events/recorder.go:41-46
        keys on the reason and them alone: EvictPod's is the pod's name, whatever its namespace)."""
        meta = involved["metadata"]
        if dedupe_values is None:
            key = _published_key(reason, involved["kind"], meta["name"], meta.get("namespace") or "")
        else:
            key = f"{reason.lower()}-{'-'.join(dedupe_values)}"
        if self._take(key, dedupe_seconds):
            self.event(involved, kind, reason, message)

    def publishes(self, reason: str, kind: str, name: str, namespace: str = "") -> bool:
        """Whether `publish` would tell an event of `reason` on this object now (asked before reading the object)."""
        return self.published.get(_published_key(reason, kind, name, namespace), 0.0) <= self.now

    def admits(self, reason: str, kind: str, name: str, namespace: str, rate_limiter: TokenBucket) -> bool:
        """Whether Karpenter's recorder writes a rate-limited event of `reason` on this object now (the caller then
        records it with `event`). The recorder takes the dedupe entry first and asks the limiter after (events/
        recorder.go:66-74), so an event the limiter turns away still holds the object's next for 2 minutes."""
        return self._take(_published_key(reason, kind, name, namespace), RECORDER_DEDUPE_SECONDS) and (
            rate_limiter.try_accept(self.now)
        )

    def _take(self, key: str, seconds: float) -> bool:
        """recorder.shouldCreateEvent: False while `key` is held, else hold it for `seconds` and say True."""
        if self.published.get(key, 0.0) > self.now:
            return False
        self.published[key] = self.now + seconds
        return True

    def published_state(self) -> dict[str, float]:
        """`published` without what has run out, to keep across steps."""
        return {key: until for key, until in self.published.items() if until > self.now}

    def backing_off(self, controller: str, obj: Obj | None = None) -> bool:
        """Whether `controller`'s reconcile (of `obj`) failed lately and waits for its retry: its caller skips it."""
        held = self.backoffs.get(_backoff_key(controller, obj))
        if held is None or self.now >= held.retry_at or held.version != _version(obj):
            return False
        self.errors += 1  # a run that left it out is not a run with nothing left to do
        return True

    def retry_times(self) -> list[float]:
        """When the reconciles held back by a failure may run again (the engine wakes for them). One not retried
        long after its time (its object is gone) is forgotten."""
        for key in [k for k, b in self.backoffs.items() if self.now - b.retry_at > RETRY_MAX_SECONDS]:
            del self.backoffs[key]
        return [b.retry_at for b in self.backoffs.values()]

    @contextmanager
    def guard(self, controller: str, obj: Obj | None = None) -> Iterator[None]:
        """Run one controller's (or one object's) reconcile so that an error in it is logged as Karpenter's
        "Reconciler error", recorded as a Warning Event on the object, and skipped: one bad object never stops
        the loop for the other objects, the other controllers or the other clusters. A failure holds the reconcile
        back (`backing_off`) for a delay that doubles with each failure in a row; a success forgets them.

        A write that lost an optimistic-lock race (409 Conflict) is held back the same way but is no error: Karpenter's
        controllers answer errors.IsConflict with `Requeue: true` (registration.go:108-110, lifecycle/controller.go:
        157-159, and ten more), which controller-runtime rate-limits like a failure but does not log."""
        key = _backoff_key(controller, obj)
        try:
            yield
        except NotLeading:
            raise  # not this controller's error: the step ends, whatever runs it
        except Conflict:
            self._hold(key, obj)
        except Exception as error:
            self._hold(key, obj)
            fields: dict[str, object] = {"controller": controller, "error": f"{type(error).__name__}: {error}"}
            if obj is not None:
                fields[obj["kind"]] = {
                    "name": obj["metadata"]["name"],
                    "namespace": obj["metadata"].get("namespace", ""),
                }
            self.log(LogRecord("Reconciler error", fields, level="ERROR", logger=f"controller.{controller}"))
            if obj is not None:
                # The error is logged above; an Event that cannot be written (the same bad object) adds nothing.
                with suppress(Exception):
                    self.event(obj, "Warning", "ReconcileError", f"{controller}: {error}", dedupe_seconds=ERROR_DEDUPE)
        else:
            self.backoffs.pop(key, None)

    def _hold(self, key: tuple[str, str], obj: Obj | None) -> None:
        """Hold a reconcile back after another failure in a row: 5 ms, doubling, at most 1000 s."""
        self.errors += 1
        failures = self.backoffs[key].failures + 1 if key in self.backoffs else 1
        retry_at = self.now + doubling_delay(RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, failures)
        self.backoffs[key] = Backoff(failures, _version(obj), retry_at)


def _backoff_key(controller: str, obj: Obj | None) -> tuple[str, str]:
    if obj is None:
        return (controller, "")
    meta = obj["metadata"]
    return (controller, f"{obj.get('kind', '')}/{meta.get('namespace', '')}/{meta['name']}")


def _version(obj: Obj | None) -> str | None:
    return None if obj is None else obj["metadata"].get("resourceVersion")


def _published_key(reason: str, kind: str, name: str, namespace: str) -> str:
    return f"{reason}/{kind}/{namespace}/{name}"
