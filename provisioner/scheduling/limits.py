"""A NodePool's limits in the simulation: what its nodes already hold, what is left, which instance types fit what
is left, and when a pod that fits nowhere is really stopped by the limits."""

from __future__ import annotations

from collections.abc import Iterable

from provisioner.nodes import Node
from provisioner.quantity import MILLI, Resources, add, format_resources
from provisioner.scheduling import results as r
from provisioner.scheduling.nodeclaim import NodeClaimTemplate, Unfit
from provisioner.scheduling.poddata import PodData


def pool_usage(nodepool: str, nodes: Iterable[Node]) -> Resources:
    """What a NodePool's nodes (and its NodeClaims still launching) hold of what its limits count. A node marked for
    deletion holds nothing: Karpenter's NodePoolResourcesFor leaves it out (cluster.go:871-875), and its scheduler
    counts only the Active() nodes against the limits (provisioner.go:417, scheduler.go:869)."""
    usage: Resources = {}
    for node in nodes:
        if node.nodepool == nodepool and not node.marked_for_deletion:
            usage = add(usage, node.capacity or node.allocatable, {"nodes": MILLI})
    return usage


def limited_subtract(remaining: Resources, used: Resources) -> Resources:
    """Subtract usage from limits, only for the resources that are limited (others are unlimited, not negative)."""
    return {name: amount - used.get(name, 0) for name, amount in remaining.items()}


def within_limits(template: NodeClaimTemplate, remaining: Resources) -> tuple[int, str | None]:
    """Options whose capacity fits the remaining limits; `nodes` exhausted blocks the pool outright."""
    if "nodes" in remaining and remaining["nodes"] < MILLI:
        return 0, "all available instance types exceed limits for nodepool: the nodes limit is reached"
    mask = template.index.within({k: v for k, v in remaining.items() if k != "nodes"})
    if not mask:
        return 0, f"all available instance types exceed limits for nodepool (remaining {_remaining_text(remaining)})"
    return mask, None


def _remaining_text(remaining: Resources) -> str:
    shown = format_resources({k: max(v, 0) for k, v in remaining.items() if k != "nodes"})
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def blamed_on_limits(template: NodeClaimTemplate, data: PodData, remaining: Resources, unfit: Unfit) -> Unfit:
    """A resource failure is really a limits failure when a type the limits excluded would have fitted."""
    index = template.index
    if not template.fitting(data.requests) & index.compatible(data.requirements):
        return unfit
    return Unfit(
        r.LIMITS,
        f"all instance types that fit exceed the NodePool's remaining limits ({_remaining_text(remaining)})",
        {"remaining": format_resources({k: max(v, 0) for k, v in remaining.items()})},
    )
