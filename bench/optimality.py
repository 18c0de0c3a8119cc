"""How far karpui's provisioning plans are from the cheapest plan for the same pods: prints $/h and ratios.

For each generated workload (a mix, a size, a seed) one NodePool over the kwok catalog (amd64, on-demand, as in
examples/provisioning) provisions the pods through the real scheduler, with the plan-improvement pass off
(Karpenter's exact plans) and on; HiGHS then solves the same pods as an integer program (which instance types to
launch and which pods go where, every pod placed, each node's allocatable respected) within a time limit. When the
solver proves its answer optimal the row says "optimal"; when time runs out it says "bound" and the ratio is
against the solver's lower bound, so it overstates karpui's distance from the optimum, never understates it.

Usage: python bench/optimality.py [--sizes 10,50,200,1000,2000] [--mixes ...] [--seeds 1,2,3] [--time-limit 20]
       [--relaxation]   (only the linear relaxation's bound: seconds instead of minutes, never "optimal")
Prints figures and asserts nothing. Needs highspy (requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.catalog.kwok import kwok_catalog
from provisioner.objects import NodeClassRef, NodePool, NodeSelectorRequirement
from provisioner.pods import OwnerReference, Pod
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve

SIZES = (10, 50, 200, 1000, 2000)
SEEDS = (1, 2, 3)
GI = 2**30
MI = 2**20

POOL = NodePool(
    name="default",
    node_class_ref=NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default"),
    requirements=(
        NodeSelectorRequirement(wk.ARCH, "In", ("amd64",)),
        NodeSelectorRequirement(wk.CAPACITY_TYPE, "In", ("on-demand",)),
    ),
)


# Workloads ------------------------------------------------------------------------------------------------------


def _uniform_small(rng: random.Random) -> tuple[str, str]:
    return "500m", "512Mi"


def _mixed(rng: random.Random) -> tuple[str, str]:
    """Mostly small pods, about one in seven a large 4Gi-per-vCPU one (4, 8 or 16 vCPU)."""
    if rng.random() < 0.15:
        return rng.choice((("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi")))
    return rng.choice(("100m", "250m", "500m", "1")), rng.choice(("256Mi", "512Mi", "1Gi", "2Gi"))


def _cpu_heavy(rng: random.Random) -> tuple[str, str]:
    return rng.choice(("1", "2", "3", "4")), rng.choice(("512Mi", "1Gi", "2Gi"))


def _memory_heavy(rng: random.Random) -> tuple[str, str]:
    return rng.choice(("250m", "500m", "1")), rng.choice(("4Gi", "6Gi", "8Gi", "12Gi"))


MIXES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "uniform-small": _uniform_small,
    "mixed": _mixed,
    "cpu-heavy": _cpu_heavy,
    "memory-heavy": _memory_heavy,
}


def workload(mix: str, size: int, seed: int) -> list[Pod]:
    """`size` pending pods of one Deployment per shape, without topology constraints."""
    rng = random.Random(f"{mix}-{size}-{seed}")
    pods = []
    for i in range(size):
        cpu, memory = MIXES[mix](rng)
        owner = OwnerReference("ReplicaSet", f"{mix}-{cpu}-{memory}".lower(), f"rs-{cpu}-{memory}")
        pods.append(
            Pod(
                name=f"{mix}-{i}",
                uid=f"uid-{i:07d}",
                labels={"app": owner.name},
                requests={"cpu": parse_quantity(cpu), "memory": parse_quantity(memory)},
                unschedulable=True,
                created=float(i),
                owner=owner,
            )
        )
    return pods


# karpui's plan ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    cost: float
    nodes: int
    seconds: float
    types: tuple[str, ...]


def karpui_plan(pods: Sequence[Pod], catalog: Sequence[InstanceType], improve: bool) -> Plan:
    value = wk.PLAN_IMPROVEMENT_ENABLED if improve else wk.PLAN_IMPROVEMENT_DISABLED
    pool = replace(POOL, annotations={wk.PLAN_IMPROVEMENT: value})
    start = time.perf_counter()
    result = solve(SchedulingInput(pods=list(pods), pools=[PoolOffer(pool, catalog)]))
    seconds = time.perf_counter() - start
    if result.failures:
        failure = next(iter(result.failures.values()))
        raise SystemExit(f"{len(result.failures)} pod(s) did not schedule, e.g. {failure.pod.key}: {failure.message}")
    plans = result.new_nodeclaims
    return Plan(
        cost=sum(p.cheapest.price for p in plans),
        nodes=len(plans),
        seconds=seconds,
        types=tuple(p.cheapest.instance_type.name for p in plans),
    )


# The integer program ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeShape:
    """Instance types with the same allocatable and price are one shape to the solver."""

    name: str
    allocatable: tuple[int, ...]  # per resource of the problem; `pods` capped at what the pods could ever use
    price: float


@dataclass(frozen=True)
class Optimum:
    value: float  # best plan the solver found (inf if none)
    bound: float  # proven lower bound on any plan's cost
    proven: bool
    seconds: float
    variables: int

    @property
    def reference(self) -> float:
        """What ratios are taken against: the optimum when proven, else the lower bound."""
        return self.value if self.proven else self.bound


def shapes(pods: Sequence[Pod], catalog: Sequence[InstanceType], resources: Sequence[str]) -> list[NodeShape]:
    """The NodePool's instance types as node shapes, without duplicates or shapes another one dominates."""
    requirements = POOL.template_requirements()
    smallest = {r: min(p.requests.get(r, 0) for p in pods) for r in resources if r != "pods"}
    found: dict[tuple[tuple[int, ...], float], str] = {}
    for it in sorted(catalog, key=lambda t: t.name):
        if not requirements.compatible(it.requirements):
            continue
        price = it.cheapest_price(requirements)
        if price is None:
            continue
        allocatable = [it.allocatable.get(r, 0) for r in resources]
        # A node can never hold more pods than its smallest pod's requests allow: a valid, tighter pods capacity.
        most = [allocatable[i] // smallest[r] for i, r in enumerate(resources) if r != "pods" and smallest[r] > 0]
        pods_index = resources.index("pods")
        if most:
            allocatable[pods_index] = min(allocatable[pods_index], min(most) * MILLI)
        found.setdefault((tuple(allocatable), round(price, 12)), it.name)
    all_shapes = [NodeShape(name, allocatable, price) for (allocatable, price), name in found.items()]
    kept = []
    for shape in all_shapes:
        dominated = any(
            other is not shape
            and other.price <= shape.price
            and all(a >= b for a, b in zip(other.allocatable, shape.allocatable, strict=True))
            and (other.price < shape.price or other.allocatable != shape.allocatable)
            for other in all_shapes
        )
        if not dominated:
            kept.append(shape)
    return sorted(kept, key=lambda s: (s.price, s.name))


def optimum(
    pods: Sequence[Pod], catalog: Sequence[InstanceType], upper: float, time_limit: float, exact: bool = True
) -> Optimum:
    """The cheapest plan for `pods` over the NodePool's types, as HiGHS finds it within `time_limit` seconds.

    Variables: y[s,k] = 1 when the k-th node of shape s is launched, x[c,s,k] = how many pods of class c (same
    requests) it holds. Each class is placed exactly; each node's requests stay within its allocatable. Two
    reductions keep every optimum reachable while cutting the search: no shape needs more nodes than `upper`
    (a known plan's cost) pays for, and two nodes that one shape holds together at no higher price (kwok's prices
    are linear in size, so c-4x + c-4x = c-8x) never both appear, since merging them costs nothing.
    """
    import highspy
    import numpy as np

    resources = sorted({name for p in pods for name, amount in p.requests.items() if amount > 0} | {"pods"})
    classes: dict[tuple[int, ...], int] = {}
    for pod in pods:
        demand = tuple(pod.requests.get(r, 0) if r != "pods" else MILLI for r in resources)
        classes[demand] = classes.get(demand, 0) + 1
    demands = list(classes)
    counts = [classes[d] for d in demands]
    node_shapes = shapes(pods, catalog, resources)
    # Memory in milli-bytes exceeds what the solver accepts; dividing every request by the requests' common divisor
    # (and rounding allocatable down) keeps each row exact in smaller numbers.
    divisors = [math.gcd(*(d[r] for d in demands)) or 1 for r in range(len(resources))]
    demands = [tuple(d[r] // divisors[r] for r in range(len(resources))) for d in demands]
    node_shapes = [
        replace(s, allocatable=tuple(a // divisors[r] for r, a in enumerate(s.allocatable))) for s in node_shapes
    ]

    def fits(demand: tuple[int, ...], shape: NodeShape) -> int:
        return min(a // d if d else len(pods) for a, d in zip(shape.allocatable, demand, strict=True))

    def mergeable(a: NodeShape, b: NodeShape) -> bool:
        together = [x + y for x, y in zip(a.allocatable, b.allocatable, strict=True)]
        return any(
            s.price <= a.price + b.price + 1e-9 and all(x >= y for x, y in zip(s.allocatable, together, strict=True))
            for s in node_shapes
        )

    copies = []
    for shape in node_shapes:
        useful = sum(n for d, n in zip(demands, counts, strict=True) if fits(d, shape) > 0)
        limit = min(int(upper / shape.price + 1e-9), useful)
        if mergeable(shape, shape):
            limit = min(limit, 1)
        copies.append(limit)

    # Columns: y for each (shape, copy), then x for each (class, shape, copy) where the class fits the shape.
    cost: list[float] = []
    upper_bounds: list[float] = []
    y_index: dict[tuple[int, int], int] = {}
    x_index: dict[tuple[int, int, int], int] = {}
    for s, shape in enumerate(node_shapes):
        for k in range(copies[s]):
            y_index[s, k] = len(cost)
            cost.append(shape.price)
            upper_bounds.append(1.0)
    for s, shape in enumerate(node_shapes):
        for k in range(copies[s]):
            for c, demand in enumerate(demands):
                most = min(fits(demand, shape), counts[c])
                if most > 0:
                    x_index[c, s, k] = len(cost)
                    cost.append(0.0)
                    upper_bounds.append(float(most))
    rows: list[tuple[list[int], list[float], float, float]] = []
    for c in range(len(demands)):
        columns = [i for (cc, _, _), i in x_index.items() if cc == c]
        rows.append((columns, [1.0] * len(columns), counts[c], counts[c]))
    for (s, k), y in y_index.items():
        shape = node_shapes[s]
        members = [(c, x_index[c, s, k]) for c in range(len(demands)) if (c, s, k) in x_index]
        for r in range(len(resources)):
            columns = [i for c, i in members if demands[c][r]]
            if columns:
                values = [float(demands[c][r]) for c, i in members if demands[c][r]]
                rows.append(([*columns, y], [*values, -float(shape.allocatable[r])], -np.inf, 0.0))
        for _, i in members:
            # A pod on a node that is not launched: x <= most * y.
            rows.append(([i, y], [1.0, -upper_bounds[i]], -np.inf, 0.0))
        if k + 1 < copies[s]:
            rows.append(([y, y_index[s, k + 1]], [1.0, -1.0], 0.0, np.inf))
    for a in range(len(node_shapes)):
        for b in range(a + 1, len(node_shapes)):
            if copies[a] and copies[b] and mergeable(node_shapes[a], node_shapes[b]):
                rows.append(([y_index[a, 0], y_index[b, 0]], [1.0, 1.0], -np.inf, 1.0))

    lp = highspy.HighsLp()
    n = len(cost)
    lp.num_col_ = n
    lp.num_row_ = len(rows)
    lp.col_cost_ = np.array(cost, dtype=np.double)
    lp.col_lower_ = np.zeros(n, dtype=np.double)
    lp.col_upper_ = np.array(upper_bounds, dtype=np.double)
    lp.row_lower_ = np.array([r[2] for r in rows], dtype=np.double)
    lp.row_upper_ = np.array([r[3] for r in rows], dtype=np.double)
    starts, index, entries = [0], [], []
    for columns, values, _, _ in rows:
        index.extend(columns)
        entries.extend(values)
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(entries, dtype=np.double)
    if exact:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    solver = highspy.Highs()
    solver.silent()
    solver.setOptionValue("time_limit", float(time_limit))
    solver.setOptionValue("threads", 1)
    solver.setOptionValue("mip_rel_gap", 1e-7)
    solver.setOptionValue("random_seed", 0)
    solver.passModel(lp)
    start = time.perf_counter()
    solver.run()
    seconds = time.perf_counter() - start
    info = solver.getInfo()
    status = solver.getModelStatus()
    if not exact:
        # The linear relaxation's optimum: a lower bound, never a plan.
        relaxed = info.objective_function_value if status == highspy.HighsModelStatus.kOptimal else 0.0
        return Optimum(float("inf"), relaxed, False, seconds, n)
    found = info.objective_function_value if info.primal_solution_status == 2 else float("inf")
    bound = info.mip_dual_bound
    proven = status == highspy.HighsModelStatus.kOptimal and found - bound <= 1e-6 * max(found, 1.0)
    if not proven and not 0 < bound < float("inf"):
        # Time ran out before the search had a bound of its own: fall back on the linear relaxation's.
        relaxation = optimum(pods, catalog, upper, time_limit, exact=False)
        bound, seconds = relaxation.bound, seconds + relaxation.seconds
    return Optimum(found, found if proven else bound, proven, seconds, n)


# The report ---------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--mixes", default=",".join(MIXES))
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds HiGHS may spend on one case")
    parser.add_argument(
        "--relaxation", action="store_true", help="only the linear relaxation's lower bound (fast; never proven)"
    )
    args = parser.parse_args()
    catalog = kwok_catalog().instance_types
    sizes = [int(s) for s in args.sizes.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    mixes = [m for m in args.mixes.split(",") if m]
    print("karpui $/h with plan improvement off (Karpenter's plans) and on, against HiGHS's optimum or bound")
    print(
        f"{'mix':<14}{'pods':>6}{'seed':>5}{'off $/h':>10}{'on $/h':>10}{'optimum':>10}{'':>9}"
        f"{'off':>7}{'on':>7}{'nodes':>11}{'off s':>7}{'on s':>7}{'ILP s':>7}"
    )
    rows: list[tuple[str, float, float, bool]] = []
    for mix in mixes:
        for size in sizes:
            for seed in seeds:
                pods = workload(mix, size, seed)
                off = karpui_plan(pods, catalog, improve=False)
                on = karpui_plan(pods, catalog, improve=True)
                best = optimum(pods, catalog, min(off.cost, on.cost), args.time_limit, exact=not args.relaxation)
                reference = best.reference
                ratio_off, ratio_on = off.cost / reference, on.cost / reference
                rows.append((mix, ratio_off, ratio_on, best.proven))
                print(
                    f"{mix:<14}{size:>6}{seed:>5}{off.cost:>10.4f}{on.cost:>10.4f}{reference:>10.4f}"
                    f"{'optimal' if best.proven else 'bound':>9}{ratio_off:>7.3f}{ratio_on:>7.3f}"
                    f"{f'{off.nodes}/{on.nodes}':>11}{off.seconds:>7.2f}{on.seconds:>7.2f}{best.seconds:>7.1f}",
                    flush=True,
                )
    print()
    print(f"{'':<14}{'cases':>6}{'proven':>8}{'off mean':>10}{'off worst':>10}{'on mean':>9}{'on worst':>10}")
    for mix in [*mixes, "all"]:
        chosen = [row for row in rows if mix in ("all", row[0])]
        if not chosen:
            continue
        off_ratios = [row[1] for row in chosen]
        on_ratios = [row[2] for row in chosen]
        print(
            f"{mix:<14}{len(chosen):>6}{sum(row[3] for row in chosen):>8}"
            f"{sum(off_ratios) / len(off_ratios):>10.3f}{max(off_ratios):>10.3f}"
            f"{sum(on_ratios) / len(on_ratios):>9.3f}{max(on_ratios):>10.3f}"
        )
    unproven = sum(1 for row in rows if not row[3])
    if unproven:
        why = "only the linear relaxation was solved" if args.relaxation else "HiGHS hit the time limit"
        print(
            f"\n{unproven} case(s) marked 'bound': {why}, so their ratio is against a lower bound "
            "(the true ratio is at most that)."
        )


if __name__ == "__main__":
    main()
