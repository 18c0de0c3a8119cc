"""The disruption controller: find commands every 10 s, validate them 15 s later, pass them through the human
gate, and carry them out (taint, launch replacements, wait until they are initialized, delete the candidates).

A command is stored as a `DisruptionCommand` object whose `status.phase` records its life:
Proposed → (validated) → AwaitingApproval → Approved | Denied | Expired, or DryRun, or Rejected (it no longer held
at validation); Approved → Executing → Succeeded | Failed. People approve and deny through karpui's services,
which write `spec.approval` on the object; nothing executes without a validation newer than the decision.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from provisioner import labels as wk
from provisioner.cluster import dra, pdb
from provisioner.cluster.conditions import is_true, set_condition, transition_time
from provisioner.cluster.objects import Obj, TooManyRequests, parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import (
    HASH_VERSION,
    cluster_nodes,
    create_nodeclaim,
    daemonsets,
    nodepool_hash,
)
from provisioner.disruption import logs as disruption_logs
from provisioner.disruption.candidates import build_candidates, pod_blocks
from provisioner.disruption.consolidation import ClusterView, compute
from provisioner.disruption.drift import drift_reason
from provisioner.disruption.methods import PassResult, disruption_pass
from provisioner.disruption.types import ClaimedNode, Command
from provisioner.scheduling.logs import LogRecord
from provisioner.scheduling.results import NodeClaimPlan
from provisioner.scheduling.scheduler import PoolOffer
from provisioner.taints import DISRUPTED

POLL_SECONDS = 10.0
VALIDATION_SECONDS = 15.0
APPROVAL_TTL_SECONDS = 3600.0
REPLACEMENT_TIMEOUT_SECONDS = 600.0
DRAIN_RETRY_SECONDS = 1.0
MIN_DRAIN_SECONDS = 5.0
NOMINATION_SECONDS = 20.0
LIVE_PHASES = ("Proposed", "AwaitingApproval", "Approved", "Executing")
APPROVAL_MODE = "karpui.dev/approval-mode"
APPROVAL_THRESHOLD = "karpui.dev/approval-threshold"
CRITICAL = ("system-cluster-critical", "system-node-critical")


class DisruptionController:
    def __init__(self, state: dict[str, Any]) -> None:
        self.next_poll: float | None = state.get("next_poll")
        self.pod_sets: dict[str, str] = dict(state.get("pod_sets") or {})
        self.draining: dict[str, float] = dict(state.get("draining") or {})
        self.drained_at: dict[str, float] = dict(state.get("drained_at") or {})
        self.last_result: Any = None

    def to_state(self) -> dict[str, Any]:
        return {
            "next_poll": self.next_poll,
            "pod_sets": self.pod_sets,
            "draining": self.draining,
            "drained_at": {n: t for n, t in self.drained_at.items() if n in self.draining},
        }

    def next_due(self, ctx: ClusterContext) -> float | None:
        times = [t for t in (self.next_poll,) if t is not None]
        for command in ctx.store.list("DisruptionCommand"):
            status = command.get("status") or {}
            if status.get("phase") == "Proposed":
                times.append(parse_timestamp(status["validateAt"]))
            elif status.get("phase") == "AwaitingApproval":
                times.append(parse_timestamp(status["expiresAt"]))
            elif status.get("phase") in ("Approved", "Executing"):
                times.append(ctx.now + DRAIN_RETRY_SECONDS)
        for claim in ctx.store.list("NodeClaim"):
            deadline = _grace_deadline(claim)
            node_name = (claim.get("status") or {}).get("nodeName")
            if deadline is not None and node_name:
                for pod in ctx.store.list("Pod"):
                    if pod["spec"].get("nodeName") == node_name:
                        grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30) or 0)
                        times.append(deadline - grace + 0.001)  # the moment it may be force-deleted
        for node, started in self.draining.items():
            times.append(self.drained_at.get(node, ctx.now) + DRAIN_RETRY_SECONDS)
            times.append(started + MIN_DRAIN_SECONDS)
        for claim in ctx.store.list("NodeClaim"):
            expiry = _expiry(ctx, claim)
            if expiry is not None:
                times.append(expiry)
        future = [t for t in times if t > ctx.now]  # a past time is not a wake-up; it must not hide a later one
        return min(future) if future else None

    # The loop ---------------------------------------------------------------------------------------------------

    def reconcile(self, ctx: ClusterContext) -> bool:
        changed = self._track_pod_events(ctx)
        changed |= self._mark_drift(ctx)
        changed |= self._expire(ctx)
        changed |= self._terminate(ctx)
        for command in ctx.store.list("DisruptionCommand"):
            changed |= self._advance_command(ctx, command)
        if self.next_poll is None or ctx.now >= self.next_poll:
            self.next_poll = ctx.now + POLL_SECONDS
            changed |= self._propose(ctx)
        return changed

    def _propose(self, ctx: ClusterContext) -> bool:
        if ctx.paused_until > ctx.now:
            return False
        view, claimed = self.view(ctx)
        if not claimed:
            return False
        busy = {
            c["node"]
            for cmd in ctx.store.list("DisruptionCommand")
            if (cmd.get("status") or {}).get("phase") in LIVE_PHASES
            for c in cmd["spec"]["candidates"]
        }
        view = _without(view, busy)
        nodepools = {np.name: np for np in ctx.nodepools}
        result = disruption_pass(view, nodepools)
        self.last_result = result
        _explain(ctx, claimed, result)
        denied = _denied_fingerprints(ctx)
        created = False
        for command in result.commands:
            fingerprint = _fingerprint(command)
            if fingerprint in denied:
                continue  # a person said no to exactly this; wait until its inputs change
            self._create(ctx, command, fingerprint)
            created = True
        return created

    def view(self, ctx: ClusterContext) -> tuple[ClusterView, list[ClaimedNode]]:
        offers = [PoolOffer(np, types) for np in ctx.nodepools if (types := ctx.instance_types_for(np)) is not None]
        nodes = [_with_claimed_devices(ctx, n) for n in cluster_nodes(ctx)]
        by_name = {n.name: n for n in nodes}
        claimed = []
        for claim in ctx.store.list("NodeClaim"):
            node_name = (claim.get("status") or {}).get("nodeName")
            node_obj = ctx.store.get("Node", node_name) if node_name else None
            if node_obj is None or node_name not in by_name:
                continue
            claimed.append(_claimed(ctx, claim, node_obj, by_name[node_name]))
        pending = [p for p in (ctx.views.pod(o) for o in ctx.store.list("Pod")) if p.is_provisionable()]
        view = ClusterView(
            claimed=claimed,
            nodes=nodes,
            pending=pending,
            pools=offers,
            now=ctx.now,
            pdbs=pdb.policies(ctx.store, ctx.views),
            daemonsets=daemonsets(ctx),
            spot_to_spot=bool(ctx.feature_gates.get("SpotToSpotConsolidation")),
            device_classes=dra.device_classes(ctx.store),
            node_devices=dra.node_inventory(ctx.store, nodes, ctx.catalogs),
        )
        return view, claimed

    # Commands -----------------------------------------------------------------------------------------------------

    def _create(self, ctx: ClusterContext, command: Command, fingerprint: str) -> None:
        name = f"{command.reason.lower()}-{hashlib.sha256(f'{fingerprint}{ctx.now}'.encode()).hexdigest()[:8]}"
        nodepool = next(np for np in ctx.nodepools if np.name == command.candidates[0].claimed.nodepool)
        mode = nodepool.annotations.get(APPROVAL_MODE, "auto")
        threshold = nodepool.annotations.get(APPROVAL_THRESHOLD)
        ctx.store.create(
            {
                "apiVersion": "karpui.dev/v1alpha1",
                "kind": "DisruptionCommand",
                "metadata": {
                    "name": name,
                    "labels": {"karpui.dev/reason": command.reason, "karpui.dev/decision": command.decision},
                },
                "spec": {
                    "reason": command.reason,
                    "method": command.method,
                    "decision": command.decision,
                    "nodepools": command.nodepools,
                    "text": disruption_logs.command_text(command, name),
                    "savings": round(command.savings, 6),
                    "fingerprint": fingerprint,
                    "approvalMode": mode,
                    "approvalThreshold": threshold,
                    "candidates": [_candidate_spec(c) for c in command.candidates],
                    "replacements": [_plan_spec(r) for r in command.replacements],
                    "risks": _risks(ctx, command),
                },
                "status": {
                    "phase": "Proposed",
                    "proposedAt": timestamp(ctx.now),
                    "validateAt": timestamp(ctx.now + VALIDATION_SECONDS),
                },
            }
        )

    def _advance_command(self, ctx: ClusterContext, command: Obj) -> bool:
        status = command["status"]
        phase = status.get("phase")
        approval = command["spec"].get("approval") or {}
        if phase == "Proposed" and ctx.now >= parse_timestamp(status["validateAt"]):
            problem = self._validate(ctx, command)
            if problem:
                return _finish(
                    ctx, command, "Rejected", f"Consolidation rejected: {command['spec']['text']}, reason: {problem}"
                )
            status["validatedAt"] = timestamp(ctx.now)
            return _gate(ctx, command)
        if phase == "AwaitingApproval":
            if approval.get("decision") == "denied":
                return _finish(ctx, command, "Denied", f"denied by {approval.get('by')}: {approval.get('reason')}")
            if approval.get("decision") == "approved":
                status["phase"] = "Approved"
                ctx.store.update(command)
                return True
            problem = self._validate(ctx, command)
            if problem or ctx.now >= parse_timestamp(status["expiresAt"]):
                return _finish(ctx, command, "Expired", f"expired: {problem or 'nobody decided before the deadline'}")
            return False
        if phase == "Approved":
            # The decision may be older than the cluster: check again before touching anything.
            problem = self._validate(ctx, command)
            if problem:
                return _finish(ctx, command, "Expired", f"expired after approval: {problem}")
            return self._start(ctx, command)
        if phase == "Executing":
            return self._execute(ctx, command)
        return False

    def _validate(self, ctx: ClusterContext, command: Obj) -> str | None:
        """Karpenter's validation: every candidate still a candidate within budget, and the same decision holds."""
        view, claimed = self.view(ctx)
        names = [c["node"] for c in command["spec"]["candidates"]]
        candidates, blocked = build_candidates(claimed, {np.name: np for np in ctx.nodepools}, view.pdbs, ctx.now)
        by_name = {c.name: c for c in candidates}
        missing = [n for n in names if n not in by_name]
        if missing:
            why = "; ".join(blocked.get(missing[0], []) or ["node is gone"])
            return f"churn ({missing[0]}: {why})"
        if command["spec"]["reason"] == "Empty":
            busy = [n for n in names if by_name[n].pods]
            return f"churn ({busy[0]} is no longer empty)" if busy else None
        if command["spec"]["reason"] in ("Drifted", "Manual"):
            return None  # eventual or requested: the pods go wherever the provisioner puts them
        outcome = compute([by_name[n] for n in names], view, command["spec"]["method"], command["spec"]["reason"])
        if not isinstance(outcome, Command):
            return f"scheduling ({outcome[0]})"
        if outcome.decision != command["spec"]["decision"]:
            return f"scheduling (now a {outcome.decision})"
        if outcome.replacements:
            wanted = set(command["spec"]["replacements"][0]["instanceTypes"])
            if not wanted <= set(outcome.replacements[0].instance_type_names):
                return "scheduling (replacement options changed)"
        return None

    def _start(self, ctx: ClusterContext, command: Obj) -> bool:
        """Taint the candidates, launch the replacements, and only then let termination begin."""
        ctx.log(
            LogRecord(
                "disrupting node(s)",
                {**_log_fields(command), "command": command["spec"]["text"]},
                logger="controller.disruption",
            )
        )
        for candidate in command["spec"]["candidates"]:
            node = ctx.store.get("Node", candidate["node"])
            if node is not None and not any(t.get("key") == DISRUPTED for t in node["spec"].get("taints") or []):
                node["spec"].setdefault("taints", []).append({"key": DISRUPTED, "effect": "NoSchedule"})
                ctx.store.update(node)
                ctx.log(
                    LogRecord(
                        "tainted node",
                        {"Node": {"name": candidate["node"]}, "taint.Key": DISRUPTED, "taint.Effect": "NoSchedule"},
                        logger="controller.disruption",
                    )
                )
            claim = ctx.store.get("NodeClaim", candidate["nodeclaim"])
            if claim is not None:
                set_condition(claim, "DisruptionReason", "True", ctx.now, command["spec"]["reason"])
                ctx.store.update(claim)
        names = []
        for spec in command["spec"]["replacements"]:
            claim = create_nodeclaim(ctx, _plan_from_spec(ctx, spec))
            names.append(claim["metadata"]["name"])
            ctx.log(
                LogRecord(
                    "created nodeclaim",
                    {
                        "NodePool": {"name": spec["nodepool"]},
                        "NodeClaim": {"name": claim["metadata"]["name"]},
                        "requests": spec["requests"],
                        "instance-types": ", ".join(spec["instanceTypes"][:5])
                        + (f" and {len(spec['instanceTypes']) - 5} other(s)" if len(spec["instanceTypes"]) > 5 else ""),
                    },
                )
            )
        command["status"].update(phase="Executing", startedAt=timestamp(ctx.now), replacementNodeClaims=names)
        ctx.store.update(command)
        return True

    def _execute(self, ctx: ClusterContext, command: Obj) -> bool:
        status = command["status"]
        replacements = [ctx.store.get("NodeClaim", n) for n in status.get("replacementNodeClaims") or []]
        if any(r is None for r in replacements) or (
            ctx.now - parse_timestamp(status["startedAt"]) > REPLACEMENT_TIMEOUT_SECONDS
            and not all(is_true(r, "Initialized") for r in replacements if r)
        ):
            _untaint(ctx, command)
            return _finish(
                ctx, command, "Failed", "a replacement NodeClaim failed to launch or initialize; candidates untainted"
            )
        if not all(is_true(r, "Initialized") for r in replacements if r is not None):
            return False  # old nodes stay until every replacement is initialized
        pending = False
        for candidate in command["spec"]["candidates"]:
            claim = ctx.store.get("NodeClaim", candidate["nodeclaim"])
            if claim is None:
                continue
            pending = True
            if not claim["metadata"].get("deletionTimestamp"):
                ctx.store.delete("NodeClaim", candidate["nodeclaim"])
                ctx.event(
                    claim, "Normal", "DisruptionTerminating", f"Disrupting NodeClaim: {command['spec']['reason']}"
                )
        if pending:
            return True
        status["completedAt"] = timestamp(ctx.now)
        return _finish(ctx, command, "Succeeded", "command succeeded")

    # Termination ---------------------------------------------------------------------------------------------------

    def _terminate(self, ctx: ClusterContext) -> bool:
        """Drain nodes of deleting NodeClaims through the eviction API (PDBs answer 429), then let them go."""
        changed = False
        for claim in ctx.store.list("NodeClaim"):
            if not claim["metadata"].get("deletionTimestamp"):
                continue
            node = ctx.store.get("Node", (claim.get("status") or {}).get("nodeName") or "")
            if node is None or node["metadata"].get("annotations", {}).get("karpui.dev/drained") == "true":
                continue
            name = node["metadata"]["name"]
            if not any(t.get("key") == DISRUPTED for t in node["spec"].get("taints") or []):
                node["spec"].setdefault("taints", []).append({"key": DISRUPTED, "effect": "NoSchedule"})
                node["metadata"].setdefault("labels", {})["node.kubernetes.io/exclude-from-external-load-balancers"] = (
                    "karpenter"
                )
                ctx.store.update(node)
                ctx.log(
                    LogRecord(
                        "tainted node",
                        {"Node": {"name": name}, "taint.Key": DISRUPTED, "taint.Effect": "NoSchedule"},
                        logger="controller.node.termination",
                    )
                )
                changed = True
            started = self.draining.setdefault(name, ctx.now)
            if self.drained_at.get(name, -DRAIN_RETRY_SECONDS) + DRAIN_RETRY_SECONDS > ctx.now:
                continue  # one drain attempt per node per second, as Karpenter requeues
            self.drained_at[name] = ctx.now
            waiting, evicted = self._drain_step(ctx, name, _grace_deadline(claim))
            changed |= evicted
            if waiting:
                continue
            if ctx.now - started < MIN_DRAIN_SECONDS:
                continue
            node["metadata"].setdefault("annotations", {})["karpui.dev/drained"] = "true"
            ctx.store.update(node)
            self.draining.pop(name, None)
            changed = True
        return changed

    def _drain_step(self, ctx: ClusterContext, node: str, deadline: float | None = None) -> tuple[bool, bool]:
        """Evict the first non-empty tier of pods: (some pod still has to go, some pod was evicted now).

        With a terminationGracePeriod, a pod is deleted regardless of PDBs and do-not-disrupt once
        `now > deadline - its terminationGracePeriodSeconds`, and such pods are not held behind earlier tiers.
        """
        pods = [
            p
            for p in ctx.store.list("Pod")
            if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")
        ]
        pods = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not _tolerates_disrupted(p)
        ]
        if not pods:
            return False, False
        evicted = False
        if deadline is not None:
            for pod in list(pods):
                grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30) or 0)
                if ctx.now > deadline - grace:
                    ctx.store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                    ctx.event(
                        pod, "Warning", "Disrupted", "Deleting pod: the NodeClaim's terminationGracePeriod is ending"
                    )
                    pods.remove(pod)
                    evicted = True
            if not pods:
                return False, evicted

        def tier(pod: Obj) -> int:
            daemon = any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])
            critical = pod["spec"].get("priorityClassName") in CRITICAL
            return (2 if critical else 0) + (1 if daemon else 0)

        first = min(tier(p) for p in pods)
        for pod in [p for p in pods if tier(p) == first]:
            if pod_blocks(ctx.views.pod(pod), ctx.now):
                continue  # do-not-disrupt pods are waited on, never evicted (until a grace period ends)
            try:
                ctx.store.evict(pod)
            except TooManyRequests as refusal:
                ctx.event(pod, "Warning", "FailedDraining", f"Failed to drain node, {refusal}")
            else:
                evicted = True
                ctx.event(pod, "Normal", "Evicted", "Evicted pod: Disrupted")
        return True, evicted

    # Node facts: pod events, drift, expiry ---------------------------------------------------------------------

    def _track_pod_events(self, ctx: ClusterContext) -> bool:
        """lastPodEventTime moves when the set of non-DaemonSet pods on a node changes (bind, finish, delete)."""
        changed = False
        by_node: dict[str, list[str]] = {}
        for pod in ctx.store.list("Pod"):
            node = pod["spec"].get("nodeName")
            owners = pod["metadata"].get("ownerReferences") or []
            if (
                node
                and not any(o.get("kind") == "DaemonSet" for o in owners)
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not pod["metadata"].get("deletionTimestamp")
            ):
                by_node.setdefault(node, []).append(pod["metadata"]["uid"])
        for claim in ctx.store.list("NodeClaim"):
            node = (claim.get("status") or {}).get("nodeName")
            if not node:
                continue
            digest = hashlib.sha256(json.dumps(sorted(by_node.get(node, []))).encode()).hexdigest()[:16]
            if self.pod_sets.get(node) != digest:
                if node in self.pod_sets or by_node.get(node):
                    claim["status"]["lastPodEventTime"] = timestamp(ctx.now)
                    ctx.store.update(claim)
                    changed = True
                self.pod_sets[node] = digest
        return changed

    def _mark_drift(self, ctx: ClusterContext) -> bool:
        changed = False
        pools = {np.name: np for np in ctx.nodepools}
        for claim in ctx.store.list("NodeClaim"):
            pool = pools.get((claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, ""))
            if pool is None or not is_true(claim, "Launched"):
                continue
            types = ctx.instance_types_for(pool) or []
            reason = drift_reason(
                pool,
                nodepool_hash(pool),
                claim["metadata"].get("annotations") or {},
                claim["metadata"].get("labels") or {},
                types,
                HASH_VERSION,
            )
            if reason is not None and set_condition(claim, "Drifted", "True", ctx.now, reason):
                ctx.store.update(claim)
                changed = True
        return changed

    def _expire(self, ctx: ClusterContext) -> bool:
        """Expiration is forced: no budgets, no gate; the NodeClaim is deleted and drained."""
        changed = False
        for claim in ctx.store.list("NodeClaim"):
            expiry = _expiry(ctx, claim)
            if expiry is not None and ctx.now >= expiry:
                ctx.store.delete("NodeClaim", claim["metadata"]["name"])
                ctx.log(
                    LogRecord(
                        "disrupting node(s)",
                        {
                            "command": f"Expired: delete: [{claim['metadata']['name']}]",
                            "decision": "delete",
                            "disrupted-node-count": 1,
                            "replacement-node-count": 0,
                            "reason": "expired",
                        },
                        logger="controller.nodeclaim.expiration",
                    )
                )
                changed = True
        return changed


# Helpers -----------------------------------------------------------------------------------------------------------


def _grace_deadline(claim: Obj) -> float | None:
    """deletionTimestamp + spec.terminationGracePeriod, when the NodeClaim has one."""
    from provisioner.durations import parse_duration

    grace = (claim.get("spec") or {}).get("terminationGracePeriod")
    deleted = claim["metadata"].get("deletionTimestamp")
    if not grace or not deleted:
        return None
    seconds = parse_duration(grace)
    return parse_timestamp(deleted) + (seconds or 0)


def _expiry(ctx: ClusterContext, claim: Obj) -> float | None:
    if claim["metadata"].get("deletionTimestamp"):
        return None
    seconds = expire_seconds(claim)
    if seconds is None:
        return None
    return parse_timestamp(claim["metadata"]["creationTimestamp"]) + seconds


def expire_seconds(claim: Obj) -> int | None:
    from provisioner.durations import parse_duration

    value = (claim.get("spec") or {}).get("expireAfter", "720h")
    return parse_duration(value, allow_never=True)


def _claimed(ctx: ClusterContext, claim: Obj, node_obj: Obj, node: Any) -> ClaimedNode:
    labels = claim["metadata"].get("labels") or {}
    pool = next((np for np in ctx.nodepools if np.name == labels.get(wk.NODEPOOL)), None)
    after = pool.consolidate_after_seconds if pool is not None else None
    last_event = (claim.get("status") or {}).get("lastPodEventTime") or transition_time(claim, "Initialized")
    consolidatable = after is not None and last_event is not None and ctx.now - parse_timestamp(last_event) >= after
    drift = next(
        (
            c
            for c in (claim.get("status") or {}).get("conditions") or []
            if c.get("type") == "Drifted" and c.get("status") == "True"
        ),
        None,
    )
    return ClaimedNode(
        node=node,
        nodeclaim=claim["metadata"]["name"],
        nodepool=labels.get(wk.NODEPOOL, ""),
        instance_type=labels.get(wk.INSTANCE_TYPE, ""),
        capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
        zone=labels.get(wk.ZONE, ""),
        price=_price(ctx, pool, labels, claim),
        created=parse_timestamp(claim["metadata"]["creationTimestamp"]),
        initialized=is_true(claim, "Initialized"),
        deleting=bool(claim["metadata"].get("deletionTimestamp") or node_obj["metadata"].get("deletionTimestamp")),
        consolidatable=consolidatable,
        drifted=drift.get("reason") if drift else None,
        grace_period=bool((claim.get("spec") or {}).get("terminationGracePeriod")),
        drifted_at=parse_timestamp(drift["lastTransitionTime"]) if drift else 0.0,
        nominated_until=float(ctx.nominations.get(node_obj["metadata"]["name"], 0.0)),
        annotations=dict(node_obj["metadata"].get("annotations") or {}),
    )


def _price(ctx: ClusterContext, pool: Any, labels: dict[str, str], claim: Obj) -> float:
    """Karpenter's candidate price: the catalog offering matching the node's type, zone and capacity type."""
    for it in (ctx.instance_types_for(pool) or []) if pool is not None else []:
        if it.name == labels.get(wk.INSTANCE_TYPE):
            for offering in it.offerings:
                if offering.zone == labels.get(wk.ZONE) and offering.capacity_type == labels.get(wk.CAPACITY_TYPE):
                    return offering.price
    return float((claim["metadata"].get("annotations") or {}).get("karpui.dev/price", 0))


def _with_claimed_devices(ctx: ClusterContext, node: Any) -> Any:
    """A pod that moves must get its devices again wherever it lands, so in simulation it asks for all of them."""
    from dataclasses import replace

    from provisioner.dra.claims import requests_from_claim_spec

    pods = []
    changed = False
    for pod in node.pods:
        obj = ctx.store.get("Pod", pod.name, pod.namespace)
        claims = dra.pod_claims(ctx.store, obj) if obj is not None and obj["spec"].get("resourceClaims") else None
        if claims:
            requests = tuple(
                r for c in claims for r in requests_from_claim_spec(c.get("spec") or {}, c["metadata"]["name"], "spec")
            )
            pods.append(replace(pod, device_requests=requests))
            changed = True
        else:
            pods.append(pod)
    return replace(node, pods=tuple(pods)) if changed else node


def _without(view: ClusterView, busy: set[str]) -> ClusterView:
    """Nodes already in a live command are spoken for: not candidates again, and they use up budget."""
    from dataclasses import replace

    return replace(view, claimed=[replace(c, deleting=True) if c.name in busy else c for c in view.claimed])


def _fingerprint(command: Command) -> str:
    """What a denial is about: the nodes, their pods and the decision; any change makes it a new question."""
    parts = sorted(f"{c.name}:{','.join(sorted(p.uid for p in c.pods))}" for c in command.candidates)
    return hashlib.sha256(f"{command.reason}|{command.decision}|{'|'.join(parts)}".encode()).hexdigest()[:16]


def _denied_fingerprints(ctx: ClusterContext) -> set[str]:
    return {
        c["spec"]["fingerprint"]
        for c in ctx.store.list("DisruptionCommand")
        # A denial, or a dry-run record, stands for its candidate set until the inputs change.
        if (c.get("status") or {}).get("phase") in ("Denied", "DryRun")
    }


def _gate(ctx: ClusterContext, command: Obj) -> bool:
    """Apply the NodePool's approval mode to a validated command."""
    spec, status = command["spec"], command["status"]
    mode = spec.get("approvalMode", "auto")
    if spec["reason"] == "Manual":
        status.update(phase="AwaitingApproval", expiresAt=timestamp(ctx.now + APPROVAL_TTL_SECONDS))
        ctx.store.update(command)
        return True
    if mode == "dry-run":
        return _finish(ctx, command, "DryRun", "recorded only (dry-run): never executed")
    automatic = mode == "auto" or (
        mode == "auto-below"
        and spec.get("approvalThreshold") is not None
        and spec["savings"] <= float(spec["approvalThreshold"])
        and not spec.get("risks")
    )
    if automatic:
        spec["approval"] = {"decision": "approved", "by": "karpui (auto)", "at": timestamp(ctx.now)}
        status["phase"] = "Approved"
    else:
        status.update(phase="AwaitingApproval", expiresAt=timestamp(ctx.now + APPROVAL_TTL_SECONDS))
    ctx.store.update(command)
    return True


def _finish(ctx: ClusterContext, command: Obj, phase: str, message: str) -> bool:
    command["status"].update(phase=phase, message=message, finishedAt=timestamp(ctx.now))
    ctx.store.update(command)
    if phase in ("Rejected", "Expired", "Failed", "Denied"):
        ctx.log(
            LogRecord(
                f"disruption command {phase.lower()}",
                {"command": command["spec"]["text"], "message": message},
                logger="controller.disruption",
            )
        )
    return True


def _untaint(ctx: ClusterContext, command: Obj) -> None:
    for candidate in command["spec"]["candidates"]:
        node = ctx.store.get("Node", candidate["node"])
        if node is not None:
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t.get("key") != DISRUPTED]
            ctx.store.update(node)


def _tolerates_disrupted(pod: Obj) -> bool:
    return any(
        t.get("key") == DISRUPTED or (t.get("operator") == "Exists" and not t.get("key"))
        for t in pod["spec"].get("tolerations") or []
    )


# Karpenter's recorder drops a repeat of these events for 15 minutes, so a pass every 10 s does not flood them.
EXPLANATION_DEDUPE_SECONDS = 15 * 60


def _explain(ctx: ClusterContext, claimed: list[ClaimedNode], result: PassResult) -> None:
    """DisruptionBlocked for nodes that cannot be candidates, Unconsolidatable for candidates consolidation would
    not act on, each on the Node and its NodeClaim. Budget exhaustion is not an event in Karpenter either."""
    claims = {c.name: c.nodeclaim for c in claimed}
    for node, reasons, event, verb in (
        *((n, r, "DisruptionBlocked", "Cannot disrupt") for n, r in sorted(result.blocked.items())),
        *((n, r, "Unconsolidatable", "") for n, r in sorted(result.notes.items())),
    ):
        for reason in reasons:
            if "disruption budget" in reason:
                continue
            for kind, name in (("Node", node), ("NodeClaim", claims.get(node, ""))):
                obj = ctx.store.get(kind, name) if name else None
                if obj is not None:
                    message = f"{verb} {kind}: {reason}" if verb else reason
                    ctx.event(obj, "Normal", event, message, dedupe_seconds=EXPLANATION_DEDUPE_SECONDS)


def _candidate_spec(candidate: Any) -> dict[str, Any]:
    claimed = candidate.claimed
    return {
        "node": claimed.name,
        "nodeclaim": claimed.nodeclaim,
        "nodepool": claimed.nodepool,
        "instanceType": claimed.instance_type,
        "capacityType": claimed.capacity_type,
        "zone": claimed.zone,
        "price": round(claimed.price, 6),
        "pods": [p.key for p in candidate.pods],
    }


def _plan_spec(plan: NodeClaimPlan) -> dict[str, Any]:
    return {
        "nodepool": plan.nodepool,
        "instanceTypes": [o.instance_type.name for o in plan.options],
        "prices": [round(o.price, 6) for o in plan.options],
        "requests": plan.requests_text(),
        "requirements": plan.requirements.to_specs(),
        "labels": dict(plan.labels),
        "taints": [t.to_spec() for t in plan.taints],
        "startupTaints": [t.to_spec() for t in plan.startup_taints],
    }


def _plan_from_spec(ctx: ClusterContext, spec: dict[str, Any]) -> NodeClaimPlan:
    """The replacement a command stored, rebuilt with the NodePool's catalog types (types since removed drop out)."""
    from provisioner.quantity import parse_resources
    from provisioner.requirements import Requirements
    from provisioner.scheduling.results import InstanceTypeOption
    from provisioner.taints import Taint

    pool = next(np for np in ctx.nodepools if np.name == spec["nodepool"])
    by_name = {it.name: it for it in ctx.instance_types_for(pool) or []}
    options = tuple(
        InstanceTypeOption(by_name[name], price)
        for name, price in zip(spec["instanceTypes"], spec["prices"], strict=True)
        if name in by_name
    )
    return NodeClaimPlan(
        nodepool=spec["nodepool"],
        pods=(),
        requests=parse_resources(spec["requests"]),
        requirements=Requirements.from_specs(spec["requirements"]),
        options=options,
        labels=spec["labels"],
        taints=tuple(Taint.from_spec(t) for t in spec["taints"]),
        startup_taints=tuple(Taint.from_spec(t) for t in spec["startupTaints"]),
    )


def _log_fields(command: Obj) -> dict[str, Any]:
    spec = command["spec"]
    return {
        "decision": spec["decision"],
        "disrupted-node-count": len(spec["candidates"]),
        "replacement-node-count": len(spec["replacements"]),
        "pod-count": sum(len(c["pods"]) for c in spec["candidates"]),
        "disrupted-nodes": [
            {
                "Node": {"name": c["node"]},
                "NodeClaim": {"name": c["nodeclaim"]},
                "instance-type": c["instanceType"],
                "capacity-type": c["capacityType"],
            }
            for c in spec["candidates"]
        ],
        "replacement-nodes": [{"instance-types": ", ".join(r["instanceTypes"][:5])} for r in spec["replacements"]],
    }


def _risks(ctx: ClusterContext, command: Command) -> list[str]:
    """What a person should weigh: single-replica workloads and PDB headroom of the pods that would move."""
    risks = []
    owners: dict[str, int] = {}
    for obj in ctx.store.list("Pod"):
        owner = next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
        if owner is not None and (obj.get("status") or {}).get("phase") == "Running":
            owners[owner["uid"]] = owners.get(owner["uid"], 0) + 1
    for candidate in command.candidates:
        for pod in candidate.pods:
            if pod.owner is not None and owners.get(pod.owner.uid, 0) <= 1:
                risks.append(f"{pod.key} is the only running replica of {pod.owner.kind}/{pod.owner.name}")
            if pod.owner is None:
                risks.append(f"{pod.key} has no controller: it will not be recreated")
    return risks
