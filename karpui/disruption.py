"""The human gate on disruption: approve, deny, pause, resume, ask for a node to go, set a NodePool's mode.

Each decision checks the actor's permission, writes the decision onto the command object inside the same
transaction as its audit row, and changes nothing else: the controllers act on it at their next run, after
validating the command against the cluster as it is then.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models.fields.json import KT

from karpui import lab, models, services, store
from karpui.costs import CONSOLIDATION_REASONS
from karpui.services import Actor, _audit
from provisioner.cluster.objects import timestamp
from provisioner.controllers.commands import APPROVAL_TTL_SECONDS, VALIDATION_SECONDS, live_commands

# The proposer's own serialisation of a command, so a person's command reads exactly like the engine's.
from provisioner.controllers.disruption import _candidate_spec, _plan_spec, _risks
from provisioner.controllers.snapshot import cluster_view, without
from provisioner.disruption.candidates import disruption_cost
from provisioner.disruption.consolidation import simulate, simulation_problems
from provisioner.disruption.logs import command_text
from provisioner.disruption.types import Candidate, Command
from provisioner.lab import Lab
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import parse_nodepool

APPROVAL_MODES = ("auto", "manual", "auto-below", "dry-run")


def _require(actor: Actor, permission: str) -> None:
    user = actor.user
    if user is None or not user.is_active or not user.has_perm(f"karpui.{permission}"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not {permission.replace('_', ' ')}")


def _refusal(command: dict[str, Any] | None, name: str, decision: str, actor: Actor) -> Exception | None:
    """Why `actor` may not decide this command now, or None.

    Called inside the lab run, which holds the cluster's row lock: checking that nobody has decided yet and writing
    the decision happen under one lock, so the first decision is final (a compare-and-set). The phase alone is not
    enough: a decision is written to `spec.approval` at once, but the phase moves only at the controllers' next run.
    """
    if command is None:
        return ValidationError(f'disruption command "{name}" not found')
    earlier = command["spec"].get("approval")
    if earlier:
        return ValidationError(
            f'disruption command "{name}" was already {earlier.get("decision")} by {earlier.get("by")} at '
            f"{earlier.get('at')}; the first decision is final"
        )
    phase = command["status"].get("phase")
    if phase != "AwaitingApproval":
        return ValidationError(f'disruption command "{name}" is {phase}, not awaiting approval')
    requester = command["spec"].get("requestedBy")
    if decision == "approved" and settings.KARPUI_FOUR_EYES and requester == actor.name:
        return PermissionDenied(f"{actor.name} asked for this disruption and may not approve it alone (four eyes)")
    return None


def _decide_many(
    cluster: models.Cluster, names: list[str], actor: Actor, decision: str, reason: str
) -> tuple[list[dict[str, Any]], dict[str, Exception]]:
    """Record one decision on each command in a single lab run; each decided command gets its own audit row.
    Commands that cannot be decided are returned with the reason and left as they were."""

    def change(running: lab.RowRun) -> tuple[list[dict[str, Any]], dict[str, Exception]]:
        decided, refused = [], {}
        for name in dict.fromkeys(names):
            command = running.store.get("DisruptionCommand", name)
            refusal = _refusal(command, name, decision, actor)
            if refusal is not None:
                refused[name] = refusal
                continue
            assert command is not None
            command["spec"]["approval"] = {
                "decision": decision,
                "by": actor.name,
                "at": timestamp(running.now),
                "reason": reason,
            }
            running.store.update(command)
            decided.append(command)
        return decided, refused

    with transaction.atomic():
        decided, refused = lab.run_rows(cluster.name, change)
        for command in decided:
            _audit(
                actor,
                {"approved": "approve", "denied": "deny"}[decision],
                "DisruptionCommand",
                command["metadata"]["name"],
                {"phase": "AwaitingApproval"},
                {"approval": command["spec"]["approval"], "text": command["spec"]["text"]},
                reason,
            )
    return decided, refused


def _decide(cluster: models.Cluster, name: str, actor: Actor, decision: str, reason: str) -> dict[str, Any]:
    decided, refused = _decide_many(cluster, [name], actor, decision, reason)
    if refused:
        raise refused[name]
    return decided[0]


def command_approve(*, cluster: models.Cluster, name: str, actor: Actor, reason: str = "") -> dict[str, Any]:
    _require(actor, "approve_disruption")
    return _decide(cluster, name, actor, "approved", reason)


def commands_approve(
    *, cluster: models.Cluster, names: list[str], actor: Actor, reason: str = ""
) -> tuple[list[str], dict[str, str]]:
    """Bulk approval: the approved names, and for each name that could not be approved, why."""
    _require(actor, "approve_disruption")
    if not names:
        raise ValidationError("select at least one command to approve")
    decided, refused = _decide_many(cluster, names, actor, "approved", reason)
    return [c["metadata"]["name"] for c in decided], {name: _message(error) for name, error in refused.items()}


def _message(error: Exception) -> str:
    return "; ".join(error.messages) if isinstance(error, ValidationError) else str(error)


def command_deny(*, cluster: models.Cluster, name: str, actor: Actor, reason: str) -> dict[str, Any]:
    _require(actor, "approve_disruption")
    if not reason.strip():
        raise ValidationError("a reason is required to deny a disruption command")
    return _decide(cluster, name, actor, "denied", reason.strip())


def disruption_pause(*, cluster: models.Cluster, actor: Actor, reason: str, seconds: int) -> models.Cluster:
    _require(actor, "pause_disruption")
    if not reason.strip():
        raise ValidationError("a reason is required to pause disruption")
    if seconds <= 0 or seconds > 7 * 24 * 3600:
        raise ValidationError("a pause lasts between one second and seven days")
    with transaction.atomic():
        row = models.Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = {"paused_until": row.paused_until.isoformat() if row.paused_until else None}
        row.paused_until = row.clock + timedelta(seconds=seconds)
        row.pause_reason, row.paused_by = reason.strip(), actor.name
        row.save(update_fields=["paused_until", "pause_reason", "paused_by"])
        _audit(
            actor, "pause", "Cluster", row.name, before, {"paused_until": row.paused_until.isoformat()}, reason.strip()
        )
    return row


def disruption_resume(*, cluster: models.Cluster, actor: Actor) -> bool:
    """Lift the cluster's pause: True, or False when nothing was paused (none, or it had lapsed on the cluster's
    clock), in which case nothing is written: an audit row saying null became null records no decision."""
    _require(actor, "pause_disruption")
    with transaction.atomic():
        row = models.Cluster.objects.select_for_update().get(pk=cluster.pk)
        if not row.is_paused(row.clock):
            return False
        before = {
            "paused_until": row.paused_until.isoformat() if row.paused_until else None,
            "reason": row.pause_reason,
        }
        row.paused_until, row.pause_reason, row.paused_by = None, "", ""
        row.save(update_fields=["paused_until", "pause_reason", "paused_by"])
        _audit(actor, "resume", "Cluster", row.name, before, {"paused_until": None})
    return True


MANUAL = "Manual"


def manual_command(running: Lab, node: str) -> Command:
    """A person's request for `node` to go, as a single-node command: the pods it would evict, the NodeClaims the
    scheduler would need for them (on the cluster without the node and without nodes other live commands are
    taking), and savings = its price − the replacements' cheapest offerings (Karpenter's single-node
    consolidation math, but with no "must be cheaper" rule: a person may pay for a replacement). Like drift, it
    takes however many replacements the pods need. New NodeClaims that would hold only pods pending already are
    not replacements: they are the provisioner's business."""
    ctx = running.ctx
    view, claimed = cluster_view(ctx)
    mine = next((c for c in claimed if c.name == node), None)
    if mine is None:
        raise ValidationError(f'node "{node}" has no registered NodeClaim yet: try again once it has joined')
    pool = ctx.nodepool(mine.nodepool)
    if pool is None:
        raise ValidationError(f'node "{node}" belongs to NodePool "{mine.nodepool}", which is gone: it is going anyway')
    busy = {c["node"] for cmd in live_commands(ctx) for c in cmd["spec"]["candidates"]}
    view = without(view, busy - {node})
    pods = tuple(p for p in mine.node.pods if p.is_reschedulable())
    candidate = Candidate(mine, pool, pods, disruption_cost(mine, pool, pods, view.now))
    result = simulate([candidate], view)
    moving = {p.uid for p in pods}
    replacements = tuple(nc for nc in result.new_nodeclaims if any(p.uid in moving for p in nc.pods))
    return Command(MANUAL, (candidate,), replacements, "manual", tuple(simulation_problems(result, [candidate], view)))


def node_disruption_request(*, cluster: models.Cluster, node: str, actor: Actor, reason: str) -> dict[str, Any]:
    """A person asks for a node to go; another person approves it (four eyes), then its replacements launch and
    it is drained and deleted. The command is priced and planned as a single-node disruption (manual_command)."""
    _require(actor, "request_disruption")

    def change(running: Lab) -> dict[str, Any]:
        claim = next(
            (c for c in running.store.list("NodeClaim") if (c.get("status") or {}).get("nodeName") == node), None
        )
        if claim is None:
            raise ValidationError(f'node "{node}" has no NodeClaim: karpui only disrupts the nodes it manages')
        command = manual_command(running, node)
        name = f"manual-{int(running.now)}-{node}"[:63]
        return running.store.create(
            {
                "apiVersion": "karpui.dev/v1alpha1",
                "kind": "DisruptionCommand",
                "metadata": {
                    "name": name,
                    "labels": {"karpui.dev/reason": MANUAL, "karpui.dev/decision": command.decision},
                },
                "spec": {
                    "reason": MANUAL,
                    "method": "manual",
                    "decision": command.decision,
                    "nodepools": command.nodepools,
                    "text": command_text(command, name),
                    "savings": round(command.savings, 6),
                    "fingerprint": name,
                    "approvalMode": "manual",
                    "requestedBy": actor.name,
                    "requestReason": reason,
                    "candidates": [_candidate_spec(c) for c in command.candidates],
                    "replacements": [_plan_spec(r) for r in command.replacements],
                    "risks": [*command.notes, *_risks(running.ctx, command)],
                },
                "status": {
                    "phase": "Proposed",
                    "proposedAt": timestamp(running.now),
                    "validateAt": timestamp(running.now + VALIDATION_SECONDS),
                },
            }
        )

    with transaction.atomic():
        command = lab.run(cluster.name, change)
        _audit(actor, "request", "DisruptionCommand", command["metadata"]["name"], None, {"node": node}, reason)
    return command


def nodepool_approval_mode_set(
    *, cluster: models.Cluster, nodepool: str, mode: str, actor: Actor, threshold: float | None = None
) -> None:
    """Store the mode as NodePool annotations, so it travels with the manifest."""
    if not actor.user or not actor.user.has_perm("karpui.change_nodepool"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not edit NodePools")
    if mode not in APPROVAL_MODES:
        raise ValidationError(f"approval mode must be one of {', '.join(APPROVAL_MODES)}")
    if mode == "auto-below" and (threshold is None or not math.isfinite(threshold) or threshold < 0):
        raise ValidationError("auto-below needs a non-negative savings threshold in $/h")
    with transaction.atomic():
        row = models.NodePool.objects.select_for_update().get(cluster=cluster, name=nodepool)
        before = dict(row.annotations)
        annotations = {**row.annotations, APPROVAL_MODE: mode}
        if threshold is not None:
            annotations[APPROVAL_THRESHOLD] = f"{threshold:.4f}"
        else:
            annotations.pop(APPROVAL_THRESHOLD, None)
        manifest = store.nodepool_manifest(row)
        manifest["metadata"]["annotations"] = annotations
        manifest.pop("status")
        try:
            parse_nodepool(manifest)  # the NodePool as it would be: never one the engine must leave out
        except ManifestError as error:
            raise ValidationError(str(error)) from None
        services.in_cluster(cluster, manifest)  # a kwok cluster's NodePool is its API server's
        row.annotations = annotations
        row.resource_version += 1
        row.save(update_fields=["annotations", "resource_version", "updated_at"])
        _audit(actor, "set-approval-mode", "NodePool", nodepool, before, dict(row.annotations))


def realised(command: dict[str, Any], now: datetime) -> float:
    """$ an executed command has saved so far: its $/h times the hours since it completed (0 if it has not)."""
    status = command.get("status") or {}
    if status.get("phase") != "Succeeded" or not status.get("completedAt"):
        return 0.0
    done = datetime.fromisoformat(status["completedAt"].replace("Z", "+00:00")).astimezone(UTC)
    return float(command["spec"]["savings"]) * max((now - done).total_seconds(), 0) / 3600


FORGONE_PHASES = ("Denied", "DryRun")


def forgone(commands: list[dict[str, Any]], nodeclaims: set[str]) -> dict[str, float]:
    """The $/h each denied or dry-run consolidation command still forgoes, by command name.

    A forgone saving is one the cluster could still take, so it counts only while every node of the command is
    there (its NodeClaim exists and is not being deleted): once another command, a person or a NodePool's deletion
    removed one, nothing is forgone any more. Several such commands about one node are alternatives for it, not
    savings to add up (a dry-run pool records a new one whenever the node's pods change): only the newest of them
    counts."""
    result: dict[str, float] = {}
    taken: set[str] = set()
    candidates = [
        c
        for c in commands
        if (c.get("status") or {}).get("phase") in FORGONE_PHASES and c["spec"].get("reason") in CONSOLIDATION_REASONS
    ]
    newest_first = sorted(candidates, key=lambda c: (c["status"].get("finishedAt") or "", c["metadata"]["name"]))
    for command in reversed(newest_first):
        claims = {n.get("nodeclaim") or n["node"] for n in command["spec"].get("candidates") or []}
        if claims and claims <= nodeclaims and not claims & taken:
            result[command["metadata"]["name"]] = float(command["spec"]["savings"])
            taken |= claims
    return result


def live_nodeclaims(cluster: models.Cluster) -> set[str]:
    """The names of the cluster's NodeClaims that are not being deleted (one query)."""
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim").values_list(
        "name", KT("body__metadata__deletionTimestamp")
    )
    return {name for name, deleting in rows if not deleting}


def savings_accounts(cluster: models.Cluster) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """The ledger per NodePool (savings_ledger) and the $/h each command still forgoes (forgone)."""
    now = cluster.clock
    commands = lab.objects(cluster, "DisruptionCommand")
    still_forgone = forgone(commands, live_nodeclaims(cluster))
    ledger: dict[str, dict[str, float]] = {}
    for command in commands:
        spec, status = command["spec"], command.get("status") or {}
        pool = (spec.get("nodepools") or [""])[0]
        entry = ledger.setdefault(
            pool, {"realised": 0.0, "saving_per_hour": 0.0, "forgone_per_hour": 0.0, "commands": 0}
        )
        entry["commands"] += 1
        if spec.get("reason") not in CONSOLIDATION_REASONS:
            continue  # drift and expiry replace nodes for correctness, not to save money
        if status.get("phase") == "Succeeded" and status.get("completedAt"):
            entry["realised"] += realised(command, now)
            entry["saving_per_hour"] += spec["savings"]
        entry["forgone_per_hour"] += still_forgone.get(command["metadata"]["name"], 0.0)
    return ledger, still_forgone


def savings_ledger(cluster: models.Cluster) -> dict[str, dict[str, float]]:
    """Per NodePool: realised $ (price difference × hours since each executed consolidation command), and the
    forgone $/h of denied and dry-run ones whose nodes are still there. Drift and expiry commands are counted but
    save nothing."""
    return savings_accounts(cluster)[0]


__all__ = [
    "APPROVAL_TTL_SECONDS",
    "command_approve",
    "command_deny",
    "commands_approve",
    "disruption_pause",
    "disruption_resume",
    "forgone",
    "manual_command",
    "node_disruption_request",
    "nodepool_approval_mode_set",
    "realised",
    "savings_accounts",
    "savings_ledger",
]
