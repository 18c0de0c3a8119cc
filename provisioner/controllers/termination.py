"""The termination controller: a NodeClaim being deleted has its Node tainted and drained through the eviction API
(PDBs answer 429 and the drain retries each pod with back-off), in Karpenter's order — ordinary pods, then DaemonSet
pods, then critical ones — before the lifecycle controller deletes the instance. A terminationGracePeriod forces
the end."""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import condition, set_claim_condition
from provisioner.cluster.objects import APIError, Obj, TooManyRequests, parse_timestamp
from provisioner.controllers.context import ClusterContext, doubling_delay
from provisioner.disruption.candidates import pod_blocks
from provisioner.durations import parse_duration
from provisioner.scheduling.logs import LogRecord
from provisioner.taints import DISRUPTED, Taint, Toleration, has_disrupted_taint

DISRUPTED_TAINT = Taint(DISRUPTED, "NoSchedule")

DRAIN_RETRY_SECONDS = 1.0
# Karpenter's eviction queue retries a refused pod after 100 ms, doubling each time, at most every 10 s
# (evictionQueueBaseDelay, evictionQueueMaxDelay): a PDB that stays shut costs an eviction every 10 s, not every
# second, and one that opens soon is found open at once. On the controller's clock, so the lab stays deterministic.
EVICTION_RETRY_SECONDS = 0.1
EVICTION_RETRY_MAX_SECONDS = 10.0
MIN_DRAIN_SECONDS = 5.0
# A pod deleted longer ago than this no longer holds its node's drain (IsStuckTerminating).
STUCK_TERMINATING_SECONDS = 60.0
CRITICAL = ("system-cluster-critical", "system-node-critical")
LOGGER = "controller.node.termination"
# The NodeClaim status conditions termination sets (Karpenter v1.2 / v1.6).
DRAINED, VOLUMES_DETACHED, INSTANCE_TERMINATING = "Drained", "VolumesDetached", "InstanceTerminating"
EXCLUDE_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"
TERMINATION_FINALIZER = "karpenter.sh/termination"
# The node classes karpui's cloud providers launch (Karpenter's GetSupportedNodeClasses); a NodeClaim or Node of any
# other is another Karpenter's, and is left alone (nodeclaimutils.IsManaged, nodeutils.IsManaged).
MANAGED_NODE_CLASSES = frozenset({("karpenter.kwok.sh", "KWOKNodeClass"), ("karpenter.k8s.aws", "EC2NodeClass")})


def taint_disrupted(
    ctx: ClusterContext, node: Obj, logger: str | None, *, leaving_load_balancers: bool = False
) -> bool:
    """Add `karpenter.sh/disrupted:NoSchedule` (once) so nothing new lands on a node that is going; True if the node
    changed. A node being terminated also leaves external load balancers, as Karpenter's termination marks it, and
    says "tainted node" whenever it changed the node, as Karpenter's terminator does (the disruption controller's
    taint before it, logged by no one, leaves the label to add)."""
    tainted = has_disrupted_taint(node)
    labels = node["metadata"].get("labels") or {}
    leaving = not leaving_load_balancers or labels.get(EXCLUDE_BALANCERS) == "karpenter"
    if tainted and leaving:
        return False
    if not tainted:
        node["spec"].setdefault("taints", []).append({"key": DISRUPTED, "effect": "NoSchedule"})
    if not leaving:
        node["metadata"].setdefault("labels", {})[EXCLUDE_BALANCERS] = "karpenter"
    ctx.api.update(node)
    if logger is None:
        return True
    ctx.log(
        LogRecord(
            "tainted node",
            {"Node": {"name": node["metadata"]["name"]}, "taint.Key": DISRUPTED, "taint.Effect": "NoSchedule"},
            logger=logger,
        )
    )
    return True


# The NodeClaim condition a disruption command's candidates carry while it runs, its reason the command's.
DISRUPTION_REASON = "DisruptionReason"
FORCEFUL_TERMINATION = "Forceful Termination"  # why a pod of any other deleted NodeClaim is evicted
FAILED_DRAINING = "FailedDraining"

# The Warning a deleting NodeClaim with a terminationGracePeriod, and its Node, carry: when the drain stops waiting.
GRACE_EXPIRING = "TerminationGracePeriodExpiring"


def eviction_delay(refusals: int) -> float:
    """How long after its `refusals`-th refusal in a row a pod's eviction is tried again."""
    return doubling_delay(EVICTION_RETRY_SECONDS, EVICTION_RETRY_MAX_SECONDS, refusals)


def grace_deadline(claim: Obj) -> float | None:
    """When the drain stops waiting: the NodeClaim's termination timestamp (Karpenter's
    karpenter.sh/nodeclaim-termination-timestamp, which a repair sets to its own moment), or else deletionTimestamp +
    spec.terminationGracePeriod, when it has one."""
    deleted = claim["metadata"].get("deletionTimestamp")
    stamp = (claim["metadata"].get("annotations") or {}).get(wk.TERMINATION_TIMESTAMP)
    if deleted and stamp:
        with suppress(ValueError):
            return parse_timestamp(stamp)
    grace = (claim.get("spec") or {}).get("terminationGracePeriod")
    if not grace or not deleted:
        return None
    return parse_timestamp(deleted) + (parse_duration(grace) or 0)


class TerminationController:
    """Drains the Nodes of deleting NodeClaims, at least five seconds each: a pass over a node's pods every second,
    and whenever a refused pod's back-off ends."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.draining: dict[str, float] = dict(state.get("draining") or {})
        self.drained_at: dict[str, float] = dict(state.get("drained_at") or {})
        # Pods whose eviction was refused, by uid: [node, refusals in a row, when to try again].
        self.refused: dict[str, list[Any]] = {uid: list(entry) for uid, entry in (state.get("refused") or {}).items()}

    def to_state(self) -> dict[str, Any]:
        return {
            "draining": self.draining,
            "drained_at": {n: t for n, t in self.drained_at.items() if n in self.draining},
            "refused": {uid: entry for uid, entry in self.refused.items() if entry[0] in self.draining},
        }

    def _retry_due(self, node: str, now: float) -> bool:
        return any(entry[0] == node and entry[2] <= now for entry in self.refused.values())

    def next_due(self, ctx: ClusterContext) -> list[float]:
        versions = (ctx.api.kind_version("NodeClaim"), ctx.api.kind_version("Pod"))
        times = list(ctx.memo("termination/force-deletions", versions, lambda: _force_deletions(ctx)))
        for node, started in self.draining.items():
            times.append(self.drained_at.get(node, ctx.now) + DRAIN_RETRY_SECONDS)
            times.append(started + MIN_DRAIN_SECONDS)
        times.extend(entry[2] for entry in self.refused.values() if entry[0] in self.draining)
        return times

    def reconcile(self, ctx: ClusterContext) -> bool:
        changed = False
        deleting = ctx.memo(
            "termination/deleting",
            ctx.api.kind_version("NodeClaim"),
            lambda: [c for c in ctx.api.list("NodeClaim") if c["metadata"].get("deletionTimestamp")],
        )
        for claim in deleting:
            if ctx.backing_off("node.termination", claim):
                continue
            with ctx.guard("node.termination", claim):
                changed |= self._terminate(ctx, claim)
        orphans = ctx.memo(
            "termination/orphans",
            (ctx.api.kind_version("Node"), ctx.api.kind_version("NodeClaim")),
            lambda: _deleting_nodes_without_one_claim(ctx),
        )
        for node in orphans:
            if ctx.backing_off("node.termination", node):
                continue
            with ctx.guard("node.termination", node):
                changed |= self._terminate_alone(ctx, node)
        return changed

    def _terminate_alone(self, ctx: ClusterContext, node: Obj) -> bool:
        """A deleted Node of this Karpenter with no NodeClaim, or several (no single source of truth): Karpenter's
        finalize drains it as any other and lets it go, with no minimum drain time and no instance to terminate
        (node/termination/controller.go:101-115, 288-290)."""
        current = ctx.api.get("Node", node["metadata"]["name"])
        if current is None or TERMINATION_FINALIZER not in (current["metadata"].get("finalizers") or []):
            return False
        name = current["metadata"]["name"]
        changed = taint_disrupted(ctx, current, LOGGER, leaving_load_balancers=True)
        # No single NodeClaim to read a DisruptionReason from: Karpenter's evictionReason fails its lookup and says
        # nothing (terminator/eviction.go:368-372), so the pod is told "Evicted pod: ".
        waiting, evicted = self._drain_step(ctx, name, reason="")
        if waiting:
            return changed or evicted
        self.refused = {uid: entry for uid, entry in self.refused.items() if entry[0] != name}
        ctx.api.remove_finalizer(ctx.api.must_get("Node", name), TERMINATION_FINALIZER)
        ctx.log(LogRecord("deleted node", {"Node": {"name": name}}, logger=LOGGER))
        return True

    def _terminate(self, ctx: ClusterContext, claim: Obj) -> bool:
        """One drain pass over the Node of a deleting NodeClaim; True if anything changed."""
        node = ctx.api.get("Node", (claim.get("status") or {}).get("nodeName") or "")
        if node is None:
            return False
        stamp = (claim["metadata"].get("annotations") or {}).get(wk.TERMINATION_TIMESTAMP)
        if stamp:
            # Karpenter's nodeTerminationTime, read at every reconcile of the Node until it is gone.
            message = f"All pods will be deleted by {stamp}"
            ctx.publish(node, "Warning", GRACE_EXPIRING, message)
        if node["metadata"].get("annotations", {}).get(wk.DRAINED) == "true":
            return False
        name = node["metadata"]["name"]
        changed = taint_disrupted(ctx, node, LOGGER, leaving_load_balancers=True)
        if condition(claim, DRAINED) is None:
            # Karpenter's awaitDrain: the NodeClaim says it is draining from the first pass on.
            set_claim_condition(claim, DRAINED, "Unknown", ctx.now, "Draining", "Draining")
            ctx.api.update(claim)
            changed = True
        started = self.draining.setdefault(name, ctx.now)
        recheck = self.drained_at.get(name, -DRAIN_RETRY_SECONDS) + DRAIN_RETRY_SECONDS <= ctx.now
        if not recheck and not self._retry_due(name, ctx.now):
            return changed  # a pass per node per second, as Karpenter requeues, and when a pod's back-off ends
        self.drained_at[name] = ctx.now
        waiting, evicted = self._drain_step(ctx, name, grace_deadline(claim), eviction_reason(claim))
        if waiting or ctx.now - started < MIN_DRAIN_SECONDS:
            return changed or evicted
        node["metadata"].setdefault("annotations", {})[wk.DRAINED] = "true"
        ctx.api.update(node)
        # Drained, then awaitVolumeDetachment: the lab attaches no volumes, so none is left to wait for.
        set_claim_condition(claim, DRAINED, "True", ctx.now, DRAINED)
        set_claim_condition(claim, VOLUMES_DETACHED, "True", ctx.now, VOLUMES_DETACHED)
        ctx.api.update(claim)
        self.draining.pop(name, None)
        self.drained_at.pop(name, None)  # as to_state keeps it: only for nodes still draining
        self.refused = {uid: entry for uid, entry in self.refused.items() if entry[0] != name}
        return True

    def _drain_step(
        self, ctx: ClusterContext, node: str, deadline: float | None = None, reason: str = FORCEFUL_TERMINATION
    ) -> tuple[int, bool]:
        """Evict the first non-empty tier of pods: (how many pods still have to go, some pod was evicted now).

        With a terminationGracePeriod, a pod is deleted regardless of PDBs and do-not-disrupt once
        `now > deadline - its terminationGracePeriodSeconds`, and such pods are not held behind earlier tiers.
        """
        pods = [p for p in ctx.api.list("Pod", fields={"spec.nodeName": node}) if _waiting_eviction(p, ctx.now)]
        present = {p["metadata"].get("uid") for p in pods if not p["metadata"].get("deletionTimestamp")}
        for uid in [uid for uid, entry in self.refused.items() if entry[0] == node and uid not in present]:
            del self.refused[uid]  # gone (or terminating): nothing left to retry
        if not pods:
            return 0, False
        waiting = len(pods)
        evicted = False
        # Karpenter's Drain enqueues the pods and its controller tells the Node at once (termination/controller.go:
        # 207-211), before the eviction queue gets to a pod: a PDB's refusal below, published under the same reason
        # and Node, is the one the 2-minute dedupe drops. A Node with no NodeClaim is told too.
        node_obj = ctx.api.get("Node", node)
        if node_obj is not None:
            message = f"Failed to drain node, {waiting} pods are waiting to be evicted"
            ctx.publish(node_obj, "Warning", FAILED_DRAINING, message)
        if deadline is not None:
            for pod in [p for p in pods if not p["metadata"].get("deletionTimestamp")]:
                grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30) or 0)
                if ctx.now > deadline - grace:
                    # DisruptPodDelete's DedupeValues: the pod's name (terminator/events/events.go:44-52).
                    message = _deleting_message(deadline, ctx.now, grace)
                    ctx.publish(pod, "Normal", "Disrupted", message, dedupe_values=[pod["metadata"]["name"]])
                    # The pod's grace clamped to what is left of the node's, at least 1 s: 0 would remove it from
                    # etcd before its containers stop (eviction.go:332-340).
                    ctx.api.delete(
                        "Pod",
                        pod["metadata"]["name"],
                        pod["metadata"]["namespace"],
                        grace_period_seconds=granted_grace(deadline, ctx.now),
                    )
                    pods.remove(pod)
                    evicted = True
            if not pods:
                return 0, evicted
        first = min(_tier(p) for p in pods)
        evicting = []
        for pod in [p for p in pods if _tier(p) == first]:
            if pod["metadata"].get("deletionTimestamp"):
                continue  # going already: waited on until it is gone, as Karpenter's drain does
            if pod_blocks(ctx.views.pod(pod), ctx.now):
                continue  # do-not-disrupt pods are waited on, never evicted (until a grace period ends)
            backing_off = self.refused.get(pod["metadata"].get("uid", ""))
            if backing_off is None or backing_off[2] <= ctx.now:
                evicting.append(pod)
        failed: APIError | None = None  # an error other than a PDB's refusal: raised once every outcome is told
        for pod, outcome in zip(evicting, ctx.api.evict_all(evicting), strict=True):
            uid = pod["metadata"].get("uid", "")
            backing_off = self.refused.get(uid)
            if isinstance(outcome, TooManyRequests):
                refusals = (backing_off[1] if backing_off is not None else 0) + 1
                self.refused[uid] = [node, refusals, ctx.now + eviction_delay(refusals)]
                # Karpenter tells it on the Node, in its words, naming the pod.
                why = (
                    "eviction does not support multiple PDBs"
                    if "more than one" in str(outcome)
                    else "evicting pod violates a PDB"
                )
                message = f"Failed to drain node, {why} (Pod={pod['metadata']['namespace']}/{pod['metadata']['name']})"
                if node_obj is not None:
                    ctx.publish(node_obj, "Warning", FAILED_DRAINING, message)
            elif outcome is not None:
                failed = failed or outcome
            else:
                self.refused.pop(uid, None)
                evicted = True
                # EvictPod's DedupeValues: the pod's name (terminator/events/events.go:33-41), so a StatefulSet's pod
                # evicted again under the same name within 2 minutes is told once.
                ctx.publish(pod, "Normal", "Evicted", f"Evicted pod: {reason}", dedupe_values=[pod["metadata"]["name"]])
        if failed is not None:
            raise failed
        return waiting, evicted


def managed_node(node: Obj) -> bool:
    """nodeutils.IsManaged: the Node carries the label of a node class this Karpenter launches (group/kind)."""
    labels = node["metadata"].get("labels") or {}
    return any(f"{group}/{kind.lower()}" in labels for group, kind in MANAGED_NODE_CLASSES)


def _deleting_nodes_without_one_claim(ctx: ClusterContext) -> list[Obj]:
    deleting = [
        n
        for n in ctx.api.scan("Node")
        if n["metadata"].get("deletionTimestamp")
        and TERMINATION_FINALIZER in (n["metadata"].get("finalizers") or [])
        and managed_node(n)
    ]
    if not deleting:
        return []
    claims: dict[str, int] = {}
    for claim in ctx.api.scan("NodeClaim"):
        provider_id = (claim.get("status") or {}).get("providerID")
        if provider_id:
            claims[provider_id] = claims.get(provider_id, 0) + 1
    return [n for n in deleting if claims.get((n.get("spec") or {}).get("providerID") or "", 0) != 1]


def eviction_reason(claim: Obj) -> str:
    """What an evicted pod is told it was evicted for (Karpenter's evictionReason): the reason of its NodeClaim's
    DisruptionReason condition, or a forceful termination (a NodeClaim deleted by hand, expired, repaired)."""
    held = condition(claim, DISRUPTION_REASON)
    return held["reason"] if held is not None and held.get("status") == "True" else FORCEFUL_TERMINATION


def granted_grace(deadline: float, now: float) -> int:
    """forceDelete's gracePeriodSeconds (eviction.go:335): the whole seconds left until the node's deadline, at
    least 1."""
    return max(int(deadline - now), 1)


def _deleting_message(deadline: float, now: float, grace: int) -> str:
    """DisruptPodDelete's words: the node's deadline as Go prints a time, and the grace the pod is deleted with."""
    granted = granted_grace(deadline, now)
    at = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    return (
        f"Deleting the pod to accommodate the terminationTime {at} of the node. The pod was granted {granted} seconds "
        f"of grace-period of its {grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
        "do-not-disrupt annotation."
    )


def _force_deletions(ctx: ClusterContext) -> list[float]:
    """When each pod on a node whose NodeClaim has a terminationGracePeriod may be force-deleted."""
    times = []
    for claim in ctx.api.list("NodeClaim"):
        deadline = grace_deadline(claim)
        node_name = (claim.get("status") or {}).get("nodeName")
        if deadline is not None and node_name:
            for pod in ctx.api.list("Pod", fields={"spec.nodeName": node_name}):
                grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30) or 0)
                times.append(deadline - grace + 0.001)  # the moment it may be force-deleted
    return times


def _tier(pod: Obj) -> int:
    """Karpenter's drain order: ordinary pods, then DaemonSet pods, then critical ones, then critical DaemonSets."""
    # IsOwnedByDaemonSet: any owner reference to an apps/v1 DaemonSet (a CRD's "DaemonSet" is an ordinary owner).
    owners = pod["metadata"].get("ownerReferences") or []
    daemon = any(o.get("kind") == "DaemonSet" and o.get("apiVersion", "apps/v1") == "apps/v1" for o in owners)
    critical = pod["spec"].get("priorityClassName") in CRITICAL
    return (2 if critical else 0) + (1 if daemon else 0)


def _waiting_eviction(pod: Obj, now: float) -> bool:
    """Karpenter's IsWaitingEviction (utils/pod/scheduling.go:69-86): a pod the drain waits for is not terminal, does
    not tolerate the disrupted taint, is not a mirror pod (owned by its Node, which only the kubelet can delete) and
    is not stuck terminating (deleted more than a minute ago); a pod terminating for less is waited on."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or _tolerates_disrupted(pod):
        return False
    if any(
        o.get("kind") == "Node" and o.get("apiVersion") == "v1" for o in pod["metadata"].get("ownerReferences") or []
    ):
        return False
    deleted = pod["metadata"].get("deletionTimestamp")
    return not deleted or now - parse_timestamp(deleted) <= STUCK_TERMINATING_SECONDS


def _tolerates_disrupted(pod: Obj) -> bool:
    """ToleratesDisruptedNoScheduleTaint: Kubernetes' toleration match against karpenter.sh/disrupted:NoSchedule."""
    return any(Toleration.from_spec(t).tolerates(DISRUPTED_TAINT) for t in pod["spec"].get("tolerations") or [])
