"""Disruption's promises over random clusters, and drift concurrency under a budget."""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.disruption.budgets import allowed_disruptions
from provisioner.objects import Budget
from provisioner.pods import OwnerReference
from tests.builders import nodepool, pod
from tests.disruption_builders import NOW, claimed, pdb, run


def rs_pod(**kwargs):
    return pod(cpu="100m", owner=OwnerReference("ReplicaSet", "rs"), **kwargs)


def test_drift_never_has_more_nodes_disrupting_than_the_budget_allows():
    pool = nodepool(budgets=[Budget(nodes="30%")])
    nodes = [claimed(f"n{i}", pods=[rs_pod()]) for i in range(10)]
    nodes = [replace(n, drifted="NodePoolDrifted", drifted_at=NOW - i) if i < 5 else n for i, n in enumerate(nodes)]
    disrupting: set[str] = set()
    for _ in range(5):
        current = [replace(n, deleting=True) if n.name in disrupting else n for n in nodes]
        for command in run(current, pools=[pool]).commands:
            disrupting.update(c.name for c in command.candidates)
    assert len(disrupting) == 3


node_specs = st.lists(
    st.fixed_dictionaries(
        {
            "pods": st.integers(min_value=0, max_value=3),
            "protected": st.booleans(),  # a do-not-disrupt pod
            "pdb": st.booleans(),  # a pod under a PDB with no disruptions left
            "node_annotation": st.booleans(),
        }
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_specs, st.sampled_from(["0", "1", "2", "50%", "100%"]))
def test_commands_never_touch_protected_nodes_or_exceed_budgets(specs, budget):
    pool = nodepool(budgets=[Budget(nodes=budget)])
    nodes, protected = [], set()
    for index, spec in enumerate(specs):
        pods = [rs_pod(labels={"app": f"a{index}"}) for _ in range(spec["pods"])]
        if spec["protected"] and pods:
            pods[0] = replace(pods[0], annotations={"karpenter.sh/do-not-disrupt": "true"})
        if spec["pdb"] and pods:
            pods[-1] = replace(pods[-1], labels={"app": "guarded"})
        annotations = {"karpenter.sh/do-not-disrupt": "true"} if spec["node_annotation"] else {}
        name = f"n{index}"
        nodes.append(
            claimed(
                name, "arm-instance-type" if index % 2 else "default-instance-type", pods=pods, annotations=annotations
            )
        )
        if (spec["protected"] or spec["pdb"]) and pods or spec["node_annotation"]:
            protected.add(name)
    result = run(nodes, pools=[pool], pdbs=[pdb(app="guarded")])
    touched = [c.name for command in result.commands for c in command.candidates]
    assert not protected & set(touched)
    for command in result.commands:
        assert len(command.candidates) <= allowed_disruptions(pool, command.reason, nodes, NOW)
