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
from django.utils import timezone

from karpui import models
from karpui.clusters import lab, store
from karpui.people.audit import Actor, audit_event_create
from karpui.writes import configs
from provisioner.cluster.objects import timestamp

# The proposer's own serialisation of a command, so a person's command reads exactly like the engine's.
from provisioner.controllers.command_specs import command_object, live_commands
from provisioner.controllers.commands import APPROVAL_TTL_SECONDS, VALIDATION_SECONDS, queue_nodes
from provisioner.controllers.recheck import manual_candidate, manual_plan
from provisioner.controllers.snapshot import cluster_view, without
from provisioner.disruption import accounting
from provisioner.disruption.accounting import CONSOLIDATION_REASONS
from provisioner.disruption.candidates import build_candidates
from provisioner.disruption.consolidation import in_flight
from provisioner.disruption.plans import CombinedPlan, Member, combined
from provisioner.disruption.plans import dependencies as plan_dependencies
from provisioner.disruption.types import Command
from provisioner.lab import Lab
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import parse_nodepool

APPROVAL_MODES = ("auto", "manual", "auto-below", "dry-run")


def _require(actor: Actor, permission: str) -> None:
    user = actor.user
    if user is None or not user.is_active or not user.has_perm(f"karpui.{permission}"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not {permission.replace('_', ' ')}")


def confirmation_needed(command: dict[str, Any]) -> str | None:
    """Why approving this command asks for a confirmation with a note (KARPUI_CONFIRM_EVICTIONS and
    KARPUI_CONFIRM_SAVINGS), or None when one click will do."""
    spec = command["spec"]
    evicted = sum(len(c.get("pods") or []) for c in spec.get("candidates") or [])
    reasons = []
    if evicted > settings.KARPUI_CONFIRM_EVICTIONS:
        reasons.append(f"evicts {evicted} pods (more than {settings.KARPUI_CONFIRM_EVICTIONS})")
    if float(spec.get("savings") or 0) > settings.KARPUI_CONFIRM_SAVINGS:
        reasons.append(f"saves ${float(spec['savings']):.4f}/h (more than ${settings.KARPUI_CONFIRM_SAVINGS:.2f}/h)")
    return " and ".join(reasons) or None


def assessment_lines(spec: dict[str, Any]) -> list[str]:
    """What a command's assessment says beside its risks: evictions and rounds, the disruption cost, and the score
    Karpenter's Balanced policy would give it in each NodePool."""
    assessment = spec.get("assessment")
    if not assessment:
        return []
    evicted, rounds = assessment.get("evicted", 0), assessment.get("evictionRounds")
    lines = [
        f"{evicted} eviction{'s' if evicted != 1 else ''}"
        + ("" if not evicted else " (a PDB allows none now)" if rounds is None else f" in {rounds} round(s)")
        + f" · disruption cost {float(assessment.get('disruptionCost') or 0):.2f}"
    ]
    for pool, score in sorted((assessment.get("balanced") or {}).items()):
        value = "∞" if score.get("score") is None else f"{score['score']:.2f}"
        verdict = "would consolidate" if score.get("approved") else "would not consolidate"
        lines.append(
            f"Balanced score in {pool}: {value} (saves {100 * score['savingsFraction']:.1f}% of its cost for "
            f"{100 * score['disruptionFraction']:.1f}% of its disruption; threshold {score['threshold']}): "
            f"Balanced {verdict}"
        )
    return lines


def decide_options(command: dict[str, Any], user: Any) -> dict[str, Any]:
    """What `user` may do with `command` now (approve, deny, withdraw), and, where that is nothing, why: a Decide
    cell is never silently empty."""
    spec, phase = command["spec"], command["status"].get("phase")
    approval = spec.get("approval") or {}
    name = user.get_username() if user is not None and user.is_authenticated else ""
    approver = bool(user is not None and user.has_perm("karpui.approve_disruption"))
    requester = spec.get("requestedBy")
    live = phase in ("Proposed", "AwaitingApproval", "Approved")
    withdraw = bool(
        requester and requester == name and live and not spec.get("withdrawn") and approval.get("decision") != "denied"
    )
    options = {"approve": False, "deny": False, "withdraw": withdraw, "why": ""}
    if spec.get("withdrawn"):
        options["why"] = f"withdrawn by {spec['withdrawn']['by']}"
    elif approval:
        options["why"] = f"{approval.get('decision')} by {approval.get('by')}"
    elif phase == "Executing":
        options["why"] = "executing: it can no longer be stopped from here"
    elif (command.get("status") or {}).get("forced"):
        options["why"] = "forced: the repair's toleration ended, no decision can hold it"
    elif not approver:
        options["why"] = "approvers only (the approve_disruption permission)"
    elif phase == "Proposed":
        options["deny"] = True
        options["why"] = "being validated (Karpenter's 15 s): it can be denied now, approved once it awaits approval"
    elif phase == "AwaitingApproval":
        options["deny"] = True
        if settings.KARPUI_FOUR_EYES and requester == name:
            options["why"] = "awaiting another approver: you asked for it (four eyes)"
        else:
            options["approve"] = True
    if withdraw and not options["why"]:
        options["why"] = "you asked for it: you may withdraw it"
    return options


def _refusal(
    command: dict[str, Any] | None, name: str, decision: str, actor: Actor, *, confirmed: bool = False, note: str = ""
) -> Exception | None:
    """Why `actor` may not decide this command now, or None.

    Called inside the lab run, which holds the cluster's row lock: checking that nobody has decided yet and writing
    the decision happen under one lock, so the first decision is final (a compare-and-set). The phase alone is not
    enough: a decision is written to `spec.approval` at once, but the phase moves only at the controllers' next run.
    A command can be denied as soon as it exists (while it is validated), and approved once it awaits approval.
    """
    if command is None:
        return ValidationError(f'disruption command "{name}" not found')
    earlier = command["spec"].get("approval")
    if earlier:
        return ValidationError(
            f'disruption command "{name}" was already {earlier.get("decision")} by {earlier.get("by")} at '
            f"{earlier.get('at')}; the first decision is final"
        )
    if command["spec"].get("withdrawn"):
        return ValidationError(f'disruption command "{name}" was withdrawn by {command["spec"]["withdrawn"]["by"]}')
    phase = command["status"].get("phase")
    if decision == "denied" and phase == "Proposed":
        return None
    if phase != "AwaitingApproval":
        return ValidationError(f'disruption command "{name}" is {phase}, not awaiting approval')
    if command["status"].get("forced"):
        # A repair past its toleration (a 20% rule may be holding it back): a decision would change nothing.
        return ValidationError(
            f'disruption command "{name}" is forced, no decision can hold it: {command["status"]["forced"]}'
        )
    requester = command["spec"].get("requestedBy")
    if decision == "approved" and settings.KARPUI_FOUR_EYES and requester == actor.name:
        return PermissionDenied(f"{actor.name} asked for this disruption and may not approve it alone (four eyes)")
    why = confirmation_needed(command) if decision == "approved" else None
    if why and not (confirmed and note.strip()):
        return ValidationError(
            f'disruption command "{name}" {why}: confirm it and say why in a note (nothing was approved)'
        )
    return None


class PlanNeedsConfirmation(ValidationError):
    """Commands selected together would strand pods or launch nodes they do not plan: nothing was approved, and
    approving them needs this plan confirmed (its digest)."""

    def __init__(self, plan: CombinedPlan, names: list[str]) -> None:
        self.plan, self.names = plan, names
        super().__init__(
            "these commands together "
            + "; ".join(plan.sentences()[1:-1])
            + ": nothing was approved; confirm the combined plan to approve them"
        )


def _decide_many(
    cluster: models.Cluster,
    names: list[str],
    actor: Actor,
    decision: str,
    reason: str,
    confirmed: bool = False,
    plan_digest: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Exception]]:
    """Record one decision on each command in a single lab run; each decided command gets its own audit row.
    Commands that cannot be decided are returned with the reason and left as they were. Several approved together
    are simulated as one plan first (combined_plan): a plan that strands pods or launches nodes the commands do
    not is refused (PlanNeedsConfirmation) unless `plan_digest` confirms it; the approved commands form a batch
    that runs in the plan's order, each step re-checked after the one before."""
    together = decision == "approved" and len(dict.fromkeys(names)) > 1

    def change(running: Lab | lab.RowRun) -> tuple[list[dict[str, Any]], dict[str, Exception]]:
        decided, refused = [], {}
        order = list(dict.fromkeys(names))
        batch: dict[str, Any] = {}
        if together and isinstance(running, Lab):
            decidable = [
                n
                for n in order
                if _refusal(
                    running.store.get("DisruptionCommand", n), n, decision, actor, confirmed=confirmed, note=reason
                )
                is None
            ]
            if len(decidable) > 1:
                plan = combined_plan(running, decidable)
                if plan.needs_confirmation and plan_digest != plan.digest:
                    raise PlanNeedsConfirmation(plan, decidable)
                order = [*plan.order, *(n for n in order if n not in plan.order)]
                batch = {
                    "id": plan.digest,
                    "of": len(plan.order),
                    "confirmed": plan.needs_confirmation,
                    "steps": list(plan.order),
                }
        for name in order:
            command = running.store.get("DisruptionCommand", name)
            refusal = _refusal(command, name, decision, actor, confirmed=confirmed, note=reason)
            if refusal is not None:
                refused[name] = refusal
                continue
            assert command is not None
            command["spec"]["approval"] = {
                "decision": decision,
                "by": actor.name,
                "at": timestamp(running.now),
                "reason": reason,
                **({"confirmed": confirmation_needed(command)} if confirmed and decision == "approved" else {}),
                **({"tolerance": settings.KARPUI_RECHECK_SAVINGS_TOLERANCE} if decision == "approved" else {}),
                **(
                    {"batch": {**batch, "step": batch["steps"].index(name) + 1}}
                    if batch and name in batch["steps"]
                    else {}
                ),
            }
            running.store.update(command)
            decided.append(command)
        return decided, refused

    with transaction.atomic():
        decided, refused = (lab.run if together else lab.run_rows)(cluster.name, change)  # type: ignore[operator]
        for command in decided:
            audit_event_create(
                actor,
                {"approved": "approve", "denied": "deny"}[decision],
                "DisruptionCommand",
                command["metadata"]["name"],
                {"phase": command["status"].get("phase")},
                {"approval": command["spec"]["approval"], "text": command["spec"]["text"]},
                reason,
                cluster=cluster,
            )
    return decided, refused


def combined_plan(running: Lab, names: list[str]) -> CombinedPlan:
    """The commands `names` simulated as one plan on the cluster now, with the nodes of commands already approved
    or executing (and not among them) on their way out; in queue order before the plan orders its steps."""
    ctx = running.ctx
    live = {c["metadata"]["name"]: c for c in live_commands(ctx)}
    chosen = sorted(
        (live[n] for n in dict.fromkeys(names) if n in live),
        key=lambda c: (c["spec"].get("queuedAt") or c["status"].get("proposedAt") or "", c["metadata"]["name"]),
    )
    _, gone = queue_nodes(ctx, excluding=names)
    view = in_flight(cluster_view(ctx)[0], gone)
    nodepools = {np.name: np for np in ctx.nodepools}
    candidates, _ = build_candidates(view.claimed, nodepools, view.pdbs, ctx.now, eventual=True)
    by_node = {c.name: c for c in candidates}
    members = [
        Member(
            cmd["metadata"]["name"],
            tuple(by_node[c["node"]] for c in cmd["spec"]["candidates"] if c["node"] in by_node),
            len(cmd["spec"].get("replacements") or []),
            cmd["spec"].get("decision", ""),
        )
        for cmd in chosen
    ]
    return combined(members, view)


def commands_plan(*, cluster: models.Cluster, names: list[str]) -> CombinedPlan:
    """The combined outcome of approving `names` together, shown before anyone approves (nothing is written)."""
    if len(dict.fromkeys(names)) < 2:
        raise ValidationError("select at least two commands to see them as one plan")

    def change(running: Lab) -> CombinedPlan:
        return combined_plan(running, names)

    return lab.run(cluster.name, change)


def _decide(
    cluster: models.Cluster, name: str, actor: Actor, decision: str, reason: str, confirmed: bool = False
) -> dict[str, Any]:
    decided, refused = _decide_many(cluster, [name], actor, decision, reason, confirmed)
    if refused:
        raise refused[name]
    return decided[0]


def command_approve(
    *, cluster: models.Cluster, name: str, actor: Actor, reason: str = "", confirmed: bool = False
) -> dict[str, Any]:
    """Approve one command; one that confirmation_needed names needs `confirmed` and a note in `reason`."""
    _require(actor, "approve_disruption")
    return _decide(cluster, name, actor, "approved", reason, confirmed)


def commands_approve(
    *,
    cluster: models.Cluster,
    names: list[str],
    actor: Actor,
    reason: str = "",
    confirmed: bool = False,
    plan: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Bulk approval: the approved names, and for each name that could not be approved, why. Raises
    PlanNeedsConfirmation, approving nothing, when together they need their combined plan confirmed (`plan`: the
    digest of the plan the approver saw)."""
    _require(actor, "approve_disruption")
    if not names:
        raise ValidationError("select at least one command to approve")
    decided, refused = _decide_many(cluster, names, actor, "approved", reason, confirmed, plan)
    return [c["metadata"]["name"] for c in decided], {name: _message(error) for name, error in refused.items()}


def command_withdraw(*, cluster: models.Cluster, name: str, actor: Actor, reason: str = "") -> dict[str, Any]:
    """The person who asked for a node's disruption takes the request back, until it starts executing."""

    def change(running: lab.RowRun) -> dict[str, Any]:
        command = running.store.get("DisruptionCommand", name)
        if command is None:
            raise ValidationError(f'disruption command "{name}" not found')
        if command["spec"].get("requestedBy") != actor.name:
            raise PermissionDenied(f"only {command['spec'].get('requestedBy') or 'its requester'} may withdraw {name}")
        phase = command["status"].get("phase")
        if phase not in ("Proposed", "AwaitingApproval", "Approved") or command["spec"].get("withdrawn"):
            raise ValidationError(f'disruption command "{name}" is {phase}: it can no longer be withdrawn')
        command["spec"]["withdrawn"] = {"by": actor.name, "at": timestamp(running.now), "reason": reason}
        running.store.update(command)
        return command

    with transaction.atomic():
        command = lab.run_rows(cluster.name, change)
        audit_event_create(
            actor,
            "withdraw",
            "DisruptionCommand",
            name,
            {"phase": command["status"].get("phase")},
            {"withdrawn": command["spec"]["withdrawn"]},
            reason,
            cluster=cluster,
        )
    return command


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
        audit_event_create(
            actor,
            "pause",
            "Cluster",
            row.name,
            before,
            {"paused_until": row.paused_until.isoformat()},
            reason.strip(),
            cluster=row,
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
        audit_event_create(actor, "resume", "Cluster", row.name, before, {"paused_until": None}, cluster=row)
    return True


MANUAL = "Manual"


def manual_command(running: Lab, node: str) -> Command:
    """A person's request for `node` to go, planned as the command queue re-plans it (recheck.manual_plan), on the
    cluster without the node and with the nodes of commands already approved or executing on their way out."""
    ctx = running.ctx
    view, _ = cluster_view(ctx)
    busy, gone = queue_nodes(ctx)
    view = without(in_flight(view, gone - {node}), busy - {node})
    candidate = manual_candidate(view, node, {np.name: np for np in ctx.nodepools})
    if isinstance(candidate, str):
        raise ValidationError(candidate)
    return manual_plan(candidate, view)


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
            command_object(
                running.ctx,
                command,
                name,
                mode="manual",
                threshold=None,
                spec={"fingerprint": name, "requestedBy": actor.name, "requestReason": reason},
                status={
                    "phase": "Proposed",
                    "proposedAt": timestamp(running.now),
                    "validateAt": timestamp(running.now + VALIDATION_SECONDS),
                },
            )
        )

    with transaction.atomic():
        command = lab.run(cluster.name, change)
        audit_event_create(
            actor,
            "request",
            "DisruptionCommand",
            command["metadata"]["name"],
            None,
            {"node": node},
            reason,
            cluster=cluster,
        )
    return command


def nodepool_approval_mode_set(
    *,
    cluster: models.Cluster,
    nodepool: str,
    mode: str,
    actor: Actor,
    threshold: float | None = None,
    decided: models.ApprovalModeRequest | None = None,
) -> None:
    """Store the mode as NodePool annotations, so it travels with the manifest. Taking it from manual to an
    unattended mode needs a decision (configs.approval_mode_guard): `decided` is the approved request, which is
    also what lets an approver who may not edit NodePools apply it."""
    if decided is None and (not actor.user or not actor.user.has_perm("karpui.change_nodepool")):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not edit NodePools")
    _check_mode(mode, threshold)
    with transaction.atomic():
        row = models.NodePool.objects.select_for_update().get(cluster=cluster, name=nodepool)
        before = dict(row.annotations)
        before_manifest = store.nodepool_manifest(row)
        annotations = {**row.annotations, APPROVAL_MODE: mode}
        if threshold is not None:
            annotations[APPROVAL_THRESHOLD] = f"{threshold:.4f}"
        else:
            annotations.pop(APPROVAL_THRESHOLD, None)
        configs.approval_mode_guard(
            cluster=cluster, name=nodepool, before=before, after=annotations, actor=actor, decided=decided
        )
        manifest = store.nodepool_manifest(row)
        manifest["metadata"]["annotations"] = annotations
        manifest.pop("status")
        try:
            parse_nodepool(manifest)  # the NodePool as it would be: never one the engine must leave out
        except ManifestError as error:
            raise ValidationError(str(error)) from None
        if cluster.mode == models.Cluster.Mode.OBSERVE:
            configs.gate_in_cluster(cluster, nodepool, annotations)  # the switch of the gate over Karpenter
        else:
            configs.in_cluster(cluster, manifest)  # a kwok cluster's NodePool is its API server's
        row.annotations = annotations
        row.resource_version += 1
        row.save(update_fields=["annotations", "resource_version", "updated_at"])
        configs.managed_fields_track(row, before_manifest, store.nodepool_manifest, actor)
        audit_event_create(
            actor, "set-approval-mode", "NodePool", nodepool, before, dict(row.annotations), cluster=cluster
        )


def _check_mode(mode: str, threshold: float | None) -> None:
    if mode not in APPROVAL_MODES:
        raise ValidationError(f"mode: must be one of {', '.join(APPROVAL_MODES)}, got {mode!r}")
    if mode == "auto-below" and (threshold is None or not math.isfinite(threshold) or threshold < 0):
        raise ValidationError("threshold: auto-below needs a non-negative savings threshold in $/h")


def approval_mode_request(
    *,
    cluster: models.Cluster,
    nodepool: str,
    mode: str,
    actor: Actor,
    reason: str = "",
    threshold: float | None = None,
) -> models.ApprovalModeRequest | None:
    """Ask for a NodePool's approval mode to change. A change that does not take it from manual to an unattended
    mode is made at once (as nodepool_approval_mode_set). One that does is a request an approver decides
    (approval_mode_decide), someone other than who asked under four eyes; an approver asking while four eyes are
    off decides it in the same step. Returns the request (None when the change was made directly)."""
    user = actor.user
    if (
        user is None
        or not user.is_active
        or not (  # type: ignore[attr-defined]
            user.has_perm("karpui.change_nodepool") or user.has_perm("karpui.approve_disruption")  # type: ignore[attr-defined]
        )
    ):
        raise PermissionDenied(f"{actor.name} may not ask to change a NodePool's approval mode")
    _check_mode(mode, threshold)
    row = models.NodePool.objects.filter(cluster=cluster, name=nodepool).first()
    if row is None:
        raise LookupError(f'nodepools.karpenter.sh "{nodepool}" not found')
    if configs.approval_mode_loosened(dict(row.annotations), {APPROVAL_MODE: mode}) is None:
        nodepool_approval_mode_set(cluster=cluster, nodepool=nodepool, mode=mode, actor=actor, threshold=threshold)
        return None
    if not reason.strip():
        raise ValidationError("reason: say why this NodePool's commands should run without a person")
    with transaction.atomic():
        waiting = models.ApprovalModeRequest.objects.select_for_update().filter(
            cluster=cluster, nodepool=nodepool, decision=models.ApprovalModeRequest.Decision.PENDING
        )
        if waiting.exists():
            earlier = waiting.first()
            assert earlier is not None
            raise ValidationError(
                f'NodePool "{nodepool}": {earlier.requested_by} already asked for {earlier.mode} at '
                f"{earlier.requested_at:%Y-%m-%d %H:%M:%S} UTC (request {earlier.pk}): it is decided first"
            )
        request = models.ApprovalModeRequest.objects.create(
            cluster=cluster,
            nodepool=nodepool,
            mode=mode,
            threshold=f"{threshold:.4f}" if threshold is not None else "",
            requested_by=actor.name,
            reason=reason.strip(),
        )
        audit_event_create(
            actor,
            "request-mode-change",
            "NodePool",
            nodepool,
            {APPROVAL_MODE: "manual"},
            {APPROVAL_MODE: mode, "request": request.pk},
            reason.strip(),
            cluster=cluster,
        )
    if user.has_perm("karpui.approve_disruption") and not settings.KARPUI_FOUR_EYES:  # type: ignore[attr-defined]
        return approval_mode_decide(cluster=cluster, request=request.pk, actor=actor, approve=True, note=reason)
    return request


def approval_mode_decide(
    *, cluster: models.Cluster, request: int, actor: Actor, approve: bool, note: str = ""
) -> models.ApprovalModeRequest:
    """An approver approves (the mode changes now) or denies (with a note) a request to take a NodePool's approval
    mode away from manual; under four eyes not the person who asked. Audited either way."""
    _require(actor, "approve_disruption")
    if not approve and not note.strip():
        raise ValidationError("reason: a reason is required to deny a change of approval mode")
    with transaction.atomic():
        row = models.ApprovalModeRequest.objects.select_for_update().filter(cluster=cluster, pk=request).first()
        if row is None:
            raise ValidationError(f"approval mode request {request} not found in cluster {cluster.name}")
        if row.decision:
            raise ValidationError(
                f"approval mode request {request} was already {row.get_decision_display()} by {row.decided_by}"
            )
        if settings.KARPUI_FOUR_EYES and row.requested_by == actor.name:
            raise PermissionDenied(f"{actor.name} asked for this change and may not approve it alone (four eyes)")
        row.decided_by, row.decided_at, row.note = actor.name, timezone.now(), note.strip()
        if approve:
            nodepool_approval_mode_set(
                cluster=cluster,
                nodepool=row.nodepool,
                mode=row.mode,
                actor=actor,
                threshold=float(row.threshold) if row.threshold else None,
                decided=row,
            )
            row.decision = models.ApprovalModeRequest.Decision.APPLIED
        else:
            row.decision = models.ApprovalModeRequest.Decision.DENIED
        row.save()
        audit_event_create(
            actor,
            "approve-mode-change" if approve else "deny-mode-change",
            "NodePool",
            row.nodepool,
            {APPROVAL_MODE: "manual", "request": row.pk, "requestedBy": row.requested_by},
            {APPROVAL_MODE: row.mode if approve else "manual"},
            note.strip(),
            cluster=cluster,
        )
    return row


def dependencies(cluster: models.Cluster, commands: list[dict[str, Any]]) -> dict[str, list[str]]:
    """What ties each queued command to the others (plans.dependencies), with the cluster's NodePools' limits and
    their budgets' allowance now (a budget with a schedule is counted as open: the tie is what matters)."""
    limited, allowed = set(), {}
    counts = dict(((cluster.cost_state or {}).get("by") or {}).get("nodepool") or {})
    for row in models.NodePool.objects.filter(cluster=cluster):
        if (row.spec or {}).get("limits"):
            limited.add(row.name)
        try:
            pool = store.nodepool_domain(row)
        except ManifestError:
            continue
        for reason in ("Empty", "Drifted", "Underutilized"):
            budgets = [
                b.allowed(int(counts.get(row.name, 0)))
                for b in pool.budgets
                if b.reasons is None or reason in b.reasons
            ]
            if budgets:
                allowed[(row.name, reason)] = min(budgets)
    return plan_dependencies(commands, limited, allowed)


def net_savings(command: dict[str, Any]) -> dict[str, float]:
    """A command's $/h as the page shows it (provisioner.disruption.accounting.net_savings)."""
    net = accounting.net_savings(command)
    return {
        "candidates": net.candidates,
        "replacements": net.replacements,
        "caused": net.caused,
        "estimated": net.estimated,
        "net": net.net,
    }


def realised(command: dict[str, Any], now: datetime) -> float:
    """$ an executed consolidation command has saved so far: what it saves each hour now (split over its NodePools,
    accounting.saving_by_nodepool) times the hours since it completed; 0 before that, and always 0 for drift,
    expiry and requests."""
    return sum(accounting.saving_by_nodepool(command).values()) * _hours_since_completed(command, now)


def _hours_since_completed(command: dict[str, Any], now: datetime) -> float:
    completed = (command.get("status") or {}).get("completedAt")
    if not completed:
        return 0.0
    done = datetime.fromisoformat(completed.replace("Z", "+00:00")).astimezone(UTC)
    return max((now - done).total_seconds(), 0) / 3600


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


# A command that never ran and was not decided against (rejected at validation, expired, superseded, withdrawn)
# is no line of the ledger: it neither saved nor forwent anything.
LEDGER_PHASES = ("Succeeded", "Executing", *FORGONE_PHASES)


def savings_accounts(cluster: models.Cluster) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """The ledger per NodePool (savings_ledger) and the $/h each command still forgoes (forgone)."""
    now = cluster.clock
    commands = lab.objects(cluster, "DisruptionCommand")
    still_forgone = forgone(commands, live_nodeclaims(cluster))
    ledger: dict[str, dict[str, float]] = {}

    def entry(pool: str) -> dict[str, float]:
        return ledger.setdefault(
            pool, {"realised": 0.0, "saving_per_hour": 0.0, "forgone_per_hour": 0.0, "commands": 0}
        )

    for command in commands:
        spec, status = command["spec"], command.get("status") or {}
        if status.get("phase") not in LEDGER_PHASES:
            continue
        entry((spec.get("nodepools") or [""])[0])["commands"] += 1
        # Drift, expiry and requests replace nodes for correctness, not to save money: they add nothing below.
        hours = _hours_since_completed(command, now)
        for pool, saving in accounting.saving_by_nodepool(command).items():
            entry(pool)["saving_per_hour"] += saving
            entry(pool)["realised"] += saving * hours
        if command["metadata"]["name"] in still_forgone:
            entry((spec.get("nodepools") or [""])[0])["forgone_per_hour"] += still_forgone[command["metadata"]["name"]]
    return ledger, still_forgone


def savings_ledger(cluster: models.Cluster) -> dict[str, dict[str, float]]:
    """Per NodePool: realised $ (price difference × hours since each executed consolidation command), and the
    forgone $/h of denied and dry-run ones whose nodes are still there. Drift and expiry commands are counted but
    save nothing."""
    return savings_accounts(cluster)[0]


__all__ = [
    "APPROVAL_TTL_SECONDS",
    "PlanNeedsConfirmation",
    "approval_mode_decide",
    "approval_mode_request",
    "command_approve",
    "command_deny",
    "command_withdraw",
    "commands_approve",
    "commands_plan",
    "confirmation_needed",
    "decide_options",
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
