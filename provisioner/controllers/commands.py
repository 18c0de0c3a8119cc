"""The disruption command queue: a proposed `DisruptionCommand` waits 15 s, is validated again, passes the human
gate (its NodePool's approval mode), is validated once more when approved, then runs: taint the candidates, launch
the replacements, wait until they are initialized, delete the candidates (termination drains them).

Observing a real Karpenter, an approved command is released to it instead (`holds`): Karpenter is let through the
gate for exactly its candidates, and the command follows what Karpenter does with them.

A command's `status.phase` records its life: Proposed → (validated) → AwaitingApproval → Approved | Denied | Expired,
or DryRun, or Rejected (it no longer held at validation); Approved → Executing → Succeeded | Failed; a person's
request may be Withdrawn. People approve and deny through karpui's services, which write `spec.approval`; nothing
executes without a re-check newer than the decision. Validation, and the re-check of a command karpui approved by
itself, are Karpenter's (`Recheck.karpenter`): a delete whose node lost pods meanwhile still runs, an emptiness
command runs with its nodes still empty. A command waiting for a person, or approved by one and not started, is
planned again on the cluster of the moment (`recheck`) whenever what it reads changes: if its plan changed it never
runs, and a new command with the plan of now takes its place (Superseded), needing approval again only when the
change is material (`provisioner.disruption.plans`). Approved commands run in the order they were approved
(those approved together in their batch's steps), each re-checked with the commands before it gone. While a
person has paused voluntary disruption, an approved command waits in Approved (`_hold`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from provisioner.cluster.conditions import clear_condition, is_true, set_claim_condition
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers import consolidation_events, holds, repair
from provisioner.controllers.command_specs import append, command_name, command_object, live_commands, plan_spec
from provisioner.controllers.context import RECORDER_DEDUPE_SECONDS, ClusterContext
from provisioner.controllers.provisioning import create_nodeclaim
from provisioner.controllers.recheck import Recheck, recheck
from provisioner.controllers.snapshot import clock_inputs, snapshot_inputs
from provisioner.controllers.termination import DISRUPTION_REASON, DRAIN_RETRY_SECONDS, taint_disrupted
from provisioner.disruption import logs as disruption_logs
from provisioner.disruption.accounting import claim_price
from provisioner.disruption.plans import PlanSummary
from provisioner.disruption.types import EMPTY, Command
from provisioner.manifests.nodepool import NODECLASS_ANNOTATION
from provisioner.objects import WHEN_EMPTY
from provisioner.quantity import parse_resources
from provisioner.requirements import Requirements
from provisioner.scheduling.logs import LogRecord
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from provisioner.scheduling.static import static_plan
from provisioner.taints import DISRUPTED, Taint, has_disrupted_taint

VALIDATION_SECONDS = 15.0
# Karpenter's orchestration queue deletes a started command's candidates at its next pass, a second on: seed 000's
# log has "tainted node" (termination's, once the NodeClaim is deleted) a second after "disrupting node(s)".
QUEUE_SECONDS = 1.0
APPROVAL_TTL_SECONDS = 3600.0
# How long a started command waits for its replacements (queue.go:66-69, 88-94): 80 ms for each candidate the
# queue holds, at least 10 minutes and at most an hour, so a long queue is not failed while it is worked through.
MIN_RETRY_SECONDS = 600.0
MAX_RETRY_SECONDS = 3600.0
RETRY_MILLISECONDS_PER_CANDIDATE = 80
LOGGER = "controller.disruption"
# A static NodePool's scale-down (Karpenter's static deprovisioning, "overprovisioned"), gated like the others.
OVERPROVISIONED = "Overprovisioned"
MANUAL = "Manual"  # a person's request for a node, not a method's decision
AUTO_APPROVER = "karpui (auto)"  # who approves a command its NodePool's approval mode lets through
# What a narrowed emptiness command's record says anew; the rest (its gate, its deadline) stays.
NARROWED_KEYS = (
    "candidates",
    "nodepools",
    "text",
    "savings",
    "fingerprint",
    "nodeStates",
    "destinations",
    "risks",
    "assessment",
)


def queue_nodes(ctx: ClusterContext, excluding: Collection[str] = ()) -> tuple[set[str], set[str]]:
    """The nodes the queue speaks for (every live command's candidates: no candidates again) and, of those, the ones
    on their way out (candidates of approved and executing commands: no destinations, their pods moving), leaving
    out the commands named in `excluding`."""
    busy: set[str] = set()
    gone: set[str] = set()
    for command in live_commands(ctx):
        if command["metadata"]["name"] in excluding:
            continue
        nodes = {c["node"] for c in command["spec"]["candidates"]}
        busy |= nodes
        if command["status"].get("phase") in ("Approved", "Executing"):
            gone |= nodes
    return busy, gone


def next_due(ctx: ClusterContext) -> list[float]:
    times = []
    for command in live_commands(ctx):
        status = command.get("status") or {}
        if status.get("phase") == "Proposed":
            times.append(parse_timestamp(status["validateAt"]))
        elif status.get("phase") == "AwaitingApproval":
            times.append(parse_timestamp(status["expiresAt"]))
        elif status.get("phase") == "Approved" and ctx.paused:
            # Waiting out a pause: nothing to do before it lapses, or before the command's own deadline passes.
            times.append(ctx.paused_until)
            if status.get("expiresAt"):
                times.append(parse_timestamp(status["expiresAt"]))
        elif status.get("phase") in ("Approved", "Executing"):
            times.append(ctx.now + DRAIN_RETRY_SECONDS)
        for moment in (command["spec"].get("forceAt"), status.get("retryAt")):
            if moment:
                times.append(parse_timestamp(moment))  # a repair forced, or a blocked one looked at again
    return times


def reconcile(ctx: ClusterContext) -> bool:
    changed = False
    for command in live_commands(ctx):
        if ctx.backing_off("disruption.queue", command):
            continue
        with ctx.guard("disruption.queue", command):
            changed |= advance(ctx, command)
    return changed


def advance(ctx: ClusterContext, command: Obj) -> bool:
    """Move one command through its life by one step: validate, gate, re-check, start, execute, finish."""
    status = command["status"]
    phase = status.get("phase")
    approval = command["spec"].get("approval") or {}
    force_at = command["spec"].get("forceAt")
    if force_at and phase in ("Proposed", "AwaitingApproval", "Approved") and ctx.now >= parse_timestamp(force_at):
        return _force(ctx, command)
    if command["spec"].get("withdrawn") and phase in ("Proposed", "AwaitingApproval", "Approved"):
        withdrawn = command["spec"]["withdrawn"]
        return _finish(ctx, command, "Withdrawn", f"withdrawn by {withdrawn.get('by')}: {withdrawn.get('reason')}")
    if phase in ("Proposed", "AwaitingApproval") and approval.get("decision") == "denied":
        # A request can be denied as soon as it exists, before its validation.
        return _finish(ctx, command, "Denied", f"denied by {approval.get('by')}: {approval.get('reason')}")
    if phase == "Proposed" and ctx.now >= parse_timestamp(status["validateAt"]):
        check = validate(ctx, command)
        _note_check(ctx, command, check, karpenters=True)
        why = check.rejection
        if why:
            consolidation_events.rejected(ctx, command, why)
            return _finish(
                ctx, command, "Rejected", f"Consolidation rejected: {command['spec']['text']}, reason: {why}"
            )
        _narrow(ctx, command, check)
        status["validatedAt"] = timestamp(ctx.now)
        return _gate(ctx, command)
    if phase == "AwaitingApproval":
        if approval.get("decision") == "approved":
            status["phase"] = "Approved"
            ctx.api.update(command)
            return True
        check = validate(ctx, command)
        noted = _note_check(ctx, command, check)
        if check.problem and not check.budget:
            return _finish(ctx, command, "Expired", f"expired: {check.problem}")
        if check.plan is not None and check.comparison.changed:
            return supersede(ctx, command, check)
        if ctx.now >= parse_timestamp(status["expiresAt"]):
            return _finish(ctx, command, "Expired", "expired: nobody decided before the deadline")
        return noted
    if phase == "Approved":
        if ctx.paused:
            return _hold(ctx, command)
        waiting = _waiting_for(ctx, command)
        if waiting:
            return _wait(ctx, command, waiting)
        recheck_now = validate(ctx, command)
        # A command karpui approved by itself has no person's approval that a change could overtake: it runs when
        # Karpenter's validation would run it, as Karpenter's queue starts a command its validation passed.
        automatic = approval.get("by") == AUTO_APPROVER
        _note_check(ctx, command, recheck_now, karpenters=automatic)
        why = recheck_now.rejection if automatic else recheck_now.problem
        if why and not recheck_now.budget:
            return _finish(ctx, command, "Expired", f"expired after approval: {why}")
        if why:
            return _wait(ctx, command, why)
        if automatic:
            _narrow(ctx, command, recheck_now)
        elif recheck_now.plan is not None and recheck_now.comparison.changed:
            return supersede(ctx, command, recheck_now)
        return _start(ctx, command)
    if phase == "Executing":
        # A pause does not stop a command already executing: its candidates are tainted (and may be draining) and
        # its replacements launching; stopping half-way would leave both, and evicted pods cannot be put back. The
        # pause holds only what has not begun (`_hold`).
        return _execute(ctx, command)
    return False


def _wait(ctx: ClusterContext, command: Obj, why: str) -> bool:
    """An approved command that cannot start yet (an earlier step of its batch, a disruption budget) waits, saying
    why, until its deadline: once past it, it expires as an undecided one would."""
    status = command["status"]
    deadline = status.get("expiresAt") or timestamp(
        parse_timestamp((command["spec"].get("approval") or {}).get("at") or status["proposedAt"])
        + APPROVAL_TTL_SECONDS
    )
    if ctx.now >= parse_timestamp(deadline):
        return _finish(ctx, command, "Expired", f"expired after approval: waited past its deadline ({why})")
    message = f"waiting: {why}"
    if status.get("message") == message:
        return False
    status["message"] = message
    ctx.api.update(command)
    return True


def _hold(ctx: ClusterContext, command: Obj) -> bool:
    """Keep an approved command from starting while disruption is paused (README: no voluntary disruption until
    the pause lapses), saying so in its message; once the pause lapses or is resumed it is validated and starts
    as any approved command does. A deadline it was given (a manual command's approval TTL) still runs: a decision
    that has waited past it expires, as an undecided one would."""
    status = command["status"]
    if status.get("expiresAt") and ctx.now >= parse_timestamp(status["expiresAt"]):
        return _finish(ctx, command, "Expired", "expired after approval: disruption was paused past its deadline")
    message = f"waiting: voluntary disruption is paused until {timestamp(ctx.paused_until)}"
    if status.get("message") == message:
        return False  # already said: waiting changes nothing
    status["message"] = message
    ctx.api.update(command)
    return True


def execution_order(command: Obj) -> tuple[str, int, str, str]:
    """Approved commands run in the order they were approved; a batch approved together in its steps' order."""
    approval = command["spec"].get("approval") or {}
    batch = approval.get("batch") or {}
    return (
        str(approval.get("at") or ""),
        int(batch.get("step", 0)),
        str(command["spec"].get("queuedAt") or command["status"].get("proposedAt") or ""),
        command["metadata"]["name"],
    )


def departing(ctx: ClusterContext, command: Obj) -> set[str]:
    """The nodes on their way out before `command` would run: every executing command's candidates, and the
    candidates of approved commands that run before it (for a command not approved yet, of every approved one)."""
    approved = command["status"].get("phase") == "Approved"
    mine = execution_order(command)
    gone: set[str] = set()
    for other in live_commands(ctx):
        if other["metadata"]["name"] == command["metadata"]["name"]:
            continue
        phase = other["status"].get("phase")
        if phase == "Executing" or (phase == "Approved" and (not approved or execution_order(other) < mine)):
            gone.update(c["node"] for c in other["spec"]["candidates"])
    return gone


def _waiting_for(ctx: ClusterContext, command: Obj) -> str | None:
    """An earlier step of the command's batch that has not finished yet: each step is re-checked on the cluster the
    steps before it left."""
    batch = (command["spec"].get("approval") or {}).get("batch") or {}
    if not batch:
        return None
    for other in live_commands(ctx):
        theirs = (other["spec"].get("approval") or {}).get("batch") or {}
        if theirs.get("id") == batch.get("id") and int(theirs.get("step", 0)) < int(batch.get("step", 0)):
            return f"step {theirs['step']} of its batch ({other['metadata']['name']}) has not finished"
    return None


def validate(ctx: ClusterContext, command: Obj) -> Recheck:
    """Karpenter's validation, and the gate's re-check: the command planned again on the cluster now (`recheck`).
    A command awaiting approval is re-checked at every step; while neither it nor anything the re-check reads has
    changed, the answer is the one already found (`validation_inputs`)."""
    gone = departing(ctx, command)
    if command["spec"]["reason"] in (OVERPROVISIONED, repair.UNHEALTHY):
        # A static NodePool's scale-down is no simulation: it holds while it still has more nodes than replicas. A
        # repair ignores do-not-disrupt: it holds while the node is still sick (its budget is read as it starts).
        def still() -> Recheck:
            if command["spec"]["reason"] == repair.UNHEALTHY:
                return Recheck(None, repair.problem(ctx, command))
            return Recheck(None, _still_overprovisioned(ctx, command))

        return ctx.memo(f"validate/{command['metadata']['uid']}", validation_inputs(ctx, command), still)
    return ctx.memo(
        f"validate/{command['metadata']['uid']}",
        (validation_inputs(ctx, command), tuple(sorted(gone))),
        lambda: recheck(ctx, command, gone),
    )


def validation_inputs(ctx: ClusterContext, command: Obj) -> tuple[Any, ...]:
    """What a validation reads that can change: the snapshot's inputs, what the clock changes in it (a
    nomination's end is read only as "nominated now"), and the command itself (its version, and the commands'
    kind version: a command a person decided on while a warm engine ran may come back at the version the engine
    had given its own change of it)."""
    return (
        snapshot_inputs(ctx),
        clock_inputs(ctx),
        command["metadata"].get("resourceVersion"),
        ctx.api.kind_version("DisruptionCommand"),
    )


def _note_check(ctx: ClusterContext, command: Obj, check: Recheck, *, karpenters: bool = False) -> bool:
    """Record a re-check on the command when its answer differs from the last one recorded (a command waiting an
    hour is re-checked on every change; its record says when the answer changed). With `karpenters`, Karpenter's
    validation decides (a proposal, or a command karpui approved by itself): a change that it lets run is recorded
    as holding, saying what changed, not as a plan gone invalid."""
    passes = karpenters and check.karpenter is not None and check.karpenter.problem is None
    if passes and not check.holds:
        changed = check.problem or "; ".join(check.comparison.changes)
        entry = {"result": "holds", "detail": f"Karpenter's validation passes; the plan changed: {changed}"}
    elif check.problem:
        entry = {"result": "budget" if check.budget else "invalid", "detail": check.problem}
    elif check.comparison.changed:
        entry = {
            "result": "material" if check.comparison.material else "changed",
            "detail": "; ".join(check.comparison.changes),
        }
    else:
        entry = {"result": "holds", "detail": "the plan holds on the cluster now"}
    checks = command["status"].get("checks") or []
    if checks and {k: checks[-1].get(k) for k in entry} == entry:
        return False
    append(command["status"], "checks", {"at": timestamp(ctx.now), **entry})
    ctx.api.update(command)
    return True


def supersede(ctx: ClusterContext, command: Obj, check: Recheck) -> bool:
    """The command's plan changed: it does not run. A new command with the plan of now takes its place in the queue
    (`queuedAt`), its deadline, its requester and its approver's note; it needs approving again only when the
    change is material (module plans), or when it was never approved."""
    assert check.plan is not None
    spec, status = command["spec"], command["status"]
    approval = spec.get("approval") or {}
    approved = approval.get("decision") == "approved"
    confirmed_plan = bool((approval.get("batch") or {}).get("confirmed"))
    more_evictions = PlanSummary.of(check.plan).evicted > PlanSummary.from_spec(spec).evicted
    # Approving a batch whose combined plan launched nodes confirmed those launches; not more evictions.
    material = check.comparison.material and not (confirmed_plan and not more_evictions)
    name = command_name(check.plan, ctx)
    carried = {
        key: spec[key] for key in ("requestedBy", "requestReason", "approvalThreshold") if spec.get(key) is not None
    }
    successor = command_object(
        ctx,
        check.plan,
        name,
        mode=spec.get("approvalMode", "auto"),
        threshold=spec.get("approvalThreshold"),
        spec={
            **carried,
            "supersedes": command["metadata"]["name"],
            "lineage": spec.get("lineage") or command["metadata"]["name"],
            "queuedAt": spec.get("queuedAt") or status.get("proposedAt"),
            "changes": list(check.comparison.changes),
            **({"previousApproval": approval} if approval else {}),
        },
        status={
            "phase": "Proposed",
            "proposedAt": timestamp(ctx.now),
            "validateAt": timestamp(ctx.now),
            "validatedAt": timestamp(ctx.now),
            **({"expiresAt": status["expiresAt"]} if status.get("expiresAt") else {}),
        },
    )
    if approved and not material:
        successor["spec"]["approval"] = {**approval, "carriedFrom": command["metadata"]["name"]}
        successor["status"]["phase"] = "Approved"
    else:
        _gate(ctx, successor, write=False)
    ctx.api.create(successor)
    status["supersededBy"] = name
    verb = "needs approving again" if approved and material else "carries its approval" if approved else "waits"
    return _finish(
        ctx,
        command,
        "Superseded",
        f"superseded by {name} ({verb}): {'; '.join(check.comparison.changes)}",
        # A successor that carries the approval over the same nodes keeps them held.
        release=not (approved and not material and _same_nodes(spec, check.plan)),
    )


def _narrow(ctx: ClusterContext, command: Obj, check: Recheck) -> None:
    """An emptiness command runs with those of its nodes still empty, as Karpenter's emptiness validation keeps
    them: its record is rewritten to say so, so that only they are drained. Its caller stores it."""
    spec = command["spec"]
    plan = check.plan
    if spec["reason"] != EMPTY or plan is None or _same_nodes(spec, plan):
        return
    dropped = sorted({c["node"] for c in spec["candidates"]} - {c.name for c in plan.candidates})
    fresh = command_object(
        ctx,
        plan,
        command["metadata"]["name"],
        mode=spec.get("approvalMode", "auto"),
        threshold=spec.get("approvalThreshold"),
    )["spec"]
    for key in NARROWED_KEYS:
        spec[key] = fresh[key]
    append(
        command["status"],
        "steps",
        {"at": timestamp(ctx.now), "step": f"narrowed to the nodes still empty: {', '.join(dropped)} left out"},
    )


def _same_nodes(spec: dict[str, Any], plan: Command) -> bool:
    return sorted(c["node"] for c in spec["candidates"]) == sorted(c.name for c in plan.candidates)


def _still_overprovisioned(ctx: ClusterContext, command: Obj) -> str | None:
    """A static NodePool's scale-down holds while its candidates exist and deleting them leaves the replicas it
    wants (nodes other live commands are taking count as gone)."""
    name = command["spec"]["nodepools"][0]
    pool = ctx.nodepool(name)
    if pool is None or not pool.static:
        return f"churn (NodePool {name} is gone or no longer static)"
    mine = {c["nodeclaim"] for c in command["spec"]["candidates"]}
    others = {
        c["nodeclaim"]
        for other in live_commands(ctx)
        if other["metadata"]["name"] != command["metadata"]["name"]
        for c in other["spec"]["candidates"]
    }
    claims = {
        c["metadata"]["name"]
        for c in ctx.api.list("NodeClaim")
        if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == name
        and not c["metadata"].get("deletionTimestamp")
    }
    missing = sorted(mine - claims)
    if missing:
        return f"churn ({missing[0]} is gone)"
    left = len(claims - mine - others)
    if left < (pool.replicas or 0):
        return f"churn (NodePool {name} now wants {pool.replicas} replicas, {left} would be left)"
    return None


def _force(ctx: ClusterContext, command: Obj) -> bool:
    """A repair past its toleration: forced whatever was decided (or not yet), unless the node recovered."""
    problem = repair.problem(ctx, command)
    if problem:
        return _finish(ctx, command, "Expired", f"expired: {problem}")
    if not command["status"].get("forced"):
        command["status"]["forced"] = repair.forced_message(command, command["spec"].get("overruled", ""))
    return _start_repair(ctx, command)


def _start_repair(ctx: ClusterContext, command: Obj) -> bool:
    """Repair the node unless its pods block a drain it has no bound for, too many of its NodePool's are unhealthy
    (then look again in five minutes), its budget allows no more or no replacement can be staged (otherwise at the
    next pass). v1.15's method launches the replacements first and deletes the node once they are initialized
    (_execute); the legacy controller, and an empty node, delete at once."""
    status = command["status"]
    if status.get("retryAt") and ctx.now < parse_timestamp(status["retryAt"]):
        return False
    for hold, retry in (
        (repair.hold_for_drain, repair.BUDGET_RETRY_SECONDS),
        (repair.hold_for_health, repair.BLOCKED_RETRY_SECONDS),
        (repair.hold_for_budget, repair.BUDGET_RETRY_SECONDS),
    ):
        blocked = hold(ctx, command)
        if blocked:
            status.update(message=f"blocked: {blocked}", retryAt=timestamp(ctx.now + retry))
            ctx.api.update(command)
            return True
    staged = () if repair.legacy(ctx) else repair.replacements(ctx, command)
    if isinstance(staged, str):
        status.update(message=f"blocked: {staged}", retryAt=timestamp(ctx.now + repair.BUDGET_RETRY_SECONDS))
        ctx.api.update(command)
        return True
    for key in ("message", "retryAt"):
        status.pop(key, None)
    if staged:
        _as_replace(command, staged)
    ctx.log(
        LogRecord("disrupting node(s)", {**_log_fields(command), "command": command["spec"]["text"]}, logger=LOGGER)
    )
    names = []
    if staged:
        _taint(ctx, command)
        for plan in staged:
            claim = create_nodeclaim(ctx, plan)  # logs "created nodeclaim"
            names.append(claim["metadata"]["name"])
            step = f"launched NodeClaim {claim['metadata']['name']} in {plan.nodepool} before the repair"
            append(status, "steps", {"at": timestamp(ctx.now), "step": step})
    else:
        repair.begin(ctx, command)
    status.update(phase="Executing", startedAt=timestamp(ctx.now), replacementNodeClaims=names)
    ctx.api.update(command)
    return True


def _as_replace(command: Obj, plans: tuple[NodeClaimPlan, ...]) -> None:
    """A repair proposed as a delete, found at its start to need replacements: it now reads as the replace it is, on
    the queue and in Command.String (`-> [n replacement(s)]`, types.go:350-379)."""
    spec = command["spec"]
    count = len(plans)
    arrow = f" -> [{count} replacement{'s' if count > 1 else ''}]"
    text = spec["text"].replace(": delete: ", ": replace: ", 1)
    cut = text.rfind(" (savings: ")
    spec.update(decision="replace", replacements=[plan_spec(p) for p in plans], text=text[:cut] + arrow + text[cut:])
    command["metadata"].setdefault("labels", {})["karpui.dev/decision"] = "replace"


def _start(ctx: ClusterContext, command: Obj) -> bool:
    """Taint the candidates, launch the replacements, and only then let termination begin. Observing a real
    Karpenter, which does all of that, release the command to it (`holds`); a person's request for a node, which
    Karpenter never chose, is carried out by deleting its NodeClaim and leaving the drain to Karpenter."""
    if command["spec"]["reason"] == repair.UNHEALTHY:
        return _start_repair(ctx, command)  # approved before its toleration ended: repaired now
    command["status"].pop("message", None)  # a pause it waited out is over
    if ctx.observe and command["spec"]["reason"] != MANUAL:
        holds.release(ctx, command)  # Karpenter carries it out, let through the gate for exactly these nodes
        ctx.api.update(command)
        return True
    ctx.log(
        LogRecord(
            "disrupting node(s)",
            {"command": command["spec"]["text"], **_log_fields(command)},  # Karpenter's order (queue.go:388-390)
            logger="controller.disruption",
        )
    )
    if any(_written_at_v1beta1(ctx, name) for name in command["spec"]["nodepools"]):
        ctx.log(disruption_logs.disrupting_v1beta1(command, _method_type(ctx, command)))
    status = command["status"]
    if ctx.observe:
        # A person's request for a node Karpenter did not choose: its NodeClaim is deleted, and Karpenter drains
        # and terminates it (PDBs and do-not-disrupt pods as for any deleted NodeClaim).
        for candidate in command["spec"]["candidates"]:
            claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
            if claim is not None and not claim["metadata"].get("deletionTimestamp"):
                ctx.api.delete("NodeClaim", candidate["nodeclaim"])
                ctx.log(
                    LogRecord(
                        "deleted nodeclaim",
                        {"NodeClaim": {"name": candidate["nodeclaim"]}, "reason": command["spec"]["reason"]},
                        logger=LOGGER,
                    )
                )
                append(
                    status, "steps", {"at": timestamp(ctx.now), "step": f"deleted NodeClaim {candidate['nodeclaim']}"}
                )
        status.update(phase="Executing", startedAt=timestamp(ctx.now), replacementNodeClaims=[])
        ctx.api.update(command)
        return True
    _hold_batch(ctx, command)
    _taint(ctx, command)
    append(status, "steps", {"at": timestamp(ctx.now), "step": f"tainted {len(command['spec']['candidates'])} node(s)"})
    names = []
    for spec in command["spec"]["replacements"]:
        claim = create_nodeclaim(ctx, _plan_from_spec(ctx, spec))  # logs "created nodeclaim"
        names.append(claim["metadata"]["name"])
        append(
            status,
            "steps",
            {"at": timestamp(ctx.now), "step": f"launched NodeClaim {claim['metadata']['name']} in {spec['nodepool']}"},
        )
    status.update(phase="Executing", startedAt=timestamp(ctx.now), replacementNodeClaims=names)
    ctx.api.update(command)
    return True


def _taint(ctx: ClusterContext, command: Obj) -> None:
    for candidate in command["spec"]["candidates"]:
        node = ctx.api.get("Node", candidate["node"])
        if node is not None:
            taint_disrupted(ctx, node, None)  # as Karpenter's disruption controller taints: without a log line
        claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
        # Karpenter's static deprovisioning deletes the NodeClaim without a disruption reason: karpui's gate runs it
        # as a command, and says so on its own record, not on the NodeClaim.
        overprovisioned = command["spec"]["reason"] == OVERPROVISIONED
        if claim is not None and not overprovisioned and not is_true(claim, DISRUPTION_REASON):
            set_claim_condition(
                claim, DISRUPTION_REASON, "True", ctx.now, command["spec"]["reason"], command["spec"]["reason"]
            )
            ctx.api.update(claim)


def _hold_batch(ctx: ClusterContext, command: Obj) -> None:
    """Taint the candidates of the later steps of `command`'s batch now (they are "held" until their turn)."""
    batch = (command["spec"].get("approval") or {}).get("batch") or {}
    if not batch:
        return
    for other in live_commands(ctx):
        theirs = (other["spec"].get("approval") or {}).get("batch") or {}
        if (
            other["metadata"]["name"] != command["metadata"]["name"]
            and theirs.get("id") == batch.get("id")
            and other["status"].get("phase") == "Approved"
            and not other["status"].get("held")
        ):
            _taint(ctx, other)
            other["status"]["held"] = True
            append(
                other["status"],
                "steps",
                {"at": timestamp(ctx.now), "step": f"held: its nodes tainted when step {batch.get('step')} started"},
            )
            ctx.api.update(other)


def _execute(ctx: ClusterContext, command: Obj) -> bool:
    status = command["status"]
    if ctx.observe and "release" in status:
        return _follow(ctx, command)
    replacements = [ctx.api.get("NodeClaim", n) for n in status.get("replacementNodeClaims") or []]
    waited = ctx.now - parse_timestamp(status["startedAt"])
    if any(r is None for r in replacements) or (
        waited > MIN_RETRY_SECONDS  # the queue is counted only once the shortest timeout has passed
        and waited > max_retry_seconds(_queued(ctx))
        and not all(is_true(r, "Initialized") for r in replacements if r)
    ):
        return _finish(
            ctx, command, "Failed", "a replacement NodeClaim failed to launch or initialize; candidates untainted"
        )
    if not status.get("replacementsReady"):
        _replacement_events(ctx, [r for r in replacements if r is not None], command["spec"]["reason"])
    if not all(is_true(r, "Initialized") for r in replacements if r is not None):
        return False  # old nodes stay until every replacement is initialized
    if command["spec"]["reason"] != repair.UNHEALTHY and ctx.now - parse_timestamp(status["startedAt"]) < QUEUE_SECONDS:
        # The orchestration queue takes the command up at its next pass; a repair is the health controller's own
        # deletion (repair.begin), never queued.
        return False
    if replacements and not status.get("replacementsReady"):
        status["replacementsReady"] = timestamp(ctx.now)
        status["launchedPrices"] = {r["metadata"]["name"]: claim_price(r) for r in replacements if r is not None}
        append(status, "steps", {"at": timestamp(ctx.now), "step": f"{len(replacements)} replacement(s) initialized"})
    pending = deleted = False
    for candidate in command["spec"]["candidates"]:
        claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
        if claim is None:
            continue
        pending = True
        if not claim["metadata"].get("deletionTimestamp"):
            if command["spec"]["reason"] == repair.UNHEALTHY:
                # Its replacements are up: the drain's deadline is stamped only now, so their launch does not eat
                # into it (queue.go:236), and the NodeClaim deleted.
                repair.begin(ctx, command)
            else:
                ctx.api.delete("NodeClaim", candidate["nodeclaim"])
            if command["spec"]["reason"] not in (OVERPROVISIONED, repair.UNHEALTHY):
                # Static deprovisioning tells no event (see _taint); a repair tells its own.
                _terminating_events(ctx, claim, candidate["node"], command["spec"]["reason"])
            append(status, "steps", {"at": timestamp(ctx.now), "step": f"deleted NodeClaim {candidate['nodeclaim']}"})
            deleted = True
    if deleted:
        ctx.api.update(command)
    if pending:
        # Waiting for termination to drain the candidates changes nothing here: only a deletion is progress (the
        # command's wake-up every DRAIN_RETRY_SECONDS looks again). Reporting a change every step made each
        # settle spin to its round limit while a node drained.
        return deleted
    status["completedAt"] = timestamp(ctx.now)
    append(status, "steps", {"at": timestamp(ctx.now), "step": "every candidate drained and deleted"})
    return _finish(ctx, command, "Succeeded", "command succeeded")


def max_retry_seconds(queued: int) -> float:
    """GetMaxRetryDuration (queue.go:88-94): the timeout of a started command with `queued` candidates in the queue."""
    return min(max(queued * RETRY_MILLISECONDS_PER_CANDIDATE / 1000, MIN_RETRY_SECONDS), MAX_RETRY_SECONDS)


def _queued(ctx: ClusterContext) -> int:
    """The candidates of the started commands: Karpenter's queue holds one entry per candidate (queue.go:440)."""
    return sum(len(c["spec"]["candidates"]) for c in live_commands(ctx) if c["status"].get("phase") == "Executing")


def _replacement_events(ctx: ClusterContext, replacements: list[Obj], reason: str) -> None:
    """Karpenter's queue, at each pass while a command waits for its replacements (queue.go waitOrTerminate): each
    replacement is "Launching", and "Waiting on readiness" until it is initialized."""
    for claim in replacements:
        launching = f"Launching NodeClaim: {_title(reason)}"
        ctx.event(claim, "Normal", "DisruptionLaunching", launching, dedupe_seconds=RECORDER_DEDUPE_SECONDS)
        if not is_true(claim, "Initialized"):
            waiting = "Waiting on readiness to continue disruption"
            ctx.event(claim, "Normal", "DisruptionWaitingReadiness", waiting, dedupe_seconds=RECORDER_DEDUPE_SECONDS)


def _terminating_events(ctx: ClusterContext, claim: Obj, node_name: str, reason: str) -> None:
    """Karpenter's "Disrupting Node" and "Disrupting NodeClaim" once a candidate's deletion is asked for."""
    node = ctx.api.get("Node", node_name)
    if node is not None:
        ctx.event(node, "Normal", "DisruptionTerminating", f"Disrupting Node: {_title(reason)}")
    ctx.event(claim, "Normal", "DisruptionTerminating", f"Disrupting NodeClaim: {_title(reason)}")


def _title(reason: str) -> str:
    """Go's cases.Title without lowering: each word's first letter upper-cased ("underutilized" -> "Underutilized")."""
    return " ".join(word[:1].upper() + word[1:] for word in reason.split(" "))


def _follow(ctx: ClusterContext, command: Obj) -> bool:
    """A command released to a real Karpenter: watch it take (or not take) the candidates."""
    before = json.dumps(command["status"], sort_keys=True)
    outcome = holds.follow(ctx, command)
    if outcome is not None:
        phase, message = outcome
        if phase == "Succeeded":
            command["status"]["completedAt"] = timestamp(ctx.now)
        return _finish(ctx, command, phase, message)
    if json.dumps(command["status"], sort_keys=True) == before:
        return False
    ctx.api.update(command)
    return True


def _gate(ctx: ClusterContext, command: Obj, *, write: bool = True) -> bool:
    """Apply the NodePool's approval mode to a validated command (`write`: store the change; a command not yet
    created is only filled in). A deadline it already has (a superseded command's) is kept."""
    spec, status = command["spec"], command["status"]
    mode = spec.get("approvalMode", "auto")
    if spec["reason"] == repair.UNHEALTHY and mode != "dry-run":
        # Karpenter repairs when the toleration ends, never sooner: `auto` waits for it too, and anyone may
        # approve a repair sooner (the force at forceAt needs no decision).
        status.update(phase="AwaitingApproval", expiresAt=spec["forceAt"])
        if write:
            ctx.api.update(command)
        return True
    deadline = status.get("expiresAt") or timestamp(ctx.now + APPROVAL_TTL_SECONDS)
    if spec["reason"] == "Manual":
        status.update(phase="AwaitingApproval", expiresAt=deadline)
    elif mode == "dry-run":
        if not write:
            status.update(
                phase="DryRun", message="recorded only (dry-run): never executed", finishedAt=timestamp(ctx.now)
            )
            return True
        return _finish(ctx, command, "DryRun", "recorded only (dry-run): never executed")
    elif mode == "auto" or (
        mode == "auto-below"
        and spec.get("approvalThreshold") is not None
        and spec["savings"] <= float(spec["approvalThreshold"])
        and not spec.get("risks")
    ):
        spec["approval"] = {"decision": "approved", "by": AUTO_APPROVER, "at": timestamp(ctx.now)}
        status["phase"] = "Approved"
    else:
        status.update(phase="AwaitingApproval", expiresAt=deadline)
    if write:
        ctx.api.update(command)
    return True


# Phases in which a command ends without having run: nodes it held are let go.
UNRUN = ("Rejected", "Expired", "Denied", "Withdrawn", "Superseded", "Failed")


def _finish(ctx: ClusterContext, command: Obj, phase: str, message: str, *, release: bool = True) -> bool:
    status = command["status"]
    status.update(phase=phase, message=message, finishedAt=timestamp(ctx.now))
    if phase in UNRUN and release and (status.get("held") or phase == "Failed"):
        _untaint(ctx, command)
        status.pop("held", None)
    ctx.api.update(command)
    ctx.memos.pop(f"validate/{command['metadata']['uid']}", None)  # finished: never validated again
    if phase in ("Rejected", "Expired", "Failed", "Denied"):
        # The fields of its "disrupting node(s)" line (the nodes' and replacements' instance types, the pods), so a
        # rejected proposal says what it would have done; the status message under a key of its own, never the
        # line's `message`.
        fields = {"command": command["spec"]["text"], "status-message": message, **_log_fields(command)}
        ctx.log(LogRecord(f"disruption command {phase.lower()}", fields, logger="controller.disruption"))
    return True


def _untaint(ctx: ClusterContext, command: Obj) -> None:
    """A failed command gives its candidates back: no disrupted taint, no DisruptionReason (Karpenter's queue)."""
    for candidate in command["spec"]["candidates"]:
        release(ctx, ctx.api.get("Node", candidate["node"]), ctx.api.get("NodeClaim", candidate["nodeclaim"]))


def release(ctx: ClusterContext, node: Obj | None, claim: Obj | None) -> bool:
    """Remove the `karpenter.sh/disrupted` taint from the node and the DisruptionReason condition from its NodeClaim;
    True if either was there."""
    changed = False
    if node is not None and has_disrupted_taint(node):
        node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t.get("key") != DISRUPTED]
        ctx.api.update(node)
        changed = True
    if claim is not None and clear_condition(claim, DISRUPTION_REASON):
        ctx.api.update(claim)
        changed = True
    return changed


def self_heal(ctx: ClusterContext) -> bool:
    """Karpenter's disruption loop first gives back nodes a command left tainted (a failure, a restart): every node
    that no executing command holds and that is not being deleted loses the disrupted taint and DisruptionReason."""
    inputs = tuple(ctx.api.kind_version(kind) for kind in ("Node", "NodeClaim", "DisruptionCommand"))
    if ctx.memos.get("disruption/self-heal", (None,))[0] == inputs:
        return False
    held = {
        c["node"]
        for command in ctx.api.list("DisruptionCommand", fields={"status.phase": "Executing"})
        for c in command["spec"]["candidates"]
    } | {
        # A batch's later steps hold their nodes (tainted) from its first step on.
        c["node"]
        for command in ctx.api.list("DisruptionCommand", fields={"status.phase": "Approved"})
        if command["status"].get("held")
        for c in command["spec"]["candidates"]
    }
    changed = False
    for claim in ctx.api.list("NodeClaim"):
        node_name = (claim.get("status") or {}).get("nodeName") or ""
        node = ctx.api.get("Node", node_name) if node_name else None
        deleting = claim["metadata"].get("deletionTimestamp") or (node or {}).get("metadata", {}).get(
            "deletionTimestamp"
        )
        if deleting or node_name in held or not is_true(claim, "Initialized"):
            continue
        with ctx.guard("disruption", claim):
            changed |= release(ctx, node, claim)
    ctx.memos["disruption/self-heal"] = (
        tuple(ctx.api.kind_version(kind) for kind in ("Node", "NodeClaim", "DisruptionCommand")),
        None,
    )
    return changed


def _plan_from_spec(ctx: ClusterContext, spec: dict[str, Any]) -> NodeClaimPlan:
    """The replacement a command stored, rebuilt with the NodePool's catalog types (types since removed drop out)."""
    pool = next(np for np in ctx.nodepools if np.name == spec["nodepool"])
    if spec.get("static"):
        return static_plan(pool)  # a static NodePool's NodeClaim as its template is now
    types = ctx.instance_types_for(pool)
    if types is None:
        # Karpenter's queue holds the replacement NodeClaims it was given: NodeOverlays awaiting evaluation for the
        # NodePool do not take their types away.
        types = ctx.cloud.instance_types(pool)
    by_name = {it.name: it for it in types or []}
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


def _written_at_v1beta1(ctx: ClusterContext, name: str) -> bool:
    """Whether the NodePool was written as a karpenter.sh/v1beta1 one (its conversion keeps the v1beta1 reference)."""
    nodepool = ctx.nodepool(name)
    return nodepool is not None and NODECLASS_ANNOTATION in nodepool.annotations


def _method_type(ctx: ClusterContext, command: Obj) -> str:
    """Karpenter v0.3x's name for the method that decided: an empty node under WhenEmpty is emptiness's, under
    WhenUnderutilized the empty-node consolidation's."""
    reason = command["spec"]["reason"]
    if reason == "Empty":
        nodepool = ctx.nodepool(command["spec"]["nodepools"][0])
        return "emptiness" if nodepool is not None and nodepool.consolidation_policy == WHEN_EMPTY else "consolidation"
    return {"Drifted": "drift", "Expired": "expiration"}.get(reason, "consolidation")


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
        "replacement-nodes": disruption_logs.replacement_nodes(
            [(Requirements.from_specs(r.get("requirements") or []), r["instanceTypes"]) for r in spec["replacements"]]
        ),
    }
