"""What the cluster's NodeOverlays do to one NodePool's instance types, for its page and the editor's what-if: each
overlay's verdict and reach, and the prices and capacities it changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpui import models
from karpui.clusters import configuration, lab
from karpui.clusters.karpenter_options import cluster_options
from provisioner.catalog import InstanceType
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeoverlay import parse_nodeoverlay
from provisioner.objects import NodePool
from provisioner.options import NODE_OVERLAY
from provisioner.overlays import NodeOverlay, OverlayResult, evaluate, offering_key
from provisioner.quantity import format_resources

# Price changes listed on the page: the cheapest this many repriced offerings.
SHOWN_PRICES = 12


def nodepool_overlays(cluster: models.Cluster, nodepool: NodePool, pools: Sequence[NodePool]) -> dict[str, Any]:
    """The overlays as the controller would evaluate them with `nodepool` among `pools` (the NodePool being edited
    may differ from the stored one), what each does to this NodePool, and its cheapest repriced offerings."""
    overlays: list[NodeOverlay] = []
    for body in lab.objects(cluster, "NodeOverlay"):
        try:
            overlays.append(parse_nodeoverlay(body))
        except ManifestError:
            continue  # the controller marks it; it changes nothing
    enabled = cluster_options(cluster).gate(NODE_OVERLAY)
    if not overlays:
        return {"enabled": enabled, "overlays": [], "prices": []}
    catalogs = configuration.catalogs_by_node_class()
    typed = [(pool, catalogs.get(pool.node_class_ref.kind, [])) for pool in pools]
    result = evaluate(overlays, typed)
    types = next((t for pool, t in typed if pool.name == nodepool.name), [])
    return {
        "enabled": enabled,
        "overlays": [_row(overlay, result, nodepool.name) for overlay in overlays],
        "prices": _price_changes(result, nodepool.name, types),
    }


def _row(overlay: NodeOverlay, result: OverlayResult, nodepool: str) -> dict[str, Any]:
    if overlay.name in result.invalid:
        verdict = f"not applied: {result.invalid[overlay.name]}"
    elif overlay.name in result.conflicts:
        verdict = "not applied: conflict with another overlay of the same weight"
    else:
        verdict = "applied"
    effects = []
    if overlay.price is not None:
        effects.append(f"price ${overlay.price}/h")
    if overlay.price_adjustment is not None:
        effects.append(f"price {overlay.price_adjustment}")
    if overlay.capacity:
        effects.append("capacity " + ", ".join(f"{k}={v}" for k, v in format_resources(overlay.capacity).items()))
    return {
        "name": overlay.name,
        "weight": overlay.weight,
        "effect": "; ".join(effects) or "nothing",
        "verdict": verdict,
        "types": len(result.reach.get(overlay.name, {}).get(nodepool, [])),
    }


def _price_changes(result: OverlayResult, nodepool: str, types: Sequence[InstanceType]) -> list[dict[str, Any]]:
    """The repriced offerings of the NodePool's types, cheapest (after) first."""
    by_name = {it.name: it for it in types}
    changes = []
    for applied in result.apply(nodepool, types):
        original = {offering_key(o): o.price for o in by_name[applied.name].offerings}
        for offering in applied.offerings:
            if offering.price_overlaid:
                changes.append(
                    {
                        "instance_type": applied.name,
                        "zone": offering.zone,
                        "capacity_type": offering.capacity_type,
                        "before": original[offering_key(offering)],
                        "after": offering.price,
                    }
                )
    changes.sort(key=lambda c: (c["after"], c["instance_type"], c["zone"], c["capacity_type"]))
    return changes[:SHOWN_PRICES]
