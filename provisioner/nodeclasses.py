"""Which node class a NodePool's nodeClassRef names, and what the NodePool's status says about it.

Karpenter's v1 conversion gives a karpenter.sh/v1beta1 nodeClassRef that names no kind the cloud provider's own node
class: the AWS provider's EC2NodeClass, the kwok provider's KWOKNodeClass (a cluster runs one provider, and the AWS
provider's v1beta1 API never read the kind). A lab offers both providers' catalogs, so karpui takes, of the two kinds:

1. only a kind whose instance types can satisfy the NodePool; if neither's can, the NodePool is refused, as any
   NodePool that no instance type can satisfy is;
2. of those, the kind that has a node class of that name; where both have one, or neither yet, the EC2NodeClass:
   a v1beta1 NodePool that names no kind is written for the AWS provider (Karpenter's AWS v1beta1 documents and
   labs, seed 004 among them, give a name only; the kwok provider's v1beta1 examples say `kind: KWOKNodeClass`).

The choice is made when the NodePool is written and again when a node class of that name comes or goes; the
NodePool's `NodeClassResolved` condition and an Event say which node class it took and why.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from provisioner.catalog import InstanceType
from provisioner.manifests.nodeclass import EC2_KIND, KWOK_KIND, NODE_CLASS_KINDS
from provisioner.manifests.nodepool import NODECLASS_ANNOTATION
from provisioner.objects import NodeClassRef, NodePool
from provisioner.scheduling.satisfiable import Unsatisfiable, unsatisfiable

# Rule 2's order: the kind taken where both kinds could serve the NodePool and both (or neither) exist.
PREFERENCE = (EC2_KIND, KWOK_KIND)

RESOLVED = "NodeClassResolved"


@dataclass(frozen=True)
class Resolution:
    """The node class a kind-less reference names, with the condition's reason and message saying why."""

    ref: NodeClassRef
    reason: str
    message: str


def kindless(nodepool: NodePool) -> bool:
    """Whether the NodePool was written at v1beta1 with a nodeClassRef that names no kind nor apiVersion (its
    conversion keeps the reference as written in an annotation, as Karpenter's does)."""
    written = nodepool.annotations.get(NODECLASS_ANNOTATION)
    if not written:
        return False
    try:
        ref = json.loads(written)
    except ValueError:
        return False
    return isinstance(ref, dict) and not ref.get("kind") and not ref.get("apiVersion")


def resolve(
    nodepool: NodePool, existing: Collection[str], catalogs: Mapping[str, Sequence[InstanceType]]
) -> Resolution | Unsatisfiable:
    """The node class the module's rule takes for a kind-less reference, given the kinds that have a node class of
    its name (`existing`) and each kind's instance types; Unsatisfiable when neither kind's types can serve it."""
    name = nodepool.node_class_ref.name
    problems = {kind: unsatisfiable(nodepool, catalogs.get(kind, ()), f"the {kind}") for kind in PREFERENCE}
    candidates = [kind for kind in PREFERENCE if problems[kind] is None]
    if not candidates:
        first = problems[PREFERENCE[0]]
        assert first is not None
        return Unsatisfiable(
            first.field,
            "the nodeClassRef names no kind, and neither node class kind could serve this NodePool: "
            + "; ".join(problem.message for problem in problems.values() if problem is not None),
        )
    named = [kind for kind in candidates if kind in existing]
    kind = (named or candidates)[0]
    taken = f'the nodeClassRef names no kind: the {kind} "{name}"'
    others = [other for other in PREFERENCE if other != kind]
    refused = [
        f"the {other} kind could not serve it: {problem.message}" for other in others if (problem := problems[other])
    ]
    if not named:
        reason = "NoneNamed"
        message = f'{taken}, once it exists (no node class is named "{name}" yet)'
    elif len(named) > 1:
        reason = "BothNamed"
        message = (
            f'{taken}; the {others[0]} "{name}" exists too, and where both kinds can serve a NodePool the '
            f"{PREFERENCE[0]} is taken"
        )
    elif [other for other in others if other in existing]:
        reason = "OnlyOneServes"
        message = taken
    else:
        reason = "OnlyOneNamed"
        message = f"{taken}, the only node class of that name"
    if refused and reason != "BothNamed":
        message += "; " + "; ".join(refused)
    return Resolution(_ref(kind, name), reason, message)


def _ref(kind: str, name: str) -> NodeClassRef:
    return NodeClassRef(group=NODE_CLASS_KINDS[kind][0].split("/", 1)[0], kind=kind, name=name)


def explain(
    nodepool: NodePool, nodeclasses: Collection[tuple[str, str]], catalogs: Mapping[str, Sequence[InstanceType]]
) -> Resolution | None:
    """Why a kind-less reference names the node class it does (None for a reference that names its kind)."""
    if not kindless(nodepool):
        return None
    name = nodepool.node_class_ref.name
    resolution = resolve(nodepool, {kind for kind, other in nodeclasses if other == name}, catalogs)
    if isinstance(resolution, Unsatisfiable) or resolution.ref != nodepool.node_class_ref:
        # The catalogs changed since the NodePool was written: it keeps what it was given until written again.
        return Resolution(
            nodepool.node_class_ref,
            "Kept",
            f'the nodeClassRef names no kind: the {nodepool.node_class_ref.kind} "{name}", as when it was written',
        )
    return resolution
