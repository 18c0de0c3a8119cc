"""The provisioning controller: batch provisionable pods, simulate scheduling, create NodeClaims for the plans.

Observing a real Karpenter (which provisions), it only explains: each batch is simulated as Karpenter would, and each
waiting pod gets karpui's verdict (why no NodePool fits, or the NodeClaim Karpenter's next batch should launch for
it, or the node it is headed for); nothing is created and no event is written, Karpenter's own being mirrored.

As Karpenter's provisioner, each batch also schedules the pods of nodes on their way out (a started command's
candidates, deleting nodes): their destinations are nominated, so disruption leaves those alone meanwhile, and what
fits nowhere gets its NodeClaim before the pods are evicted."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any

from provisioner import capacitybuffers as cb
from provisioner import volumes
from provisioner.cluster import dra, pdb
from provisioner.cluster.conditions import is_true
from provisioner.cluster.names import random_suffix
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.cluster.views import node_view, unbound_pods
from provisioner.controllers import capacitybuffer
from provisioner.controllers.attribution import attribute_launch
from provisioner.controllers.batcher import Batcher
from provisioner.controllers.context import ClusterContext, doubling_delay
from provisioner.disruption.consolidation import currently_reschedulable
from provisioner.dra.claims import DeviceRequest, allocate, merged
from provisioner.durations import format_duration, go_duration, parse_duration
from provisioner.manifests.pod import pod_from_spec
from provisioner.nodes import DaemonSet, Node, state_node_name
from provisioner.objects import NodePool
from provisioner.options import IGNORE, RESERVED_CAPACITY
from provisioner.pods import SCHEDULE_ANYWAY, Pod
from provisioner.quantity import parse_resources
from provisioner.scheduling import logs
from provisioner.scheduling.defaultspread import DefaultSpreadInjector
from provisioner.scheduling.reservations import RESERVATION_STRICT
from provisioner.scheduling.results import RESERVED, VOLUMES, NodeClaimPlan, PodFailure, Reason, SchedulingResult
from provisioner.scheduling.scheduler import MIN_VALUES_UNMET, PoolOffer, SchedulingInput, solve
from provisioner.scheduling.typeindex import declared_devices
from provisioner.taints import Taint, has_disrupted_taint

REQUEUE_SECONDS = 10.0
# Observe mode's verdicts for pods a simulation of Karpenter places: a NodeClaim to come, or a node with room.
LAUNCHING = "launching"
HEADED_FOR = "headed-for"
# A provisioning run that failed (a NodeClaim POST answered 500, say) is run again after 1 s, then 2, 4, then every
# 5 s, as controller-runtime requeues a failed reconcile with exponential back-off (capped well under the 10 s
# re-trigger, or eight 500s in a row would hold pods Pending for a minute); no jitter, so the lab, driven by its own
# clock, stays deterministic.
RETRY_SECONDS = 1.0
RETRY_MAX_SECONDS = 5.0
# A node a pod is headed for is nominated for twice BATCH_MAX_DURATION, at least 10 s (Karpenter's nominationWindow).
NOMINATION_MIN_SECONDS = 10.0
# Karpenter's provisioner gives each scheduling simulation one minute (v1.4+, provisioner.go), wall-clock time.
SIMULATION_TIME_LIMIT_SECONDS = 60.0
HASH_VERSION = "v3"
# Karpenter's PodFailedToScheduleEvent: one per pod in 5 minutes, whatever it says.
FAILED_DEDUPE = 300.0
PRICE_OVERLAY_APPLIED = "karpenter.sh/price-overlay-applied"
CAPACITY_OVERLAY_APPLIED = "karpenter.sh/capacity-overlay-applied"


def retry_delay(failures: int) -> float:
    """How long after its `failures`-th failure in a row a provisioning run is retried."""
    return doubling_delay(RETRY_SECONDS, RETRY_MAX_SECONDS, failures)


def nodepool_hash(nodepool: NodePool) -> str:
    """Karpenter's drift hash: the template without requirements (those drift by label comparison instead). As
    hashstructure (SlicesAsSets) hashes it in apis/v1/nodepool.go:340-346, taints are a set, and durations count by
    length ("60m" is "1h"; NillableDuration's text is `hash:"ignore"`). A duration already in its shortest form, and
    taints already in order, keep the text this hash was first taken from, so NodeClaims stamped then do not drift."""
    grace = nodepool.termination_grace_period
    payload = {
        "labels": nodepool.template_labels,
        "annotations": nodepool.template_annotations,
        "taints": _taint_set(nodepool.taints),
        "startupTaints": _taint_set(nodepool.startup_taints),
        "nodeClassRef": [nodepool.node_class_ref.group, nodepool.node_class_ref.kind, nodepool.node_class_ref.name],
        "expireAfter": format_duration(nodepool.expire_after_seconds),
        "terminationGracePeriod": None if grace is None else format_duration(parse_duration(grace)),
    }
    return str(int(hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:15], 16))


def _taint_set(taints: Collection[Taint]) -> list[dict[str, str]]:
    return sorted((t.to_spec() for t in taints), key=lambda spec: json.dumps(spec, sort_keys=True))


class ProvisioningController:
    """Triggers the batcher for provisionable pods (again every 10 s while they stay so) and provisions when it closes;
    a run that failed is retried with back-off instead of at the next batch."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.batcher = Batcher.from_state(state.get("batcher") or {})
        self.triggers: dict[str, float] = dict(state.get("triggers") or {})
        self.verdicts: dict[str, list[dict[str, str]]] = dict(state.get("verdicts") or {})
        self.failures: int = int(state.get("failures") or 0)
        self.retry_at: float | None = state.get("retry_at")
        # Pending pods whose preferences were warned about (Karpenter's change monitor: once a pod, for 24 hours).
        self.warned: dict[str, float] = dict(state.get("warned") or {})
        # What each failing virtual pod was last told (its log line and event repeat only when that changes, as a
        # real pod's verdict does); kept apart from the verdicts, which are the pods' scheduling decisions.
        self.buffer_failures: dict[str, str] = dict(state.get("buffer_failures") or {})
        self.last_result: SchedulingResult | None = None

    def to_state(self) -> dict[str, Any]:
        return {
            "batcher": self.batcher.to_state(),
            "triggers": self.triggers,
            "verdicts": self.verdicts,
            "failures": self.failures,
            "retry_at": self.retry_at,
            **({"warned": self.warned} if self.warned else {}),
            **({"buffer_failures": self.buffer_failures} if self.buffer_failures else {}),
        }

    def next_due(self, now: float) -> float | None:
        times = [
            t for t in (self.batcher.closes_at, self.retry_at, *self.triggers.values()) if t is not None and t > now
        ]
        return min(times) if times else None

    def _due(self, now: float) -> bool:
        """After a failure the retry decides, not the batch window (new pods meanwhile join the retry)."""
        return now >= self.retry_at if self.retry_at is not None else self.batcher.due(now)

    def reconcile(self, ctx: ClusterContext) -> bool:
        # The cluster's batch window (BATCH_IDLE_DURATION, BATCH_MAX_DURATION), as Karpenter reads it at start.
        self.batcher.idle = ctx.options.batch_idle_duration
        self.batcher.maximum = ctx.options.batch_max_duration
        provisionable = [
            dra.with_devices(ctx.api, obj, pod)
            for obj, pod in ctx.views.readable(unbound_pods(ctx.api))
            if pod.is_provisionable()
        ]
        # CapacityBuffers' virtual pods join after the real ones (Karpenter injects them after its Validate filter)
        # and trigger a batch as they do, so a buffer is kept whether or not anything else is pending.
        provisionable += capacitybuffer.virtual_pods(ctx)
        # Karpenter's node trigger: a node carrying the disrupted taint opens a batch (again every 10 s while it
        # does), whose simulation moves its pods.
        # Each CapacityBuffer's reconcile triggers a pass too, ready or not (controller.go:135), so one that stops
        # resolving or is deleted has its Provisioning condition and the nodes holding buffer pods refreshed.
        buffers = capacitybuffer.triggers(ctx)
        triggers = [p.uid for p in provisionable] + [f"node/{name}" for name in _disrupted_nodes(ctx)] + buffers
        live = set(triggers)
        for uid in triggers:
            due = self.triggers.get(uid)
            if due is None or ctx.now >= due:
                self.batcher.trigger(uid, ctx.now)
                again = capacitybuffer.REQUEUE_SECONDS if uid.startswith(capacitybuffer.TRIGGER) else REQUEUE_SECONDS
                self.triggers[uid] = ctx.now + again
        existing = capacitybuffer.present(ctx)
        for uid in list(self.triggers):
            if uid not in live:
                del self.triggers[uid]
                self.verdicts.pop(uid, None)
                self.buffer_failures.pop(uid, None)
                if uid.startswith(capacitybuffer.TRIGGER) and uid.partition("@")[0] not in existing:
                    self.batcher.trigger(uid, ctx.now)  # a deleted buffer's TriggerReconcile (controller.go:91)
        self.warned = {uid: until for uid, until in self.warned.items() if uid in live and until > ctx.now}
        if not self._due(ctx.now):
            return False
        self.batcher.reset()
        self.retry_at = None
        # Read after the pending pods: a pod migrating off a deleting node meanwhile is missed, not counted twice.
        nodes = cluster_nodes(ctx)
        pending = self._with_usable_volumes(ctx, provisionable)
        moving = [read for pod in deleting_pods(ctx, nodes) if (read := with_volume_requirements(ctx, pod))]
        pods = pending + moving
        pods = self._without_dra(ctx, pods) if ctx.ignore_dra_requests else self._with_claims(ctx, pods)
        if not pods:
            self.failures = 0
            if ctx.buffer_nodes:
                ctx.buffer_nodes.clear()  # no buffer left to hold capacity for
            # Schedule's empty Results still go to updateBufferProvisioningStatus (provisioner.go:162, 400): a buffer
            # not ready, or empty, is told so.
            capacitybuffer.write_provisioning(ctx, {})
            return False
        try:
            changed = self.provision(ctx, pods, nodes)
        except Exception:
            # NodeClaims created before the failure count as capacity at the retry, so their pods get no second.
            self.failures += 1
            self.retry_at = ctx.now + retry_delay(self.failures)
            raise
        self.failures = 0
        return changed

    def _without_dra(self, ctx: ClusterContext, pods: list[Pod]) -> list[Pod]:
        """Karpenter's IGNORE_DRA_REQUESTS=true: a permanent error for pods with claims, which are left out."""
        message = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
        kept = []
        for pod in pods:
            obj = ctx.api.get("Pod", pod.name, pod.namespace)
            if obj is not None and has_dra_requirements(obj["spec"]):
                self._leave_out(ctx, pod, message)
                continue
            kept.append(pod)
        return kept

    def _with_claims(self, ctx: ClusterContext, pods: list[Pod]) -> list[Pod]:
        """Karpenter's scheduler fails a pod one of whose ResourceClaims does not exist yet (scheduler.go add, from
        dra.go resolvePodClaims), so it is deferred to a later loop, and one with a claim its allocator refuses
        (a distinctAttribute constraint) fails; the others go on."""
        kept = []
        for pod in pods:
            obj = ctx.api.get("Pod", pod.name, pod.namespace) if pod.resource_claims else None
            missing = dra.missing_claim(ctx.api, obj) if obj is not None else None
            if missing is not None:
                self._leave_out(ctx, pod, f'resourceclaim "{missing}" not found')
                continue
            unsupported = dra.unsupported_claim(ctx.api, obj) if obj is not None else None
            if unsupported is not None:
                self._leave_out(ctx, pod, unsupported)
                continue
            kept.append(pod)
        return kept

    def _leave_out(self, ctx: ClusterContext, pod: Pod, message: str) -> None:
        """A pod left out for its devices: its verdict, and Karpenter's "could not schedule pod" once per message."""
        verdict = [{"nodepool": "", "kind": "devices", "message": message}]
        if self.verdicts.get(pod.uid) != verdict:
            self.verdicts[pod.uid] = verdict
            ctx.log(logs.could_not_schedule(pod, message))

    def _with_usable_volumes(self, ctx: ClusterContext, pods: list[Pod]) -> list[Pod]:
        """Karpenter's Validate of the pending pods' PVCs (GetPendingPods): a pod with one kube-scheduler would refuse
        is left out, with its verdict, Karpenter's "ignoring pod" log line and a FailedScheduling event; a node
        launched for it could never run it. The others come with their volumes' alternatives for their node."""
        kept = []
        for pod in pods:
            obj = None if cb.is_virtual(pod) else ctx.api.get("Pod", pod.name, pod.namespace)
            if obj is None or not (obj.get("spec") or {}).get("volumes"):
                kept.append(pod)
                continue
            error = volumes.validation_error(ctx.api, obj)
            if error is None:
                read = with_volume_requirements(ctx, pod, obj)
                kept.extend([read] if read else [])
                continue
            self.verdicts[pod.uid] = [{"nodepool": "", "kind": VOLUMES, "message": f"ignoring pod, {error}"}]
            if ctx.observe:  # Karpenter writes its own
                continue
            ctx.log(logs.ignoring_pod(pod, error))
            ctx.publish(
                obj, "Warning", "FailedScheduling", f"Failed to schedule pod, {error}", dedupe_seconds=FAILED_DEDUPE
            )
        return kept

    def provision(self, ctx: ClusterContext, pods: list[Pod], nodes: list[Node] | None = None) -> bool:
        """Schedule `pods` (pending, then those of deleting nodes) over `nodes` (the cluster's, read again if None)
        and act on the result: NodeClaims, nominations, verdicts, logs and events."""
        started = time.perf_counter()
        # A deleting node's pod has no trigger to drop its verdict with: kept while it is among the pods to move.
        moving = {p.uid for p in pods if p.node_name}
        self.verdicts = {uid: v for uid, v in self.verdicts.items() if uid in self.triggers or uid in moving}
        self.buffer_failures = {uid: m for uid, m in self.buffer_failures.items() if uid in self.triggers}
        if not ctx.observe:  # observing, Karpenter writes its own
            self._warn_about_preferences(ctx, [p for p in pods if not p.node_name])
        request = scheduling_input(ctx, pods, nodes)
        result = solve(replace(request, time_limit=SIMULATION_TIME_LIMIT_SECONDS))
        self.last_result = result
        if ctx.observe:
            self._explain(result)
            return False
        if result.timed_out:
            ctx.log(logs.simulation_timed_out(time.perf_counter() - started))
        for name, why in sorted(result.skipped_nodepools.items()):
            _no_compatible_instance_types(ctx, name, why)
        if result.new_nodeclaims:
            ctx.log(logs.found_provisionable(result.pods_considered, time.perf_counter() - started))
            # As Karpenter's Results.Record: the new NodeClaims' pods, then (only beside them) the existing ones'.
            ctx.log(logs.computed_new_nodeclaims(result.new_nodeclaims))
            if any(result.placements.values()):
                ctx.log(logs.computed_unready_nodes(result.placements))
        for plan in result.new_nodeclaims:
            nodeclaim = create_nodeclaim(ctx, plan)
            # A node launched for pods a disruption command evicted is that command's cost.
            attribute_launch(ctx, plan.pods, nodeclaim, plan.cheapest.price if plan.options else 0.0)
        deferred = [f.pod for f in result.failures.values() if any(r.kind == RESERVED for r in f.reasons)]
        if deferred:
            ctx.log(logs.deferred_for_reservations(deferred))
        placed = self._buffers(ctx, result)
        for uid, failure in result.failures.items():
            if cb.is_virtual(failure.pod):
                self._buffer_failure(ctx, failure, failure.pod in deferred)
                continue
            verdict = [_verdict(reason) for reason in failure.reasons]
            if failure.pod in deferred:
                self.verdicts[uid] = verdict  # shown as waiting, not told as a failure (no FailedScheduling)
                continue
            if self.verdicts.get(uid) != verdict:
                self.verdicts[uid] = verdict
                ctx.log(logs.could_not_schedule(failure.pod, failure.message))
            # Every pass publishes PodFailedToScheduleEvent, deduped by the pod alone for 5 minutes (events.go:64-73,
            # scheduler.go:322-333): a pod that keeps failing is told again every 5 minutes, and a new verdict
            # within them is not told. The log line above stays once per verdict: every pass would flood the log.
            # Asked before the object is read: thousands of pods failing pass after pass read only those told now.
            pod = failure.pod
            if (
                ctx.publishes("FailedScheduling", "Pod", pod.name, pod.namespace)
                and (obj := pod_object(ctx, pod)) is not None
            ):
                message = f"Failed to schedule pod, {failure.message}"
                ctx.publish(obj, "Warning", "FailedScheduling", message, dedupe_seconds=FAILED_DEDUPE)
        for plan in result.new_nodeclaims:
            for pod in plan.pods:
                self.verdicts.pop(pod.uid, None)
                self.buffer_failures.pop(pod.uid, None)
        for placed_pods in result.placements.values():
            for pod in placed_pods:
                self.buffer_failures.pop(pod.uid, None)
        for node in [node for node, until in ctx.nominations.items() if until <= ctx.now]:
            del ctx.nominations[node]  # lapsed: read only as "nominated now", and a warm engine would keep them all
        # Read only when a pod gets past the rate limiter: a batch of thousands tells at most a few.
        claims = functools.cache(lambda: _claims_by_node(ctx))
        for node, placed_pods in result.placements.items():
            real = [p for p in placed_pods if not cb.is_virtual(p)]
            if not real:
                continue  # only real pods nominate (a buffer's would never expire: it is injected every pass)
            # A pod is headed for this node: disruption leaves it alone for a while.
            ctx.nominations[node] = ctx.now + nomination_seconds(ctx)

            # Karpenter names the node by its NodeClaim and its Node, as far as each exists (a NodeClaim still
            # waiting for its Node is a node named after it).
            def where(node: str = node) -> str:
                return state_node_name(claims().get(node), node if ctx.api.get("Node", node) else None)

            for pod in real:
                nominate(ctx, pod, where)
        capacitybuffer.write_provisioning(ctx, placed)
        return bool(result.new_nodeclaims)

    def _buffer_failure(self, ctx: ClusterContext, failure: PodFailure, deferred: bool) -> None:
        """A virtual pod that did not fit: Karpenter's Results.Record tells it as it tells a real pod (could not
        schedule pod, a FailedScheduling event on the pod it names; scheduler.go:322-333), a deferral to a later
        reservation excepted. Only the pods' scheduling decisions leave it out (filterVirtualPodErrors), so it has
        no verdict."""
        if deferred or self.buffer_failures.get(failure.pod.uid) == failure.message:
            return
        self.buffer_failures[failure.pod.uid] = failure.message
        ctx.log(logs.could_not_schedule(failure.pod, failure.message))
        involved = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": failure.pod.name, "namespace": failure.pod.namespace, "uid": failure.pod.uid},
        }
        ctx.event(involved, "Warning", "FailedScheduling", f"Failed to schedule pod, {failure.message}")

    def _warn_about_preferences(self, ctx: ClusterContext, pods: list[Pod]) -> None:
        """Karpenter's consolidationWarnings, as it reads the pending pods: each pod with a preferred anti-affinity or
        a ScheduleAnyway spread is named once (unless PREFERENCE_POLICY=Ignore drops preferences anyway)."""
        if ctx.options.preference_policy == IGNORE:
            return
        fresh = [p for p in pods if not cb.is_virtual(p) and p.uid not in self.warned]
        anti_affinity = [p for p in fresh if p.preferred_anti_affinity]
        spread = [p for p in fresh if any(c.when_unsatisfiable == SCHEDULE_ANYWAY for c in p.spread)]
        for record in logs.consolidation_warnings(anti_affinity, spread):
            ctx.log(record)
        for pod in (*anti_affinity, *spread):
            self.warned[pod.uid] = ctx.now + PREFERENCE_WARNING_SECONDS

    @staticmethod
    def _buffers(ctx: ClusterContext, result: SchedulingResult) -> dict[str, cb.Placement]:
        """classifyBufferPods: where each buffer's virtual pods went; and which nodes now hold buffer capacity
        (UpdateBufferPodCounts), which emptiness leaves alone."""
        placed: dict[str, cb.Placement] = {}
        hosting: dict[str, int] = {}
        for node, pods in result.placements.items():
            for pod in pods:
                if key := cb.buffer_key(pod):
                    placed.setdefault(key, cb.Placement()).existing += 1
                    hosting[node] = hosting.get(node, 0) + 1
        for plan in result.new_nodeclaims:
            for pod in plan.pods:
                if key := cb.buffer_key(pod):
                    placed.setdefault(key, cb.Placement()).new += 1
        for failure in result.failures.values():
            if key := cb.buffer_key(failure.pod):
                placed.setdefault(key, cb.Placement()).failed += 1
        ctx.buffer_nodes.clear()
        ctx.buffer_nodes.update(hosting)
        return placed

    def _explain(self, result: SchedulingResult) -> None:
        """Observing Karpenter: each pending pod's verdict from the simulation, launching nothing (Karpenter
        launches). A CapacityBuffer's virtual pods are no one's to explain, nor is a deleting node's running pod."""
        for uid, failure in result.failures.items():
            if not cb.is_virtual(failure.pod) and not failure.pod.node_name:
                self.verdicts[uid] = [_verdict(reason) for reason in failure.reasons]
        for plan in result.new_nodeclaims:
            types = [o.instance_type.name for o in plan.options]
            shown = ", ".join(types[:3]) + (f" and {len(types) - 3} more" if len(types) > 3 else "")
            verdict = {
                "nodepool": plan.nodepool,
                "kind": LAUNCHING,
                "message": f"Karpenter's next batch should launch a NodeClaim for it ({shown}) with "
                f"{len(plan.pods)} pod(s)",
            }
            for pod in plan.pods:
                if not cb.is_virtual(pod) and not pod.node_name:
                    self.verdicts[pod.uid] = [verdict]
        for node, placed in result.placements.items():
            for pod in (p for p in placed if not cb.is_virtual(p) and not p.node_name):
                self.verdicts[pod.uid] = [
                    {
                        "nodepool": "",
                        "kind": HEADED_FOR,
                        "message": f"fits on {node} (a node or a NodeClaim still launching): kube-scheduler binds it "
                        "once that node is ready and has room",
                    }
                ]


def _verdict(reason: Reason) -> dict[str, str]:
    """A reason as the dashboard reads it (kept with the controller's state while the pod waits)."""
    verdict = {"nodepool": reason.nodepool, "kind": reason.kind, "message": reason.message}
    if "selection" in reason.details:
        verdict["selection"] = str(reason.details["selection"])
    return verdict


def with_volume_requirements(ctx: ClusterContext, pod: Pod, obj: Obj | None = None) -> Pod | None:
    """The pod with the alternatives its volumes allow its node (getVolumeTopologyRequirements, for every pod a batch
    schedules); None, logged as Karpenter does, when a PVC, PV or StorageClass it names cannot be read."""
    obj = obj if obj is not None else ctx.api.get("Pod", pod.name, pod.namespace)
    if obj is None or not (obj.get("spec") or {}).get("volumes"):
        return pod
    try:
        alternatives = volumes.requirement_alternatives(ctx.api, obj)
    except volumes.VolumeError as error:
        if not ctx.observe:
            ctx.log(logs.volume_requirements_failed(pod, str(error)))
        return None
    # And the PVCs it would attach, by driver: what counts against volume attachment limits (scheduler.go:623).
    attached = volumes.pod_volumes(ctx.api, obj)
    if not alternatives and not attached:
        return pod
    return replace(pod, volume_requirements=alternatives or pod.volume_requirements, csi_volumes=attached)


def nomination_seconds(ctx: ClusterContext) -> float:
    return max(2 * ctx.options.batch_max_duration, NOMINATION_MIN_SECONDS)


def _disrupted_nodes(ctx: ClusterContext) -> list[str]:
    """The Nodes carrying the `karpenter.sh/disrupted` taint."""
    return [obj["metadata"]["name"] for obj in ctx.api.scan("Node") if has_disrupted_taint(obj)]


def deleting_pods(ctx: ClusterContext, nodes: list[Node]) -> list[Pod]:
    """Karpenter's `Deleting().CurrentlyReschedulablePods`: the pods that would move off the nodes on their way out.
    A batch's later steps, tainted ahead of their turn (`held`), are not on their way yet: their command launches
    their replacements when it starts."""
    leaving = [n for n in nodes if n.marked_for_deletion]
    if not leaving:
        return []
    held = {
        c["node"]
        for command in ctx.api.list("DisruptionCommand", fields={"status.phase": "Approved"})
        if command["status"].get("held")
        for c in command["spec"]["candidates"]
    }
    policies = pdb.policies(ctx.api, ctx.views)
    claims = bool(ctx.api.list("ResourceClaim"))  # without claims no pod has devices to ask for again
    return [
        pod
        for node in leaving
        if node.name not in held
        for pod in (dra.with_claimed_devices(ctx.api, node) if claims else node).pods
        if currently_reschedulable(pod, ctx.now, policies)
    ]


def scheduling_input(ctx: ClusterContext, pods: list[Pod], nodes: list[Node] | None = None) -> SchedulingInput:
    offers = []
    for nodepool in ctx.nodepools:
        if nodepool.static:
            continue  # static NodePools are the static provisioning controller's (Karpenter's NewScheduler skips them)
        types = ctx.instance_types_for(nodepool)
        if types is not None:
            offers.append(PoolOffer(nodepool, types))
    nodes = cluster_nodes(ctx) if nodes is None else nodes
    # SCHEDULER_CONFIG's default spread on the scheduling copies of pods without their own, before topology is
    # counted (provisioner.go:336); unconfigured, the pods are the same ones.
    pods = DefaultSpreadInjector(ctx.api).inject(pods, ctx.options.default_spread)
    return SchedulingInput(
        pods=pods,
        pools=offers,
        nodes=nodes,
        device_classes=dra.device_classes(ctx.api),
        node_devices=dra.node_inventory(ctx.api, nodes, ctx.catalogs),
        daemonsets=daemonsets(ctx),
        namespace_labels={n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in ctx.api.list("Namespace")},
        preference_policy=ctx.options.preference_policy,
        min_values_policy=ctx.options.min_values_policy,
        reserved_capacity=ctx.gate(RESERVED_CAPACITY),
        # Provisioning never falls back past reserved capacity others hold (DisableReservedCapacityFallback).
        reservation_mode=RESERVATION_STRICT,
    )


def cluster_nodes(ctx: ClusterContext, fresh: Collection[str] = frozenset()) -> list[Node]:
    """Nodes, plus NodeClaims still waiting for their Node, which count as capacity being launched; those named in
    `fresh` are under their NodePool's consolidateAfter (disruption's simulations only move pods onto them)."""
    by_node = ctx.views.pods_by_node(ctx.api)
    attached = attached_volumes(ctx)
    if attached:
        by_node = {
            name: [replace(p, csi_volumes=attached[p.uid]) if p.uid in attached else p for p in pods]
            for name, pods in by_node.items()
        }
    # Read, never changed: one CSINode per node, which `list` would copy every batch.
    csi_nodes = {obj["metadata"]["name"]: obj for obj in ctx.api.scan("CSINode")}
    claims = {c["metadata"]["name"]: c for c in ctx.api.list("NodeClaim")}
    claim_by_node = {
        (c.get("status") or {}).get("nodeName"): c for c in claims.values() if (c.get("status") or {}).get("nodeName")
    }
    # Karpenter keys its state nodes by providerID (cluster.go:383, :416): a Node its NodeClaim has not registered
    # yet (no status.nodeName) is still that NodeClaim's state node, not a second node beside it.
    claim_by_provider = {
        (c.get("status") or {}).get("providerID"): c
        for c in claims.values()
        if (c.get("status") or {}).get("providerID")
    }
    nodes = []
    matched: set[str] = set()
    for obj in ctx.api.list("Node"):
        name = obj["metadata"]["name"]
        claim = claim_by_node.get(name) or claim_by_provider.get((obj.get("spec") or {}).get("providerID") or "")
        if claim is not None:
            matched.add(claim["metadata"]["name"])
        view = node_view(obj, by_node.get(name, []), claim, under_consolidate_after=name in fresh)
        if name in csi_nodes:
            # Karpenter's populateVolumeLimits reads the node's CSINode as it hydrates the state node.
            view = replace(view, csi_drivers=volumes.csi_drivers(csi_nodes[name]))
        nodes.append(view)
    seen = {node.name for node in nodes}
    for claim in claims.values():
        status = claim.get("status") or {}
        if (
            status.get("nodeName") in seen
            or claim["metadata"]["name"] in matched
            or claim["metadata"].get("deletionTimestamp")
        ):
            continue
        # Not launched yet (a launch that failed a write, on a real API): its capacity is at least what it was
        # made to hold, so the pods it was made for are not given a second NodeClaim meanwhile. Or registered to a
        # Node the cache has not seen (its informer relisting after an API server restart, while the NodeClaims'
        # is back): still capacity, as Karpenter's state node made from a NodeClaim alone is, or every pending pod
        # would get a second NodeClaim.
        launched = is_true(claim, "Launched")
        planned = parse_resources(((claim.get("spec") or {}).get("resources") or {}).get("requests") or {})
        name = status.get("nodeName") or claim["metadata"]["name"]
        spec = claim.get("spec") or {}
        nodes.append(
            Node(
                name=name,
                labels={**(claim["metadata"].get("labels") or {}), "kubernetes.io/hostname": name},
                allocatable=parse_resources(status.get("allocatable") or {}) if launched else planned,
                capacity=parse_resources(status.get("capacity") or {}) if launched else planned,
                # A state node without its Node has its NodeClaim's taints (Karpenter's StateNode.Taints), and the
                # pods the cache has already seen bound to it.
                taints=tuple(Taint.from_spec(t) for t in spec.get("taints") or []),
                startup_taints=tuple(Taint.from_spec(t) for t in spec.get("startupTaints") or []),
                pods=tuple(by_node.get(name, [])),
                initialized=False,
                managed=True,
                nodepool=(claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", ""),
                under_consolidate_after=name in fresh,
                nodeclaim=claim["metadata"]["name"],
            )
        )
    return nodes


def attached_volumes(ctx: ClusterContext) -> dict[str, volumes.VolumeItems]:
    """Pod uid -> the PVCs by CSI driver of each bound pod that has any (Karpenter's StateNode.updateForPod tracks
    them per node), read again only when pods or storage objects change."""
    kinds = ("Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass")

    def read() -> dict[str, volumes.VolumeItems]:
        found: dict[str, volumes.VolumeItems] = {}
        if not ctx.api.scan("PersistentVolumeClaim"):
            return found  # a pod whose PVC does not exist attaches nothing: no pod need be looked at
        for obj in ctx.api.scan("Pod"):
            spec = obj.get("spec") or {}
            if not spec.get("nodeName") or all(volumes.claim_name(obj, v) is None for v in spec.get("volumes") or ()):
                continue
            attached = volumes.pod_volumes(ctx.api, obj)
            if attached:
                found[obj["metadata"].get("uid", "")] = attached
        return found

    return ctx.memo("provisioning/attached-volumes", tuple(ctx.api.kind_version(k) for k in kinds), read)


def has_dra_requirements(spec: Mapping[str, Any]) -> bool:
    """Karpenter's pod.HasDRARequirements: the pod claims devices, at pod level or in a container's resources."""
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    return bool(spec.get("resourceClaims")) or any((c.get("resources") or {}).get("claims") for c in containers)


def daemonsets(ctx: ClusterContext) -> list[DaemonSet]:
    """The DaemonSets whose pods would land on a new or existing node, each as its newest live pod when it has one,
    else as its template (Karpenter's getDaemonSetPods, provisioner.go:548): a pod may ask for other resources than
    the template (a VPA or a LimitRange changed them), and it is the pod that takes the room. With
    IGNORE_DRA_REQUESTS, one whose pods claim devices adds no overhead (scheduler.go's shouldSkipDaemonPod), as such
    a pending pod is never scheduled."""
    objs = ctx.api.list("DaemonSet")
    live = _newest_daemon_pods(ctx.api.scan("Pod")) if objs else {}
    result = []
    for obj in objs:
        namespace = obj["metadata"].get("namespace", "default")
        template = (obj.get("spec") or {}).get("template") or {}
        template_spec = template.get("spec") or {}
        live_pod = live.get((namespace, obj["metadata"].get("uid", "")))
        pod = _daemon_pod(live_pod, template_spec, namespace) if live_pod is not None else None
        spec = (live_pod.get("spec") or {}) if live_pod is not None and pod is not None else template_spec
        if ctx.ignore_dra_requests and has_dra_requirements(spec):
            continue
        if pod is None:
            labels = (template.get("metadata") or {}).get("labels") or {}
            pod = pod_from_spec(template_spec, "spec.template.spec", namespace=namespace, labels=labels)
        result.append(DaemonSet(name=obj["metadata"]["name"], namespace=namespace, template=pod))
    return result


def _newest_daemon_pods(pods: list[Obj]) -> dict[tuple[str, str], Obj]:
    """(namespace, DaemonSet uid) -> the newest pod it controls (Karpenter's Cluster.UpdateDaemonSet keeps the one
    created last; ties go to the first by namespace and name, as `list` orders them). One pass over every pod, not
    one per DaemonSet: at 20,000 pods a pass per DaemonSet would be most of a provisioning step."""
    newest: dict[tuple[str, str], tuple[float, tuple[str, str], Obj]] = {}
    for pod in pods:
        meta = pod["metadata"]
        # A plain loop, not next() over a generator: this runs for every pod in the cluster on each call.
        for owner in meta.get("ownerReferences") or ():
            if owner.get("controller"):
                break
        else:
            continue
        if owner.get("kind") != "DaemonSet" or not owner.get("uid"):
            continue
        key = (meta.get("namespace") or "default", owner["uid"])
        created = parse_timestamp(meta["creationTimestamp"]) if meta.get("creationTimestamp") else 0.0
        order = (key[0], meta["name"])
        kept = newest.get(key)
        if kept is None or created > kept[0] or (created == kept[0] and order < kept[1]):
            newest[key] = (created, order, pod)
    return {key: pod for key, (_, _, pod) in newest.items()}


def _daemon_pod(obj: Obj, template_spec: Mapping[str, Any], namespace: str) -> Pod | None:
    """A live DaemonSet pod as the scheduler's overhead, with the template's required node affinity: the DaemonSet
    controller replaces a pod's with a pin to its own node (Karpenter reads only matchExpressions, so the pin alone
    selects nothing). None when karpui cannot read the pod; the template stands in for it."""
    spec = dict(obj.get("spec") or {})
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = ((template_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    else:
        node_affinity.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    spec["affinity"] = {**affinity, "nodeAffinity": node_affinity}
    labels = obj["metadata"].get("labels") or {}
    try:
        return pod_from_spec(spec, "spec", namespace=namespace, labels=labels)
    except ValueError:
        return None


def _requested_drivers(ctx: ClusterContext, plan: NodeClaimPlan) -> dict[str, str]:
    """Karpenter's `karpenter.sh/requested-dra-drivers`: initialization waits for these drivers' slices. They are
    the drivers of the devices allocated to the NodeClaim's pods (scheduling/dra.go draDriversForNodeClaim), not
    every driver its instance type has."""
    requests: tuple[DeviceRequest, ...] = ()
    for pod in plan.pods:
        requests = merged(requests, pod.device_requests)
    if not requests or not plan.options:
        return {}
    outcome = allocate(requests, declared_devices(plan.options[0].instance_type), dra.device_classes(ctx.api))
    drivers = sorted({device.driver for _, device in outcome}) if not isinstance(outcome, str) else []
    return {"karpenter.sh/requested-dra-drivers": ",".join(drivers)} if drivers else {}


def _overlays_applied(plan: NodeClaimPlan) -> dict[str, str]:
    """Karpenter's ToNodeClaim marks a NodeClaim whose instance types a NodeOverlay repriced or gave capacity."""
    marks = {}
    if any(o.instance_type.price_overlaid for o in plan.options):
        marks[PRICE_OVERLAY_APPLIED] = "true"
    if any(o.instance_type.capacity_overlaid for o in plan.options):
        marks[CAPACITY_OVERLAY_APPLIED] = "true"
    return marks


def create_nodeclaim(ctx: ClusterContext, plan: NodeClaimPlan) -> Obj:
    nodepool = next(np for np in ctx.nodepools if np.name == plan.nodepool)
    while True:
        name = f"{nodepool.name}-{random_suffix(ctx.rng)}"
        if ctx.api.get("NodeClaim", name) is None:
            break
    ref = nodepool.node_class_ref
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name},
        "requirements": plan.requirements.to_specs(),
        "resources": {"requests": plan.requests_text()},
        "expireAfter": nodepool.expire_after,
    }
    if plan.taints:
        spec["taints"] = [t.to_spec() for t in plan.taints]
    if plan.startup_taints:
        spec["startupTaints"] = [t.to_spec() for t in plan.startup_taints]
    if nodepool.termination_grace_period:
        # A *metav1.Duration in Karpenter's NodeClaim, so written as Go prints it ("223h" becomes "223h0m0s").
        spec["terminationGracePeriod"] = go_duration(parse_duration(nodepool.termination_grace_period) or 0)
    nodeclaim = ctx.api.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": name,
                "labels": dict(plan.labels),
                "annotations": {
                    **nodepool.template_annotations,
                    "karpenter.sh/nodepool-hash": nodepool_hash(nodepool),
                    "karpenter.sh/nodepool-hash-version": HASH_VERSION,
                    **(
                        {}
                        if plan.static  # the scheduler sets it; a static NodeClaim is never scheduled
                        else {
                            "karpenter.sh/nodeclaim-min-values-relaxed": "true" if plan.min_values_relaxed else "false"
                        }
                    ),
                    **_requested_drivers(ctx, plan),
                    **_overlays_applied(plan),
                },
                "ownerReferences": [
                    {
                        "apiVersion": "karpenter.sh/v1",
                        "kind": "NodePool",
                        "name": nodepool.name,
                        "uid": ctx.nodepool_uids.get(nodepool.name, ""),
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": spec,
            "status": {},
        }
    )
    # Logged before anything else is written: a step cut short right after (a crash, a lost Lease) still records it.
    ctx.log(logs.created_nodeclaim(plan, name))
    if plan.pods:
        ctx.nodeclaim_pods[name] = [pod.key for pod in plan.pods]
    for pod in plan.pods:
        nominate(ctx, pod, lambda: f"nodeclaim/{name}")
    return nodeclaim


# How long a pod named in a consolidation warning is not named again (Karpenter's ChangeMonitor cache).
PREFERENCE_WARNING_SECONDS = 24 * 3600.0


def nominate(ctx: ClusterContext, pod: Pod, where: Callable[[], str]) -> None:
    """Karpenter's NominatePodEvent: "Pod should schedule on: nodeclaim/x[, node/y]", once per pod in 2 minutes and
    through the one rate limiter every pod's nomination shares (a pod it turns away is held for the 2 minutes all the
    same, as the recorder takes the dedupe entry before it asks the limiter)."""
    # Asked before the object is read: a batch of thousands of pods reads only the few the limiter lets through.
    if not ctx.admits("Nominated", "Pod", pod.name, pod.namespace, ctx.nominated_events):
        return
    obj = pod_object(ctx, pod)
    if obj is not None:
        ctx.event(obj, "Normal", "Nominated", f"Pod should schedule on: {where()}")


def _claims_by_node(ctx: ClusterContext) -> dict[str, str]:
    """NodeClaim names by the node the scheduler knows them as: their Node's name, or their own while they wait."""
    return {
        (c.get("status") or {}).get("nodeName") or c["metadata"]["name"]: c["metadata"]["name"]
        for c in ctx.api.list("NodeClaim")
    }


# Karpenter publishes a NodePool's NoCompatibleInstanceTypes at most once a minute.
NO_COMPATIBLE_DEDUPE_SECONDS = 60.0


def _no_compatible_instance_types(ctx: ClusterContext, name: str, why: str) -> None:
    """A NodePool whose requirements leave it no instance type launches nothing: Karpenter says so on it (a Warning)
    and in its log, each batch; karpui's reason beside (which requirement, or minValues) is the dashboard's."""
    min_values = why.startswith(MIN_VALUES_UNMET)
    ctx.log(logs.skipping_nodepool(name, why if min_values else None))
    message = "NodePool requirements filtered out all compatible available instance types" + (
        " due to minValues incompatibility" if min_values else ""
    )
    ctx.publish(
        ctx.nodepool_object(name),
        "Warning",
        "NoCompatibleInstanceTypes",
        message,
        dedupe_seconds=NO_COMPATIBLE_DEDUPE_SECONDS,
    )


def pod_object(ctx: ClusterContext, pod: Pod) -> Obj | None:
    """The stored Pod a scheduling result speaks of, if it still exists as the same pod (uid)."""
    obj = ctx.api.get("Pod", pod.name, pod.namespace)
    return obj if obj is not None and obj["metadata"].get("uid") == pod.uid else None
