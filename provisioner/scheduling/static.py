"""A static NodePool's NodeClaim (Karpenter's NewNodeClaimTemplate for a NodePool with spec.replicas): no
simulation decides it, so it carries its template's requirements and labels and no pods, requests or types."""

from __future__ import annotations

from provisioner import labels as wk
from provisioner.objects import NodePool
from provisioner.requirements import Requirement
from provisioner.scheduling.results import NodeClaimPlan


def static_plan(nodepool: NodePool) -> NodeClaimPlan:
    """A static NodePool's NodeClaim, as Karpenter's NewNodeClaimTemplate makes one: the template's requirements and
    labels (with the NodePool and node class labels), no pods, no requests and no instance types of its own (the
    cloud provider picks among the template's)."""
    ref = nodepool.node_class_ref
    node_class_key = f"{ref.group}/{ref.kind.lower()}"
    requirements = nodepool.template_requirements().merged([Requirement.in_values(node_class_key, ref.name)])
    labels = {**nodepool.template_labels, wk.NODEPOOL: nodepool.name, node_class_key: ref.name}
    for key, requirement in requirements.items():
        if key not in labels and key not in wk.WELL_KNOWN_LABELS and not wk.is_restricted_label(key):
            value = requirement.any_value()
            if value:
                labels[key] = value
    return NodeClaimPlan(
        nodepool=nodepool.name,
        pods=(),
        requests={},
        requirements=requirements,
        options=(),
        labels=labels,
        taints=nodepool.taints,
        startup_taints=nodepool.startup_taints,
        static=True,
    )
