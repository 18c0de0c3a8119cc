"""Consolidation's price filters in computeConsolidation's order: priced under the NodeClaim's own capacity types,
pinned to spot after, and minValues checked again after every filter (Karpenter v1.15 consolidation.go)."""

from provisioner.disruption.consolidation import min_values_shortfall
from provisioner.pods import OwnerReference
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.results import InstanceTypeOption
from tests.builders import instance_type, nodepool, pod, req
from tests.disruption_builders import claimed, run

FAMILY = "karpenter.kwok.sh/instance-family"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = [("test-zone-1", "on-demand")]


def rs_pod(**kwargs):
    return pod(cpu="1", owner=OwnerReference("ReplicaSet", "rs"), **kwargs)


def test_an_on_demand_nodes_replacement_keeps_cheaper_on_demand_only_types_but_launches_spot():
    """consolidation.go:278-301: the filter prices each type under [spot, on-demand] (an on-demand-only type at its
    on-demand price), then only the requirements are pinned to spot; the options stay."""
    types = [
        instance_type("current", "8", "8Gi", zones=ZONE, price=1.0),
        instance_type("on-demand-only", "2", "2Gi", zones=ZONE, price=0.3),
        instance_type("spot-and-on-demand", "2", "2Gi", zones=[("test-zone-1", "spot"), *ZONE], price=0.4),
    ]
    [command] = run([claimed("n1", "current", types=types, pods=[rs_pod()])], types=types).commands
    [replacement] = command.replacements
    assert replacement.instance_type_names == ["on-demand-only", "spot-and-on-demand"]
    assert replacement.requirements[CAPACITY_TYPE].values == frozenset({"spot"})


def test_a_replacement_whose_cheaper_types_break_min_values_is_no_command():
    """nodeclaim.go:473: two types would do, but only one is cheaper than the node and minValues asks for two."""
    types = [
        instance_type("current", "8", "8Gi", zones=ZONE, price=1.0),
        instance_type("small", "2", "2Gi", zones=ZONE, price=0.3),
    ]
    pool = nodepool("default", req(INSTANCE_TYPE, "Exists", min_values=2), req(CAPACITY_TYPE, "In", "on-demand"))
    result = run([claimed("n1", "current", types=types, pods=[rs_pod()])], pools=[pool], types=types)
    assert result.commands == []
    assert result.notes["n1"][-1] == (
        "Filtering by price: minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])"
    )


def test_min_values_shortfall_counts_the_first_options_that_meet_every_floor():
    """SatisfiesMinValues: how many options, in their order, it takes; the short keys when all of them do not."""
    options = [
        InstanceTypeOption(instance_type(name, "2", "2Gi", labels={FAMILY: family}), price)
        for name, family, price in (("a-1", "a", 0.1), ("a-2", "a", 0.2), ("b-1", "b", 0.3), ("c-1", "c", 0.4))
    ]
    three_families = Requirements([Requirement(FAMILY, frozenset(), True, min_values=3)])
    assert min_values_shortfall(options, three_families) == (4, [])
    assert min_values_shortfall(options[:3], three_families) == (3, [FAMILY])
    assert min_values_shortfall(options, Requirements()) == (0, [])
