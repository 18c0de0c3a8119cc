"""Whether any instance type can satisfy a NodePool, and if not, which of its requirements rules the last one out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from provisioner.catalog import InstanceType
from provisioner.objects import NodePool, NodeSelectorRequirement
from provisioner.scheduling.typeindex import TypeIndex


@dataclass(frozen=True)
class Unsatisfiable:
    """The manifest field to blame and why, e.g. spec.template.spec.requirements[1]."""

    field: str
    message: str


def unsatisfiable(nodepool: NodePool, instance_types: Sequence[InstanceType]) -> Unsatisfiable | None:
    """None when some type satisfies the NodePool (or there is no catalog to judge by); else the first requirement,
    in the order written, after which no type is left."""
    if not instance_types:
        return None
    index = TypeIndex(instance_types)
    if index.compatible(nodepool.template_requirements()):
        return None
    for position in range(len(nodepool.requirements)):
        prefix = replace(nodepool, requirements=nodepool.requirements[: position + 1], template_labels={})
        if not index.compatible(prefix.template_requirements()):
            written = _as_written(nodepool.requirements[position])
            return Unsatisfiable(
                f"spec.template.spec.requirements[{position}]",
                f"no instance type of the {len(instance_types)} this NodePool's node class offers satisfies "
                f"{written}" + (" together with the requirements before it" if position else ""),
            )
    return Unsatisfiable(
        "spec.template.metadata.labels",
        f"no instance type of the {len(instance_types)} this NodePool's node class offers has these labels "
        "together with the requirements",
    )


def _as_written(requirement: NodeSelectorRequirement) -> str:
    """`key In [a, b]`, `key Exists`, `key Gt 4`: the requirement as the manifest has it."""
    if not requirement.values:
        return f"{requirement.key} {requirement.operator}"
    if requirement.operator in ("Gt", "Lt"):
        return f"{requirement.key} {requirement.operator} {requirement.values[0]}"
    return f"{requirement.key} {requirement.operator} [{', '.join(requirement.values)}]"
