"""The disruption command queue: a proposed `DisruptionCommand` waits 15 s, is validated again, passes the human
gate (its NodePool's approval mode), is validated once more when approved, then runs: taint the candidates, launch
the replacements, wait until they are initialized, delete the candidates (termination drains them).

A command's `status.phase` records its life: Proposed → (validated) → AwaitingApproval → Approved | Denied | Expired,
or DryRun, or Rejected (it no longer held at validation); Approved → Executing → Succeeded | Failed. People approve
and deny through karpui's services, which write `spec.approval`; nothing executes without a validation newer than
the decision. While a person has paused voluntary disruption, an approved command waits in Approved (`_hold`).
"""

from __future__ import annotations

from typing import Any

from provisioner.cluster.conditions import is_true, set_condition
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import create_nodeclaim
from provisioner.controllers.snapshot import clock_inputs, cluster_view, snapshot_inputs
from provisioner.controllers.termination import DRAIN_RETRY_SECONDS, taint_disrupted
from provisioner.disruption.candidates import build_candidates
from provisioner.disruption.consolidation import compute
from provisioner.disruption.types import Command
from provisioner.quantity import parse_resources
from provisioner.requirements import Requirements
from provisioner.scheduling.logs import LogRecord
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from provisioner.taints import DISRUPTED, Taint

VALIDATION_SECONDS = 15.0
APPROVAL_TTL_SECONDS = 3600.0
REPLACEMENT_TIMEOUT_SECONDS = 600.0
LIVE_PHASES = ("Proposed", "AwaitingApproval", "Approved", "Executing")
LOGGER = "controller.disruption"


def live_commands(ctx: ClusterContext) -> list[Obj]:
    """Commands still on their way (finished ones are history the queue never looks at again), oldest name first."""
    live = [c for phase in LIVE_PHASES for c in ctx.api.list("DisruptionCommand", fields={"status.phase": phase})]
    return sorted(live, key=lambda c: c["metadata"]["name"])


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
    return times


def reconcile(ctx: ClusterContext) -> bool:
    changed = False
    for command in live_commands(ctx):
        with ctx.guard("disruption.queue", command):
            changed |= advance(ctx, command)
    return changed


def advance(ctx: ClusterContext, command: Obj) -> bool:
    """Move one command through its life by one step: validate, gate, start, execute, finish."""
    status = command["status"]
    phase = status.get("phase")
    approval = command["spec"].get("approval") or {}
    if phase == "Proposed" and ctx.now >= parse_timestamp(status["validateAt"]):
        problem = validate(ctx, command)
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
            ctx.api.update(command)
            return True
        problem = validate(ctx, command)
        if problem or ctx.now >= parse_timestamp(status["expiresAt"]):
            return _finish(ctx, command, "Expired", f"expired: {problem or 'nobody decided before the deadline'}")
        return False
    if phase == "Approved":
        if ctx.paused:
            return _hold(ctx, command)
        # The decision may be older than the cluster: check again before touching anything.
        problem = validate(ctx, command)
        if problem:
            return _finish(ctx, command, "Expired", f"expired after approval: {problem}")
        return _start(ctx, command)
    if phase == "Executing":
        # A pause does not stop a command already executing: its candidates are tainted (and may be draining) and
        # its replacements launching; stopping half-way would leave both, and evicted pods cannot be put back. The
        # pause holds only what has not begun (`_hold`).
        return _execute(ctx, command)
    return False


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


def validate(ctx: ClusterContext, command: Obj) -> str | None:
    """Karpenter's validation: every candidate still a candidate within budget, and the same decision holds. A
    command awaiting approval is validated at every step; while neither it nor anything the validation reads has
    changed, the answer is the one already found (`validation_inputs`)."""
    return ctx.memo(
        f"validate/{command['metadata']['uid']}", validation_inputs(ctx, command), lambda: _validate(ctx, command)
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


def _validate(ctx: ClusterContext, command: Obj) -> str | None:
    view, claimed = cluster_view(ctx)
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


def _start(ctx: ClusterContext, command: Obj) -> bool:
    """Taint the candidates, launch the replacements, and only then let termination begin. Observing a cluster
    whose Karpenter does all of that, delete the candidates' NodeClaims and leave the rest to it."""
    ctx.log(
        LogRecord(
            "disrupting node(s)",
            {**_log_fields(command), "command": command["spec"]["text"]},
            logger="controller.disruption",
        )
    )
    command["status"].pop("message", None)  # a pause it waited out is over
    if ctx.observe:
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
        command["status"].update(phase="Executing", startedAt=timestamp(ctx.now), replacementNodeClaims=[])
        ctx.api.update(command)
        return True
    for candidate in command["spec"]["candidates"]:
        node = ctx.api.get("Node", candidate["node"])
        if node is not None:
            taint_disrupted(ctx, node, LOGGER)
        claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
        if claim is not None:
            set_condition(claim, "DisruptionReason", "True", ctx.now, command["spec"]["reason"])
            ctx.api.update(claim)
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
    ctx.api.update(command)
    return True


def _execute(ctx: ClusterContext, command: Obj) -> bool:
    status = command["status"]
    replacements = [ctx.api.get("NodeClaim", n) for n in status.get("replacementNodeClaims") or []]
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
    pending = deleted = False
    for candidate in command["spec"]["candidates"]:
        claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
        if claim is None:
            continue
        pending = True
        if not claim["metadata"].get("deletionTimestamp"):
            ctx.api.delete("NodeClaim", candidate["nodeclaim"])
            ctx.event(claim, "Normal", "DisruptionTerminating", f"Disrupting NodeClaim: {command['spec']['reason']}")
            deleted = True
    if pending:
        # Waiting for termination to drain the candidates changes nothing here: only a deletion is progress (the
        # command's wake-up every DRAIN_RETRY_SECONDS looks again). Reporting a change every step made each
        # settle spin to its round limit while a node drained.
        return deleted
    status["completedAt"] = timestamp(ctx.now)
    return _finish(ctx, command, "Succeeded", "command succeeded")


def _gate(ctx: ClusterContext, command: Obj) -> bool:
    """Apply the NodePool's approval mode to a validated command."""
    spec, status = command["spec"], command["status"]
    mode = spec.get("approvalMode", "auto")
    if spec["reason"] == "Manual":
        status.update(phase="AwaitingApproval", expiresAt=timestamp(ctx.now + APPROVAL_TTL_SECONDS))
        ctx.api.update(command)
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
    ctx.api.update(command)
    return True


def _finish(ctx: ClusterContext, command: Obj, phase: str, message: str) -> bool:
    command["status"].update(phase=phase, message=message, finishedAt=timestamp(ctx.now))
    ctx.api.update(command)
    ctx.memos.pop(f"validate/{command['metadata']['uid']}", None)  # finished: never validated again
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
        node = ctx.api.get("Node", candidate["node"])
        if node is not None:
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t.get("key") != DISRUPTED]
            ctx.api.update(node)


def _plan_from_spec(ctx: ClusterContext, spec: dict[str, Any]) -> NodeClaimPlan:
    """The replacement a command stored, rebuilt with the NodePool's catalog types (types since removed drop out)."""
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
