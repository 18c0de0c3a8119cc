"""What successive provisioning rounds make of the same pods: the NodeClaims of one round launch (as the cloud
provider's cheapest offering) before the next, so a NodePool limit that one round had to count pessimistically
(a NodeClaim may launch as its largest option) counts what launched in the next."""

from __future__ import annotations

import dataclasses
import random

from provisioner import labels as wk
from provisioner.nodes import Node
from provisioner.quantity import MILLI, add, subtract
from provisioner.scheduling.launch import cheapest_launch
from provisioner.scheduling.results import NodeClaimPlan, SchedulingResult
from provisioner.scheduling.scheduler import SchedulingInput, solve

# Rounds after the first, at most: each round launches at least one NodeClaim or stops, and a preview that needs
# more rounds than this to settle is a very large change, whose first rounds tell the story.
MAX_ROUNDS = 20


def solve_rounds(request: SchedulingInput, seed: int = 0) -> SchedulingResult:
    """The pods' fate after as many provisioning rounds as change anything: every round's NodeClaims and
    placements, and the last round's failures. Offerings are picked with a seeded RNG: the same cluster gives
    the same answer."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible preview, not secrets
    result = solve(request)
    merged = SchedulingResult(
        new_nodeclaims=list(result.new_nodeclaims),
        placements={name: list(pods) for name, pods in result.placements.items()},
        failures=dict(result.failures),
        relaxations=dict(result.relaxations),
        pods_considered=list(result.pods_considered),
        skipped_nodepools=dict(result.skipped_nodepools),
    )
    nodes = list(request.nodes)
    for round_number in range(1, MAX_ROUNDS + 1):
        if not result.new_nodeclaims or not result.failures:
            break
        nodes = [
            dataclasses.replace(n, pods=(*n.pods, *result.placements[n.name])) if n.name in result.placements else n
            for n in nodes
        ]
        nodes += [
            launched_node(plan, f"whatif-{round_number}-{index}", rng)
            for index, plan in enumerate(result.new_nodeclaims)
        ]
        waiting = [failure.pod for failure in result.failures.values()]
        result = solve(dataclasses.replace(request, pods=waiting, nodes=nodes))
        merged.new_nodeclaims += result.new_nodeclaims
        for name, pods in result.placements.items():
            merged.placements.setdefault(name, []).extend(pods)
        merged.failures = dict(result.failures)
        merged.relaxations.update(result.relaxations)
    return merged


def launched_node(plan: NodeClaimPlan, name: str, rng: random.Random) -> Node:
    """The Node a planned NodeClaim becomes: its cheapest offering's type, zone and capacity type, its pods bound,
    and room for them less the DaemonSet pods it was planned with (they are in its requests, not its pods)."""
    launch = cheapest_launch(plan, rng)
    # The scheduler counts a node's pods as their requests plus `pods: 1` each (existing._requested).
    pods_requests = add(*(pod.requests for pod in plan.pods), {"pods": MILLI * len(plan.pods)})
    daemons = {key: max(amount, 0) for key, amount in subtract(plan.requests, pods_requests).items()}
    allocatable = {key: max(amount, 0) for key, amount in subtract(launch.instance_type.allocatable, daemons).items()}
    labels = {
        **plan.labels,
        **launch.instance_type.labels,
        wk.INSTANCE_TYPE: launch.instance_type.name,
        wk.ZONE: launch.offering.zone,
        wk.CAPACITY_TYPE: launch.offering.capacity_type,
        wk.NODEPOOL: plan.nodepool,
        wk.HOSTNAME: name,
    }
    return Node(
        name=name,
        labels=labels,
        allocatable=allocatable,
        capacity=dict(launch.instance_type.capacity),
        taints=plan.taints,
        pods=plan.pods,
        initialized=False,
        managed=True,
        nodepool=plan.nodepool,
    )
