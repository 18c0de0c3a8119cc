"""Karpenter v1.15.0's consolidation logging tests (pkg/controllers/disruption/consolidation_logging_test.go) ported
onto karpui's command text, "disrupting node(s)" record, savings estimate and ConsolidationRejected reason, each test
naming the Go test (and t.Run case) it follows.

Go's Command.String has a short form for test commands without a Method; every karpui command has its reason and id,
so the cases are checked in the full form (types.go:371-378) instead.
"""

from __future__ import annotations

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.controllers.consolidation_events import validation_failure_reason
from provisioner.disruption.logs import command_text, disrupting, replacement_nodes
from provisioner.disruption.types import UNDERUTILIZED, Candidate, Command
from provisioner.quantity import MILLI
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.results import InstanceTypeOption, NodeClaimPlan
from tests.builders import nodepool, pod
from tests.disruption_builders import claimed
from tests.lab_builders import deployment, lab, nodepool_doc

CAPACITY, ZONE = "karpenter.sh/capacity-type", "topology.kubernetes.io/zone"


def mock_candidate(name: str, price: float = 0.0, pods: int = 0, pool: str = "default") -> Candidate:
    made = claimed(name, pods=[pod(name=f"{name}-pod-{i}") for i in range(pods)], price=price, pool=pool)
    return Candidate.with_costs(made, nodepool(pool), made.node.pods, 1.0)


def instance_type(name: str, *offerings: Offering) -> InstanceType:
    return InstanceType(name, {"cpu": 4 * MILLI}, tuple(offerings))


def plan(*types: InstanceType, requirements: tuple[Requirement, ...] = ()) -> NodeClaimPlan:
    """A replacement NodeClaim: `types` its options in order (the price the scheduler put beside each plays no
    part in the estimate)."""
    options = tuple(InstanceTypeOption(t, 0.0) for t in types)
    return NodeClaimPlan("default", (), {}, Requirements(requirements), options, {}, (), ())


def command(*candidates: Candidate, replacements: tuple[NodeClaimPlan, ...] = ()) -> Command:
    return Command(UNDERUTILIZED, tuple(candidates), replacements)


SOURCE = mock_candidate("node-1", 0.50)


@pytest.mark.parametrize(
    ("problem", "reason"),
    [
        (None, "unknown"),  # nil error
        ("some other error", "unknown"),  # non-validation error
        ("budget (a candidate was nominated during validation)", "budget"),  # budget error - nominated
        ("budget (can no longer be disrupted without violating budgets)", "budget"),  # budget error - budget
        ("scheduling (scheduling simulation produced new results)", "scheduling"),  # scheduling error
        ("churn (candidates are no longer valid)", "churn"),  # churn error - no longer valid
        ("churn (pod churn detected)", "churn"),  # churn error - churn
        ("something unexpected", "unknown"),  # generic validation error
    ],
)
def test_get_validation_failure_reason(problem, reason):
    """TestGetValidationFailureReason: a rejection's problem as recheck words it, to the reason the event gives"""
    assert validation_failure_reason(problem) == reason


def test_get_command_estimated_savings_multiple_replacements():
    """TestGetCommandEstimatedSavings_MultipleReplacements: 0.50 - (0.20 + 0.15)"""
    first = plan(instance_type("dest-type-1", Offering("test-zone-1", "on-demand", 0.20)))
    second = plan(instance_type("dest-type-2", Offering("test-zone-1", "on-demand", 0.15)))
    assert command(SOURCE, replacements=(first, second)).savings == pytest.approx(0.15)


DEST = instance_type("dest-type", Offering("us-west-2a", "spot", 0.10), Offering("us-west-2a", "on-demand", 0.40))


def test_get_command_estimated_savings_on_demand_only_nodepool():
    """TestGetCommandEstimatedSavings_OnDemandOnlyNodePool: the spot offering is no price for an on-demand NodeClaim"""
    replacement = plan(DEST, requirements=(Requirement.in_values(CAPACITY, "on-demand"),))
    assert command(SOURCE, replacements=(replacement,)).savings == pytest.approx(0.10)


def test_get_command_estimated_savings_zone_requirement():
    """TestGetCommandEstimatedSavings_ZoneRequirement: an offering in another zone is no price either"""
    dest = instance_type(
        "dest-type", Offering("us-west-2b", "on-demand", 0.05), Offering("us-west-2a", "on-demand", 0.45)
    )
    replacement = plan(dest, requirements=(Requirement.in_values(ZONE, "us-west-2a"),))
    assert command(SOURCE, replacements=(replacement,)).savings == pytest.approx(0.05)


def test_get_command_estimated_savings_no_capacity_type_restriction():
    """TestGetCommandEstimatedSavings_NoCapacityTypeRestriction: with spot allowed, spot prices the replacement"""
    replacement = plan(DEST, requirements=(Requirement.in_values(CAPACITY, "on-demand", "spot"),))
    assert command(SOURCE, replacements=(replacement,)).savings == pytest.approx(0.40)


def test_get_command_estimated_savings_edge_cases():
    """TestGetCommandEstimatedSavings_EdgeCases: NodeClaim with no InstanceTypeOptions; NodeClaim with empty
    Offerings; delete consolidation - no replacements (no candidates either). The first case, replacements without
    NodeClaims, cannot be: a karpui replacement is its NodeClaim."""
    assert command(replacements=(plan(),)).savings == 0.0
    assert command(replacements=(plan(instance_type("instance-type")),)).savings == 0.0
    assert command().savings == 0.0
    # An unavailable offering, or a reservation with no room left, cannot launch: it prices nothing.
    gone = instance_type("gone", Offering("us-west-2a", "on-demand", 0.10, available=False))
    full = instance_type(
        "full", Offering("us-west-2a", "reserved", 0.01, reservation_id="cr-1", reservation_capacity=0)
    )
    assert command(SOURCE, replacements=(plan(gone),)).savings == 0.50
    assert command(SOURCE, replacements=(plan(full),)).savings == 0.50


@pytest.mark.parametrize(
    ("candidates", "replacements", "expected"),
    [
        (["node-1"], 0, "Underutilized/x: delete: nodepools=[default]: [node-1] (savings: $0.00)"),
        (["node-1", "node-2"], 0, "Underutilized/x: delete: nodepools=[default]: [node-1, node-2] (savings: $0.00)"),
        (["node-1"], 1, "Underutilized/x: replace: nodepools=[default]: [node-1] -> [1 replacement] (savings: $0.00)"),
        (
            ["node-1"],
            2,
            "Underutilized/x: replace: nodepools=[default]: [node-1] -> [2 replacements] (savings: $0.00)",
        ),
        ([], 0, "Underutilized/x: no-op: nodepools=[]: [] (savings: $0.00)"),
    ],
)
def test_command_string(candidates, replacements, expected):
    """TestCommand_String: delete single node; delete multiple nodes; replace with single replacement; replace with
    multiple replacements; empty command"""
    made = command(*(mock_candidate(n) for n in candidates), replacements=tuple(plan() for _ in range(replacements)))
    assert command_text(made, "x") == expected


def test_command_string_names_nodepools_in_the_order_of_the_candidates():
    """Command.String: lo.Uniq of the candidates' NodePools, in their order, not sorted"""
    made = command(
        mock_candidate("n1", pool="zeta"), mock_candidate("n2", pool="alpha"), mock_candidate("n3", pool="zeta")
    )
    assert command_text(made, "x") == "Underutilized/x: delete: nodepools=[zeta,alpha]: [n1, n2, n3] (savings: $0.00)"


def test_log_values_pod_count():
    """TestLogValues_PodCount: the pods of every candidate, 3 + 2"""
    record = disrupting(command(mock_candidate("node-1", pods=3), mock_candidate("node-2", pods=2)), "x").as_dict()
    assert (record["pod-count"], record["disrupted-node-count"], record["replacement-node-count"]) == (5, 2, 0)
    assert record["disrupted-nodes"][1] == {
        "Node": {"name": "node-2"},
        "NodeClaim": {"name": "node-2"},
        "instance-type": "default-instance-type",
        "capacity-type": "on-demand",
    }


def test_log_values_replacement_nodes():
    """Command.LogValues' replacement-nodes (types.go:466-479): one capacity type, reserved before spot before
    on-demand, and InstanceTypeList in the options' order, only for a single replacement"""
    types = [instance_type(f"t{i}", Offering("z", "spot", 1.0)) for i in range(7)]
    spot_or_od = (Requirement.in_values(CAPACITY, "on-demand", "spot"),)
    single = command(SOURCE, replacements=(plan(*reversed(types), requirements=spot_or_od),))
    assert disrupting(single, "x").as_dict()["replacement-nodes"] == [
        {"capacity-type": "spot", "instance-types": "t6, t5, t4, t3, t2 and 2 other(s)"}
    ]
    assert replacement_nodes(
        [
            (Requirements((Requirement.in_values(CAPACITY, "on-demand"),)), ["a"]),
            (Requirements((Requirement.in_values(CAPACITY, "reserved", "on-demand"),)), ["b"]),
            (Requirements(()), ["c"]),
        ]
    ) == [{"capacity-type": "on-demand"}, {"capacity-type": "reserved"}, {"capacity-type": "reserved"}]


def test_the_queues_disrupting_line_leads_with_the_command_and_logs_karpenters_replacement_nodes():
    """queue.go:388-390: "command" (Command.String), then LogValues, as the lab's queue logs a consolidation it starts"""
    on_demand = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    made = lab(nodepool_doc(template_spec={"requirements": on_demand}), deployment("inflate", 10, "1"))
    made.advance(60)
    scaled = made.store.get("Deployment", "inflate", "default")
    scaled["spec"]["replicas"] = 1
    made.store.update(scaled)
    made.advance(60)
    [line] = [e.record.as_dict() for e in made.logs if e.record.message == "disrupting node(s)"]
    [command] = made.store.list("DisruptionCommand")
    spec = command["spec"]
    assert list(line)[3:] == [
        "command",
        "decision",
        "disrupted-node-count",
        "replacement-node-count",
        "pod-count",
        "disrupted-nodes",
        "replacement-nodes",
    ]
    assert (line["command"], line["decision"], line["pod-count"]) == (spec["text"], "replace", 1)
    assert line["replacement-nodes"] == [
        {
            "capacity-type": "on-demand",
            "instance-types": "c-2x-amd64-linux, c-2x-amd64-windows, c-2x-arm64-linux, c-2x-arm64-windows, "
            "s-2x-amd64-linux and 31 other(s)",
        }
    ]
    assert len(spec["replacements"][0]["instanceTypes"]) == 36
