"""What a NodePool change would do, computed before saving: pods that would (stop being able to) schedule,
nodes that would drift and what would replace them, limits already exceeded, and the cost per hour before and after."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

import yaml

from karpui import lab, models, store
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash, scheduling_input
from provisioner.disruption.drift import drift_reason
from provisioner.objects import NodePool
from provisioner.quantity import format_quantity, parse_resources
from provisioner.scheduling.results import SchedulingResult
from provisioner.scheduling.rounds import solve_rounds


def nodepool_diff(row: models.NodePool | None, proposed: dict[str, Any]) -> str:
    current = store.nodepool_manifest(row) if row else {}
    current.pop("status", None)
    for manifest in (current, proposed):
        meta = manifest.get("metadata") or {}
        for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
            meta.pop(key, None)
    before = yaml.safe_dump(current, sort_keys=True).splitlines() if current else []  # a new NodePool: all added
    after = yaml.safe_dump(proposed, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(before, after, "current", "proposed", lineterm=""))


def over_limits(proposed: NodePool, current: NodePool | None, usage: Mapping[str, int]) -> list[dict[str, str]]:
    """Limits this change sets (new or changed) that the NodePool's NodeClaims already exceed. A limit left as it
    was is not news: whatever it blocks, it blocked before the edit. Karpenter never removes nodes for a limit, so
    a pool over it keeps its nodes and launches nothing more."""
    before = current.limits if current is not None else {}
    return [
        {"resource": name, "usage": format_quantity(usage[name], name), "limit": format_quantity(limit, name)}
        for name, limit in sorted(proposed.limits.items())
        if usage.get(name, 0) > limit and before.get(name) != limit
    ]


def _scheduled(result: SchedulingResult) -> set[str]:
    return {p.uid for nc in result.new_nodeclaims for p in nc.pods} | {
        p.uid for ps in result.placements.values() for p in ps
    }


def _price(claim: dict[str, Any]) -> float:
    return float((claim["metadata"].get("annotations") or {}).get("karpui.dev/price", 0) or 0)


def preview(cluster: models.Cluster, nodepool: NodePool) -> dict[str, Any]:
    """The change's effect on the cluster as it is now.

    Drift is simulated as its end state: every NodeClaim of the pool that the change drifts is gone, and its pods
    are scheduled (with the pending pods, by the real scheduler, under the changed NodePool) onto the remaining
    nodes first, then onto new NodeClaims. The cost after counts those NodeClaims' cheapest offerings instead of the
    drifted nodes' prices. Karpenter replaces drifted nodes one at a time, so on the way there may briefly be more
    nodes; consolidation then packs them as this simulation does.

    Both sides run as many provisioning rounds as change anything (`solve_rounds`): a raised limit that one round
    fills pessimistically (each NodeClaim counted as its largest option) is filled by what launched, as the
    provisioner does over its next batches.
    """
    running = lab.load(cluster)
    ctx = running.ctx
    pending = [pod for obj in ctx.api.list("Pod") if (pod := ctx.views.pod(obj)).is_provisionable()]
    before = solve_rounds(scheduling_input(ctx, pending))
    current = next((np for np in ctx.nodepools if np.name == nodepool.name), None)
    ctx.nodepools = [*(np for np in ctx.nodepools if np.name != nodepool.name), nodepool]
    claims = ctx.api.list("NodeClaim")
    types = ctx.instance_types_for(nodepool) or []
    drifting, gone, drifted_cost = [], set(), 0.0
    for claim in claims:
        labels = claim["metadata"].get("labels") or {}
        if labels.get("karpenter.sh/nodepool") != nodepool.name or claim["metadata"].get("deletionTimestamp"):
            continue
        reason = drift_reason(
            nodepool, nodepool_hash(nodepool), claim["metadata"].get("annotations") or {}, labels, types, HASH_VERSION
        )
        if reason:
            node = (claim.get("status") or {}).get("nodeName") or claim["metadata"]["name"]
            drifting.append({"node": node, "reason": reason, "price": _price(claim)})
            gone |= {node, claim["metadata"]["name"]}
            drifted_cost += _price(claim)
    moving = [
        pod
        for obj in ctx.api.list("Pod")
        if (obj.get("spec") or {}).get("nodeName") in gone and (pod := ctx.views.pod(obj)).is_reschedulable()
    ]
    request = scheduling_input(ctx, [*pending, *moving])
    after = solve_rounds(dataclasses.replace(request, nodes=[n for n in request.nodes if n.name not in gone]))
    now_cost = sum(_price(c) for c in claims)
    scheduled_before, scheduled_after = _scheduled(before), _scheduled(after)
    names = {p.uid: p.key for p in [*pending, *moving]}
    waiting, moved = {p.uid for p in pending}, {p.uid for p in moving}
    usage = parse_resources((running.nodepool_status().get(nodepool.name) or {}).get("resources") or {})
    return {
        "over_limits": over_limits(nodepool, current, usage),
        "newly_schedulable": sorted(names[u] for u in (scheduled_after - scheduled_before) & waiting),
        "newly_unschedulable": sorted(names[u] for u in (scheduled_before - scheduled_after) & waiting),
        # Pods of drifted nodes that no node, old or new, could take: drift would leave them pending.
        "stranded": sorted(p.key for p in moving if p.uid not in scheduled_after),
        "drifting": drifting,
        "replacements": sum(1 for nc in after.new_nodeclaims if any(p.uid in moved for p in nc.pods)),
        "cost_before": now_cost + sum(nc.cheapest.price for nc in before.new_nodeclaims),
        "cost_after": now_cost - drifted_cost + sum(nc.cheapest.price for nc in after.new_nodeclaims),
        "new_nodeclaims_after": [
            (nc.nodepool, nc.cheapest.instance_type.name, len(nc.pods)) for nc in after.new_nodeclaims
        ],
    }
