"""The NodeOverlay controller (Karpenter's nodeoverlay controller, gate NodeOverlay): works out what the cluster's
NodeOverlays change in each NodePool's instance types whenever an overlay, a NodePool or the instance types change,
tells each overlay whether it applies (ValidationSucceeded, Ready), and gives the result to the context, which then
hands every controller the overlaid instance types (`ClusterContext.instance_types_for`)."""

from __future__ import annotations

from typing import Any

from provisioner.cluster.conditions import set_with_root
from provisioner.controllers.context import ClusterContext
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeoverlay import parse_nodeoverlay
from provisioner.options import NODE_OVERLAY
from provisioner.overlays import CONFLICT_MESSAGE, NodeOverlay, OverlayResult, evaluate

VALIDATION_SUCCEEDED = "ValidationSucceeded"


class NodeOverlayController:
    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None
        self._result: OverlayResult | None = None

    def reconcile(self, ctx: ClusterContext, *, write: bool = True) -> bool:
        """Evaluate the overlays if anything they depend on changed; `write` their status (not when observing a
        cluster whose own Karpenter writes it). True if an object was written."""
        if not ctx.gate(NODE_OVERLAY):
            ctx.overlays = None
            self._seen = None
            return False
        pools = [(np, types) for np in ctx.nodepools if (types := ctx.cloud.instance_types(np)) is not None]
        # With `write`: an evaluation made without writing statuses is made again by the first one that writes.
        inputs = (ctx.api.kind_version("NodeOverlay"), write, repr(ctx.nodepools), tuple(id(t) for _, t in pools))
        if inputs == self._seen and self._result is not None:
            ctx.overlays = self._result
            return False
        objects = ctx.api.list("NodeOverlay")
        overlays: list[NodeOverlay] = []
        unreadable: dict[str, str] = {}
        for obj in objects:
            try:
                overlays.append(parse_nodeoverlay(obj))
            except ManifestError as error:  # stored before a rule existed: it applies to nothing, and says why
                unreadable[obj["metadata"]["name"]] = f"{error.field}: {error.message}"
        result = evaluate(overlays, pools)
        result.invalid.update(unreadable)
        changed, applied = False, True
        if write:
            for obj in objects:
                if ctx.backing_off("nodeoverlay", obj):
                    applied = False  # its failed write is retried first
                    continue
                written = False
                with ctx.guard("nodeoverlay", obj):
                    changed |= _write_status(ctx, obj, result)
                    written = True
                applied &= written
        if not applied:
            # Karpenter swaps in the new store only once every status is written (controller.go:120-128): until
            # then the last one stands, and a NodePool it did not evaluate has no instance types.
            ctx.overlays = self._result
            return changed
        ctx.overlays = self._result = result
        self._seen = (ctx.api.kind_version("NodeOverlay"), *inputs[1:])
        return changed


def _write_status(ctx: ClusterContext, obj: dict[str, Any], result: OverlayResult) -> bool:
    name = obj["metadata"]["name"]
    generation = int(obj["metadata"].get("generation") or 1)
    conditions = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
    before = [dict(c) for c in conditions]
    if name in result.invalid:
        verdict = ("False", "RuntimeValidation", result.invalid[name])
    elif name in result.conflicts:
        verdict = ("False", "Conflict", CONFLICT_MESSAGE)
    else:
        verdict = ("True", VALIDATION_SUCCEEDED, "")
    set_with_root(conditions, VALIDATION_SUCCEEDED, *verdict, ctx.now, generation, (VALIDATION_SUCCEEDED,))
    if conditions == before:
        return False
    # A copy: a write the API server refuses leaves the stored overlay (and the next reconcile's view of it) as it was.
    ctx.api.update({**obj, "status": {**(obj.get("status") or {}), "conditions": conditions}})
    return True
