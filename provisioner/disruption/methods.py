"""Disruption methods in Karpenter's order; the first that yields a command ends the pass.

Emptiness (one delete of every empty candidate the budgets admit), Drift (one drifted node, replaced as needed,
no price check), multi-node consolidation (the largest prefix of up to 101 candidates that can be deleted or
replaced by one cheaper node, found by binary search), single-node consolidation (the first candidate that can).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.disruption.budgets import allowed_disruptions
from provisioner.disruption.candidates import build_candidates, consolidation_blockers, consolidation_order
from provisioner.disruption.consolidation import (
    ClusterView,
    compute,
    destinations,
    launch_limit_problems,
    simulate,
    simulation_problems,
    without_same_types,
)
from provisioner.disruption.scoring import NodePoolTotals, ScoreResult, command_scores, nodepool_totals, score_move
from provisioner.disruption.types import DRIFTED, EMPTY, UNDERUTILIZED, Candidate, Command, candidate_state
from provisioner.objects import BALANCED, NodePool
from provisioner.quantity import MILLI
from provisioner.scheduling.static import static_plan

MAX_MULTI_CANDIDATES = 100
# Karpenter's methods in the order its disruption controller tries them, named as a Command's `method`.
METHOD_ORDER = ("empty", "static-drift", "drift", "multi", "single")
# Karpenter stops single-node consolidation after 3 minutes and puts the NodePools it had not reached first in the
# next pass (singlenodeconsolidation.go:63-75). The lab must be deterministic, so its bound is a count: this many
# candidates simulated per pass (about 10-16 ms each in memory at 1,819 nodes, bench/README.md). Over the same inputs
# the walk goes on where it stopped (continue_pass), as Karpenter's one pass would have; a pass over new inputs
# starts a walk afresh, the NodePools the stopped one had not reached first.
MAX_SINGLE_SIMULATIONS = 20


@dataclass(frozen=True)
class Walk:
    """One single-node consolidation walk over every candidate, spread over passes by MAX_SINGLE_SIMULATIONS: the
    candidates, the notes of the methods before it, and the NodePools it put first (its order)."""

    candidates: Sequence[Candidate]
    notes: Mapping[str, tuple[str, ...]]
    first: frozenset[str] = frozenset()


@dataclass
class PassResult:
    """What one disruption pass found: at most one method's commands, and why every other node stays."""

    commands: list[Command] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)  # node -> reasons it is not a candidate
    notes: dict[str, list[str]] = field(default_factory=dict)  # node -> why consolidation did not act on it
    # node -> why drift could not replace it: drift.go tells it as DisruptionBlocked, not Unconsolidatable
    drift_blocked: dict[str, list[str]] = field(default_factory=dict)
    budgets: dict[tuple[str, str], int] = field(default_factory=dict)  # (nodepool, reason) -> allowed
    # Single-node consolidation stopped at its bound: the candidate its walk goes on with (None: it went through
    # every candidate, so a pass that found nothing is a whole pass).
    resume: str | None = None
    # Karpenter's PreviouslyUnseenNodePools as the pass leaves it: the NodePools single-node consolidation had not
    # reached when it stopped at its bound, none once it went through every candidate; None when it did not run or
    # returned a command (Karpenter's is then left as it was).
    unseen_nodepools: frozenset[str] | None = None
    # a candidate's NodeClaim -> consolidation_blockers' answer, as the first consolidation method to ask got it
    unconsolidatable: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)
    # Set when the pass reached single-node consolidation: what `continue_pass` goes on from.
    walk: Walk | None = field(default=None, repr=False, compare=False)
    # Balanced NodePools: every pool's cost and disruption totals the scores are fractions of; the chosen command's
    # scores in its Balanced pools (ConsolidationApproved); and per node, why Balanced refused a move (shown where
    # the node's page explains it, but no event: Karpenter records rejections as metrics only).
    totals: Mapping[str, NodePoolTotals] = field(default_factory=dict, repr=False, compare=False)
    approved: dict[str, ScoreResult] = field(default_factory=dict)
    balanced_notes: dict[str, list[str]] = field(default_factory=dict)
    # What people said no to: reason -> (node, the state (candidate_state) it was in). A node in that state is no
    # candidate for that reason; the other candidates are tried as if it were not there.
    declined: Mapping[str, Collection[tuple[str, str]]] = field(default_factory=dict, repr=False, compare=False)


def disruption_pass(
    view: ClusterView,
    nodepools: Mapping[str, NodePool],
    *,
    unseen_nodepools: Collection[str] = (),
    resume: str | None = None,
    problems: Mapping[str, str] | None = None,
    static_counts: Mapping[str, tuple[int, int, int]] | None = None,
    declined: Mapping[str, Collection[tuple[str, str]]] | None = None,
    after: str | None = None,
) -> PassResult:
    """One pass; `unseen_nodepools` the NodePools the last single-node walk had not reached when it stopped (their
    candidates go first in this one); `resume` a candidate of a walk to go on with, as continue_pass does; `problems` the NodePools left out of `nodepools` as they cannot be evaluated, with why; `declined` the nodes
    people denied disrupting for a reason, in the state they denied it (PassResult); `after` the method whose
    command validation has just rejected: the pass goes on with the methods after it, as Karpenter's does."""
    result = PassResult(declined=declined or {})
    candidates, result.blocked = build_candidates(view.claimed, nodepools, view.pdbs, view.now, problems=problems)
    if any(np.consolidation_policy == BALANCED for np in nodepools.values()):
        result.totals = nodepool_totals(view.claimed, candidates)  # GetCandidatesWithTotals
    for nodepool in nodepools.values():
        for reason in (EMPTY, DRIFTED, UNDERUTILIZED):
            result.budgets[(nodepool.name, reason)] = allowed_disruptions(nodepool, reason, view.claimed, view.now)
    # Drift's candidates differ only on nodes with a terminationGracePeriod (their pods do not block it); without
    # any, they are these, and building them again was a fifth of a pass at 20,000 pods.
    eventual = candidates
    if any(c.grace_period for c in view.claimed):
        eventual, _ = build_candidates(view.claimed, nodepools, view.pdbs, view.now, eventual=True, problems=problems)
    methods: tuple[Callable[[], list[Command]], ...] = (
        lambda: _emptiness(candidates, view, result),
        lambda: _static_drift(eventual, result, static_counts or {}),
        lambda: _drift(eventual, view, result),
        lambda: _multi_node(candidates, view, result),
        lambda: _single_node(candidates, view, result, frozenset(unseen_nodepools), resume),
    )
    first = 0 if after is None else METHOD_ORDER.index(after) + 1
    for method in methods[first:]:
        commands = method()
        if commands:
            result.commands = commands
            break
    return result


def continue_pass(previous: PassResult, view: ClusterView) -> PassResult:
    """The next pass over the same inputs as `previous`, which stopped at its single-node bound. Emptiness, drift and
    multi-node consolidation are functions of those inputs and found nothing then, so they would find nothing now:
    only the single-node walk goes on, from `previous.resume`, to its last candidate. Karpenter's single-node
    consolidation goes through every candidate in one pass unless its 3-minute timeout stops it, and a pass that went
    through them all and found nothing is "consolidated" (no pass until something changes or five minutes pass); a
    walk that always restarted would never get there. At 20,000 pods the methods before the walk (six multi-node
    simulations of up to 100 candidates) and building the candidates were half of every 10 s poll."""
    walk = previous.walk
    if walk is None or previous.resume is None:
        raise ValueError("only a pass that stopped at its single-node bound goes on")
    result = PassResult(
        blocked=previous.blocked,
        drift_blocked=previous.drift_blocked,
        notes={name: list(notes) for name, notes in walk.notes.items()},
        budgets=previous.budgets,
        unconsolidatable=previous.unconsolidatable,
        declined=previous.declined,
        walk=walk,
        totals=previous.totals,
    )
    result.commands = _single_node(walk.candidates, view, result, walk.first, previous.resume, walk)
    return result


def _consolidatable(
    candidates: Sequence[Candidate], result: PassResult, *, empty: bool | None, hosting: Collection[str] = ()
) -> list[Candidate]:
    """The candidates consolidation may take: Emptiness (`empty` True) the empty ones but those `hosting`
    CapacityBuffer virtual pods (Karpenter's HasBufferPods: deleting one would only bring its capacity back), the
    consolidation methods (`empty` False) only the others. An empty node hosting buffer pods is thus left by all
    of them: Karpenter's consolidation passes over every empty candidate, "Empty nodes are handled by Emptiness"
    (consolidation.go:126-129)."""
    chosen = []
    for candidate in candidates:
        if candidate.nodepool.static:
            continue  # a static NodePool's nodes are never consolidated (Karpenter passes over them silently)
        if empty and candidate.name in hosting and candidate.nodepool.consolidate_after_seconds is not None:
            # Emptiness says so of every node hosting buffer pods, empty or not, once consolidation is enabled
            # (emptiness.go:54-56); with it disabled, that is what the blockers below say.
            result.notes.setdefault(candidate.name, []).append(f'Node "{candidate.name}" has buffer pods')
            continue
        if empty is not None and candidate.is_empty != empty:
            continue
        reasons = _consolidation_blockers(candidate, result)
        if reasons:
            result.notes.setdefault(candidate.name, []).extend(reasons)
            continue
        chosen.append(candidate)
    return chosen


def _consolidation_blockers(candidate: Candidate, result: PassResult) -> list[str]:
    """consolidation_blockers of a candidate, worked out once per pass: each consolidation method asks again (and
    notes the answer again, as Karpenter's methods each do), and nothing it reads changes within a pass."""
    reasons = result.unconsolidatable.get(candidate.claimed.nodeclaim)
    if reasons is None:
        reasons = consolidation_blockers(candidate.claimed, candidate.nodepool, candidate.is_empty)
        result.unconsolidatable[candidate.claimed.nodeclaim] = reasons
    return reasons


def _admit(candidates: Sequence[Candidate], result: PassResult, reason: str) -> list[Candidate]:
    """Keep candidates while their pool's budget for `reason` lasts, spending one per admitted node."""
    left = {pool: allowed for (pool, why), allowed in result.budgets.items() if why == reason}
    admitted = []
    for candidate in candidates:
        pool = candidate.claimed.nodepool
        if left.get(pool, 0) > 0:
            left[pool] -= 1
            admitted.append(candidate)
        else:
            result.notes.setdefault(candidate.name, []).append(
                f'disruption budget of NodePool "{pool}" for {reason} allows no more nodes now'
            )
    return admitted


def _out_of_budget(candidate: Candidate, result: PassResult, reason: str) -> bool:
    """Whether the candidate's NodePool allows no more disruptions for `reason` (noted on the candidate): for the
    methods whose command holds one candidate, which spend no budget trying one."""
    pool = candidate.claimed.nodepool
    if result.budgets.get((pool, reason), 0) > 0:
        return False
    result.notes.setdefault(candidate.name, []).append(
        f'disruption budget of NodePool "{pool}" for {reason} allows no more nodes now'
    )
    return True


def _not_declined(candidates: Sequence[Candidate], result: PassResult, reason: str) -> list[Candidate]:
    """The candidates no person has denied disrupting for `reason` in the state they are in now."""
    declined = result.declined.get(reason) or ()
    if not declined:
        return list(candidates)
    kept = []
    for candidate in candidates:
        if (candidate.name, candidate_state(candidate)) in declined:
            note = f"a person denied disrupting this node for {reason} while its pods are the ones it has now"
            if note not in result.notes.get(candidate.name, []):
                result.notes.setdefault(candidate.name, []).append(note)
            continue
        kept.append(candidate)
    return kept


def _emptiness(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    candidates = _not_declined(candidates, result, EMPTY)
    empty = _admit(
        consolidation_order(_consolidatable(candidates, result, empty=True, hosting=view.buffer_nodes)), result, EMPTY
    )
    return [Command(EMPTY, tuple(empty), (), "empty")] if empty else []


def _drift(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    """One drifted node per pass, replaced by however many nodes its pods need, whatever they cost."""
    candidates = _not_declined(candidates, result, DRIFTED)
    drifted = [c for c in candidates if c.claimed.drifted and not c.nodepool.static]
    drifted.sort(key=lambda c: (bool(c.pods), c.claimed.drifted_at, c.name))  # empty first, then oldest
    for candidate in drifted:
        # A command holds one node, so trying one spends no budget: a NodePool's budget only has to allow one more
        # (drift.go:78-83), and a node that cannot be replaced leaves it for the next.
        if _out_of_budget(candidate, result, DRIFTED):
            continue
        outcome = simulate([candidate], view)
        problems = simulation_problems(outcome, [candidate], view) or launch_limit_problems(
            outcome.new_nodeclaims, view
        )
        if problems:
            result.drift_blocked[candidate.name] = problems[:1]
            continue
        where = destinations(outcome, [candidate])
        return [Command(DRIFTED, (candidate,), tuple(outcome.new_nodeclaims), "drift", destinations=where)]
    return []


# Karpenter's blocked reason for a static NodePool's drifted node when the pool is at limits.nodes.
STATIC_AT_LIMIT = "static NodePool is at its node limit and cannot stage a replacement"


def _static_drift(
    candidates: Sequence[Candidate], result: PassResult, counts: Mapping[str, tuple[int, int, int]]
) -> list[Command]:
    """Karpenter's StaticDrift: a static NodePool's drifted nodes, each replaced by a new NodeClaim of the NodePool
    (no simulation), as many as its Drifted budget and limits.nodes allow, and none while it has more NodeClaims
    than replicas (the scale-down goes first)."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in _not_declined(candidates, result, DRIFTED):
        if candidate.nodepool.static and candidate.claimed.drifted:
            by_pool.setdefault(candidate.nodepool.name, []).append(candidate)
    commands = []
    for name, drifted in sorted(by_pool.items()):
        nodepool = drifted[0].nodepool
        budget = result.budgets.get((name, DRIFTED), 0)
        active, deleting, pending = counts.get(name, (0, 0, 0))
        if budget <= 0 or active + pending > (nodepool.replicas or 0):
            continue
        limit = nodepool.limits.get("nodes")
        room = len(drifted) if limit is None else max(limit // MILLI - (active + deleting + pending), 0)
        drifted.sort(key=lambda c: (c.claimed.drifted_at, c.name))
        allowed = drifted[: min(budget, len(drifted))]
        if room == 0:
            # At its node limit the pool cannot stage a replacement: the nodes the budget allows are told why
            # (DisruptionBlocked) rather than passed over silently (staticdrift.go:122-124, unreplaceableCommands).
            for candidate in allowed:
                result.drift_blocked[candidate.name] = [STATIC_AT_LIMIT]
            continue
        for candidate in allowed[:room]:
            commands.append(Command(DRIFTED, (candidate,), (static_plan(nodepool),), "static-drift"))
    return commands


def _multi_node(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    candidates = _not_declined(candidates, result, UNDERUTILIZED)
    eligible = _admit(
        consolidation_order(_consolidatable(candidates, result, empty=False)),
        result,
        UNDERUTILIZED,
    )
    if len(eligible) < 2:
        return []
    # firstNConsolidationOption: the window's last index is at most 100 (maxParallel), so a window holds at most
    # 101 candidates when there are more.
    low, high = 1, min(len(eligible) - 1, MAX_MULTI_CANDIDATES)
    best: Command | None = None
    best_scores: dict[str, ScoreResult] = {}
    rejected: tuple[Sequence[Candidate], dict[str, ScoreResult]] | None = None
    while low <= high:
        middle = (low + high) // 2
        outcome = compute(eligible[: middle + 1], view, "multi", UNDERUTILIZED)
        command = without_same_types(outcome) if isinstance(outcome, Command) else None
        if command is not None:
            approved, scores = balanced_verdict(command, result.totals)
            if not approved:
                command, rejected = None, (eligible[: middle + 1], scores)
        if command is not None:
            best, low, best_scores = command, middle + 1, scores
        else:
            high = middle - 1
    if best is None:
        if rejected is not None:  # the smallest window Balanced refused, said once (as Karpenter's metrics are)
            for candidate in rejected[0]:
                result.balanced_notes.setdefault(candidate.name, []).extend(refusals(rejected[1], "multi-node"))
        return []
    result.approved = best_scores
    return [best]


def _single_node(
    candidates: Sequence[Candidate],
    view: ClusterView,
    result: PassResult,
    unseen: frozenset[str] = frozenset(),
    resume: str | None = None,
    walk: Walk | None = None,
) -> list[Command]:
    """The first candidate that can go; one command at most, so trying a candidate spends no budget. The candidates
    of the NodePools in `unseen` go first (SortCandidates); at most MAX_SINGLE_SIMULATIONS are simulated, starting
    at `resume` if it is still a candidate, and going on with an earlier pass's `walk` in its order."""
    before = {name: tuple(notes) for name, notes in result.notes.items()} if walk is None else {}
    eligible = _not_declined(candidates, result, UNDERUTILIZED)
    if walk is None:
        walk = Walk(candidates, before, unseen)
    ordered = single_node_order(_consolidatable(eligible, result, empty=False), walk.first)
    start = next((i for i, c in enumerate(ordered) if c.name == resume), 0)
    result.walk = walk
    simulated = 0
    for index in range(start, len(ordered)):
        candidate = ordered[index]
        if simulated == MAX_SINGLE_SIMULATIONS:
            # The timeout: the NodePools with no candidate reached yet go first in the next walk.
            result.resume = candidate.name
            reached = {c.claimed.nodepool for c in ordered[:index]}
            result.unseen_nodepools = frozenset(c.claimed.nodepool for c in ordered[index:]) - reached
            return []
        pool = candidate.claimed.nodepool
        if _out_of_budget(candidate, result, UNDERUTILIZED):
            continue
        best_case = upper_bound(candidate, result.totals)
        if best_case is not None and not best_case.approved:
            # CanPassThreshold: even deleting it outright would score below the threshold, so no move on it can.
            result.balanced_notes.setdefault(candidate.name, []).append(
                f"Balanced: even deleting it {describe(best_case)} in NodePool {pool}"
            )
            continue
        outcome = compute([candidate], view, "single", UNDERUTILIZED)
        simulated += 1
        if isinstance(outcome, Command):
            approved, scores = balanced_verdict(outcome, result.totals)
            if approved:
                result.approved = scores
                return [outcome]
            result.balanced_notes.setdefault(candidate.name, []).extend(refusals(scores, "this move"))
            continue
        result.notes.setdefault(candidate.name, []).extend(outcome)
    result.unseen_nodepools = frozenset()  # every NodePool reached
    return []


def single_node_order(candidates: Sequence[Candidate], first: Collection[str] = ()) -> list[Candidate]:
    """SortCandidates (singlenodeconsolidation.go:139-172): by savings ratio, then interwoven by NodePool, the
    NodePools in `first` (PreviouslyUnseenNodePools) before the others."""
    return _interleaved(consolidation_order(candidates), first)


def _interleaved(candidates: Sequence[Candidate], first: Collection[str] = ()) -> list[Candidate]:
    """Round-robin over NodePools (first of each pool, then second, ...), as single-node consolidation does, the
    pools in `first` leading each round. Go's map and set order is random; here each group is in name order."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_pool.setdefault(candidate.claimed.nodepool, []).append(candidate)
    pools = sorted(by_pool, key=lambda name: (name not in first, name))
    result = []
    for index in range(max((len(v) for v in by_pool.values()), default=0)):
        for pool in pools:
            if index < len(by_pool[pool]):
                result.append(by_pool[pool][index])
    return result


# Balanced (Karpenter v1.14, balanced.go) ----------------------------------------------------------------------------


def balanced_verdict(command: Command, totals: Mapping[str, NodePoolTotals]) -> tuple[bool, dict[str, ScoreResult]]:
    """EvaluateBalancedMove: the command's score in each of its Balanced NodePools, approved only when every one
    approves; NodePools of other policies are not scored. A command with no candidates moves nothing and is
    refused (balanced.go:128-130)."""
    if not command.candidates:
        return False, {}
    balanced = {c.claimed.nodepool for c in command.candidates if c.nodepool.consolidation_policy == BALANCED}
    if not balanced:
        return True, {}
    scores = {pool: score for pool, score in command_scores(command, totals).items() if pool in balanced}
    return all(score.approved for score in scores.values()), scores


def upper_bound(candidate: Candidate, totals: Mapping[str, NodePoolTotals]) -> ScoreResult | None:
    """CanPassThreshold's score, a delete of the candidate (the best any move on it can do), for a Balanced
    NodePool with a cost to normalise against; None otherwise (it passes)."""
    pool = totals.get(candidate.claimed.nodepool)
    if candidate.nodepool.consolidation_policy != BALANCED or pool is None or pool.total_cost <= 0:
        return None
    return score_move(candidate.price, candidate.reschedule_cost, pool)


def describe(score: ScoreResult) -> str:
    """A score as the node page says it: `scores 0.31 < threshold 0.50 (saves 12.5% of its cost for 40.0% of its
    disruption)`."""
    relation = ">=" if score.approved else "<"
    return (
        f"scores {score_text(score.score)} {relation} threshold {score.threshold:.2f} (saves "
        f"{score.savings_fraction * 100:.1f}% of its cost for {score.disruption_fraction * 100:.1f}% of its disruption)"
    )


def refusals(scores: Mapping[str, ScoreResult], what: str) -> list[str]:
    return [
        f"Balanced: {what} {describe(s)} in NodePool {pool}" for pool, s in sorted(scores.items()) if not s.approved
    ]


def score_text(score: float) -> str:
    """As Go's %.2f prints a float (an undisrupting move's infinite score is +Inf)."""
    return "+Inf" if score == float("inf") else f"{score:.2f}"
