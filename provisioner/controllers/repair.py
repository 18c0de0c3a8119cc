"""What the disruption queue does with a node repair (reason Unhealthy): whether it still holds, whether the
NodePool is too unhealthy to repair, and the repair itself, as Karpenter's node health controller
(pkg/controllers/node/health) makes it: the NodeClaim's termination timestamp set to now + the drain bound, then
the NodeClaim deleted, so its pods leave by then whatever their PDBs and do-not-disrupt."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from provisioner import labels as wk
from provisioner.cloudprovider.types import RepairPolicy
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.nodecounts import node_counts
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.budgets import allowed_disruptions
from provisioner.disruption.candidates import blockers, disruption_cost, node_blockers
from provisioner.disruption.consolidation import launch_limit_problems, simulate, simulation_problems
from provisioner.disruption.methods import STATIC_AT_LIMIT
from provisioner.disruption.types import Candidate, ClaimedNode
from provisioner.durations import format_duration, parse_duration
from provisioner.objects import NodePool
from provisioner.quantity import MILLI
from provisioner.repairpolicies import REPLACE_NODE, repair_policy_matcher, resolve
from provisioner.scheduling.logs import LogRecord
from provisioner.scheduling.results import NodeClaimPlan
from provisioner.scheduling.static import static_plan

UNHEALTHY = "Unhealthy"  # the command's reason (Karpenter's metrics say "unhealthy")
METHOD = "repair"
# Karpenter's allowedUnhealthyPercent: more unhealthy nodes than this share (rounded up) blocks every repair.
ALLOWED_UNHEALTHY_PERCENT = 20
BLOCKED_RETRY_SECONDS = 5 * 60.0  # a blocked repair is looked at again after five minutes, as Karpenter requeues
BUDGET_RETRY_SECONDS = 10.0  # one held by its budget at the disruption controller's next pass
NODE_REPAIR_BLOCKED = "NodeRepairBlocked"
BLOCKED_DEDUPE_SECONDS = 15 * 60.0
LOGGER = "controller.node.health"
DO_NOT_REPAIR = "karpenter.sh/do-not-repair"
STANDALONE = "repair requires a NodePool to construct and budget a safe replacement"
UNBOUNDED = "repair requires a termination grace period to bypass blocking pods"
VETOED = f'repair is blocked through the "{DO_NOT_REPAIR}" annotation'


@dataclass(frozen=True)
class Unhealthy:
    """A Node condition a repair policy matches, since when, and how long it is tolerated."""

    condition: str
    status: str
    since: float
    toleration: float

    @property
    def due(self) -> float:
        """When the toleration ends and the node is repaired."""
        return self.since + self.toleration

    @property
    def text(self) -> str:
        return f"{self.condition}={self.status}"


def _condition(node: Obj, kind: str) -> dict[str, str] | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def legacy(ctx: ClusterContext) -> bool:
    """LEGACY_NODE_REPAIR: v1.14's node.health controller (pkg/controllers/node/legacyrepair in v1.15) repairs."""
    return ctx.options.legacy_node_repair


def unhealthy(node: Obj, policies: Sequence[RepairPolicy], *, legacy: bool = False) -> Unhealthy | None:
    """The condition whose repair is due first: as the legacy controller finds it, or as v1.15's matcher does."""
    return _legacy_unhealthy(node, policies) if legacy else _unhealthy(node, policies)


def _legacy_unhealthy(node: Obj, policies: Sequence[RepairPolicy]) -> Unhealthy | None:
    """findUnhealthyConditions (legacyrepair/controller.go:229): of the ReplaceNode policies whose condition has
    their status (and a reason their regex finds), the one whose toleration from lastTransitionTime ends first."""
    found: Unhealthy | None = None
    for policy in policies:
        if policy.action != REPLACE_NODE:
            continue  # the legacy controller only replaces
        condition = _condition(node, policy.condition_type)
        if condition is None or condition.get("status") != policy.condition_status:
            continue
        if policy.reason_regex and not re.search(policy.reason_regex, condition.get("reason") or ""):
            continue
        since = parse_timestamp(condition["lastTransitionTime"]) if condition.get("lastTransitionTime") else 0.0
        candidate = Unhealthy(policy.condition_type, policy.condition_status, since, policy.toleration_seconds)
        if found is None or candidate.due < found.due:
            found = candidate
    return found


def _unhealthy(node: Obj, policies: Sequence[RepairPolicy]) -> Unhealthy | None:
    """The condition whose repair becomes eligible first, as Karpenter's policy matcher resolves it then: a
    reason-specific policy whose regex finds the reason, else the set's default fallback (policy.go:316). None when
    no condition's type and status is one the set covers."""
    matches = repair_policy_matcher(policies).match(node)
    if not matches:
        return None
    due = min(m.eligible_at for m in matches)
    result = resolve(matches, due)
    chosen = next(
        m
        for m in matches
        if (m.condition_type, m.policy.reason_regex, m.eligible_at)
        == (result.condition, result.reason_regex, result.selected_eligible_at)
    )
    toleration = chosen.policy.toleration_seconds
    return Unhealthy(chosen.condition_type, chosen.condition_status, chosen.eligible_at - toleration, toleration)


def drain_bound(claim: Obj, node: Obj, policies: Sequence[RepairPolicy], now: float) -> float | None:
    """effectiveDrainBound (repair.go:350): the shortest bound of the policies eligible by `now` (or when the first
    is, for a repair approved sooner), capped by the NodeClaim's terminationGracePeriod; None inherits the
    NodeClaim's own."""
    matches = repair_policy_matcher(policies).match(node)
    if not matches:
        return None
    bound = resolve(matches, max(now, min(m.eligible_at for m in matches))).termination_grace_period
    if bound is None:
        return None
    own = (claim.get("spec") or {}).get("terminationGracePeriod")
    return min(bound, float(parse_duration(own) or 0)) if own else bound


def hold_for_drain(ctx: ClusterContext, command: Obj) -> str | None:
    """Repair.ShouldDisrupt (repair.go:102): a node whose pods block eviction (do-not-disrupt, a PDB) is repaired
    only on the promise of a drain bound, the policies' or the NodeClaim's; without one it waits, said on the Node
    and the NodeClaim."""
    _, claim, node = _subjects(ctx, command)
    if legacy(ctx) or claim is None or node is None or (claim.get("spec") or {}).get("terminationGracePeriod"):
        return None  # the legacy controller ignores do-not-disrupt and PDBs outright
    if drain_bound(claim, node, ctx.cloud.repair_policies(), ctx.now) is not None:
        return None
    view, claimed = cluster_view(ctx)
    mine = next((c for c in claimed if c.name == node["metadata"]["name"]), None)
    if mine is None:
        return None
    pool = next((p for p in ctx.nodepools if p.name == mine.nodepool), None)
    if not set(blockers(mine, pool, view.pdbs, ctx.now)) - set(node_blockers(mine, pool, ctx.now)):
        return None
    for obj in (node, claim):
        ctx.publish(obj, "Normal", "DisruptionBlocked", UNBOUNDED)
    return UNBOUNDED


def hold_for_budget(ctx: ClusterContext, command: Obj) -> str | None:
    """computeCommands (repair.go:126-156): an initialized node's repair rides its NodePool's budget for Unhealthy,
    which the repairs due with it take in order of their score (then the lower disruption cost, then the node's
    name); it waits while the budget is spent or taken by those ranked ahead. An uninitialized node runs no workload
    to protect and needs none. The legacy controller ignores budgets."""
    if legacy(ctx):
        return None
    _, claimed = cluster_view(ctx)
    by_name = {c.name: c for c in claimed}
    mine = by_name.get(command["spec"]["candidates"][0]["node"])
    pool = None if mine is None else next((p for p in ctx.nodepools if p.name == mine.nodepool), None)
    if mine is None or pool is None or not mine.initialized:
        return None
    allowed = allowed_disruptions(pool, UNHEALTHY, claimed, ctx.now)
    if allowed > 0:
        rivals = [
            by_name[c["spec"]["candidates"][0]["node"]]
            for c in ctx.api.list("DisruptionCommand")
            if c["spec"]["reason"] == UNHEALTHY
            and c["metadata"]["name"] != command["metadata"]["name"]
            and c["status"].get("phase") in ("Proposed", "AwaitingApproval", "Approved")
            and ctx.now >= parse_timestamp(c["spec"]["forceAt"])
            and c["spec"]["candidates"][0]["node"] in by_name
        ]
        policies = ctx.cloud.repair_policies()
        order = _repair_order(ctx, pool, policies, mine)
        ahead = sum(
            1
            for r in rivals
            if r.nodepool == pool.name and r.initialized and _repair_order(ctx, pool, policies, r) < order
        )
        if ahead < allowed:
            return None
    return f'NodePool "{pool.name}" allows no more nodes to be disrupted for {UNHEALTHY} now'


def replacements(ctx: ClusterContext, command: Obj) -> tuple[NodeClaimPlan, ...] | str:
    """Repair's pre-spin (repair.go:177-259): what to launch before the node goes, or why nothing can be staged yet.
    A static NodePool's node is replaced by one of the NodePool's own, once its scale-down is done and while
    limits.nodes leaves room; any other by the NodeClaims its reschedulable pods need elsewhere, the pods that block
    eviction included (they leave within the drain bound). An empty node needs none. A refusal is said on the Node
    and the NodeClaim (DisruptionBlocked), as Karpenter says it."""
    candidate, claim, node = _subjects(ctx, command)
    view, claimed = cluster_view(ctx)
    mine = next((c for c in claimed if c.name == candidate["node"]), None)
    pool = None if mine is None else next((p for p in ctx.nodepools if p.name == mine.nodepool), None)
    if mine is None or pool is None or claim is None or node is None:
        return ()
    if pool.static:
        counts = node_counts(ctx, pool.name)
        if counts.active + counts.pending_disruption > (pool.replicas or 0):
            return f'static NodePool "{pool.name}" is scaling down first'  # no event: the surplus goes anyway
        limit = pool.limits.get("nodes")
        if limit is not None and counts.active + counts.deleting + counts.pending_disruption >= limit // MILLI:
            return _refused(ctx, claim, node, STATIC_AT_LIMIT)
        return (static_plan(pool),)
    pods = tuple(p for p in mine.node.pods if p.is_reschedulable())
    if not pods:
        return ()
    moving = Candidate.with_costs(mine, pool, pods, 1.0)
    outcome = simulate([moving], view, include_blocked=True)
    problems = simulation_problems(outcome, [moving], view) or launch_limit_problems(outcome.new_nodeclaims, view)
    if problems:
        return _refused(ctx, claim, node, problems[0])
    return tuple(outcome.new_nodeclaims)


def _refused(ctx: ClusterContext, claim: Obj, node: Obj, why: str) -> str:
    for obj in (node, claim):
        ctx.publish(obj, "Normal", "DisruptionBlocked", why)
    return why


def _repair_order(
    ctx: ClusterContext, pool: NodePool, policies: Sequence[RepairPolicy], claimed: ClaimedNode
) -> tuple[float, float, str]:
    """The repair sort (repair.go:131): the higher score as of now first, then the lower disruption cost, then the
    node's name."""
    node = ctx.api.get("Node", claimed.name) or {}
    score = resolve(repair_policy_matcher(policies).match(node), ctx.now).score_at(ctx.now)
    pods = [p for p in claimed.node.pods if p.is_reschedulable()]
    return (-score, disruption_cost(claimed, pool, pods, ctx.now), claimed.name)


def vetoed(node: Obj) -> bool:
    """do-not-repair, on the literal value "true" only, on the registered Node (StateNode.Annotations)."""
    return (node["metadata"].get("annotations") or {}).get(DO_NOT_REPAIR) == "true"


def allowed_unhealthy(total: int) -> int:
    """20% of `total` nodes, rounded up (as a PDB's percentage is): one of three nodes may be unhealthy."""
    return math.ceil(total * ALLOWED_UNHEALTHY_PERCENT / 100)


def blocked(ctx: ClusterContext, claim: Obj) -> str | None:
    """breakerTrippedPools (repair.go:314): more of its NodePool's nodes than allowed have a condition the policies
    cover, however fresh, so no repair in the pool goes ahead."""
    pool = (claim["metadata"].get("labels") or {}).get(wk.NODEPOOL)
    if legacy(ctx):
        return _legacy_blocked(ctx, pool)
    if not pool:
        return None  # a standalone NodeClaim is never repaired (health.py)
    matcher = repair_policy_matcher(ctx.cloud.repair_policies())
    nodes = [n for n in ctx.api.list("Node") if (n["metadata"].get("labels") or {}).get(wk.NODEPOOL) == pool]
    sick = sum(1 for n in nodes if any(matcher.matches(c) for c in (n.get("status") or {}).get("conditions") or []))
    if sick <= allowed_unhealthy(len(nodes)):
        return None
    return f'more than {ALLOWED_UNHEALTHY_PERCENT}% of nodes in nodepool "{pool}" are unhealthy'


def _legacy_blocked(ctx: ClusterContext, pool: str | None) -> str | None:
    """isNodePoolHealthy, or isClusterHealthy for a NodeClaim of no NodePool (legacyrepair/controller.go:268): the
    nodes a policy finds unhealthy, however fresh, against 20% of the pool's (or the cluster's), in its words."""
    policies = ctx.cloud.repair_policies()
    nodes = [
        n for n in ctx.api.list("Node") if not pool or (n["metadata"].get("labels") or {}).get(wk.NODEPOOL) == pool
    ]
    sick = sum(1 for n in nodes if _legacy_unhealthy(n, policies) is not None)
    if sick <= allowed_unhealthy(len(nodes)):
        return None
    if pool:
        return f"more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the nodepool"
    return f"more then {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the cluster"  # sic, Karpenter's event


def _subjects(ctx: ClusterContext, command: Obj) -> tuple[dict[str, str], Obj | None, Obj | None]:
    candidate = command["spec"]["candidates"][0]
    return candidate, ctx.api.get("NodeClaim", candidate["nodeclaim"]), ctx.api.get("Node", candidate["node"])


def problem(ctx: ClusterContext, command: Obj) -> str | None:
    """Why the repair no longer holds: its NodeClaim or Node is gone or going, or the node is healthy again."""
    candidate, claim, node = _subjects(ctx, command)
    if claim is None or claim["metadata"].get("deletionTimestamp"):
        return f"churn (NodeClaim {candidate['nodeclaim']} is gone or being deleted)"
    if node is None or node["metadata"].get("deletionTimestamp"):
        return f"churn (Node {candidate['node']} is gone or being deleted)"
    if vetoed(node) and not legacy(ctx):
        return f"churn (Node {candidate['node']}: {VETOED})"
    found = unhealthy(node, ctx.cloud.repair_policies(), legacy=legacy(ctx))
    if found is None:
        ready = _condition(node, "Ready") or {}
        return f"churn (Node {candidate['node']} is healthy again: Ready={ready.get('status', 'Unknown')})"
    if timestamp(found.due) != command["spec"].get("forceAt", timestamp(found.due)):
        # Eligibility is resolved from the conditions as they are now (policy.go:535): a reason change can bring
        # the repair forward or back, so the health controller proposes it again with the new time.
        return f"churn (Node {candidate['node']}'s repair is now due at {timestamp(found.due)})"
    return None


def forced_message(command: Obj, denial: str = "") -> str:
    """What the queue says of a repair past its toleration: why no approval could hold it."""
    spec = command["spec"]
    toleration = format_duration(int(spec["toleration"]))
    held = f"; {denial} could not hold it" if denial else ""
    return (
        f"forced: Node {spec['candidates'][0]['node']} has had {spec['condition']} since {spec['unhealthySince']}, "
        f"past the cloud provider's {toleration} repair toleration; Karpenter repairs an unhealthy node then, "
        f"whatever the approval mode, do-not-disrupt or a pause{held}"
    )


def hold_for_health(ctx: ClusterContext, command: Obj) -> str | None:
    """The 20% rule, said on the Node, its NodeClaim and its NodePool as Karpenter's NodeRepairBlocked events (each
    at most every 15 minutes, events.go:32)."""
    _, claim, node = _subjects(ctx, command)
    if claim is None or node is None:
        return None
    reason = blocked(ctx, claim)
    if reason is not None:
        pool = ctx.nodepool_object((claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, ""))
        # The legacy controller's events all involve the Node (legacyrepair/events.go).
        for obj in (node,) if legacy(ctx) else (node, claim, pool):
            ctx.publish(obj, "Warning", NODE_REPAIR_BLOCKED, reason, dedupe_seconds=BLOCKED_DEDUPE_SECONDS)
    return reason


def begin(ctx: ClusterContext, command: Obj) -> None:
    """Stamp the drain's deadline, now + the policies' drain bound, unless a sooner one is set
    (TightenTerminationTimestampAnnotation, queue.go:239), then delete the NodeClaim. A policy with no bound stamps
    nothing: the NodeClaim's own terminationGracePeriod holds (kwok's bound is 0: its pods leave at once)."""
    candidate, claim, node = _subjects(ctx, command)
    if claim is None:
        return
    # The repair's lines name the Node and the NodeClaim.
    subjects = {"Node": {"name": candidate["node"]}, "NodeClaim": {"name": claim["metadata"]["name"]}}
    if legacy(ctx):
        bound: float | None = 0.0  # annotateTerminationGracePeriod (legacyrepair/controller.go:246): now
    else:
        bound = None if node is None else drain_bound(claim, node, ctx.cloud.repair_policies(), ctx.now)
    annotations = claim["metadata"].setdefault("annotations", {})
    current = annotations.get(wk.TERMINATION_TIMESTAMP)
    if bound is not None and (current is None or not _at_or_before(current, ctx.now + bound)):
        annotations[wk.TERMINATION_TIMESTAMP] = timestamp(ctx.now + bound)
        ctx.api.update(claim)
        ctx.log(
            LogRecord(
                "annotated nodeclaim",
                {**subjects, wk.TERMINATION_TIMESTAMP: timestamp(ctx.now + bound)},
                logger=LOGGER,
            )
        )
    if not claim["metadata"].get("deletionTimestamp"):
        ctx.api.delete("NodeClaim", claim["metadata"]["name"])
        ctx.log(LogRecord("deleting unhealthy node", subjects, logger=LOGGER))


def _at_or_before(stamp: str, deadline: float) -> bool:
    try:
        return parse_timestamp(stamp) <= deadline
    except ValueError:
        return False
