"""Plan improvement: re-pack one batch's new NodeClaims into a cheaper set of instance types, constraints kept.

Karpenter fills one NodeClaim while any instance type still fits and launches the cheapest type that holds it, so
a batch's last NodeClaim is often far larger than its pods need (10 pods of 500m → one c-8x at 63 %, where a c-4x
and a c-2x cost three quarters as much), and a queue sorted by CPU alone fills big nodes in one dimension. A
NodePool that opts in (`karpui.dev/plan-improvement: enabled`) gets a second look after the simulation:

* Only NodeClaims whose pods no topology group owns or counts (no spread, no pod affinity or anti-affinity, no
  selector of another pod's constraint that matches them), with no host ports and no device requests, are
  re-packed, and only with NodeClaims of the same NodePool carrying the same requirements, so moving a pod
  between them can change no other pod's constraint.
* Across those groups, such a NodeClaim is folded away when its pods can join the batch's other NodeClaims (of any
  NodePool that opts in) for less than it costs, as they would have had they come later in Karpenter's queue.
* A packer chooses node shapes and how many pods of each request class go on each (`Packer`); then every new
  NodeClaim is rebuilt through the scheduler's own fit checks (taints, requirements, resources with DaemonSet
  overhead, minValues) and the final plan checks (instance-type truncation), and the NodePool's limits are
  checked with the scheduler's pessimistic accounting. Anything refused leaves the group as Karpenter planned it.
* A re-pack is kept only when it is cheaper, or as cheap with fewer nodes.

Everything is ordered (no set or hash order reaches the result), so the same inputs give the same plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from provisioner import labels as wk
from provisioner.dra.claims import DeviceClass
from provisioner.objects import NodePool
from provisioner.options import STRICT
from provisioner.pods import Pod
from provisioner.quantity import MILLI, Resources
from provisioner.requirements import Requirements
from provisioner.scheduling.nodeclaim import NodeClaimTemplate, PlannedNodeClaim, Unfit
from provisioner.scheduling.poddata import PodData, PodState
from provisioner.scheduling.results import NodeClaimPlan, Reason
from provisioner.scheduling.topology import Topology

# Prices are sums of floats: within this they are equal, and then fewer nodes win.
EPSILON = 1e-9
# The packer looks ahead (tries every shape for the next node and completes greedily) once what is left is worth
# at most this many of the dearest shape; before that it takes the most efficient node shape, repeatedly.
TAIL = 1.0
# How many of the most promising shapes the look-ahead completes for each node it chooses.
LOOKAHEAD = 8
# Groups with more distinct pod requests than this stay as planned: the packer's work grows with their square.
MAX_CLASSES = 64
# Pods whose exact packing weighs at most this many (pod counts, node content) pairs are packed exactly.
EXACT_PAIRS = 20000
# How many fit checks folding NodeClaims into other groups' may spend on one batch.
FOLD_FITS = 4000


def enabled(nodepool: NodePool) -> bool:
    return nodepool.annotations.get(wk.PLAN_IMPROVEMENT) == wk.PLAN_IMPROVEMENT_ENABLED


@dataclass(frozen=True)
class Simulation:
    """What the re-pack needs from the scheduling simulation that made the NodeClaims."""

    pod_state: Callable[[Pod], tuple[PodState, PodData]]  # each pod as finally placed (relaxed preferences)
    independent: Callable[[Pod], bool]  # no topology group owns or counts the pod
    remaining: Mapping[str, Resources]  # each limited NodePool's limits minus its nodes, before the batch
    seq: Iterator[int]  # for new NodeClaims' numbers (their hostname placeholders)
    plan: Callable[[PlannedNodeClaim], NodeClaimPlan | Reason]  # the scheduler's final plan check
    min_values_policy: str = STRICT
    device_classes: Mapping[str, DeviceClass] | None = None


def improve(claims: Sequence[PlannedNodeClaim], simulation: Simulation) -> list[PlannedNodeClaim]:
    """The batch's NodeClaims re-packed where that is cheaper: each group of interchangeable ones on its own, and
    after folding NodeClaims into those of other groups, whichever of the two costs less."""
    repacked = _repack_groups(claims, simulation)
    folded = _fold(claims, simulation)
    if folded is None:
        return repacked
    folded = _repack_groups(folded, simulation)
    cost, nodes = sum(price(c) for c in folded), len(folded)
    return folded if _better(cost, nodes, sum(price(c) for c in repacked), len(repacked)) else repacked


def _group(claim: PlannedNodeClaim) -> tuple[str, Requirements]:
    """Which NodeClaims are interchangeable: the same NodePool and the same requirements, hostname aside."""
    return claim.template.name, _without_hostname(claim.requirements)


def _repack_groups(claims: Sequence[PlannedNodeClaim], simulation: Simulation) -> list[PlannedNodeClaim]:
    groups: dict[tuple[str, Requirements], list[PlannedNodeClaim]] = {}
    for claim in claims:
        if _changeable(claim, simulation):
            groups.setdefault(_group(claim), []).append(claim)
    result = list(claims)
    for (pool, requirements), members in groups.items():
        group = {c.seq for c in members}
        others = [c for c in result if c.template.name == pool and c.seq not in group]
        replacement = _repack(members, requirements, others, simulation)
        if replacement is None:
            continue
        # The new NodeClaims take the group's place in the batch's order.
        at = next(i for i, c in enumerate(result) if c.seq in group)
        result = [c for c in result if c.seq not in group]
        result[at:at] = replacement
    return result


def _fold(claims: Sequence[PlannedNodeClaim], simulation: Simulation) -> list[PlannedNodeClaim] | None:
    """The batch with NodeClaims dropped whose pods all join NodeClaims of other groups for less than they cost, or
    None if none can be.

    Karpenter tries the NodeClaims in flight before opening a new one, so which NodePool a batch opens depends on
    which pod comes first: a tolerating pod first opens a NodeClaim on the tainted NodePool, and the plain pods after
    it open another, where plain pods first would have taken the tolerating one along (corpus/010). Within a group
    the re-pack already chooses the NodeClaims; this looks across groups. Each pod of a candidate joins the
    NodeClaim it makes dearer the least, through the scheduler's own fit checks; cheapest candidates are tried
    first, again after every fold, within `FOLD_FITS` fit checks so that a large batch costs a bounded time.
    """
    result = list(claims)
    budget = [FOLD_FITS]
    folded = False
    while budget[0] > 0:
        # Only NodeClaims of independent pods give or take pods, so a constrained pod's NodeClaim stays as it was.
        open_to_change = [c for c in result if _changeable(c, simulation)]
        for candidate in sorted(open_to_change, key=lambda c: (price(c), c.seq)):
            receivers = [c for c in open_to_change if _group(c) != _group(candidate)]
            joined = _join(candidate.pods, receivers, simulation, budget)
            if joined is None:
                continue
            before = price(candidate) + sum(price(c) for c in receivers if c.seq in joined)
            if sum(price(c) for c in joined.values()) < before - EPSILON:
                result = [joined.get(c.seq, c) for c in result if c is not candidate]
                folded = True
                break
        else:
            break
    return result if folded else None


def _changeable(claim: PlannedNodeClaim, simulation: Simulation) -> bool:
    return enabled(claim.template.nodepool) and all(_movable(p, simulation) for p in claim.pods)


def _join(
    pods: Sequence[Pod], receivers: Sequence[PlannedNodeClaim], simulation: Simulation, budget: list[int]
) -> dict[int, PlannedNodeClaim] | None:
    """Copies of the receivers that changed, by seq, once every pod has joined one; None if a pod fits none of
    them, or the budget of fit checks runs out."""
    scratch = Topology({}, (), {})  # the pods are independent: no topology group owns or counts them
    current = {c.seq: c for c in receivers}
    changed: dict[int, PlannedNodeClaim] = {}
    for pod in pods:
        state, data = simulation.pod_state(pod)
        best: tuple[float, PlannedNodeClaim] | None = None
        for claim in current.values():
            budget[0] -= 1
            if budget[0] < 0:
                return None
            try:
                fit = claim.fit(state, data, scratch, [], simulation.min_values_policy, simulation.device_classes)
            except Unfit:
                continue
            trial = claim.copy()
            trial.commit(state, data, fit, scratch)
            if trial.min_values_relaxed and not claim.min_values_relaxed:
                continue
            increase = price(trial) - price(claim)
            if best is None or increase < best[0] - EPSILON:
                best = (increase, trial)
        if best is None:
            return None
        current[best[1].seq] = changed[best[1].seq] = best[1]
    if any(isinstance(simulation.plan(c), Reason) for c in changed.values()):
        return None
    return changed


def _movable(pod: Pod, simulation: Simulation) -> bool:
    if pod.host_ports or pod.device_requests or pod.resource_claims:
        return False
    return simulation.independent(pod)


def _without_hostname(requirements: Requirements) -> Requirements:
    return Requirements(v for k, v in requirements.items() if k != wk.HOSTNAME)


def price(claim: PlannedNodeClaim) -> float:
    """What the NodeClaim launches as: its cheapest option's cheapest compatible offering."""
    index = claim.template.index
    table = index.priced(_without_hostname(claim.requirements))
    for position in table.order:
        if claim.mask >> position & 1:
            return table.prices[position]
    return float("inf")


def _repack(
    members: list[PlannedNodeClaim],
    requirements: Requirements,
    others: list[PlannedNodeClaim],
    simulation: Simulation,
) -> list[PlannedNodeClaim] | None:
    """A cheaper set of NodeClaims for the pods of `members`, or None to keep them."""
    template = members[0].template
    classes = _RequestClasses(members)
    if len(classes.demands) > MAX_CLASSES:
        return None
    resources = sorted(
        {name for requests in classes.requests for name, amount in requests.items() if amount > 0}
        | {name for group in template.daemon_groups for name, amount in group.overhead.items() if amount > 0}
    )
    demands = [tuple(requests.get(r, 0) for r in resources) for requests in classes.requests]
    packer = Packer(demands, _shapes(template, requirements, resources))
    bins = packer.pack(classes.counts())
    prices = [price(c) for c in members]
    before = sum(prices)
    if bins is None or not _better(sum(b.shape.price for b in bins), len(bins), before, len(members)):
        return None
    # NodeClaims the packer would rebuild exactly (same pods per class, no cheaper) stay as they are.
    kept: set[int] = set()
    unmatched = list(bins)
    for claim, content, cost in zip(members, classes.contents, prices, strict=True):
        for i, b in enumerate(unmatched):
            if b.content == content and b.shape.price >= cost - EPSILON:
                kept.add(claim.seq)
                del unmatched[i]
                break
    pool = classes.pods(members, kept)
    limited = dict(simulation.remaining.get(template.name, {}))
    built = []
    for b in unmatched:
        chosen = sorted(entry for c, n in enumerate(b.content) for entry in pool[c][:n])
        for c, n in enumerate(b.content):
            del pool[c][:n]
        rebuilt = _build(template, [pod for _, pod in chosen], b.shape, limited, simulation)
        if rebuilt is None:
            return None
        built.append(rebuilt)
    replacement = [c for c in members if c.seq in kept] + built
    if not _better(sum(price(c) for c in replacement), len(replacement), before, len(members)):
        return None
    if limited and not _within_limits(limited, [*others, *replacement], len(members) + len(others)):
        return None
    if any(c.min_values_relaxed for c in built) and not any(c.min_values_relaxed for c in members):
        return None
    if any(isinstance(simulation.plan(c), Reason) for c in built):
        return None
    return replacement


class _RequestClasses:
    """The pods of a group by their requests (pods with equal requests are interchangeable within a group)."""

    def __init__(self, members: Sequence[PlannedNodeClaim]) -> None:
        keys: dict[tuple[tuple[str, int], ...], int] = {}
        self.rows: list[list[int]] = []  # per NodeClaim, each pod's class
        for claim in members:
            row = []
            for pod in claim.pods:
                key = tuple(pod.requests.items())
                c = keys.get(key)
                if c is None:
                    c = keys[key] = len(keys)
                row.append(c)
            self.rows.append(row)
        # What the scheduler fits: the pod's requests and one of the node's pods.
        self.requests = [{**dict(key), "pods": dict(key).get("pods", 0) + MILLI} for key in keys]
        self.demands = list(keys)
        self.contents: list[tuple[int, ...]] = []  # per NodeClaim, how many pods of each class
        for row in self.rows:
            content = [0] * len(keys)
            for c in row:
                content[c] += 1
            self.contents.append(tuple(content))

    def counts(self) -> list[int]:
        return [sum(content[c] for content in self.contents) for c in range(len(self.demands))]

    def pods(self, members: Sequence[PlannedNodeClaim], kept: set[int]) -> list[list[tuple[int, Pod]]]:
        """Per class, the pods of the NodeClaims not kept, each with its place in the group's order."""
        pool: list[list[tuple[int, Pod]]] = [[] for _ in self.demands]
        order = 0
        for claim, row in zip(members, self.rows, strict=True):
            for pod, c in zip(claim.pods, row, strict=True):
                order += 1
                if claim.seq not in kept:
                    pool[c].append((order, pod))
        return pool


def _shapes(template: NodeClaimTemplate, requirements: Requirements, resources: Sequence[str]) -> list[Shape]:
    """The group's node shapes: room for pods (allocatable less DaemonSet overhead) and price, one per distinct
    pair, the cheapest type standing for each."""
    index = template.index
    table = index.priced(requirements)
    compatible = index.compatible(requirements)
    found: dict[tuple[tuple[int, ...], float], int] = {}
    for position in table.order:
        if not compatible >> position & 1:
            continue
        allocatable = index.types[position].allocatable
        overhead = template.daemon_overhead(1 << position)  # the overhead of the DaemonSets this type would run
        capacity = tuple(allocatable.get(r, 0) - overhead.get(r, 0) for r in resources)
        if min(capacity) >= 0:
            found.setdefault((capacity, table.prices[position]), position)
    # A NodeClaim sized to a shape may launch as any type at least as large; where those offer too few distinct
    # values for a minValues requirement, the shape is left out rather than the NodeClaim refused later.
    floors = [r for r in requirements.values() if r.min_values]
    shapes = []
    for (capacity, cost), position in found.items():
        allocatable = index.types[position].allocatable
        larger = compatible & index.fitting({r: allocatable.get(r, 0) for r in resources})
        if all(index.distinct_values(larger, r) >= (r.min_values or 0) for r in floors):
            shapes.append(Shape(position, capacity, cost))
    return shapes


def _better(cost: float, nodes: int, than_cost: float, than_nodes: int) -> bool:
    return cost < than_cost - EPSILON or (abs(cost - than_cost) <= EPSILON and nodes < than_nodes)


def _build(
    template: NodeClaimTemplate, pods: list[Pod], shape: Shape, limited: Mapping[str, int], simulation: Simulation
) -> PlannedNodeClaim | None:
    """A new NodeClaim for `pods` through the scheduler's own fit checks, or None if any pod is refused."""
    index = template.index
    mask = index.all
    if limited:
        # Under limits the scheduler counts a NodeClaim as its largest option; options no larger than the shape
        # chosen keep that count honest.
        chosen = index.types[shape.position].capacity
        mask = index.within({r: chosen.get(r, 0) for r in limited if r != "nodes"})
    # No group owns or counts these pods, so a topology of their own sees all there is to see, and the simulation's
    # topology stays as the loop left it.
    scratch = Topology({}, (), {})
    claim = PlannedNodeClaim(next(simulation.seq), template, mask, scratch)
    for pod in pods:
        state, data = simulation.pod_state(pod)
        try:
            fit = claim.fit(state, data, scratch, [], simulation.min_values_policy, simulation.device_classes)
        except Unfit:
            return None
        claim.commit(state, data, fit, scratch)
    return claim


def _within_limits(remaining: Mapping[str, int], claims: list[PlannedNodeClaim], before: int) -> bool:
    """The scheduler's accounting: every NodeClaim counts as its largest option, and the sum must fit the limits.
    A `nodes` limit is not counted within a batch by Karpenter; the re-pack may not add nodes beyond it."""
    total: dict[str, int] = {}
    for claim in claims:
        for name, amount in claim.template.index.max_capacity(claim.mask).items():
            total[name] = total.get(name, 0) + amount
    for name, amount in remaining.items():
        if name == "nodes":
            if len(claims) > before and len(claims) * MILLI > amount:
                return False
        elif total.get(name, 0) > amount:
            return False
    return True


# The packer -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """Instance types with the same room for pods (allocatable less DaemonSet overhead) and price."""

    position: int  # the cheapest such type in the NodePool's index
    capacity: tuple[int, ...]
    price: float


@dataclass(frozen=True)
class Bin:
    shape: Shape  # right-sized: the cheapest shape that holds the content
    content: tuple[int, ...]  # pods per request class


class Packer:
    """Variable-sized bin packing of pod request classes into node shapes, cheapest total price first.

    Few pods are packed exactly (`_exact`). Otherwise each request class is valued at what its pods would cost on
    the shape that holds them most cheaply, fractions of a node allowed; while much is left, the next node is the
    shape whose greedy fill is worth the most per dollar (repeated while its pods last); near the end the most
    promising shapes are each tried for the next node, the rest completed greedily (or exactly, once few pods are
    left), and the cheapest total wins, fewer nodes breaking ties. Last, nodes that one shape holds for no more are
    merged.
    """

    def __init__(self, demands: Sequence[tuple[int, ...]], shapes: Sequence[Shape]) -> None:
        self.demands = list(demands)
        self.shapes = sorted(shapes, key=lambda s: (s.price, s.position))
        self.parts = [tuple((r, amount) for r, amount in enumerate(d) if amount > 0) for d in self.demands]
        self.weights = [self._weight(c) for c in range(len(self.demands))]
        # Larger classes first where scores tie, as first-fit-decreasing does.
        self.order = sorted(range(len(self.demands)), key=lambda c: (-self.weights[c], c))
        self.dearest = max((s.price for s in self.shapes), default=0.0)
        self._completions: dict[tuple[int, ...], tuple[float, int] | None] = {}
        self._exacts: dict[tuple[int, ...], tuple[float, int, Bin | None] | None] = {}
        self._fits: dict[tuple[int, ...], Shape | None] = {}

    def _weight(self, c: int) -> float:
        parts = self.parts[c]
        best = float("inf")
        for shape in self.shapes:
            if all(amount <= shape.capacity[r] for r, amount in parts):
                best = min(best, shape.price * max(amount / shape.capacity[r] for r, amount in parts))
        return best

    def value(self, counts: Sequence[int]) -> float:
        return sum(n * self.weights[c] for c, n in enumerate(counts) if n)

    def _needed(self, content: Sequence[int]) -> list[int]:
        needed = [0] * len(self.shapes[0].capacity)
        for c, n in enumerate(content):
            if n:
                for r, amount in self.parts[c]:
                    needed[r] += n * amount
        return needed

    def rightsized(self, content: Sequence[int]) -> Shape:
        """The cheapest shape that holds `content` (shapes are sorted by price)."""
        needed = self._needed(content)
        for shape in self.shapes:
            if all(a >= b for a, b in zip(shape.capacity, needed, strict=True)):
                return shape
        raise ValueError("no shape holds the content")

    def useful(self, counts: Sequence[int]) -> list[Shape]:
        """Shapes up to the cheapest one that holds everything left: a dearer one could only hold the same."""
        needed = self._needed(counts)
        useful = []
        for shape in self.shapes:
            useful.append(shape)
            if all(a >= b for a, b in zip(shape.capacity, needed, strict=True)):
                break
        return useful

    def fill(self, shape: Shape, counts: Sequence[int]) -> list[int]:
        """A greedy fill of one node: repeatedly the class that alone would fill the most value into the room
        left, half of what fits at a time, so that the node's resources tend to run out together."""
        room = list(shape.capacity)
        taken = [0] * len(self.demands)
        parts, weights = self.parts, self.weights
        candidates = [c for c in self.order if counts[c]]
        while candidates:
            best, best_score, best_fit = -1, 0.0, 0
            still = []
            for c in candidates:
                left = counts[c] - taken[c]
                if not left:
                    continue
                share = 0.0  # of the scarcest room left, what one pod of the class takes
                for r, amount in parts[c]:
                    if amount > room[r]:
                        share = 2.0
                        break
                    if amount > share * room[r]:
                        share = amount / room[r]
                if share > 1.0:
                    continue
                still.append(c)
                score = weights[c] / share
                if score > best_score:
                    best, best_score, best_fit = c, score, left
            if best < 0:
                break
            for r, amount in parts[best]:
                best_fit = min(best_fit, room[r] // amount)
            take = best_fit if len(still) == 1 else (best_fit + 1) // 2
            taken[best] += take
            for r, amount in parts[best]:
                room[r] -= take * amount
            candidates = still
        return taken

    def _best_step(self, counts: Sequence[int]) -> tuple[Bin, float] | None:
        """The most valuable node per dollar among every useful shape's fill, and the fill's value."""
        best: tuple[Bin, float] | None = None
        best_key = (-1.0, -1.0)
        for shape in self.useful(counts):
            content = self.fill(shape, counts)
            if not any(content):
                continue
            sized = self.rightsized(content)
            worth = self.value(content)
            key = (worth / sized.price, worth)
            if key > best_key:
                best, best_key = (Bin(sized, tuple(content)), worth), key
        return best

    def _greedy(self, counts: list[int], bins: list[Bin], tail: float) -> bool:
        """Most valuable node per dollar, repeated while its pods last, until what is left is worth `tail` or less
        (False if some pod fits no shape). Takes from `counts` and appends to `bins`."""
        while any(counts) and self.value(counts) > tail:
            step = self._best_step(counts)
            if step is None:
                return False
            chosen, worth = step
            repeat = min(counts[c] // n for c, n in enumerate(chosen.content) if n)
            if tail > 0:
                repeat = max(1, min(repeat, int((self.value(counts) - tail) / worth)))
            bins.extend([chosen] * repeat)
            for c, n in enumerate(chosen.content):
                counts[c] -= n * repeat
        return True

    def _completion(self, counts: tuple[int, ...]) -> tuple[float, int] | None:
        """Price and node count of packing `counts`, remembered: the exact best for few pods, else the greedy's."""
        if counts in self._completions:
            return self._completions[counts]
        result: tuple[float, int] | None = None
        if _pairs(counts) <= EXACT_PAIRS:
            exact = self._exact(counts)
            result = None if exact is None else (exact[0], exact[1])
        else:
            bins: list[Bin] = []
            if self._greedy(list(counts), bins, 0.0):
                result = (sum(b.shape.price for b in bins), len(bins))
        self._completions[counts] = result
        return result

    def _exact(self, counts: tuple[int, ...]) -> tuple[float, int, Bin | None] | None:
        """The cheapest packing of few pods (fewest nodes among equals): its price, node count and first node.

        Bottom-up over every pod-count vector at or below `counts`: each is packed as the best of every content for
        the node holding its first class's next pod, on the cheapest shape that holds that content, plus the best
        packing of the rest (already known, being a smaller vector). Exact, since any node of any packing is one
        such content on at least that shape. Tables are shared by all calls of one packing.
        """
        if counts in self._exacts:
            return self._exacts[counts]
        table = self._exacts
        for vector in itertools.product(*(range(n + 1) for n in counts)):
            if vector in table:
                continue
            if not any(vector):
                table[vector] = (0.0, 0, None)
                continue
            first = next(c for c, n in enumerate(vector) if n)
            ranges = [range(1, n + 1) if c == first else range(n + 1) for c, n in enumerate(vector)]
            best: tuple[float, int, Bin | None] | None = None
            for content in itertools.product(*ranges):
                shape = self._smallest(content)
                if shape is None:
                    continue
                rest = table[tuple(a - b for a, b in zip(vector, content, strict=True))]
                if rest is None:
                    continue
                total, nodes = shape.price + rest[0], 1 + rest[1]
                if best is None or _better(total, nodes, best[0], best[1]):
                    best = (total, nodes, Bin(shape, content))
            table[vector] = best
        return table[counts]

    def _exact_bins(self, counts: tuple[int, ...]) -> list[Bin] | None:
        bins = []
        while any(counts):
            step = self._exact(counts)
            if step is None or step[2] is None:
                return None
            bins.append(step[2])
            counts = tuple(a - b for a, b in zip(counts, step[2].content, strict=True))
        # Largest node first, as the simulation's own NodeClaims come.
        return sorted(bins, key=lambda b: (-b.shape.price, b.shape.position, tuple(-n for n in b.content)))

    def pack(self, counts: Sequence[int]) -> list[Bin] | None:
        """Bins holding exactly `counts` pods per class, or None if some pod fits no shape."""
        if not self.shapes or any(n and w == float("inf") for n, w in zip(counts, self.weights, strict=True)):
            return None
        # Shapes dearer than the cheapest that holds every pod can hold no more; values stay those of all shapes.
        needed = self._needed(counts)
        last = next(
            (i for i, s in enumerate(self.shapes) if all(a >= b for a, b in zip(s.capacity, needed, strict=True))),
            len(self.shapes) - 1,
        )
        self.shapes = _undominated(self.shapes[: last + 1])
        self._completions.clear()
        self._exacts.clear()
        self._fits.clear()
        if _pairs(counts) <= EXACT_PAIRS:
            return self._exact_bins(tuple(counts))
        left = list(counts)
        bins: list[Bin] = []
        if not self._greedy(left, bins, TAIL * self.dearest):
            return None
        while any(left):
            # Each useful shape's fill, most promising first (its price plus what the rest is worth).
            tries = []
            for i, shape in enumerate(self.useful(left)):
                content = self.fill(shape, left)
                if any(content):
                    rest = tuple(a - b for a, b in zip(left, content, strict=True))
                    sized = self.rightsized(content)
                    tries.append((sized.price + self.value(rest), i, sized, content, rest))
            tries.sort(key=lambda t: (t[0], t[1]))
            best: tuple[float, int, Bin] | None = None
            for _, _, sized, content, rest in tries[:LOOKAHEAD]:
                completion = self._completion(rest)
                if completion is None:
                    continue
                total, nodes = sized.price + completion[0], 1 + completion[1]
                if best is None or total < best[0] - EPSILON or (abs(total - best[0]) <= EPSILON and nodes < best[1]):
                    best = (total, nodes, Bin(sized, tuple(content)))
            if best is None:
                return None
            chosen = best[2]
            bins.append(chosen)
            for c, n in enumerate(chosen.content):
                left[c] -= n
        return self._merged(bins)

    def _merged(self, bins: list[Bin]) -> list[Bin]:
        """Fewer nodes at no extra cost: two nodes one shape holds together for at most their price become one
        (kwok's prices are linear in size, so two c-1x cost what a c-2x costs, and the c-2x has more room)."""
        bins = list(bins)
        while True:
            best: tuple[float, int, int, Bin] | None = None
            for i in range(len(bins)):
                for j in range(i + 1, len(bins)):
                    if (j > i + 1 and bins[j - 1] == bins[j]) or (i > 0 and bins[i - 1] == bins[i]):
                        continue  # the same pair as one already weighed
                    content = tuple(a + b for a, b in zip(bins[i].content, bins[j].content, strict=True))
                    sized = self._smallest(content)
                    if sized is None:
                        continue
                    saving = bins[i].shape.price + bins[j].shape.price - sized.price
                    if saving >= -EPSILON and (best is None or saving > best[0] + EPSILON):
                        best = (saving, i, j, Bin(sized, content))
            if best is None:
                return bins
            _, i, j, merged = best
            bins[i] = merged
            del bins[j]

    def _smallest(self, content: Sequence[int]) -> Shape | None:
        """The cheapest shape that holds `content`, if any (remembered)."""
        key = tuple(content)
        if key not in self._fits:
            needed = self._needed(content)
            self._fits[key] = next(
                (s for s in self.shapes if all(a >= b for a, b in zip(s.capacity, needed, strict=True))), None
            )
        return self._fits[key]


def _pairs(counts: Sequence[int]) -> int:
    """How many (vector, node content) pairs the exact search weighs for `counts`: its work."""
    pairs = 1
    for n in counts:
        pairs *= (n + 1) * (n + 2) // 2
    return pairs


def _undominated(shapes: Sequence[Shape]) -> list[Shape]:
    """Shapes by price, without any that another shape beats or equals in every resource at no higher price."""
    # Cheapest first and, at one price, roomiest first: a shape can only be dominated by one before it, and a
    # dominated one's dominator dominates whatever it would, so comparing with the kept shapes is enough.
    ordered = sorted(shapes, key=lambda s: (s.price, -sum(s.capacity), s.position))
    kept: list[Shape] = []
    for shape in ordered:
        if not any(all(a >= b for a, b in zip(k.capacity, shape.capacity, strict=True)) for k in kept):
            kept.append(shape)
    return sorted(kept, key=lambda s: (s.price, s.position))
