"""Disruption methods in Karpenter's order; the first that yields a command ends the pass.

Emptiness (one delete of every empty candidate the budgets admit), Drift (one drifted node, replaced as needed,
no price check), multi-node consolidation (the largest prefix of up to 100 candidates that can be deleted or
replaced by one cheaper node, found by binary search), single-node consolidation (the first candidate that can).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.disruption.budgets import allowed_disruptions
from provisioner.disruption.candidates import build_candidates, consolidation_blockers, consolidation_order
from provisioner.disruption.consolidation import ClusterView, compute, simulate, simulation_problems, without_same_types
from provisioner.disruption.types import DRIFTED, EMPTY, UNDERUTILIZED, Candidate, Command
from provisioner.objects import NodePool

MAX_MULTI_CANDIDATES = 100
# Karpenter stops single-node consolidation after 3 minutes and starts the next pass where it stopped. The lab
# must be deterministic, so its bound is a count: this many candidates simulated per pass (about 10-16 ms each in
# memory at 1,819 nodes, bench/README.md), then the next pass resumes with the candidate after the last one tried.
MAX_SINGLE_SIMULATIONS = 20


@dataclass(frozen=True)
class Walk:
    """One single-node consolidation walk over every candidate, spread over passes by MAX_SINGLE_SIMULATIONS: the
    candidates, the notes of the methods before it, and the candidate it began with (where it ends)."""

    candidates: Sequence[Candidate]
    notes: Mapping[str, tuple[str, ...]]
    begin: str | None


@dataclass
class PassResult:
    """What one disruption pass found: at most one method's commands, and why every other node stays."""

    commands: list[Command] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)  # node -> reasons it is not a candidate
    notes: dict[str, list[str]] = field(default_factory=dict)  # node -> why consolidation did not act on it
    budgets: dict[tuple[str, str], int] = field(default_factory=dict)  # (nodepool, reason) -> allowed
    # Single-node consolidation stopped at its bound: the candidate the next pass starts with (None: it went through
    # every candidate, so a pass that found nothing is a whole pass).
    resume: str | None = None
    # a candidate's NodeClaim -> consolidation_blockers' answer, as the first consolidation method to ask got it
    unconsolidatable: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)
    # Set when the pass reached single-node consolidation: what `continue_pass` goes on from.
    walk: Walk | None = field(default=None, repr=False, compare=False)


def disruption_pass(view: ClusterView, nodepools: Mapping[str, NodePool], *, resume: str | None = None) -> PassResult:
    """One pass; `resume` names the candidate where the previous pass's single-node consolidation stopped."""
    result = PassResult()
    candidates, result.blocked = build_candidates(view.claimed, nodepools, view.pdbs, view.now)
    for nodepool in nodepools.values():
        for reason in (EMPTY, DRIFTED, UNDERUTILIZED):
            result.budgets[(nodepool.name, reason)] = allowed_disruptions(nodepool, reason, view.claimed, view.now)
    # Drift's candidates differ only on nodes with a terminationGracePeriod (their pods do not block it); without
    # any, they are these, and building them again was a fifth of a pass at 20,000 pods.
    eventual = candidates
    if any(c.grace_period for c in view.claimed):
        eventual, _ = build_candidates(view.claimed, nodepools, view.pdbs, view.now, eventual=True)
    for method in (_emptiness, _drift, _multi_node, _single_node):
        if method is _single_node:
            commands = _single_node(candidates, view, result, resume)
        else:
            commands = method(eventual if method is _drift else candidates, view, result)
        if commands:
            result.commands = commands
            break
    return result


def continue_pass(previous: PassResult, view: ClusterView) -> PassResult:
    """The next pass over the same inputs as `previous`, which stopped at its single-node bound. Emptiness, drift and
    multi-node consolidation are functions of those inputs and found nothing then, so they would find nothing now:
    only the single-node walk goes on, from `previous.resume`, and ends where it began. Karpenter's single-node
    consolidation goes through every candidate in one pass unless its 3-minute timeout stops it, and a pass that went
    through them all and found nothing is "consolidated" (no pass until something changes or five minutes pass); a
    walk that always restarted would never get there. At 20,000 pods the methods before the walk (six multi-node
    simulations of up to 100 candidates) and building the candidates were half of every 10 s poll."""
    walk = previous.walk
    if walk is None or previous.resume is None:
        raise ValueError("only a pass that stopped at its single-node bound goes on")
    result = PassResult(
        blocked=previous.blocked,
        notes={name: list(notes) for name, notes in walk.notes.items()},
        budgets=previous.budgets,
        unconsolidatable=previous.unconsolidatable,
        walk=walk,
    )
    result.commands = _single_node(walk.candidates, view, result, previous.resume, walk)
    return result


def _consolidatable(candidates: Sequence[Candidate], result: PassResult, *, empty: bool | None) -> list[Candidate]:
    chosen = []
    for candidate in candidates:
        is_empty = not candidate.pods
        if empty is not None and is_empty != empty:
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
        reasons = consolidation_blockers(candidate.claimed, candidate.nodepool, not candidate.pods)
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


def _emptiness(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    empty = _admit(consolidation_order(_consolidatable(candidates, result, empty=True)), result, EMPTY)
    return [Command(EMPTY, tuple(empty), (), "empty")] if empty else []


def _drift(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    """One drifted node per pass, replaced by however many nodes its pods need, whatever they cost."""
    drifted = [c for c in candidates if c.claimed.drifted]
    drifted.sort(key=lambda c: (bool(c.pods), c.claimed.drifted_at, c.name))  # empty first, then oldest
    for candidate in _admit(drifted, result, DRIFTED):
        outcome = simulate([candidate], view)
        problems = simulation_problems(outcome, [candidate], view)
        if problems:
            result.notes.setdefault(candidate.name, []).extend(problems)
            continue
        return [Command(DRIFTED, (candidate,), tuple(outcome.new_nodeclaims), "drift")]
    return []


def _multi_node(candidates: Sequence[Candidate], view: ClusterView, result: PassResult) -> list[Command]:
    eligible = _admit(consolidation_order(_consolidatable(candidates, result, empty=False)), result, UNDERUTILIZED)
    eligible = eligible[:MAX_MULTI_CANDIDATES]
    if len(eligible) < 2:
        return []
    low, high = 1, len(eligible) - 1
    best: Command | None = None
    while low <= high:
        middle = (low + high) // 2
        outcome = compute(eligible[: middle + 1], view, "multi", UNDERUTILIZED)
        command = without_same_types(outcome) if isinstance(outcome, Command) else None
        if command is not None:
            best, low = command, middle + 1
        else:
            high = middle - 1
    return [best] if best is not None else []


def _single_node(
    candidates: Sequence[Candidate],
    view: ClusterView,
    result: PassResult,
    resume: str | None = None,
    walk: Walk | None = None,
) -> list[Command]:
    """The first candidate that can go; one command at most, so trying a candidate spends no budget. At most
    MAX_SINGLE_SIMULATIONS are simulated, starting at `resume` if it is still a candidate; going on with an earlier
    pass's `walk`, the walk ends where it began."""
    before = {name: tuple(notes) for name, notes in result.notes.items()} if walk is None else {}
    ordered = _interleaved(consolidation_order(_consolidatable(candidates, result, empty=False)))
    start = next((i for i, c in enumerate(ordered) if c.name == resume), 0)
    ordered = ordered[start:] + ordered[:start]
    if walk is None:
        walk = Walk(candidates, before, ordered[0].name if ordered else None)
    else:
        ordered = ordered[: next((i for i, c in enumerate(ordered) if i and c.name == walk.begin), len(ordered))]
    result.walk = walk
    simulated = 0
    for candidate in ordered:
        if simulated == MAX_SINGLE_SIMULATIONS:
            result.resume = candidate.name
            return []
        pool = candidate.claimed.nodepool
        if result.budgets.get((pool, UNDERUTILIZED), 0) <= 0:
            result.notes.setdefault(candidate.name, []).append(
                f'disruption budget of NodePool "{pool}" for {UNDERUTILIZED} allows no more nodes now'
            )
            continue
        outcome = compute([candidate], view, "single", UNDERUTILIZED)
        simulated += 1
        if isinstance(outcome, Command):
            return [outcome]
        result.notes.setdefault(candidate.name, []).extend(outcome)
    return []


def _interleaved(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Round-robin over NodePools (first of each pool, then second, ...), as single-node consolidation does."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_pool.setdefault(candidate.claimed.nodepool, []).append(candidate)
    result = []
    for index in range(max((len(v) for v in by_pool.values()), default=0)):
        for pool in sorted(by_pool):
            if index < len(by_pool[pool]):
                result.append(by_pool[pool][index])
    return result
