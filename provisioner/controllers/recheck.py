"""A stored command planned again on the cluster of this moment, as Karpenter's validation does 15 s after a
proposal, and as karpui's gate does again whenever a command waiting for a person, or approved and about to run, may
have been overtaken: its candidates still candidates (and within their budgets), its pods still placeable with the
nodes already on their way out gone, its replacements within their NodePools' limits while the nodes they replace
still run. The answer is the plan as it would be now, and how it differs from the stored one."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.cluster.objects import Obj
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.budgets import allowed_disruptions
from provisioner.disruption.candidates import build_candidates, disruption_cost
from provisioner.disruption.consolidation import (
    ClusterView,
    compute,
    destinations,
    in_flight,
    launch_limit_problems,
    simulate,
    simulation_problems,
)
from provisioner.disruption.plans import SAVINGS_TOLERANCE, Comparison, PlanSummary, compare
from provisioner.disruption.types import DRIFTED, EMPTY, Candidate, Command
from provisioner.scheduling.results import SchedulingResult
from provisioner.scheduling.static import static_plan

MANUAL = "Manual"
NEW_RESULTS = "scheduling (scheduling simulation produced new results)"  # Karpenter's words for a changed outcome


@dataclass(frozen=True)
class Verdict:
    """Karpenter's own validation of a command as proposed (validation.go): `problem` is why it would not run."""

    problem: str | None


@dataclass(frozen=True)
class Recheck:
    plan: Command | None  # the command as it would be planned now; None when it cannot run
    problem: str | None = None  # why it cannot run (Karpenter's reasons: churn, budget, scheduling)
    budget: bool = False  # the problem is a disruption budget: it may run once the budget allows
    comparison: Comparison = field(default_factory=lambda: Comparison((), False))
    # Where Karpenter validates a proposal (emptiness and consolidation), its verdict on the stored command. It
    # simulates again rather than comparing plans, so a delete whose node lost pods meanwhile, or a replacement whose
    # types the simulation still offers, runs as proposed; an emptiness command runs with its nodes still empty.
    karpenter: Verdict | None = None

    @property
    def holds(self) -> bool:
        """The stored plan is still the plan."""
        return self.problem is None and not self.comparison.changed

    @property
    def rejection(self) -> str | None:
        """Why the command does not run where no person's approval is at stake: Karpenter's validation's reason,
        or, where Karpenter has none, how the plan changed."""
        if self.karpenter is not None:
            return self.karpenter.problem
        if self.problem:
            return self.problem
        if self.comparison.changed:
            return f"scheduling (plan changed: {'; '.join(self.comparison.changes)})"
        return None


def recheck(ctx: ClusterContext, command: Obj, departing: Collection[str] = ()) -> Recheck:
    """Plan `command` again on the cluster now, with the `departing` nodes (other commands' candidates that go
    before it) marked as on their way out."""
    view, _ = cluster_view(ctx)
    view = in_flight(view, departing)
    spec = command["spec"]
    reason = spec["reason"]
    names = [c["node"] for c in spec["candidates"]]
    if command["status"].get("held"):
        view = _own(view, names)
    nodepools = {np.name: np for np in ctx.disruptable_nodepools() if not ctx.awaiting_overlays(np)}
    candidates, blocked = build_candidates(
        view.claimed, nodepools, view.pdbs, ctx.now, eventual=reason == DRIFTED, problems=ctx.nodepool_problems
    )
    by_name = {c.name: c for c in candidates}
    missing = [n for n in names if n not in by_name]
    karpenter: Verdict | None = None
    if reason == MANUAL:
        if missing:
            return Recheck(None, f"churn ({missing[0]}: {'; '.join(blocked.get(missing[0], []) or ['node is gone'])})")
        plan: Command | list[str] = manual_plan(by_name[names[0]], view)
    elif reason == EMPTY:
        # Emptiness keeps the candidates still empty (Karpenter drops the others), and needs one.
        # A node holding a CapacityBuffer's virtual pods is not empty (HasBufferPods).
        kept = tuple(by_name[n] for n in names if n in by_name and by_name[n].is_empty and n not in view.buffer_nodes)
        if not kept:
            gone = next(iter(missing), names[0])
            why = "; ".join(blocked.get(gone, []) or [f"{gone} is no longer empty"])
            return Recheck(None, f"churn ({gone}: {why})")
        plan = Command(EMPTY, kept, (), spec.get("method", "empty"))
        karpenter = Verdict(None)
    else:
        if missing:
            return Recheck(None, f"churn ({missing[0]}: {'; '.join(blocked.get(missing[0], []) or ['node is gone'])})")
        chosen = [by_name[n] for n in names]
        if spec.get("method") == "static-drift":
            # A static NodePool's drifted node is replaced node for node, as its template is now: no simulation.
            plan = Command(DRIFTED, (chosen[0],), (static_plan(chosen[0].nodepool),), "static-drift")
        elif reason == DRIFTED:
            plan = _drift_plan(chosen[0], view)
        else:
            result = simulate(chosen, view)
            plan = compute(chosen, view, spec["method"], reason, result)
            karpenter = Verdict(validate_command(result, chosen, view, spec.get("replacements") or []))
    if reason != MANUAL:
        over = _over_budget(
            plan.candidates if isinstance(plan, Command) else tuple(by_name[n] for n in names),
            reason,
            view,
            ctx.now,
            nodepools,
        )
        if over:
            verdict = None if karpenter is None else Verdict(f"budget ({over})")
            return Recheck(None, f"budget ({over})", budget=True, karpenter=verdict)
    if not isinstance(plan, Command):
        return Recheck(None, f"scheduling ({plan[0]})", karpenter=karpenter)
    tolerance = float((spec.get("approval") or {}).get("tolerance", SAVINGS_TOLERANCE))
    comparison = compare(PlanSummary.from_spec(spec), PlanSummary.of(plan), tolerance)
    return Recheck(plan, comparison=comparison, karpenter=karpenter)


def validate_command(
    result: SchedulingResult,
    candidates: Sequence[Candidate],
    view: ClusterView,
    replacements: Sequence[Mapping[str, Any]],
) -> str | None:
    """Karpenter's validateCommand on the scheduling simulated again without the candidates: every pod they hold
    still lands, and the simulation launches nothing where the command launches nothing, or exactly one NodeClaim
    that still offers every instance type the command's replacement may be (it does no price filtering, so it may
    offer more). None when the command runs."""
    problems = simulation_problems(result, candidates, view)
    if problems:
        return f"scheduling ({problems[0]})"
    launches = result.new_nodeclaims
    if not launches and not replacements:
        return None
    if len(launches) != 1 or len(replacements) != 1:
        return NEW_RESULTS
    offered = {o.instance_type.name for o in launches[0].options}
    return None if set(replacements[0].get("instanceTypes") or []) <= offered else NEW_RESULTS


def _own(view: ClusterView, names: Collection[str]) -> ClusterView:
    """The view with the command's own held nodes (tainted `karpenter.sh/disrupted` when an earlier step of its
    batch started, so nothing lands on them) taken as candidates again: the taint is its own, not a deletion."""
    mine = {c.name for c in view.claimed if c.name in names and not c.deleting}
    if not mine:
        return view
    nodes = {n.name: replace(n, marked_for_deletion=False) for n in view.nodes if n.name in mine}
    return replace(
        view,
        nodes=[nodes.get(n.name, n) for n in view.nodes],
        claimed=[replace(c, node=nodes[c.name]) if c.name in nodes else c for c in view.claimed],
    )


def _drift_plan(candidate: Candidate, view: ClusterView) -> Command | list[str]:
    """Drift's plan: the candidate and however many replacements its pods need, at whatever price."""
    outcome = simulate([candidate], view)
    problems = simulation_problems(outcome, [candidate], view) or launch_limit_problems(outcome.new_nodeclaims, view)
    if problems:
        return problems
    return Command(
        DRIFTED, (candidate,), tuple(outcome.new_nodeclaims), "drift", destinations=destinations(outcome, [candidate])
    )


def manual_plan(candidate: Candidate, view: ClusterView) -> Command:
    """A person's request for a node to go, as a single-node command: the pods it evicts, the NodeClaims the
    scheduler needs for them (launched before the drain) and savings = its price − the replacements' cheapest
    offerings. Like drift it takes however many replacements the pods need, and no "must be cheaper" rule applies:
    a person may pay for a replacement. NodeClaims that would hold only pods pending already are the provisioner's
    business, not replacements. What would strand pods or pass a limit is said in its notes (a person decides)."""
    result = simulate([candidate], view)
    moving = {p.uid for p in candidate.pods}
    replacements = tuple(nc for nc in result.new_nodeclaims if any(p.uid in moving for p in nc.pods))
    notes = (*simulation_problems(result, [candidate], view), *launch_limit_problems(replacements, view))
    return Command(MANUAL, (candidate,), replacements, "manual", notes, destinations=destinations(result, [candidate]))


def manual_candidate(view: ClusterView, node: str, nodepools: Mapping[str, Any]) -> Candidate | str:
    """The candidate a person's request is about, whatever would keep Karpenter from choosing it (or why none)."""
    mine = next((c for c in view.claimed if c.name == node), None)
    if mine is None:
        return f'node "{node}" has no registered NodeClaim yet: try again once it has joined'
    pool = nodepools.get(mine.nodepool)
    if pool is None:
        return f'node "{node}" belongs to NodePool "{mine.nodepool}", which is gone: it is going anyway'
    pods = tuple(p for p in mine.node.pods if p.is_reschedulable())
    return Candidate(mine, pool, pods, disruption_cost(mine, pool, pods, view.now))


def _over_budget(
    candidates: Sequence[Candidate], reason: str, view: ClusterView, now: float, nodepools: Mapping[str, Any]
) -> str | None:
    """Karpenter's budget validation: the candidates of each NodePool fit in what its budget for the command's
    reason allows now (nodes of other commands already on their way out count as disrupting)."""
    counts: dict[str, int] = {}
    for candidate in candidates:
        counts[candidate.claimed.nodepool] = counts.get(candidate.claimed.nodepool, 0) + 1
    for pool, count in sorted(counts.items()):
        nodepool = nodepools.get(pool)
        if nodepool is None:
            continue
        allowed = allowed_disruptions(nodepool, reason, view.claimed, now)
        if count > allowed:
            return f'NodePool "{pool}" allows {allowed} more node(s) to be disrupted for {reason} now, the command needs {count}'
    return None
