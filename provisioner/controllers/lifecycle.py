"""The NodeClaim lifecycle (Karpenter's lifecycle controller): launch through the cloud provider, register the Node
that appears, initialize it, time out a launch (5 min, v1.7) or a registration (15 min) and tell the NodePool's
registration health, and release the NodeClaim once its instance is gone."""

from __future__ import annotations

import contextlib
from typing import Protocol

from provisioner import labels as wk
from provisioner.cloudprovider.types import (
    REGISTRATION_TIMEOUT,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from provisioner.cluster.conditions import is_true, set_claim_condition, transition_time
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.cluster.views import is_ready
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.termination import (
    GRACE_EXPIRING,
    INSTANCE_TERMINATING,
    MANAGED_NODE_CLASSES,
    TERMINATION_FINALIZER,
    grace_deadline,
)
from provisioner.controllers.termination import LOGGER as TERMINATION_LOGGER
from provisioner.quantity import parse_quantity
from provisioner.scheduling.logs import LogRecord, go_duration
from provisioner.taints import UNREGISTERED, Taint, is_known_ephemeral

LIFECYCLE = "controller.nodeclaim.lifecycle"
# Karpenter's liveness: a NodeClaim not launched within LaunchTimeout of its creation, or not registered within
# registrationTimeout of its Registered condition first being set (at launch), is deleted and retried.
LAUNCH_TIMEOUT = 5 * 60.0
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
UNREGISTERED_TAINT_MISSING = "UnregisteredTaintMissing"
DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"


class LaunchOutcomes(Protocol):
    """Who hears how each NodeClaim's launch ended (the NodePools' registration health)."""

    def registered(self, ctx: ClusterContext, claim: Obj) -> None: ...

    def timed_out(self, ctx: ClusterContext, claim: Obj) -> None: ...


class _Unheard:
    def registered(self, ctx: ClusterContext, claim: Obj) -> None:
        return None

    def timed_out(self, ctx: ClusterContext, claim: Obj) -> None:
        return None


def is_managed(claim: Obj) -> bool:
    """Whether the NodeClaim's node class is one this Karpenter launches."""
    ref = (claim.get("spec") or {}).get("nodeClassRef") or {}
    return (ref.get("group"), ref.get("kind")) in MANAGED_NODE_CLASSES


def registration_deadline(claim: Obj) -> float | None:
    """When a launched, unregistered NodeClaim times out: 15 minutes after its Registered condition was set."""
    if not is_true(claim, "Launched") or is_true(claim, "Registered") or claim["metadata"].get("deletionTimestamp"):
        return None
    since = transition_time(claim, "Registered") or transition_time(claim, "Launched")
    return parse_timestamp(since) + REGISTRATION_TIMEOUT if since else None


def launch_deadline(claim: Obj) -> float | None:
    """When a NodeClaim that has not launched times out: five minutes after its Launched condition was last set (its
    first failed launch; liveness.go measures from the condition, not the creation), or after it was made."""
    if is_true(claim, "Launched") or claim["metadata"].get("deletionTimestamp"):
        return None
    since = transition_time(claim, "Launched") or claim["metadata"]["creationTimestamp"]
    return parse_timestamp(since) + LAUNCH_TIMEOUT


def _registration_dues(ctx: ClusterContext) -> list[float]:
    times = []
    for claim in ctx.api.list("NodeClaim"):
        if not is_managed(claim):
            continue
        due = ctx.cloud.registered_by(claim)
        if due is not None:
            times.append(due)
        times.extend(t for t in (registration_deadline(claim), launch_deadline(claim)) if t is not None)
    return sorted(times)


class LifecycleController:
    """Runs when NodeClaims, Nodes or ResourceSlices were written since its last run, or a registration or a
    timeout is due; otherwise every NodeClaim is where it was and nothing can move it."""

    def __init__(self, outcomes: LaunchOutcomes | None = None) -> None:
        self.outcomes: LaunchOutcomes = outcomes or _Unheard()
        self._seen: tuple[int, int, int] | None = None
        self._seen_at = float("-inf")
        self._dues: list[float] = []

    def _versions(self, ctx: ClusterContext) -> tuple[int, int, int]:
        return (ctx.api.kind_version("NodeClaim"), ctx.api.kind_version("Node"), ctx.api.kind_version("ResourceSlice"))

    def next_due(self, ctx: ClusterContext) -> float | None:
        if self._versions(ctx) != self._seen:
            self._dues = _registration_dues(ctx)
        future = [t for t in self._dues if t > ctx.now]
        return future[0] if future else None

    def reconcile(self, ctx: ClusterContext) -> bool:
        if self._versions(ctx) == self._seen and not any(self._seen_at < t <= ctx.now for t in self._dues):
            return False
        errors = ctx.errors
        changed = reconcile(ctx, self.outcomes)
        # A NodeClaim moves one phase per run (launch, register, initialize), so a run that changed something
        # runs again, and so does one that failed (a write refused with a 409 on a real API is retried); only a run
        # that found nothing to do may be skipped until its inputs change.
        self._seen = None if changed or ctx.errors > errors else self._versions(ctx)
        self._seen_at = ctx.now
        self._dues = _registration_dues(ctx)
        return changed


def next_due(ctx: ClusterContext) -> float | None:
    future = [t for t in _registration_dues(ctx) if t > ctx.now]
    return min(future) if future else None


def reconcile(ctx: ClusterContext, outcomes: LaunchOutcomes | None = None) -> bool:
    changed = False
    for claim in ctx.api.list("NodeClaim"):
        if not is_managed(claim) or ctx.backing_off("nodeclaim.lifecycle", claim):
            continue
        with ctx.guard("nodeclaim.lifecycle", claim):
            changed |= _reconcile_claim(ctx, claim, outcomes or _Unheard())
    for gone in [name for name in ctx.nodeclaim_pods if ctx.api.get("NodeClaim", name) is None]:
        del ctx.nodeclaim_pods[gone]  # deleted before it launched
    changed |= _nodes_without_claims(ctx)
    return changed


def _reconcile_claim(ctx: ClusterContext, claim: Obj, outcomes: LaunchOutcomes) -> bool:
    if claim["metadata"].get("deletionTimestamp"):
        annotated = _annotate_termination(ctx, claim)
        return _finalize(ctx, claim) or annotated
    finalized = False
    if TERMINATION_FINALIZER not in (claim["metadata"].get("finalizers") or []):
        # Karpenter adds it before launching: an instance launched for a NodeClaim without it could leak.
        claim["metadata"]["finalizers"] = [*(claim["metadata"].get("finalizers") or []), TERMINATION_FINALIZER]
        claim = ctx.api.update(claim)
        finalized = True
    if not is_true(claim, "Launched"):
        deadline = launch_deadline(claim)
        if deadline is not None and ctx.now >= deadline:
            return _time_out(ctx, claim, outcomes, LAUNCH_TIMEOUT, "launch_timeout")
        return _launch(ctx, claim) or finalized
    if not is_true(claim, "Registered"):
        # Registration runs before liveness (controller.go): a Node that came in time registers even when the
        # NodeClaim is looked at only after its timeout.
        changed = _register(ctx, claim, outcomes)
        deadline = registration_deadline(claim)
        if deadline is not None and ctx.now >= deadline:
            return _time_out(ctx, claim, outcomes, REGISTRATION_TIMEOUT, "registration_timeout")
        return changed or finalized
    if not is_true(claim, "Initialized"):
        return _initialize(ctx, claim)
    return False


def _failed_launching(name: str, error: Exception) -> LogRecord:
    return LogRecord(
        "failed launching nodeclaim",
        {"NodeClaim": {"name": name}, "error": str(error)},
        level="ERROR",
        logger=LIFECYCLE,
    )


def _launch(ctx: ClusterContext, claim: Obj) -> bool:
    name = claim["metadata"]["name"]
    try:
        launched = ctx.cloud.create(claim)
    except NodeClassNotReadyError as error:
        # Karpenter logs it and deletes the NodeClaim; no event (it is not a capacity error).
        ctx.log(_failed_launching(name, error))
        ctx.nodeclaim_pods.pop(name, None)
        ctx.api.delete("NodeClaim", name)
        return True
    except InsufficientCapacityError as error:
        ctx.event(claim, "Warning", "InsufficientCapacityError", f"NodeClaim {name} event: {error}")
        _tell_pods_no_capacity(ctx, name, error)
        ctx.log(_failed_launching(name, error))
        claim["metadata"]["finalizers"] = []
        ctx.api.delete("NodeClaim", name)
        return True
    except Exception as error:
        # launch.go: any other failure is told on the Launched condition (whose time the launch timeout counts
        # from), then returned as the reconcile's error.
        if set_claim_condition(claim, "Launched", "Unknown", ctx.now, "LaunchFailed", _truncated(str(error))):
            ctx.api.update(claim)
        raise
    ctx.nodeclaim_pods.pop(name, None)
    claim["metadata"]["labels"] = dict(launched.labels)
    claim["metadata"].setdefault("annotations", {})[wk.PRICE] = repr(launched.price)
    claim["status"].update(
        providerID=launched.provider_id,
        capacity=dict(launched.capacity),
        allocatable=dict(launched.allocatable),
        imageID=launched.image_id,
    )
    set_claim_condition(claim, "Launched", "True", ctx.now, "Launched")
    set_claim_condition(claim, "Registered", "Unknown", ctx.now, "AwaitingReconciliation")
    set_claim_condition(claim, "Initialized", "Unknown", ctx.now, "AwaitingReconciliation")
    set_claim_condition(claim, "Ready", "Unknown", ctx.now, "AwaitingReconciliation")
    ctx.api.update(claim)
    ctx.log(
        LogRecord(
            "launched nodeclaim",
            {
                "NodeClaim": {"name": name},
                "provider-id": launched.provider_id,
                "instance-type": launched.instance_type,
                "zone": launched.zone,
                "capacity-type": launched.capacity_type,
                "allocatable": dict(launched.allocatable),
            },
            logger=LIFECYCLE,
        )
    )
    ctx.event(
        claim, "Normal", "Launched", "Status condition transitioned, Type: Launched, Status: True, Reason: Launched"
    )
    return True


def _truncated(message: str) -> str:
    """launch.go's truncateMessage: a condition message of at most 1024 characters, a cut one ending in "..."."""
    return message if len(message) <= 1024 else message[:1021] + "..."


def _tell_pods_no_capacity(ctx: ClusterContext, name: str, error: Exception) -> None:
    """publishPodInsufficientCapacityEvents: each pod the NodeClaim was planned for, while still unscheduled and
    alive, is told (its UID the dedupe value, one shared rate limit)."""
    for key in ctx.nodeclaim_pods.pop(name, []):
        namespace, _, pod_name = key.partition("/")
        pod = ctx.api.get("Pod", pod_name, namespace)  # a CapacityBuffer's virtual pod is never found
        if pod is None or (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        # The dedupe entry is taken before the rate limiter is asked, as Karpenter's recorder does.
        if ctx.admits("InsufficientCapacityError", "Pod", pod_name, namespace, ctx.ice_pod_events):
            message = f"NodeClaim {name} nominated for this pod failed to launch: {error}"
            ctx.event(pod, "Warning", "InsufficientCapacityError", message)


def node_of(ctx: ClusterContext, claim: Obj) -> Obj | None:
    """The Node with the NodeClaim's providerID, or None before its launch. Looked up first by the name it
    registered, else by the providerID's last part (kwok's `kwok://<node name>`), else by providerID (indexed)."""
    status = claim.get("status") or {}
    provider_id = status.get("providerID")
    if not provider_id:
        return None
    node = ctx.api.get("Node", status.get("nodeName") or str(provider_id).rsplit("/", 1)[-1])
    if node is not None and (node.get("spec") or {}).get("providerID") == provider_id:
        return node
    return next(iter(ctx.api.list("Node", fields={"spec.providerID": str(provider_id)})), None)


def _time_out(ctx: ClusterContext, claim: Obj, outcomes: LaunchOutcomes, timeout: float, reason: str) -> bool:
    """Karpenter's deleteNodeClaimForTimeout: the NodePool hears of the failure, the NodeClaim is deleted (its pods
    get another at the next provisioning run)."""
    outcomes.timed_out(ctx, claim)
    ctx.api.delete("NodeClaim", claim["metadata"]["name"])
    ctx.log(
        LogRecord(
            "terminating due to timeout",
            {"NodeClaim": {"name": claim["metadata"]["name"]}, "timeout": go_duration(timeout), "reason": reason},
            level="DEBUG",
            logger=LIFECYCLE,
        )
    )
    return True


def _register(ctx: ClusterContext, claim: Obj, outcomes: LaunchOutcomes) -> bool:
    """Karpenter's registration.go: find the one Node with the NodeClaim's providerID, sync the NodeClaim onto it,
    lift the unregistered taint and mark it registered."""
    name = claim["metadata"]["name"]
    due = ctx.cloud.registered_by(claim)
    node = node_of(ctx, claim) if due is None or ctx.now >= due else None
    if node is None:
        # The instance has not registered its Node yet.
        if set_claim_condition(
            claim, "Registered", "Unknown", ctx.now, "NodeNotFound", "Node not registered with cluster"
        ):
            ctx.api.update(claim)
            return True
        return False
    provider_id = claim["status"]["providerID"]
    if len(ctx.api.list("Node", fields={"spec.providerID": provider_id})) > 1:
        if set_claim_condition(
            claim, "Registered", "False", ctx.now, "MultipleNodesFound", "Invariant violated, matched multiple nodes"
        ):
            ctx.api.update(claim)
            return True
        return False
    labels = node["metadata"].get("labels") or {}
    if wk.REGISTERED not in labels and not any(_is_unregistered(t) for t in node["spec"].get("taints") or []):
        # The taint keeps pods off a Node until Karpenter has synced it; without it, registration goes on but
        # says so (registration.go, UnregisteredTaintMissingEvent).
        ctx.log(
            LogRecord(
                "node claim registration error",
                {
                    "NodeClaim": {"name": name},
                    "error": "missing taint prevents registration-related race conditions on Karpenter-managed nodes",
                    "taint": UNREGISTERED,
                },
                level="ERROR",
                logger=LIFECYCLE,
            )
        )
        if ctx.publishes(UNREGISTERED_TAINT_MISSING, "NodeClaim", name):
            ctx.publish(
                claim,
                "Warning",
                UNREGISTERED_TAINT_MISSING,
                f"Missing {UNREGISTERED} taint which prevents registration related race conditions on "
                "Karpenter-managed nodes",
            )
    _sync_node(claim, node)
    node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if not _is_unregistered(t)]
    node["metadata"]["labels"][wk.REGISTERED] = "true"
    ctx.api.update(node)
    claim["status"]["nodeName"] = node["metadata"]["name"]
    set_claim_condition(claim, "Registered", "True", ctx.now, "Registered")
    ctx.api.update(claim)
    outcomes.registered(ctx, claim)
    ctx.log(
        LogRecord(
            "registered nodeclaim",
            {"NodeClaim": {"name": name}, "Node": {"name": node["metadata"]["name"]}},
            logger=LIFECYCLE,
        )
    )
    return True


def _is_unregistered(taint: Obj) -> bool:
    """MatchTaint against karpenter.sh/unregistered:NoExecute: the key and the effect, whatever the value."""
    return bool(taint.get("key") == UNREGISTERED and taint.get("effect") == "NoExecute")


def _merge_taints(taints: list[Obj], more: list[Obj]) -> list[Obj]:
    """scheduling.Taints.Merge: each taint of `more` whose key and effect no taint has yet, added after them."""
    merged = list(taints)
    for taint in more:
        if not any(t.get("key") == taint.get("key") and t.get("effect") == taint.get("effect") for t in merged):
            merged.append(taint)
    return merged


def _sync_node(claim: Obj, node: Obj) -> None:
    """registration.go's syncNode: the termination finalizer, the NodeClaim as an owner, its taints and startup taints
    (unless the Node is labelled karpenter.sh/do-not-sync-taints=true, a provider that manages taints itself), its
    annotations (a NodePool template's karpenter.sh/do-not-disrupt protects the Node) and its labels."""
    meta = node["metadata"]
    if TERMINATION_FINALIZER not in (meta.get("finalizers") or []):
        meta["finalizers"] = [*(meta.get("finalizers") or []), TERMINATION_FINALIZER]
    uid = claim["metadata"].get("uid")
    owners = list(meta.get("ownerReferences") or [])
    if not any(
        o.get("apiVersion") == "karpenter.sh/v1" and o.get("kind") == "NodeClaim" and o.get("uid") == uid
        for o in owners
    ):
        owners.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "name": claim["metadata"]["name"],
                "uid": uid,
                "blockOwnerDeletion": True,
            }
        )
        meta["ownerReferences"] = owners
    if (meta.get("labels") or {}).get(DO_NOT_SYNC_TAINTS) != "true":
        taints = _merge_taints(list(node["spec"].get("taints") or []), list(claim["spec"].get("taints") or []))
        node["spec"]["taints"] = _merge_taints(taints, list(claim["spec"].get("startupTaints") or []))
    meta["annotations"] = {**(meta.get("annotations") or {}), **(claim["metadata"].get("annotations") or {})}
    meta["labels"] = {**(meta.get("labels") or {}), **(claim["metadata"].get("labels") or {})}


def _not_initialized_because(ctx: ClusterContext, claim: Obj, node: Obj | None) -> tuple[str, str] | None:
    """The (reason, message) Karpenter's initialization.go gives for a registered NodeClaim not being Initialized
    yet, in its order: no Node, a Node not Ready, a startup taint or a known ephemeral taint still on it, a resource
    the NodeClaim requested that it does not offer, a requested DRA driver without a complete pool on it."""
    if node is None:
        return "NodeNotFound", "Node not registered with cluster"
    if not is_ready(node):
        return "NodeNotReady", "Node status is NotReady"
    taints = node["spec"].get("taints") or []
    for startup in claim["spec"].get("startupTaints") or []:
        for spec in taints:
            if spec.get("key") == startup.get("key") and spec.get("effect") == startup.get("effect"):
                return "StartupTaintsExist", f'StartupTaint "{Taint.from_spec(spec)}" still exists'
    for spec in taints:
        taint = Taint.from_spec(spec)
        if is_known_ephemeral(taint):
            return "KnownEphemeralTaintsExist", f'KnownEphemeralTaint "{taint}" still exists'
    allocatable = node.get("status", {}).get("allocatable") or {}
    for name, quantity in ((claim["spec"].get("resources") or {}).get("requests") or {}).items():
        if parse_quantity(str(quantity)) != 0 and parse_quantity(str(allocatable.get(name, "0"))) == 0:
            return "ResourceNotRegistered", f'Resource "{name}" was requested but not registered'
    if not ctx.options.ignore_dra_requests:
        missing = _driver_without_complete_pool(ctx, claim, node["metadata"]["name"])
        if missing is not None:
            return "DRADriverPoolsNotPublished", f'DRA driver "{missing}" has not published a complete resource pool'
    return None


def _driver_without_complete_pool(ctx: ClusterContext, claim: Obj, node_name: str) -> str | None:
    """initialization.go's DRADriversPublished: the first driver the requested-dra-drivers annotation names that has
    no complete pool among the Node's ResourceSlices (those naming it in spec.nodeName or owned by it). A pool is
    complete when its slices at its highest generation number its declared resourceSliceCount."""
    annotation = str((claim["metadata"].get("annotations") or {}).get(DRA_DRIVERS, "")).strip()
    if not annotation:
        return None
    pools: dict[tuple[str, str], tuple[int, int, int]] = {}  # (driver, pool) -> (generation, declared, observed)
    for item in ctx.api.scan("ResourceSlice"):
        spec = item.get("spec") or {}
        owned = any(
            o.get("kind") == "Node" and o.get("name") == node_name
            for o in item["metadata"].get("ownerReferences") or []
        )
        if spec.get("nodeName") != node_name and not owned:
            continue
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        generation, declared = int(pool.get("generation", 0)), int(pool.get("resourceSliceCount", 0))
        seen = pools.get(key)
        if seen is None or generation > seen[0]:
            pools[key] = (generation, declared, 1)
        elif generation == seen[0]:
            pools[key] = (seen[0], seen[1], seen[2] + 1)
    complete = {
        driver for (driver, _), (_, declared, observed) in pools.items() if declared > 0 and observed == declared
    }
    for driver in annotation.split(","):
        if driver.strip() and driver.strip() not in complete:
            return driver.strip()
    return None


def _initialize(ctx: ClusterContext, claim: Obj) -> bool:
    node = ctx.api.get("Node", claim["status"].get("nodeName", ""))
    # Karpenter's checks, in its order: e.g. a Ready node still tainted not-ready (kube-controller-manager lifts the
    # taint a moment after the kubelet reports Ready) takes no pods yet, and an initialized NodeClaim would make the
    # provisioner count on it at once, launching a second node for its pods.
    waiting = _not_initialized_because(ctx, claim, node)
    if waiting is not None or node is None:
        if waiting is not None and set_claim_condition(claim, "Initialized", "Unknown", ctx.now, *waiting):
            ctx.api.update(claim)
            return True
        return False
    node["metadata"]["labels"][wk.INITIALIZED] = "true"
    ctx.api.update(node)
    set_claim_condition(claim, "Initialized", "True", ctx.now, "Initialized")
    set_claim_condition(claim, "Ready", "True", ctx.now, "Ready")
    ctx.api.update(claim)
    ctx.log(
        LogRecord(
            "initialized nodeclaim",
            {
                "NodeClaim": {"name": claim["metadata"]["name"]},
                "Node": {"name": node["metadata"]["name"]},
                "allocatable": node["status"].get("allocatable"),
            },
            logger=LIFECYCLE,
        )
    )
    return True


def _annotate_termination(ctx: ClusterContext, claim: Obj) -> bool:
    """Karpenter's annotateTerminationGracePeriod: a deleting NodeClaim with a terminationGracePeriod is stamped with
    when its drain stops waiting (deletionTimestamp + the period), once, and says so (a Warning on it)."""
    annotations = claim["metadata"].get("annotations") or {}
    deadline = grace_deadline(claim)  # deletionTimestamp + the period, the annotation being absent
    if wk.TERMINATION_TIMESTAMP in annotations or deadline is None:
        return False
    stamp = timestamp(deadline)
    claim["metadata"]["annotations"] = {**annotations, wk.TERMINATION_TIMESTAMP: stamp}
    ctx.api.update(claim)
    name = claim["metadata"]["name"]
    ctx.log(
        LogRecord(
            "annotated nodeclaim", {"NodeClaim": {"name": name}, wk.TERMINATION_TIMESTAMP: stamp}, logger=LIFECYCLE
        )
    )
    ctx.event(claim, "Warning", GRACE_EXPIRING, f"All pods will be deleted by {stamp}")
    return True


def _finalize(ctx: ClusterContext, claim: Obj) -> bool:
    """Once termination has drained the Node, delete the instance (its Node goes with it), then release the
    NodeClaim. Pods left on the Node (DaemonSets, pods tolerating the disruption taint) are removed by the
    cluster's pod garbage collector once the Node is gone. A NodeClaim that never registered has no Node of its own
    to drain: its instance is deleted at once (controller.go:213), and one never launched has none to delete."""
    name = claim["metadata"]["name"]
    node = node_of(ctx, claim)
    node_name = node["metadata"]["name"] if node is not None else ""
    if node is not None and is_true(claim, "Registered"):
        drained = (node["metadata"].get("annotations") or {}).get(wk.DRAINED) == "true"
        if not drained and is_ready(node):
            return False  # the termination controller is still draining
    if (claim.get("status") or {}).get("providerID"):
        with contextlib.suppress(NodeClaimNotFoundError):  # already gone: deleting it again is done
            ctx.cloud.delete(claim)
        if set_claim_condition(claim, INSTANCE_TERMINATING, "True", ctx.now, INSTANCE_TERMINATING):
            ctx.api.update(claim)
    if node is not None:
        node = ctx.api.get("Node", node["metadata"]["name"])
        if node is not None:
            held = TERMINATION_FINALIZER in (node["metadata"].get("finalizers") or [])
            ctx.api.remove_finalizer(node, TERMINATION_FINALIZER)
            if held:  # Karpenter's termination controller says so once it has let the Node go
                ctx.log(LogRecord("deleted node", {"Node": {"name": node_name}}, logger=TERMINATION_LOGGER))
    if TERMINATION_FINALIZER in (claim["metadata"].get("finalizers") or []):
        ctx.api.remove_finalizer(claim, TERMINATION_FINALIZER)
        ctx.log(
            LogRecord(
                "deleted nodeclaim",
                {"NodeClaim": {"name": name}, "Node": {"name": node_name}},
                logger=LIFECYCLE,
            )
        )
        return True
    return node is not None


def _nodes_without_claims(ctx: ClusterContext) -> bool:
    """`karp delete node` on a Karpenter node deletes its NodeClaim too (the termination controller's rule: the
    NodeClaims with the Node's providerID)."""
    changed = False
    claims = {
        c["status"]["providerID"]: c for c in ctx.api.list("NodeClaim") if (c.get("status") or {}).get("providerID")
    }
    for node in ctx.api.list("Node"):
        provider_id = (node.get("spec") or {}).get("providerID")
        if node["metadata"].get("deletionTimestamp") and provider_id in claims:
            claim = claims[provider_id]
            if not claim["metadata"].get("deletionTimestamp"):
                ctx.api.delete("NodeClaim", claim["metadata"]["name"])
                changed = True
    return changed
