"""A command's plan as a person approved it, and how a later simulation of it differs: what changed, and whether the
change is material (it needs approving again). Also several commands simulated as one plan, in the order that
keeps every step valid.

The rule (README, "Re-checked at execution"): a change is material when the command would evict more pods, save
less than it said by more than the tolerance, launch more nodes, or launch into a NodePool it did not (using that
NodePool's limits); fewer evictions, more savings, a cheaper or different instance type in the same NodePool, or a
node dropped from an emptiness command within the tolerance are changes the command carries without asking again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner.disruption.consolidation import ClusterView, departing_pods, simulate
from provisioner.disruption.types import Candidate, Command
from provisioner.scheduling.results import NodeClaimPlan

# A re-checked plan may save this much less (as a share of what it said) before the change is material.
SAVINGS_TOLERANCE = 0.10
# ... and never less than this much in $/h: a saving of $0.0001/h that became $0.00005/h is not news.
SAVINGS_EPSILON = 0.0005


@dataclass(frozen=True)
class PlanSummary:
    """What a person weighed: the decision, the nodes, how many pods move, the replacements (NodePool and most
    likely instance type, in order) and the savings."""

    decision: str
    nodes: tuple[str, ...]
    evicted: int
    replacements: tuple[tuple[str, str], ...]
    savings: float

    @classmethod
    def of(cls, command: Command) -> PlanSummary:
        return cls(
            decision=command.decision,
            nodes=tuple(sorted(c.name for c in command.candidates)),
            evicted=command.pod_count,
            replacements=tuple(
                (r.nodepool, r.cheapest.instance_type.name if r.options else "") for r in command.replacements
            ),
            savings=round(command.savings, 6),
        )

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> PlanSummary:
        """The plan a stored DisruptionCommand describes."""
        return cls(
            decision=str(spec.get("decision", "")),
            nodes=tuple(sorted(c["node"] for c in spec.get("candidates") or [])),
            evicted=sum(len(c.get("pods") or []) for c in spec.get("candidates") or []),
            replacements=tuple(
                (str(r.get("nodepool", "")), (r.get("instanceTypes") or [""])[0])
                for r in spec.get("replacements") or []
            ),
            savings=round(float(spec.get("savings") or 0.0), 6),
        )


@dataclass(frozen=True)
class Comparison:
    changes: tuple[str, ...]  # what differs, in words (empty: the plan holds)
    material: bool  # it needs approving again

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def compare(old: PlanSummary, new: PlanSummary, tolerance: float = SAVINGS_TOLERANCE) -> Comparison:
    """How `new` differs from the approved `old`, and whether that is material (module docstring)."""
    changes: list[str] = []
    material = False
    if new.nodes != old.nodes:
        dropped = sorted(set(old.nodes) - set(new.nodes))
        changes.append(f"nodes {', '.join(dropped)} no longer part of it" if dropped else "its nodes changed")
    if new.decision != old.decision:
        changes.append(f"now a {new.decision}, was a {old.decision}")
    if new.evicted > old.evicted:
        changes.append(f"evicts {new.evicted} pods, {new.evicted - old.evicted} more than approved")
        material = True
    elif new.evicted < old.evicted:
        changes.append(f"evicts {new.evicted} pods, {old.evicted - new.evicted} fewer")
    old_pools, new_pools = [p for p, _ in old.replacements], [p for p, _ in new.replacements]
    if len(new.replacements) > len(old.replacements):
        changes.append(f"launches {len(new.replacements)} node(s), was {len(old.replacements)}")
        material = True
    elif len(new.replacements) < len(old.replacements):
        changes.append(f"launches {len(new.replacements)} node(s), was {len(old.replacements)}")
    for pool in sorted(set(new_pools) - set(old_pools)):
        changes.append(f'launches into NodePool "{pool}" (and so counts against its limits), which it did not')
        material = True
    if len(new.replacements) == len(old.replacements) and new_pools == old_pools:
        for (pool, before), (_, after) in zip(old.replacements, new.replacements, strict=True):
            if before != after:
                changes.append(f"replacement in {pool} is {after or 'unpriced'}, was {before or 'unpriced'}")
    drop = old.savings - new.savings
    if abs(drop) > 1e-6:
        changes.append(f"saves ${new.savings:.4f}/h, was ${old.savings:.4f}/h")
        if drop > max(tolerance * abs(old.savings), SAVINGS_EPSILON):
            material = True
    return Comparison(tuple(changes), material)


# Several commands as one plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One command of a set: its name, its candidates on the cluster now, and what it launches on its own."""

    name: str
    candidates: tuple[Candidate, ...]
    replacements: int
    decision: str


@dataclass(frozen=True)
class CombinedPlan:
    """Several commands simulated as one: every candidate gone at once, every pod they hold (and every pod of a node
    already on its way out) placed again."""

    order: tuple[str, ...]  # the order the steps run in
    evicted: int
    stranded: tuple[str, ...]  # pods that would fit nowhere, with why
    launches: tuple[NodeClaimPlan, ...]  # NodeClaims the set needs together
    planned_launches: int  # what the commands launch on their own
    candidates_price: float

    @property
    def extra_launches(self) -> int:
        return max(len(self.launches) - self.planned_launches, 0)

    @property
    def launch_price(self) -> float:
        return sum(plan.cheapest.price for plan in self.launches if plan.options)

    @property
    def savings(self) -> float:
        return self.candidates_price - self.launch_price

    @property
    def needs_confirmation(self) -> bool:
        """A set that would strand pods or launch nodes the commands did not plan is refused unless the approver
        confirms this plan."""
        return bool(self.stranded) or self.extra_launches > 0

    @property
    def digest(self) -> str:
        """What an approver confirms: the same steps in the same order with the same outcome."""
        text = repr(
            (
                self.order,
                self.evicted,
                self.stranded,
                tuple((p.nodepool, p.cheapest.instance_type.name if p.options else "") for p in self.launches),
            )
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def sentences(self) -> list[str]:
        said = [f"{len(self.order)} command(s) together evict {self.evicted} pods and save ${self.savings:.4f}/h"]
        if self.launches:
            said.append(
                f"they need {len(self.launches)} new node(s) (${self.launch_price:.4f}/h), "
                f"{self.extra_launches} more than the commands launch on their own"
                if self.extra_launches
                else f"they launch {len(self.launches)} replacement(s), as the commands say"
            )
        if self.stranded:
            said.append(f"{len(self.stranded)} pod(s) would fit nowhere: {'; '.join(self.stranded[:5])}")
        said.append("in this order: " + ", ".join(self.order))
        return said


def combined(members: Sequence[Member], view: ClusterView) -> CombinedPlan:
    """Simulate `members` as one plan on `view` (in which nodes already on their way out are marked for deletion):
    what the set evicts, strands and launches together, and an order in which each step stays valid: replacements
    first (the pods of a later delete may count on them; every candidate of the set is held from the start, so no
    step's pods land on a later step's node), then deletes, each in queue order."""
    candidates = [c for m in members for c in m.candidates]
    result = simulate(candidates, view)
    moving = {p.uid for c in candidates for p in c.pods}
    leaving = {p.uid for p in departing_pods(view, {c.name for c in candidates})}
    stranded = tuple(
        f"{f.pod.key} => {f.message}" for uid, f in sorted(result.failures.items()) if uid in moving | leaving
    )
    launches = tuple(plan for plan in result.new_nodeclaims if any(p.uid in moving for p in plan.pods))
    order = tuple(m.name for m in members if m.replacements) + tuple(m.name for m in members if not m.replacements)
    return CombinedPlan(
        order=order,
        evicted=len(moving),
        stranded=stranded,
        launches=launches,
        planned_launches=sum(m.replacements for m in members),
        candidates_price=sum(c.price for c in candidates),
    )


def dependencies(
    commands: Sequence[Mapping[str, Any]],
    limited: Collection[str] = (),
    allowed: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, list[str]]:
    """For each queued command (stored objects), what ties it to the others, in words: its pods are planned onto
    another's node (both cannot run as planned), its replacements and another's count against the same NodePool's
    limits (`limited`: the NodePools that have limits), or together they need more of a NodePool's disruption budget
    for their reason than it allows (`allowed`: (NodePool, reason) -> nodes the budget allows now)."""
    owner = {c["node"]: cmd["metadata"]["name"] for cmd in commands for c in cmd["spec"].get("candidates") or []}
    said: dict[str, list[str]] = {}
    for cmd in commands:
        name, spec = cmd["metadata"]["name"], cmd["spec"]
        onto: dict[str, list[str]] = {}
        for node in spec.get("destinations") or {}:
            other = owner.get(node)
            if other is not None and other != name:
                onto.setdefault(other, []).append(node)
        for other, nodes in sorted(onto.items()):
            said.setdefault(name, []).append(
                f"its pods are planned onto {', '.join(sorted(nodes))}, which {other} removes"
            )
            said.setdefault(other, []).append(f"{name} plans its pods onto {', '.join(sorted(nodes))}")
    launching: dict[str, list[str]] = {}
    disrupting: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for cmd in commands:
        name, spec = cmd["metadata"]["name"], cmd["spec"]
        for pool in sorted({r.get("nodepool", "") for r in spec.get("replacements") or []} & set(limited)):
            launching.setdefault(pool, []).append(name)
        counts: dict[str, int] = {}
        for candidate in spec.get("candidates") or []:
            counts[candidate.get("nodepool", "")] = counts.get(candidate.get("nodepool", ""), 0) + 1
        for pool, count in counts.items():
            disrupting.setdefault((pool, spec.get("reason", "")), []).append((name, count))
    for pool, names in sorted(launching.items()):
        for name in names:
            others = [n for n in names if n != name]
            if others:
                said.setdefault(name, []).append(
                    f'launches into NodePool "{pool}", whose limits {", ".join(others)} also use'
                )
    for (pool, reason), members in sorted(disrupting.items()):
        budget = (allowed or {}).get((pool, reason))
        if budget is None or len(members) < 2 or sum(count for _, count in members) <= budget:
            continue
        for name, _ in members:
            others = [n for n, _ in members if n != name]
            said.setdefault(name, []).append(
                f'NodePool "{pool}" allows {budget} node(s) disrupted for {reason} at once: it shares that with '
                + ", ".join(others)
            )
    return said
