"""A `Command` written down as a DisruptionCommand object, one way for everyone who makes one: the proposer, the
command queue when a re-check supersedes a command, and a person asking for a node to go."""

from __future__ import annotations

import hashlib
from typing import Any

from provisioner.cluster.objects import Obj, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption import logs as disruption_logs
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.risks import Assessment, assess
from provisioner.disruption.types import Candidate, Command, candidate_state
from provisioner.scheduling.results import NodeClaimPlan

LIVE_PHASES = ("Proposed", "AwaitingApproval", "Approved", "Executing")


def live_commands(ctx: ClusterContext) -> list[Obj]:
    """Commands still on their way (finished ones are history the queue never looks at again), oldest name first."""
    live = [c for phase in LIVE_PHASES for c in ctx.api.list("DisruptionCommand", fields={"status.phase": phase})]
    return sorted(live, key=lambda c: c["metadata"]["name"])


API_VERSION = "karpui.dev/v1alpha1"
# How many re-checks and execution steps a command keeps in its status (newest last).
KEPT_ENTRIES = 30


def fingerprint(command: Command) -> str:
    """What a denial is about: the nodes, their pods and the decision; any change makes it a new question."""
    parts = sorted(f"{c.name}:{','.join(sorted(p.uid for p in c.pods))}" for c in command.candidates)
    return hashlib.sha256(f"{command.reason}|{command.decision}|{'|'.join(parts)}".encode()).hexdigest()[:16]


def node_states(command: Command) -> dict[str, str]:
    """Each candidate's state as a denial remembers it (candidate_state)."""
    return {c.name: candidate_state(c) for c in command.candidates}


def command_name(command: Command, ctx: ClusterContext) -> str:
    return f"{command.reason.lower()}-{hashlib.sha256(f'{fingerprint(command)}{ctx.now}'.encode()).hexdigest()[:8]}"


def command_object(
    ctx: ClusterContext,
    command: Command,
    name: str,
    *,
    mode: str,
    threshold: str | None,
    view: ClusterView | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> Obj:
    """The DisruptionCommand for `command`, assessed on `view` (the cluster now, unless given), Proposed unless
    `status` says otherwise; `spec` adds fields (who asked, what it supersedes)."""
    risks = assessment(ctx, command, view if view is not None else cluster_view(ctx)[0])
    return {
        "apiVersion": API_VERSION,
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
            "fingerprint": fingerprint(command),
            "nodeStates": node_states(command),
            "approvalMode": mode,
            "approvalThreshold": threshold,
            "candidates": [candidate_spec(c) for c in command.candidates],
            "replacements": [plan_spec(r) for r in command.replacements],
            "destinations": dict(sorted(command.destinations.items())),
            "risks": [*command.notes, *risks.risks],
            "assessment": risks.to_spec(),
            **(spec or {}),
        },
        "status": status or {"phase": "Proposed", "proposedAt": timestamp(ctx.now)},
    }


def assessment(ctx: ClusterContext, command: Command, view: ClusterView) -> Assessment:
    """The command's risks on the cluster `view` shows, with the local volumes its pods would lose."""
    volumes = {}
    for candidate in command.candidates:
        for pod in candidate.pods:
            obj = ctx.api.get("Pod", pod.name, pod.namespace)
            names = local_volumes(obj) if obj is not None else ()
            if names:
                volumes[pod.uid] = names
    return assess(command, view, volumes)


def local_volumes(pod: Obj) -> tuple[str, ...]:
    """A pod's volumes that live and die with its node (emptyDir, hostPath): eviction loses what they hold."""
    return tuple(
        str(volume.get("name", ""))
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if isinstance(volume, dict) and ("emptyDir" in volume or "hostPath" in volume)
    )


def candidate_spec(candidate: Candidate) -> dict[str, Any]:
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


def plan_spec(plan: NodeClaimPlan) -> dict[str, Any]:
    return {
        "nodepool": plan.nodepool,
        "instanceTypes": [o.instance_type.name for o in plan.options],
        "prices": [round(o.price, 6) for o in plan.options],
        "requests": plan.requests_text(),
        "requirements": plan.requirements.to_specs(),
        "labels": dict(plan.labels),
        "taints": [t.to_spec() for t in plan.taints],
        "startupTaints": [t.to_spec() for t in plan.startup_taints],
        **({"static": True} if plan.static else {}),
    }


def append(status: dict[str, Any], key: str, entry: dict[str, Any]) -> None:
    """Add a re-check or a step to the command's record, keeping the newest KEPT_ENTRIES."""
    entries = [*(status.get(key) or []), entry]
    status[key] = entries[-KEPT_ENTRIES:]
