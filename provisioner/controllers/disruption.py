"""The disruption controller's proposer: every 10 s, unless paused, run Karpenter's disruption methods in priority
order over a snapshot of the cluster and record each command they return as a `DisruptionCommand` (the command
queue in `commands` takes it from there), and explain, as Karpenter's events do, why other nodes are not disrupted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.objects import timestamp
from provisioner.controllers.commands import VALIDATION_SECONDS, live_commands
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.snapshot import clock_inputs, cluster_view, without
from provisioner.disruption import logs as disruption_logs
from provisioner.disruption.methods import PassResult, continue_pass, disruption_pass
from provisioner.disruption.types import ClaimedNode, Command
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.scheduling.results import NodeClaimPlan

POLL_SECONDS = 10.0
# Karpenter's "already consolidated" short-circuit (state/cluster.go): a pass that found nothing is not repeated
# until something it reads changes, or for five minutes.
CONSOLIDATED_TTL_SECONDS = 300.0
WATCHED_KINDS = (
    "Node",
    "Pod",
    "NodeClaim",
    "PodDisruptionBudget",
    "DaemonSet",
    "DisruptionCommand",
    "ResourceClaim",
    "ResourceSlice",
    "DeviceClass",
    "Namespace",
)

__all__ = ["APPROVAL_MODE", "APPROVAL_THRESHOLD", "POLL_SECONDS", "DisruptionController"]


class DisruptionController:
    """Proposes commands every POLL_SECONDS; `last_result` keeps the latest pass for explanations."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.next_poll: float | None = state.get("next_poll")
        # Where the last pass's single-node consolidation stopped at its bound: the next pass starts there.
        self.resume: str | None = state.get("resume")
        self.last_result: PassResult | None = None
        self._consolidated: tuple[tuple[Any, ...], float] | None = None  # what the last empty pass read, and when
        self._last_pass: _Pass | None = None

    def to_state(self) -> dict[str, Any]:
        return {"next_poll": self.next_poll, **({"resume": self.resume} if self.resume else {})}

    def next_due(self) -> list[float]:
        return [self.next_poll] if self.next_poll is not None else []

    def reconcile(self, ctx: ClusterContext) -> bool:
        if self.next_poll is None or ctx.now >= self.next_poll:
            self.next_poll = ctx.now + POLL_SECONDS
            return self._propose(ctx)
        return False

    def _propose(self, ctx: ClusterContext) -> bool:
        if ctx.paused:
            return False
        inputs = _inputs(ctx)
        if (
            self._consolidated is not None
            and self._consolidated[0] == inputs
            and ctx.now - self._consolidated[1] < CONSOLIDATED_TTL_SECONDS
        ):
            return False  # already consolidated: nothing it reads has changed since a pass found nothing
        self._consolidated = None
        last = self._last_pass
        # The pass is a function of what it reads: over the same inputs it would find exactly the same again.
        unchanged = last is not None and last.inputs == inputs
        if (
            last is not None
            and unchanged
            and last.result.resume is None
            and ctx.now - last.at < CONSOLIDATED_TTL_SECONDS
        ):
            # A whole pass that a budget held back (so it is not "consolidated"): its explanations and commands are
            # replayed instead of simulating every candidate once more.
            result, claimed = last.result, last.claimed
        else:
            view, claimed = cluster_view(ctx)
            if not claimed:
                return False
            busy = {c["node"] for cmd in live_commands(ctx) for c in cmd["spec"]["candidates"]}
            view = without(view, busy)
            if last is not None and unchanged and last.result.resume is not None:
                # A pass that stopped at its single-node bound: its walk goes on with the next candidates, until it
                # has been through them all (then the pass is whole, and may be "consolidated").
                result = continue_pass(last.result, view)
            else:
                nodepools = {np.name: np for np in ctx.nodepools}
                result = disruption_pass(view, nodepools, resume=self.resume)
            self.resume = result.resume
            self._last_pass = _Pass(inputs, ctx.now, result, claimed)
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
        budget_limited = any("disruption budget" in r for reasons in result.notes.values() for r in reasons)
        if not created and not budget_limited and result.resume is None:
            self._consolidated = (inputs, ctx.now)
        return created

    def _create(self, ctx: ClusterContext, command: Command, fingerprint: str) -> None:
        name = f"{command.reason.lower()}-{hashlib.sha256(f'{fingerprint}{ctx.now}'.encode()).hexdigest()[:8]}"
        nodepool = next(np for np in ctx.nodepools if np.name == command.candidates[0].claimed.nodepool)
        mode = nodepool.annotations.get(APPROVAL_MODE, "auto")
        threshold = nodepool.annotations.get(APPROVAL_THRESHOLD)
        ctx.api.create(
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


@dataclass(frozen=True)
class _Pass:
    inputs: tuple[Any, ...]  # what it read
    at: float  # when it ran
    result: PassResult
    claimed: list[ClaimedNode]


def _inputs(ctx: ClusterContext) -> tuple[Any, ...]:
    """Everything a pass reads that can change: the objects (by kind version), the NodePools and their instance
    types, and what the clock alone changes (nominations, budget windows, timed do-not-disrupt)."""
    return (
        tuple(ctx.api.kind_version(kind) for kind in WATCHED_KINDS),
        repr(ctx.nodepools),
        tuple(ctx.instance_types_for(np) for np in ctx.nodepools),
        *clock_inputs(ctx),
    )


# Helpers -----------------------------------------------------------------------------------------------------------


def _fingerprint(command: Command) -> str:
    """What a denial is about: the nodes, their pods and the decision; any change makes it a new question."""
    parts = sorted(f"{c.name}:{','.join(sorted(p.uid for p in c.pods))}" for c in command.candidates)
    return hashlib.sha256(f"{command.reason}|{command.decision}|{'|'.join(parts)}".encode()).hexdigest()[:16]


def _denied_fingerprints(ctx: ClusterContext) -> set[str]:
    return {
        c["spec"]["fingerprint"]
        # A denial, or a dry-run record, stands for its candidate set until the inputs change.
        for phase in ("Denied", "DryRun")
        for c in ctx.api.list("DisruptionCommand", fields={"status.phase": phase})
    }


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
        told = [reason for reason in dict.fromkeys(reasons) if "disruption budget" not in reason]
        if not told:
            continue
        objects = [
            obj
            for kind, name in (("Node", node), ("NodeClaim", claims.get(node, "")))
            if name and (obj := ctx.api.get(kind, name)) is not None
        ]
        # A reason noted twice (multi-node and single-node consolidation both note an unconsolidatable candidate)
        # is told once: the recorder would drop the repeat within EXPLANATION_DEDUPE_SECONDS of the first anyway,
        # and the 3,638 repeats at 20,000 pods cost 0.1 s of the pass (profiled).
        for reason in told:
            for obj in objects:
                message = f"{verb} {obj['kind']}: {reason}" if verb else reason
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


def _risks(ctx: ClusterContext, command: Command) -> list[str]:
    """What a person should weigh: single-replica workloads and PDB headroom of the pods that would move."""
    risks = []
    owners: dict[str, int] = {}
    for obj in ctx.api.list("Pod"):
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
