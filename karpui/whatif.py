"""What a NodePool change would do, computed before saving: pods that would (stop being able to) schedule,
nodes that would drift, and the cluster's cost per hour before and after."""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from karpui import lab, models, store
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash, scheduling_input
from provisioner.disruption.drift import drift_reason
from provisioner.objects import NodePool
from provisioner.quantity import format_quantity, parse_resources
from provisioner.scheduling.scheduler import solve


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


def preview(cluster: models.Cluster, nodepool: NodePool) -> dict[str, Any]:
    running = lab.load(cluster)
    ctx = running.ctx
    pending = [pod for obj in ctx.api.list("Pod") if (pod := ctx.views.pod(obj)).is_provisionable()]
    before = solve(scheduling_input(ctx, pending))
    others = [np for np in ctx.nodepools if np.name != nodepool.name]
    ctx.nodepools = [*others, nodepool]
    after = solve(scheduling_input(ctx, pending))
    drifting = []
    types = ctx.instance_types_for(nodepool) or []
    for claim in ctx.api.list("NodeClaim"):
        labels = claim["metadata"].get("labels") or {}
        if labels.get("karpenter.sh/nodepool") != nodepool.name:
            continue
        reason = drift_reason(
            nodepool, nodepool_hash(nodepool), claim["metadata"].get("annotations") or {}, labels, types, HASH_VERSION
        )
        if reason:
            drifting.append(
                {"node": (claim.get("status") or {}).get("nodeName") or claim["metadata"]["name"], "reason": reason}
            )
    now_cost = sum(
        float((c["metadata"].get("annotations") or {}).get("karpui.dev/price", 0) or 0)
        for c in ctx.api.list("NodeClaim")
    )
    scheduled_before = {p.uid for nc in before.new_nodeclaims for p in nc.pods} | {
        p.uid for ps in before.placements.values() for p in ps
    }
    scheduled_after = {p.uid for nc in after.new_nodeclaims for p in nc.pods} | {
        p.uid for ps in after.placements.values() for p in ps
    }
    names = {p.uid: p.key for p in pending}
    usage = parse_resources((running.nodepool_status().get(nodepool.name) or {}).get("resources") or {})
    # Karpenter never removes nodes for a limit: a pool already over it just launches nothing more.
    over_limits = [
        {"resource": name, "usage": format_quantity(usage[name], name), "limit": format_quantity(limit, name)}
        for name, limit in sorted(nodepool.limits.items())
        if usage.get(name, 0) > limit
    ]
    return {
        "over_limits": over_limits,
        "newly_schedulable": sorted(names[u] for u in scheduled_after - scheduled_before),
        "newly_unschedulable": sorted(names[u] for u in scheduled_before - scheduled_after),
        "drifting": drifting,
        "cost_before": now_cost + sum(nc.cheapest.price for nc in before.new_nodeclaims),
        "cost_after": now_cost + sum(nc.cheapest.price for nc in after.new_nodeclaims),
        "new_nodeclaims_after": [
            (nc.nodepool, nc.cheapest.instance_type.name, len(nc.pods)) for nc in after.new_nodeclaims
        ],
    }
