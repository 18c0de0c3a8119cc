"""The disruption controller's proposer: every 10 s, unless paused, run Karpenter's disruption methods in priority
order over a snapshot of the cluster and record each command they return as a `DisruptionCommand` (the command
queue in `commands` takes it from there), and explain, as Karpenter's events do, why other nodes are not disrupted.
As Karpenter's controller, it proposes one thing at a time: no pass while its commands are being validated.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, replace
from typing import Any

from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers import consolidation_events
from provisioner.controllers.command_specs import command_name, command_object
from provisioner.controllers.command_specs import fingerprint as command_fingerprint
from provisioner.controllers.commands import (
    APPROVAL_TTL_SECONDS,
    AUTO_APPROVER,
    VALIDATION_SECONDS,
    queue_nodes,
    self_heal,
)
from provisioner.controllers.context import RECORDER_DEDUPE_SECONDS, ClusterContext
from provisioner.controllers.holds import GATED_MODES
from provisioner.controllers.lifecycle import node_of
from provisioner.controllers.nodecounts import node_counts
from provisioner.controllers.provisioning import pod_object
from provisioner.controllers.snapshot import clock_inputs, cluster_view, timed_do_not_disrupt_pods, without
from provisioner.disruption.budgets import budget_errors
from provisioner.disruption.candidates import (
    NOT_CONSOLIDATABLE_YET,
    do_not_disrupt_notice,
    node_blockers,
    pod_blocks,
)
from provisioner.disruption.consolidation import in_flight
from provisioner.disruption.logs import DISRUPTION
from provisioner.disruption.methods import METHOD_ORDER, PassResult, continue_pass, disruption_pass
from provisioner.disruption.types import DRIFTED, ClaimedNode, Command
from provisioner.labels import APPROVAL_MODE, APPROVAL_THRESHOLD
from provisioner.objects import NodePool
from provisioner.scheduling.logs import LogRecord

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
        # Karpenter's PreviouslyUnseenNodePools: the NodePools the last single-node walk had not reached when it
        # stopped at its bound; their candidates go first in the next pass over new inputs.
        self.unseen_nodepools: frozenset[str] = frozenset(state.get("unseenNodePools") or ())
        self.last_result: PassResult | None = None
        self._consolidated: tuple[tuple[Any, ...], float] | None = None  # what the last empty pass read, and when
        self._last_pass: _Pass | None = None
        # What the last pass said about each node it leaves, and when: its events are deduplicated for 15 minutes,
        # so their times say when a reason was first told, not whether the last pass still told it.
        self.explained: dict[str, Any] = dict(state.get("explained") or {})
        # The commands the last pass made, until they have started (or been sent to the gate, or rejected).
        self.starting: list[str] = list(state.get("starting") or [])

    def to_state(self) -> dict[str, Any]:
        return {
            "next_poll": self.next_poll,
            **({"unseenNodePools": sorted(self.unseen_nodepools)} if self.unseen_nodepools else {}),
            **({"explained": self.explained} if self.explained else {}),
            **({"starting": self.starting} if self.starting else {}),
        }

    def next_due(self) -> list[float]:
        return [self.next_poll] if self.next_poll is not None else []

    def reconcile(self, ctx: ClusterContext) -> bool:
        if self.starting:
            if _not_started(ctx, self.starting):
                # Karpenter's controller waits out its command's validation (it blocks on the clock for 15 s) and
                # starts it before its next pass: a pass beside a command not yet started would count that command's
                # candidates as destinations, and miss the replacements it is about to launch. The skipped pass is
                # not owed: the 10 s grid goes on.
                if self.next_poll is not None and ctx.now >= self.next_poll:
                    self.next_poll = ctx.now + POLL_SECONDS
                return False
            rejected, started = _outcome(ctx, self.starting)
            self.starting = []
            if rejected is not None:
                # Karpenter's reconcile goes on with the methods after the one whose command its validation has
                # just rejected, at once and on the cluster as it is now (controller.go tries each method in turn);
                # the next reconcile comes a poll after it ends.
                self.next_poll = ctx.now + POLL_SECONDS
                return rejected != METHOD_ORDER[-1] and self._propose(ctx, after=rejected)
            if started:
                self.next_poll = ctx.now  # Karpenter's next pass comes at once once a command started
        if self.next_poll is None or ctx.now >= self.next_poll:
            self.next_poll = ctx.now + POLL_SECONDS
            _log_invalid_budgets(ctx)
            healed = False if ctx.observe else self_heal(ctx)  # observing, Karpenter heals its own nodes
            return self._propose(ctx) or healed
        return False

    def _propose(self, ctx: ClusterContext, after: str | None = None) -> bool:
        """One pass, proposing what it finds; `after` a method whose command validation has just rejected: only the
        methods after it run (a part of a pass, neither replayed nor "consolidated")."""
        if ctx.paused:
            return False
        inputs = _inputs(ctx)
        if (
            self._consolidated is not None
            and self._consolidated[0] == inputs
            and ctx.now - self._consolidated[1] < CONSOLIDATED_TTL_SECONDS
        ):
            if self.explained:
                self.explained["at"] = ctx.now  # nothing it reads has changed: what it said still holds
            if self._last_pass is not None:
                # Karpenter skips only the consolidation simulations then: every pass still builds candidates, so
                # DisruptionBlocked and the pods' do-not-disrupt Events go on being told every 2 minutes.
                last_pass = self._last_pass
                _explain(ctx, last_pass.claimed, last_pass.result, queue_nodes(ctx)[0], simulated=False)
            return False  # already consolidated: nothing it reads has changed since a pass found nothing
        self._consolidated = None
        last = self._last_pass
        # The pass is a function of what it reads: over the same inputs it would find exactly the same again.
        unchanged = last is not None and last.inputs == inputs
        if (
            after is None
            and last is not None
            and unchanged
            and last.result.resume is None
            and ctx.now - last.at < CONSOLIDATED_TTL_SECONDS
        ):
            # A whole pass that a budget held back (so it is not "consolidated"): its explanations and commands are
            # replayed instead of simulating every candidate once more.
            result, claimed = last.result, last.claimed
        else:
            view, claimed = cluster_view(ctx)
            if ctx.observe:
                # Observing a real Karpenter, karpui decides only where its gate holds Karpenter back: elsewhere
                # Karpenter disrupts on its own, and what it does is in its Events.
                gated = {np.name for np in ctx.nodepools if np.annotations.get(APPROVAL_MODE, "auto") in GATED_MODES}
                claimed = [c for c in claimed if c.nodepool in gated]
                view = replace(view, claimed=claimed)
            if not claimed:
                self.explained = {"at": ctx.now, "nodes": {}}
                _tell_claims_without_nodes(ctx, set())
                return False
            # Nodes of approved and executing commands are on their way out: no destinations, their pods moving.
            busy, gone = queue_nodes(ctx)
            view = without(in_flight(view, gone), busy)
            if after is None and last is not None and unchanged and last.result.resume is not None:
                # A pass that stopped at its single-node bound: its walk goes on with the next candidates, until it
                # has been through them all (then the pass is whole, and may be "consolidated").
                result = continue_pass(last.result, view)
            else:
                nodepools = {
                    np.name: np
                    for np in ctx.disruptable_nodepools()
                    if (not ctx.observe or np.name in {c.nodepool for c in claimed})
                    # BuildNodePoolMap skips a NodePool awaiting NodeOverlays: its nodes are no candidates.
                    and not ctx.awaiting_overlays(np)
                }
                counts = {name: astuple(node_counts(ctx, name)) for name, pool in nodepools.items() if pool.static}
                result = disruption_pass(
                    view,
                    nodepools,
                    unseen_nodepools=self.unseen_nodepools,
                    problems=ctx.nodepool_problems,
                    static_counts=counts,
                    declined=declined(ctx),
                    after=after,
                )
            if result.unseen_nodepools is not None:
                self.unseen_nodepools = result.unseen_nodepools
            if after is None:
                self._last_pass = _Pass(inputs, ctx.now, result, claimed)
        self.last_result = result
        _explain(ctx, claimed, result, queued=queue_nodes(ctx)[0])
        self.explained = {"at": ctx.now, "nodes": explanations(result)}
        denied = denied_fingerprints(ctx, legacy=True)
        created = False
        for command in result.commands:
            fingerprint = command_fingerprint(command)
            if fingerprint in denied:
                continue  # a person said no to exactly this; wait until its inputs change
            self.starting.append(self._create(ctx, command, fingerprint, result))
            created = True
        budget_limited = any("disruption budget" in r for reasons in result.notes.values() for r in reasons)
        if not created and not budget_limited and result.resume is None and after is None:
            self._consolidated = (inputs, ctx.now)
        return created

    def _create(self, ctx: ClusterContext, command: Command, fingerprint: str, result: PassResult) -> str:
        """Record `command` as a Proposed DisruptionCommand; its name."""
        name = command_name(command, ctx)
        nodepool = next(np for np in ctx.nodepools if np.name == command.candidates[0].claimed.nodepool)
        status = {
            "phase": "Proposed",
            "proposedAt": timestamp(ctx.now),
            # Karpenter validates consolidation after 15 s (commandValidationDelay); drift it starts at once.
            "validateAt": timestamp(ctx.now + (0.0 if command.reason == DRIFTED else VALIDATION_SECONDS)),
        }
        spec: dict[str, Any] = {}
        earlier = _earlier(ctx, command)
        if earlier is not None:
            # The same question asked again (its command expired or was rejected, and the nodes are candidates once
            # more): it keeps the earlier one's place in the queue, its deadline while that lasts, and the note of
            # whoever had approved it.
            spec = {
                "lineage": earlier["spec"].get("lineage") or earlier["metadata"]["name"],
                "queuedAt": earlier["spec"].get("queuedAt") or earlier["status"].get("proposedAt"),
                "follows": earlier["metadata"]["name"],
                **({"previousApproval": earlier["spec"]["approval"]} if earlier["spec"].get("approval") else {}),
            }
            deadline = earlier["status"].get("expiresAt")
            if deadline and parse_timestamp(deadline) > ctx.now + VALIDATION_SECONDS:
                status["expiresAt"] = deadline
        view = cluster_view(ctx)[0]
        consolidation_events.computed(ctx, command, name, result.approved)
        ctx.api.create(
            command_object(
                ctx,
                command,
                name,
                mode=nodepool.annotations.get(APPROVAL_MODE, "auto"),
                threshold=nodepool.annotations.get(APPROVAL_THRESHOLD),
                view=view,
                spec=spec,
                status=status,
            )
        )
        return name


def _log_invalid_budgets(ctx: ClusterContext) -> None:
    """controller.go logInvalidBudgets: a budget the CRD let through but Karpenter cannot read allows nothing, and
    this error line on every pass is all Karpenter says about it (the NodePool editor warns as well)."""
    text = "".join(
        f"invalid disruption budgets in nodepool {nodepool.name}, {error}"
        for nodepool in ctx.nodepools
        if (error := budget_errors(nodepool.budgets)) is not None
    )
    if text:
        ctx.log(LogRecord("detected disruption budget errors", {"error": text}, level="ERROR", logger=DISRUPTION))


def _not_started(ctx: ClusterContext, names: list[str]) -> bool:
    """Whether any of the commands named is still on its way to starting: Proposed, or approved by karpui itself
    and starting at the queue's next round; unless a whole poll past its validation (a command the queue cannot move,
    its step failing, or one waiting for a budget, does not stop disruption for good)."""
    for name in names:
        command = ctx.api.get("DisruptionCommand", name)
        if command is None:
            continue
        phase = command["status"].get("phase")
        automatic = (command["spec"].get("approval") or {}).get("by") == AUTO_APPROVER
        if (phase == "Proposed" or (phase == "Approved" and automatic)) and ctx.now < parse_timestamp(
            command["status"]["validateAt"]
        ) + POLL_SECONDS:
            return True
    return False


def _outcome(ctx: ClusterContext, names: list[str]) -> tuple[str | None, bool]:
    """How the commands named ended up: the method of one that validation rejected (a pass makes one command), and
    whether any has started (Karpenter's RequeueImmediately follows only that)."""
    rejected, started = None, False
    for name in names:
        command = ctx.api.get("DisruptionCommand", name)
        if command is None:
            continue
        phase = command["status"].get("phase")
        if phase == "Rejected" and command["spec"].get("method") in METHOD_ORDER:
            rejected = command["spec"]["method"]
        started |= phase in ("Executing", "Succeeded", "Failed")
    return rejected, started


def _earlier(ctx: ClusterContext, command: Command) -> Obj | None:
    """The most recent command about the same nodes for the same reason that ended without running (expired or
    rejected) within the approval TTL: the one a new command takes the place of."""
    nodes = sorted(c.name for c in command.candidates)
    found = None
    for phase in ("Expired", "Rejected"):
        for other in ctx.api.list("DisruptionCommand", fields={"status.phase": phase}):
            finished = other["status"].get("finishedAt")
            if (
                other["spec"].get("reason") == command.reason
                and sorted(c["node"] for c in other["spec"]["candidates"]) == nodes
                and finished
                and ctx.now - parse_timestamp(finished) <= APPROVAL_TTL_SECONDS
                and (found is None or finished > found["status"]["finishedAt"])
            ):
                found = other
    return found


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
        tuple(sorted(ctx.nodepool_problems)),  # a NodePool that can be evaluated again is a change
    )


# Helpers -----------------------------------------------------------------------------------------------------------


def declined(ctx: ClusterContext) -> dict[str, set[tuple[str, str]]]:
    """What people said no to, for the pass: reason -> (node, state) of every node of a denied command, and of a
    dry-run record (which stands for its nodes as a denial does), in the state it was then."""
    result: dict[str, set[tuple[str, str]]] = {}
    for phase in ("Denied", "DryRun"):
        for command in ctx.api.list("DisruptionCommand", fields={"status.phase": phase}):
            spec = command["spec"]
            for node, state in (spec.get("nodeStates") or {}).items():
                result.setdefault(spec["reason"], set()).add((node, state))
    return result


def gate_fields(nodepool: NodePool) -> dict[str, Any]:
    """The NodePool's approval mode and threshold, which a command keeps as they were when it was proposed."""
    return {
        "approvalMode": nodepool.annotations.get(APPROVAL_MODE, "auto"),
        "approvalThreshold": nodepool.annotations.get(APPROVAL_THRESHOLD),
    }


def denied_fingerprints(ctx: ClusterContext, *, legacy: bool = False) -> set[str]:
    """The candidate sets of denied commands and dry-run records, each standing for exactly its nodes and pods
    (`legacy`: only those written before commands kept their nodes' states, nodeStates, which `declined` reads)."""
    return {
        c["spec"]["fingerprint"]
        for phase in ("Denied", "DryRun")
        for c in ctx.api.list("DisruptionCommand", fields={"status.phase": phase})
        if not legacy or "nodeStates" not in c["spec"]
    }


# Karpenter's recorder publishes one DisruptionBlocked per object every 2 minutes, whatever it says (its dedupe value
# is the object's UID alone), so a pass every 10 s does not flood them. Unconsolidatable it keeps for 15 minutes;
# karpui keeps each of its messages that long, so that a node whose reason changes says the new one at once (seed
# 004: a full spot node cannot be replaced by a cheaper one; scaled down, it lacks 15 cheaper types).
UNCONSOLIDATABLE_DEDUPE_SECONDS = 15 * 60


def explanations(result: PassResult) -> dict[str, list[str]]:
    """Per node the pass leaves, what it said: every reason it cannot be a candidate (Karpenter tells the first) and
    why consolidation would not act on it, budgets included (those are no event, in Karpenter either)."""
    said: dict[str, list[str]] = {}
    for reasons in (result.blocked, result.drift_blocked, result.notes, result.balanced_notes):
        for node, told in sorted(reasons.items()):
            said.setdefault(node, []).extend(dict.fromkeys(told))
    return said


def _explain(
    ctx: ClusterContext, claimed: list[ClaimedNode], result: PassResult, queued: set[str], *, simulated: bool = True
) -> None:
    """DisruptionBlocked for nodes that cannot be candidates (the first reason, as Karpenter's NewCandidate stops at
    it), Unconsolidatable for candidates consolidation would not act on, each on the Node and its NodeClaim, and the
    do-not-disrupt Events on the pods it read. As in Karpenter, some are no event: budget exhaustion, a node whose
    consolidateAfter has not elapsed (ShouldDisrupt), and a node of a command in the queue (NewCandidate's
    "candidate is already being disrupted"): those the dashboard says. Not `simulated`: a pass that skipped its
    consolidation simulations, which tells only the DisruptionBlocked and pod Events of the last one's."""
    ctx.published = ctx.published_state()
    claims = {c.name: c.nodeclaim for c in claimed}
    # A drifted node whose pods drift could not place, told as DisruptionBlocked too; drift runs on every pass (the
    # "already consolidated" skip is consolidation's), so a replayed pass tells it as well.
    for node, reasons in sorted({**result.blocked, **result.drift_blocked}.items()):
        names = [(kind, name) for kind, name in (("Node", node), ("NodeClaim", claims.get(node, ""))) if name]
        if node in queued or not reasons or not any(ctx.publishes("DisruptionBlocked", k, n) for k, n in names):
            continue  # said lately: the objects are not even read
        for obj in _objects(ctx, names):
            ctx.publish(obj, "Normal", "DisruptionBlocked", reasons[0])
    _tell_claims_without_nodes(ctx, set(claims.values()))
    for node, reasons in sorted(result.notes.items()) if simulated else ():
        # A reason noted twice (multi-node and single-node consolidation both note an unconsolidatable candidate)
        # is told once: the recorder would drop the repeat within the window anyway, and the 3,638 repeats at
        # 20,000 pods cost 0.1 s of the pass (profiled).
        told = [r for r in dict.fromkeys(reasons) if "disruption budget" not in r and NOT_CONSOLIDATABLE_YET not in r]
        if node in queued or not told:
            continue
        objects = _objects(ctx, [("Node", node), ("NodeClaim", claims.get(node, ""))])
        for reason in told:
            for obj in objects:
                ctx.event(obj, "Normal", "Unconsolidatable", reason, dedupe_seconds=UNCONSOLIDATABLE_DEDUPE_SECONDS)
    _tell_do_not_disrupt(ctx, claimed, queued)


# ValidateNodeDisruptable's first check after the NodeClaim's: a NodeClaim is a state node before its Node registers
# (and after its Node is gone), told on the NodeClaim alone.
NO_NODE = "Nodeclaim does not have an associated node"


def _tell_claims_without_nodes(ctx: ClusterContext, with_nodes: set[str]) -> None:
    """DisruptionBlocked on the NodeClaims no Node stands for: not launched, launched but not registered, or their
    Node deleted. Observing, Karpenter tells its own."""
    if ctx.observe:
        return
    for claim in ctx.api.list("NodeClaim"):
        name = claim["metadata"]["name"]
        if (
            name not in with_nodes
            and ctx.publishes("DisruptionBlocked", "NodeClaim", name)
            and node_of(ctx, claim) is None
        ):
            ctx.publish(claim, "Normal", "DisruptionBlocked", NO_NODE)


def _objects(ctx: ClusterContext, names: list[tuple[str, str]]) -> list[Obj]:
    """The named objects that exist (a node without a NodeClaim name has only its Node)."""
    return [obj for kind, name in names if name and (obj := ctx.api.get(kind, name)) is not None]


def _tell_do_not_disrupt(ctx: ClusterContext, claimed: list[ClaimedNode], queued: set[str]) -> None:
    """The Events Karpenter's candidate validation tells on pods with a timed or invalid do-not-disrupt annotation
    (IsDoNotDisruptActive): for each node it validates the pods of, in order, up to the first one that blocks."""
    on_nodes = {pod.node_name for pod in timed_do_not_disrupt_pods(ctx)}
    for node in claimed:
        if (
            node.name not in on_nodes
            or node.name in queued
            or node_blockers(node, ctx.nodepool(node.nodepool), ctx.now)
        ):
            continue
        for pod in node.node.pods:
            notice = do_not_disrupt_notice(pod, ctx.now)
            if notice is not None and (obj := pod_object(ctx, pod)) is not None:
                ctx.event(obj, notice.event_type, notice.reason, notice.message, dedupe_seconds=RECORDER_DEDUPE_SECONDS)
            if pod_blocks(pod, ctx.now):
                break
