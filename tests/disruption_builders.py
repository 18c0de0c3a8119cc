"""Builders for disruption tests: Karpenter nodes with their NodeClaim facts, and the cluster view."""

from __future__ import annotations

from dataclasses import replace

from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.methods import disruption_pass
from provisioner.disruption.types import ClaimedNode, DisruptionBudgetPolicy
from provisioner.scheduling.scheduler import PoolOffer
from provisioner.selectors import LabelSelector
from tests.builders import fake_catalog, node, nodepool

NOW = 1_800_000_000.0


def claimed(
    name,
    instance_type="default-instance-type",
    *,
    pods=(),
    capacity_type="on-demand",
    zone="test-zone-1",
    price=None,
    pool="default",
    types=None,
    annotations=None,
    **node_options,
):
    types = {it.name: it for it in (types or fake_catalog())}
    it = types[instance_type]
    labels = {
        "node.kubernetes.io/instance-type": it.name,
        "karpenter.sh/capacity-type": capacity_type,
        "topology.kubernetes.io/zone": zone,
        **it.labels,
        **node_options.pop("labels", {}),
    }
    allocatable = it.allocatable
    base = node(
        name,
        labels=labels,
        scheduled=[replace(p, node_name=name, unschedulable=False, phase="Running") for p in pods],
        managed=True,
        nodepool_name=pool,
        **node_options,
    )
    base = replace(base, allocatable=dict(allocatable), capacity=dict(it.capacity))
    if price is None:
        price = min(o.price for o in it.offerings if o.capacity_type == capacity_type and o.zone == zone)
    return ClaimedNode(
        node=base,
        nodeclaim=name,
        nodepool=pool,
        instance_type=it.name,
        capacity_type=capacity_type,
        zone=zone,
        price=price,
        created=NOW - 3600,
        initialized=base.initialized,
        annotations=dict(annotations or {}),
    )


def run(nodes, pools=None, types=None, pending=(), pdbs=(), now=NOW, spot_to_spot=False, extra_nodes=()):
    pools = pools or [nodepool()]
    types = types or fake_catalog()
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes] + list(extra_nodes),
        pending=list(pending),
        pools=[PoolOffer(p, types) for p in pools],
        now=now,
        pdbs=list(pdbs),
        spot_to_spot=spot_to_spot,
    )
    return disruption_pass(view, {p.name: p for p in pools})


def pdb(namespace="default", allowed=0, **match):
    return DisruptionBudgetPolicy(
        namespace, "pdb", LabelSelector.parse(",".join(f"{k}={v}" for k, v in match.items())), allowed
    )
