"""Karpenter's hydration controllers (nodeclaim/hydration, node/hydration): the node class label on NodeClaims and Nodes."""

from __future__ import annotations

from provisioner.controllers.context import ClusterContext
from provisioner.controllers.termination import MANAGED_NODE_CLASSES


class HydrationController:
    """Each managed NodeClaim, and the Node with its providerID, get the `<group>/<kind lowercased>` label naming the
    NodeClaim's node class: karpui writes it at launch, but a NodeClaim made before that label existed (or one
    whose label was removed) lacks it, and a Node without it is taken for another Karpenter's."""

    def __init__(self) -> None:
        self._seen: tuple[int, int] | None = None  # NodeClaim and Node versions after the last run

    def reconcile(self, ctx: ClusterContext) -> bool:
        if ctx.observe:
            return False  # observing, Karpenter hydrates its own
        versions = (ctx.api.kind_version("NodeClaim"), ctx.api.kind_version("Node"))
        if versions == self._seen:
            return False
        changed = False
        nodes = {n["spec"]["providerID"]: n for n in ctx.api.scan("Node") if (n.get("spec") or {}).get("providerID")}
        for claim in ctx.api.scan("NodeClaim"):
            ref = (claim.get("spec") or {}).get("nodeClassRef") or {}
            if (ref.get("group"), ref.get("kind")) not in MANAGED_NODE_CLASSES:
                continue  # nodeclaimutils.IsManaged: another Karpenter's NodeClaim
            label = {f"{ref['group']}/{ref['kind'].lower()}": ref.get("name", "")}
            node = nodes.get((claim.get("status") or {}).get("providerID"))
            for kind, obj in (("NodeClaim", claim), ("Node", node)):
                if obj is None or obj["metadata"].get("deletionTimestamp"):
                    continue
                if label.items() <= (obj["metadata"].get("labels") or {}).items():
                    continue
                with ctx.guard(f"{kind.lower()}.hydration", obj):
                    ctx.api.patch(kind, obj["metadata"]["name"], "", {"metadata": {"labels": label}})
                    changed = True
        self._seen = (ctx.api.kind_version("NodeClaim"), ctx.api.kind_version("Node"))
        return changed
