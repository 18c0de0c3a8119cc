"""Node repair under LEGACY_NODE_REPAIR, ported from sigs.k8s.io/karpenter@v1.15.0
pkg/controllers/node/legacyrepair/suite_test.go ("Node Health"): v1.14's node.health controller, which v1.15 keeps
behind the option. It replaces a node once a ReplaceNode policy's toleration has passed since the condition's
lastTransitionTime, ignoring budgets, do-not-disrupt and drain bounds, and stamps the drain's deadline now.

Each test names the It it follows; the lab and its helpers are the v1.15 repair port's (test_upstream_repair.py).
"""

from provisioner.cloudprovider.types import RepairPolicy
from provisioner.cluster.objects import parse_timestamp, timestamp
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.repairpolicies import REBOOT_NODE
from tests.lab_builders import deployment, nodepool_doc
from tests.unit.test_upstream_repair import (
    C2X,
    MINUTE,
    SUITE,
    TERMINATION_TIMESTAMP,
    annotate,
    deleting,
    sicken,
    stored_claim,
)
from tests.unit.test_upstream_repair import running as _running

LEGACY = KarpenterOptions(feature_gates=parse_feature_gates("NodeRepair=true"), legacy_node_repair=True)


def one_node(pool=None, policies=SUITE, **pod_spec):
    made = _running(deployment(replicas=1, **pod_spec), pool=pool, policies=policies, options=LEGACY)
    [claim] = made.store.list("NodeClaim")
    return made, claim["metadata"]["name"], claim["status"]["nodeName"]


def test_should_delete_nodes_that_are_unhealthy_by_the_cloud_provider():
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert deleting(made, claim)


def test_should_not_delete_node_when_unhealthy_type_does_not_match():
    made, claim, node = one_node()
    sicken(made, node, kind="FakeHealthyNode")
    made.advance(60 * MINUTE)
    assert not deleting(made, claim)


def test_should_not_delete_node_when_health_status_does_not_match():
    made, claim, node = one_node()
    sicken(made, node, status="True")
    made.advance(60 * MINUTE)
    assert not deleting(made, claim)


def test_should_not_delete_node_when_health_duration_is_not_reached():
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(20 * MINUTE)
    assert not deleting(made, claim)


def test_the_toleration_runs_from_last_transition_time_even_before_the_node_was_created():
    """v1.14 reads lastTransitionTime as it is (the v1.15 matcher starts no earlier than the Node's creation): a
    condition said to have changed 31 minutes ago is past the 30-minute toleration at once."""
    made, claim, node = one_node()
    sicken(made, node, since=made.ctx.now - 31 * MINUTE)
    made.advance(5)
    assert deleting(made, claim)


def test_should_set_annotation_termination_grace_period_when_force_termination_is_started():
    made, claim, node = one_node()
    due = made.ctx.now + 30 * MINUTE
    sicken(made, node)
    made.advance(60 * MINUTE)
    stamped = parse_timestamp(stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP])
    assert due <= stamped <= due + 15  # the moment it was forced: now, whatever the policies' drain bound


def test_should_not_respect_termination_grace_period_if_set_on_the_nodepool():
    made, claim, node = one_node(
        policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=600.0)]
    )
    annotate(made, "NodeClaim", claim, **{TERMINATION_TIMESTAMP: timestamp(made.ctx.now + 120 * MINUTE)})
    due = made.ctx.now + 30 * MINUTE
    sicken(made, node)
    made.advance(60 * MINUTE)
    stamped = parse_timestamp(stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP])
    assert due <= stamped <= due + 15


def test_should_not_update_termination_grace_period_if_set_before_the_current_time():
    made, claim, node = one_node()
    earlier = timestamp(made.ctx.now - 3 * MINUTE)
    annotate(made, "NodeClaim", claim, **{TERMINATION_TIMESTAMP: earlier})
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP] == earlier


def test_should_ignore_policies_with_a_non_replace_action():
    made, claim, node = one_node(policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, action=REBOOT_NODE)])
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert not deleting(made, claim)


def test_should_replace_with_the_replace_policy_when_a_reboot_policy_also_matches():
    made, claim, node = one_node(
        policies=[
            RepairPolicy("BadNode", "False", 10 * MINUTE, reason_regex="Transient", action=REBOOT_NODE),
            RepairPolicy("BadNode", "False", 30 * MINUTE),
        ]
    )
    sicken(made, node, reason="Transient")
    made.advance(15 * MINUTE)
    assert not deleting(made, claim)
    made.advance(15 * MINUTE + 5)
    assert deleting(made, claim)


def test_should_only_match_a_policy_with_a_reason_regex_when_the_condition_reason_matches():
    made, claim, node = one_node(policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, reason_regex="^Fatal$")])
    since = made.ctx.now
    sicken(made, node, reason="Other")
    made.advance(60 * MINUTE)
    assert not deleting(made, claim)
    sicken(made, node, reason="Fatal", since=since)
    made.advance(5)
    assert deleting(made, claim)


def test_should_ignore_node_disruption_budgets():
    made, claim, node = one_node(
        pool=nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]})
    )
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert deleting(made, claim)


def test_should_ignore_do_not_disrupt_on_a_node():
    made, claim, node = one_node()
    annotate(made, "Node", node, **{"karpenter.sh/do-not-disrupt": "true"})
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert deleting(made, claim)


def test_do_not_repair_is_not_known_to_the_legacy_controller():
    """The option's help: the legacy controller does not support the karpenter.sh/do-not-repair annotation."""
    made, claim, node = one_node()
    annotate(made, "Node", node, **{"karpenter.sh/do-not-repair": "true"})
    sicken(made, node)
    made.advance(60 * MINUTE)
    assert deleting(made, claim)


def three_nodes():
    """Three c-2x nodes of one 1.5-CPU pod each, their NodeClaims by name."""
    pool = nodepool_doc(disruption={"consolidateAfter": "Never"}, template_spec={"requirements": C2X})
    made = _running(deployment(replicas=3, cpu="1500m"), pool=pool, options=LEGACY)
    return made, sorted(made.store.list("NodeClaim"), key=lambda c: c["metadata"]["name"])


def test_should_consider_round_up_when_there_is_a_low_number_of_nodes_for_a_nodepool():
    """One unhealthy node of three: 33%, but 20% of three rounds up to one, so it is repaired."""
    made, claims = three_nodes()
    assert len(claims) == 3
    sicken(made, claims[0]["status"]["nodeName"])
    made.advance(60 * MINUTE)
    assert deleting(made, claims[0]["metadata"]["name"])


def test_should_ignore_unhealthy_nodes_if_more_than_20_percent_are_unhealthy_in_a_nodepool():
    made, claims = three_nodes()
    for claim in claims[:2]:
        sicken(made, claim["status"]["nodeName"])
    made.advance(60 * MINUTE)
    assert [deleting(made, c["metadata"]["name"]) for c in claims] == [False, False, False]
    blocked = {
        (e["involvedObject"]["kind"], e["message"])
        for e in made.store.list("Event", "default")
        if e["reason"] == "NodeRepairBlocked"
    }
    assert blocked == {("Node", "more than 20% nodes are unhealthy in the nodepool")}
