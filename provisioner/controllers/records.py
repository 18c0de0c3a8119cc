"""DisruptionCommands written outside the consolidation pass (a static NodePool's scale-down, a node repair, an
expiration): the same record the queue and the dashboard read, built from the NodeClaims and Nodes themselves."""

from __future__ import annotations

import hashlib
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.objects import Obj, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.disruption import gate_fields


def node_entry(ctx: ClusterContext, claim: Obj, node: Obj | None) -> dict[str, Any]:
    """A command's candidate: the node, its NodeClaim, where and at what price it runs, and the pods on it."""
    labels = claim["metadata"].get("labels") or {}
    node_name = node["metadata"]["name"] if node is not None else (claim.get("status") or {}).get("nodeName", "")
    return {
        "node": node_name,
        "nodeclaim": claim["metadata"]["name"],
        "nodepool": labels.get(wk.NODEPOOL, ""),
        "instanceType": labels.get(wk.INSTANCE_TYPE, ""),
        "capacityType": labels.get(wk.CAPACITY_TYPE, ""),
        "zone": labels.get(wk.ZONE, ""),
        "price": round(float((claim["metadata"].get("annotations") or {}).get(wk.PRICE, 0) or 0), 6),
        "pods": [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in (ctx.api.list("Pod", fields={"spec.nodeName": node_name}) if node_name else [])
        ],
    }


def fingerprint_of(reason: str, *parts: str) -> str:
    """What a denial is about: the reason and the objects (any change makes it a new question)."""
    return hashlib.sha256(f"{reason}|delete|{'|'.join(parts)}".encode()).hexdigest()[:16]


def record_command(
    ctx: ClusterContext,
    *,
    reason: str,
    method: str,
    entries: list[dict[str, Any]],
    fingerprint: str,
    savings: float,
    status: dict[str, Any],
    **spec: Any,
) -> Obj:
    """Create a delete command for `entries` under their NodePool's approval mode, in `status` (its phase and
    times); `spec` adds fields of its own (a repair's forceAt)."""
    name = f"{reason.lower()}-{hashlib.sha256(f'{fingerprint}{ctx.now}'.encode()).hexdigest()[:8]}"
    pools = sorted({e["nodepool"] for e in entries if e["nodepool"]})
    nodepool = ctx.nodepool(pools[0]) if pools else None
    nodes = ", ".join(e["node"] for e in entries)
    return ctx.api.create(
        {
            "apiVersion": "karpui.dev/v1alpha1",
            "kind": "DisruptionCommand",
            "metadata": {"name": name, "labels": {"karpui.dev/reason": reason, "karpui.dev/decision": "delete"}},
            "spec": {
                "reason": reason,
                "method": method,
                "decision": "delete",
                "nodepools": pools,
                "text": f"{reason}/{name}: delete: nodepools=[{','.join(pools)}]: [{nodes}] (savings: ${savings:.2f})",
                "savings": round(savings, 6),
                "fingerprint": fingerprint,
                **(
                    gate_fields(nodepool)
                    if nodepool is not None
                    else {"approvalMode": "auto", "approvalThreshold": None}
                ),
                "candidates": entries,
                "replacements": [],
                "risks": [],
                **spec,
            },
            "status": {"proposedAt": timestamp(ctx.now), **status},
        }
    )
