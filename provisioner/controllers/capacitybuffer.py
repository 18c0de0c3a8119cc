"""The CapacityBuffer controller (Karpenter v1.14, gate CapacityBuffer, off by default): resolves each buffer's pod
shape from its PodTemplate or workload, works out its chunks (status.replicas) and says so (ReadyForProvisioning);
the provisioner then schedules the ready buffers' virtual pods with the pending ones (`virtual_pods`) and writes
where they went (Provisioning)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner import capacitybuffers as cb
from provisioner.cluster.objects import Obj, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.options import CAPACITY_BUFFER
from provisioner.pods import Pod
from provisioner.quantity import parse_resources


def set_condition(obj: Obj, kind: str, status: str, reason: str, message: str, now: float) -> None:
    """apimeta.SetStatusCondition as CapacityBuffer.SetCondition calls it: in place, with the object's generation;
    the transition time moves only when the status does."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    new = {
        "type": kind,
        "status": status,
        "observedGeneration": int(obj["metadata"].get("generation") or 0),
        "lastTransitionTime": timestamp(now),
        "reason": reason,
        "message": message,
    }
    for index, current in enumerate(conditions):
        if current.get("type") == kind:
            if current.get("status") == status:
                new["lastTransitionTime"] = current.get("lastTransitionTime", new["lastTransitionTime"])
            conditions[index] = new
            return
    conditions.append(new)


def _getter(ctx: ClusterContext) -> cb.Getter:
    def get(kind: str, name: str, namespace: str) -> Obj | None:
        return ctx.api.get(kind, name, namespace)

    return get


def resolve_status(buffer: Obj, get: cb.Getter, now: float) -> Mapping[str, Any] | None:
    """resolveAndUpdateStatus on a copy's status: the template it resolved to (None when it did not) and the status
    it writes into `buffer`."""
    return _resolve_status(buffer, get, now)[0]


def _resolve_status(buffer: Obj, get: cb.Getter, now: float) -> tuple[Mapping[str, Any] | None, cb.Unresolved | None]:
    """resolve_status, with why the buffer did not resolve (None when it did)."""
    spec = buffer.get("spec") or {}
    status = buffer.setdefault("status", {})
    try:
        resolution = cb.resolve(buffer, get)
        pod = cb.template_pod(resolution.template, buffer["metadata"].get("namespace") or "default")
    except cb.Unresolved as unresolved:
        set_condition(buffer, cb.READY_FOR_PROVISIONING, "False", unresolved.reason, str(unresolved), now)
        status["provisioningStrategy"] = spec.get("provisioningStrategy", cb.ACTIVE_CAPACITY)
        return None, unresolved
    scalable = spec.get("podTemplateRef") is None
    if scalable:
        status.pop("podTemplateRef", None)
        status.pop("podTemplateGeneration", None)
    else:
        status["podTemplateRef"] = {"name": resolution.pod_template}
        status["podTemplateGeneration"] = resolution.pod_template_generation
    limits = parse_resources(spec.get("limits") or {})
    status["replicas"] = cb.desired_replicas(
        spec, pod.requests, limits, scalable_replicas=resolution.scalable_replicas, scalable=scalable
    )
    set_condition(buffer, cb.READY_FOR_PROVISIONING, "True", cb.RESOLVED, "Pod template resolved successfully", now)
    status["provisioningStrategy"] = spec.get("provisioningStrategy", cb.ACTIVE_CAPACITY)
    return resolution.template, None


def buffer_key(buffer: Obj) -> str:
    meta = buffer["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


class CapacityBufferController:
    def reconcile(self, ctx: ClusterContext) -> bool:
        """Each buffer's status as its template and workload stand now; True if one was written."""
        if not ctx.gate(CAPACITY_BUFFER) or ctx.observe:
            return False  # observing, the cluster's own Karpenter writes their status
        changed = False
        get = _getter(ctx)
        buffers = ctx.api.list(cb.KIND)
        for buffer in buffers:
            if ctx.backing_off("capacitybuffer", buffer):
                continue
            with ctx.guard("capacitybuffer", buffer):
                key = buffer_key(buffer)
                before = repr(buffer.get("status"))
                template, unresolved = _resolve_status(buffer, get, ctx.now)
                if repr(buffer.get("status")) != before:
                    ctx.api.update(buffer)
                    changed = True
                if unresolved is not None and unresolved.retry:
                    # Karpenter patches the status first, then fails the reconcile (logged, retried with backoff)
                    # for anything but a missing object, which is the user's to create. It returns before the
                    # cache and the trigger (controller.go:110-113): the buffer keeps its last virtual pods, and no
                    # provisioning pass is asked for.
                    ctx.buffers_failing.add(key)
                    raise unresolved
                ctx.buffers_failing.discard(key)
                if template is not None and cb.ready(buffer):
                    ctx.buffer_cache[key] = (_identity(buffer), template)  # UpdateEntry
                else:
                    ctx.buffer_cache.pop(key, None)  # RemoveEntry: not ready, or not resolved
        present = {buffer_key(b) for b in buffers}
        for key in [k for k in ctx.buffer_cache if k not in present]:
            del ctx.buffer_cache[key]  # a deleted buffer's RemoveEntry
        ctx.buffers_failing &= present
        return changed


def _identity(buffer: Obj) -> Obj:
    """What BuildVirtualPods reads of a buffer: its name, namespace, uid and chunk count."""
    meta = buffer["metadata"]
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
        "status": {"replicas": (buffer.get("status") or {}).get("replicas")},
    }


TRIGGER = "capacitybuffer/"
REQUEUE_SECONDS = 30.0  # the buffer controller's RequeueAfter (controller.go:137): each reconcile triggers again


def triggers(ctx: ClusterContext) -> list[str]:
    """The provisioner's triggers by the buffer controller (Trigger(cb.UID) at each reconcile that succeeds, ready
    or not): one per buffer, keyed by its version too, since any change to a buffer (its status included) reconciles
    it at once. A buffer whose reconcile fails with a retryable error triggers nothing (controller.go:110-113)."""
    if not ctx.gate(CAPACITY_BUFFER):
        return []
    return [trigger_key(b) for b in ctx.api.list(cb.KIND) if buffer_key(b) not in ctx.buffers_failing]


def trigger_key(buffer: Obj) -> str:
    meta = buffer["metadata"]
    return f"{TRIGGER}{meta.get('uid', '')}@{meta.get('resourceVersion', '')}"


def present(ctx: ClusterContext) -> set[str]:
    """The buffers that exist, by their trigger key's uid part (what a deleted buffer's trigger is told by)."""
    if not ctx.gate(CAPACITY_BUFFER):
        return set()
    return {trigger_key(b).partition("@")[0] for b in ctx.api.list(cb.KIND)}


def virtual_pods(ctx: ClusterContext) -> list[Pod]:
    """The virtual pods of every ready buffer (the provisioner's GetAll), none with the gate off; a buffer whose
    reconcile is failing with a retryable error keeps those of its last successful one."""
    if not ctx.gate(CAPACITY_BUFFER):
        return []
    get = _getter(ctx)
    pods: list[Pod] = []
    for buffer in ctx.api.list(cb.KIND):
        if ctx.buffers_failing and buffer_key(buffer) in ctx.buffers_failing:
            kept = ctx.buffer_cache.get(buffer_key(buffer))
            if kept is not None:
                pods.extend(cb.virtual_pods(kept[0], kept[1], ctx.now))  # the cache entry it last had
            continue
        if not cb.ready(buffer):
            continue
        try:
            template = cb.resolve(buffer, get).template
            pods.extend(cb.virtual_pods(buffer, template, ctx.now))
        except cb.Unresolved:
            continue  # skipped until the buffer controller says why
    return pods


def write_provisioning(ctx: ClusterContext, placed: Mapping[str, cb.Placement]) -> None:
    """updateBufferProvisioningStatus: each buffer's Provisioning condition from where its virtual pods went."""
    if not ctx.gate(CAPACITY_BUFFER) or ctx.observe:
        return
    for buffer in ctx.api.list(cb.KIND):
        key = f"{buffer['metadata'].get('namespace') or 'default'}/{buffer['metadata']['name']}"
        verdict = cb.provisioning_condition(buffer, placed.get(key))
        if verdict is None:
            continue
        before = repr(buffer.get("status"))
        set_condition(buffer, cb.PROVISIONING, *verdict, ctx.now)
        if repr(buffer.get("status")) != before:
            with ctx.guard("capacitybuffer", buffer):
                ctx.api.update(buffer)
