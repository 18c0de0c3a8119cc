"""Whether any instance type can satisfy a NodePool, and if not, which of its requirements rules the last one out.

"Satisfy" is what the drift controller will check once a NodeClaim exists: the labels a NodeClaim launched on the
type carries must meet every requirement of its NodePool. A requirement on a key the type leaves undefined is met
only where the NodeClaim is stamped with a value for it (a well-known key pinned to one value, a custom key), or a
template label gives one; otherwise the node would be Drifted the moment it launched. Karpenter cannot meet that
case: its provider's instance types define every well-known label of its own. A lab offers two providers' catalogs,
so an EC2NodeClass requirement (`karpenter.k8s.aws/instance-category In [c, m, r]`) on a KWOKNodeClass must not
pass for the kwok types that lack the label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from provisioner import labels as wk
from provisioner.catalog import InstanceType
from provisioner.objects import NodePool, NodeSelectorRequirement
from provisioner.requirements import DOES_NOT_EXIST, IN, NOT_IN
from provisioner.scheduling.typeindex import TypeIndex


@dataclass(frozen=True)
class Unsatisfiable:
    """The manifest field to blame and why, e.g. spec.template.spec.requirements[1]."""

    field: str
    message: str


def unsatisfiable(
    nodepool: NodePool, instance_types: Sequence[InstanceType], offered_by: str = "this NodePool's node class"
) -> Unsatisfiable | None:
    """None when some type satisfies the NodePool (or there is no catalog to judge by); else the first requirement,
    in the order written, after which no type is left. `offered_by` names whose types they are, in the message."""
    if not instance_types:
        return None
    if _satisfied(nodepool, instance_types):
        return None
    for position in range(len(nodepool.requirements)):
        prefix = replace(nodepool, requirements=nodepool.requirements[: position + 1], template_labels={})
        if not _satisfied(prefix, instance_types):
            written = _as_written(nodepool.requirements[position])
            return Unsatisfiable(
                f"spec.template.spec.requirements[{position}]",
                f"no instance type of the {len(instance_types)} {offered_by} offers satisfies "
                f"{written}" + (" together with the requirements before it" if position else ""),
            )
    return Unsatisfiable(
        "spec.template.metadata.labels",
        f"no instance type of the {len(instance_types)} {offered_by} offers has these labels "
        "together with the requirements",
    )


def _satisfied(nodepool: NodePool, instance_types: Sequence[InstanceType]) -> bool:
    launchable = without_drift(nodepool, instance_types)
    return bool(launchable) and bool(TypeIndex(launchable).compatible(nodepool.template_requirements()))


def without_drift(nodepool: NodePool, instance_types: Sequence[InstanceType]) -> list[InstanceType]:
    """The types a NodeClaim of this NodePool can launch on without being Drifted at once: those that define every
    key the NodePool requires and nothing else would label."""
    keys = type_labelled_keys(nodepool)
    return [it for it in instance_types if all(key in it.requirements for key in keys)]


def type_labelled_keys(nodepool: NodePool) -> frozenset[str]:
    """Keys the NodePool requires that only an instance type can put on its nodes: a positive requirement that the
    NodeClaim is not stamped with (as the scheduler stamps it: a well-known key only when one value is left, any
    other key with a value it allows) and that no template label sets."""
    keys = set()
    for written in nodepool.requirements:
        if written.operator in (NOT_IN, DOES_NOT_EXIST) or written.key in nodepool.template_labels:
            continue
        if written.key in (wk.NODEPOOL, wk.ZONE, wk.CAPACITY_TYPE):
            continue  # set on every NodeClaim: the NodePool's name, and its offering's zone and capacity type
        requirement = written.to_requirement()
        if written.key in wk.WELL_KNOWN_LABELS:
            if requirement.operator == IN and len(requirement.values) == 1:
                continue
        elif requirement.any_value():
            continue
        keys.add(written.key)
    return frozenset(keys)


def _as_written(requirement: NodeSelectorRequirement) -> str:
    """`key In [a, b]`, `key Exists`, `key Gt 4`: the requirement as the manifest has it."""
    if not requirement.values:
        return f"{requirement.key} {requirement.operator}"
    if requirement.operator in ("Gt", "Lt"):
        return f"{requirement.key} {requirement.operator} {requirement.values[0]}"
    return f"{requirement.key} {requirement.operator} [{', '.join(requirement.values)}]"
