"""A NodePool that no instance type can satisfy is named by the requirement that rules the last type out."""

from provisioner.catalog.kwok import kwok_catalog
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.scheduling.satisfiable import Unsatisfiable, unsatisfiable

TYPES = list(kwok_catalog().instance_types)


def nodepool(requirements, labels=None):
    template = {
        "spec": {
            "requirements": requirements,
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        }
    }
    if labels:
        template["metadata"] = {"labels": labels}
    return parse_nodepool(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": template}}
    )


def test_a_satisfiable_nodepool_passes_and_no_catalog_means_no_judgement():
    arm = nodepool([{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}])
    assert unsatisfiable(arm, TYPES) is None
    nothing = nodepool([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["nope"]}])
    assert unsatisfiable(nothing, []) is None


def test_the_first_requirement_after_which_no_type_is_left_is_named():
    pool = nodepool(
        [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            {"key": "karpenter.kwok.sh/instance-size", "operator": "Gt", "values": ["300"]},
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        ]
    )
    assert unsatisfiable(pool, TYPES) == Unsatisfiable(
        "spec.template.spec.requirements[1]",
        "no instance type of the 144 this NodePool's node class offers satisfies karpenter.kwok.sh/instance-size "
        "Gt 300 together with the requirements before it",
    )
    alone = nodepool([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}])
    assert unsatisfiable(alone, TYPES) == Unsatisfiable(
        "spec.template.spec.requirements[0]",
        "no instance type of the 144 this NodePool's node class offers satisfies karpenter.sh/capacity-type In "
        "[reserved]",
    )


def test_template_labels_that_contradict_every_type_are_blamed_when_no_requirement_is():
    pool = nodepool([], labels={"kubernetes.io/arch": "s390x"})
    assert unsatisfiable(pool, TYPES) == Unsatisfiable(
        "spec.template.metadata.labels",
        "no instance type of the 144 this NodePool's node class offers has these labels together with the requirements",
    )
