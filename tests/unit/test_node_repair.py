"""Node auto-repair (gate NodeRepair) in a lab over the kwok catalog, and karpui's human gate around it.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/node/health/suite_test.go ("Node Health"): each test
names the It it follows. The suite's fake provider's policy is a condition BadNode=False tolerated 30 minutes;
kwok's, which the lab runs, is Ready=False or Ready=Unknown tolerated 10 minutes, so the steps are scaled to it.
"""

import pytest

from provisioner.cloudprovider.kwok import KWOK_REPAIR_POLICIES
from provisioner.cloudprovider.types import RepairPolicy
from provisioner.cluster.objects import timestamp
from provisioner.controllers import commands
from provisioner.controllers.repair import allowed_unhealthy, unhealthy
from provisioner.options import KarpenterOptions, parse_feature_gates
from tests.lab_builders import deployment, lab, nodepool_doc

ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeRepair=true"))
STATIC_ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeRepair=true,StaticCapacity=true"))
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
C2X = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-2x-amd64-linux"]}]


def running(*docs, options=ON, pool=None):
    made = lab(pool or nodepool_doc(disruption={"consolidateAfter": "Never"}), *docs, options=options)
    made.advance(60)
    return made


def one_node(options=ON, pool=None, **pod_spec):
    made = running(deployment(replicas=1, **pod_spec), options=options, pool=pool)
    [claim] = made.store.list("NodeClaim")
    return made, claim["metadata"]["name"], claim["status"]["nodeName"]


def sicken(made, node_name, kind="Ready", status="False", since=None):
    """Set the node's condition `kind` to `status`, changed at `since` (now by default)."""
    node = made.store.get("Node", node_name)
    conditions = [c for c in node["status"]["conditions"] if c["type"] != kind]
    conditions.append(
        {"type": kind, "status": status, "lastTransitionTime": timestamp(made.ctx.now if since is None else since)}
    )
    node["status"]["conditions"] = conditions
    made.store.update(node)


def repairs(made):
    return [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]


def deleting(made, claim_name):
    claim = made.store.get("NodeClaim", claim_name)
    return claim is None or bool(claim["metadata"].get("deletionTimestamp"))


# Reconciliation ---------------------------------------------------------------------------------------------------


def test_an_unhealthy_node_is_repaired_when_its_toleration_ends():
    """should delete nodes that are unhealthy by the cloud provider"""
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(9 * 60)
    assert not deleting(made, claim)
    made.advance(61)
    assert deleting(made, claim)
    [command] = repairs(made)
    assert command["status"]["forced"] == (
        f"forced: Node {node} has had Ready=False since {command['spec']['unhealthySince']}, past the cloud "
        "provider's 10m repair toleration; Karpenter repairs an unhealthy node then, whatever the approval mode, "
        "do-not-disrupt or a pause"
    )


def test_a_silent_kubelet_is_unhealthy_too():
    """kwok's second policy: Ready=Unknown for 10 minutes"""
    made, claim, node = one_node()
    sicken(made, node, status="Unknown")
    made.advance(10 * 60 + 1)
    assert deleting(made, claim)


def test_a_condition_no_policy_names_is_no_reason_to_repair():
    """should not delete node when unhealthy type does not match cloud provider passed in value"""
    made, claim, node = one_node()
    sicken(made, node, kind="FakeHealthyNode")
    made.advance(60 * 60)
    assert not deleting(made, claim) and repairs(made) == []


def test_a_status_no_policy_names_is_no_reason_to_repair():
    """should not delete node when health status does not match cloud provider passed in value"""
    made, claim, node = one_node()
    sicken(made, node, status="True")
    made.advance(60 * 60)
    assert not deleting(made, claim) and repairs(made) == []


def test_the_repair_waits_for_the_toleration():
    """should not delete node when health duration is not reached"""
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(5 * 60)
    assert not deleting(made, claim)
    [command] = repairs(made)
    assert command["status"]["phase"] == "AwaitingApproval"
    assert command["status"]["expiresAt"] == command["spec"]["forceAt"] == timestamp(made.ctx.now + 5 * 60)


def test_the_repair_sets_the_termination_timestamp_to_its_moment():
    """should set annotation termination grace period when force termination is started"""
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(10 * 60 + 1)
    gone = made.store.get("NodeClaim", claim) or made.store.removed[("NodeClaim", "", claim)]
    forced = repairs(made)[0]["spec"]["forceAt"]
    assert gone["metadata"]["annotations"][TERMINATION_TIMESTAMP] == forced


def test_the_repair_logs_name_the_node_and_its_nodeclaim_as_karpenters_node_health_controller_does():
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(10 * 60 + 1)
    forced = repairs(made)[0]["spec"]["forceAt"]
    logged = [(r.record.message, r.record.fields) for r in made.logs if r.record.logger == "controller.node.health"]
    subjects = {"Node": {"name": node}, "NodeClaim": {"name": claim}}
    assert logged == [
        ("annotated nodeclaim", {**subjects, TERMINATION_TIMESTAMP: forced}),
        ("deleting unhealthy node", subjects),
    ]


def test_a_later_termination_timestamp_is_brought_forward():
    """should not respect termination grace period if set on the nodepool"""
    made, claim, node = one_node()
    stored = made.store.get("NodeClaim", claim)
    stored["metadata"].setdefault("annotations", {})[TERMINATION_TIMESTAMP] = timestamp(made.ctx.now + 120 * 60)
    made.store.update(stored)
    sicken(made, node)
    made.advance(10 * 60 + 1)
    gone = made.store.get("NodeClaim", claim) or made.store.removed[("NodeClaim", "", claim)]
    assert gone["metadata"]["annotations"][TERMINATION_TIMESTAMP] == repairs(made)[0]["spec"]["forceAt"]


def test_an_earlier_termination_timestamp_is_kept():
    """should not update termination grace period if set before the current time"""
    made, claim, node = one_node()
    earlier = timestamp(made.ctx.now - 3 * 60)
    stored = made.store.get("NodeClaim", claim)
    stored["metadata"].setdefault("annotations", {})[TERMINATION_TIMESTAMP] = earlier
    made.store.update(stored)
    sicken(made, node)
    made.advance(10 * 60 + 1)
    gone = made.store.get("NodeClaim", claim) or made.store.removed[("NodeClaim", "", claim)]
    assert gone["metadata"]["annotations"][TERMINATION_TIMESTAMP] == earlier


def test_the_condition_whose_toleration_ends_first_decides():
    """should return the requeue interval for the condition closest to its terminationDuration"""
    policies = (
        RepairPolicy("BadNode", "False", 60 * 60.0),
        # v1.15 allows one default fallback (policy.go:128): the other policy names a reason regex.
        RepairPolicy("ValidUnhealthyCondition", "False", 30 * 60.0, reason_regex=".*"),
    )
    node = {
        "status": {
            "conditions": [
                {"type": "ValidUnhealthyCondition", "status": "False", "lastTransitionTime": timestamp(1000.0)},
                {"type": "BadNode", "status": "False", "lastTransitionTime": timestamp(1000.0)},
            ]
        }
    }
    found = unhealthy(node, policies)
    assert (found.condition, found.due) == ("ValidUnhealthyCondition", 1000.0 + 30 * 60)
    assert unhealthy(node, KWOK_REPAIR_POLICIES) is None


def test_the_queue_wakes_when_the_toleration_ends():
    """should return the requeue interval for the time between now and when the nodeClaim termination time"""
    made, claim, node = one_node()
    sicken(made, node)
    sick_at = made.ctx.now
    made.advance(1)
    assert sick_at + 10 * 60 in commands.next_due(made.ctx)


# Forceful termination ---------------------------------------------------------------------------------------------


def test_do_not_disrupt_does_not_hold_a_repair():
    """should ignore do-not-disrupt on a node"""
    made, claim, node = one_node()
    stored = made.store.get("Node", node)
    stored["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    made.store.update(stored)
    sicken(made, node)
    made.advance(10 * 60 + 1)
    assert deleting(made, claim)


def test_its_pods_leave_at_once_whatever_their_pdb():
    """the termination timestamp the repair sets is the drain's deadline (termination/suite_test.go)"""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "hold", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "inflate"}}},
    }
    made, claim, node = one_node()
    made.store.create(pdb)
    sicken(made, node)
    made.advance(10 * 60 + 30)
    assert made.store.get("NodeClaim", claim) is None and made.store.get("Node", node) is None
    [pod] = made.store.list("Pod")
    assert pod["spec"]["nodeName"] != node and pod["status"]["phase"] == "Running"


def static_nodes(count):
    pool = nodepool_doc("static", replicas=count, template_spec={"requirements": C2X})
    made = lab(pool, options=STATIC_ON)
    made.advance(30)
    claims = sorted(made.store.list("NodeClaim"), key=lambda c: c["metadata"]["name"])
    assert len(claims) == count
    return made, [(c["metadata"]["name"], c["status"]["nodeName"]) for c in claims]


def test_more_than_a_fifth_unhealthy_blocks_every_repair_in_the_nodepool():
    """should ignore unhealthy nodes if more then 20% of the nodes are unhealthy in a nodepool"""
    made, pairs = static_nodes(10)
    for _, node in pairs[:3]:
        sicken(made, node)
    made.advance(10 * 60 + 1)
    assert not any(deleting(made, claim) for claim, _ in pairs)
    commands = repairs(made)
    assert len(commands) == 3
    message = 'more than 20% of nodes in nodepool "static" are unhealthy'  # v1.15, repair.go:148
    assert {c["status"]["message"] for c in commands} == {f"blocked: {message}"}
    assert {c["status"]["retryAt"] for c in commands} == {timestamp(made.ctx.now - 1 + 5 * 60)}
    blocked = [e for e in made.store.list("Event", "default") if e["reason"] == "NodeRepairBlocked"]
    # On the Node, the NodeClaim and the NodePool (once: it dedupes for 15 minutes), events.go:32.
    assert sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in blocked) == sorted(
        [("Node", node) for _, node in pairs[:3]]
        + [("NodeClaim", claim) for claim, _ in pairs[:3]]
        + [("NodePool", "static")]
    )
    assert {(e["type"], e["message"]) for e in blocked} == {("Warning", message)}
    # One node recovers: two of ten is within the 20%, and the two are repaired from the next look, one at a time
    # as the NodePool's default budget (10%) allows (v1.15, repair.go:154).
    sicken(made, pairs[2][1], status="True")
    made.advance(6 * 60)
    assert [deleting(made, claim) for claim, _ in pairs[:3]] == [True, True, False]


def test_a_fifth_is_rounded_up():
    """should consider round up when there is a low number of nodes for a nodepool"""
    assert [allowed_unhealthy(n) for n in (1, 3, 5, 6, 10, 11)] == [1, 1, 1, 2, 2, 3]
    made, pairs = static_nodes(3)
    sicken(made, pairs[0][1])
    made.advance(10 * 60 + 1)
    assert deleting(made, pairs[0][0])


def test_without_the_gate_nothing_is_repaired():
    """NodeRepair is off by default (pkg/operator/options)"""
    made, claim, node = one_node(options=KarpenterOptions())
    sicken(made, node)
    made.advance(60 * 60)
    assert not deleting(made, claim) and repairs(made) == []


# The human gate (karpui) ------------------------------------------------------------------------------------------


def manual_pool():
    pool = nodepool_doc(disruption={"consolidateAfter": "Never"})
    pool["metadata"]["annotations"] = {"karpui.dev/approval-mode": "manual"}
    return pool


def decide(made, command, decision, **extra):
    command["spec"]["approval"] = {"decision": decision, "by": "alice", "at": timestamp(made.ctx.now), **extra}
    made.store.update(command)


def test_an_approved_repair_happens_before_the_toleration_ends():
    made, claim, node = one_node(pool=manual_pool())
    sicken(made, node)
    made.advance(60)
    [command] = repairs(made)
    decide(made, command, "approved")
    made.advance(5)
    assert deleting(made, claim)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] in ("Executing", "Succeeded") and "forced" not in command["status"]


def test_a_denial_cannot_hold_a_repair_past_its_toleration():
    made, claim, node = one_node(pool=manual_pool())
    sicken(made, node)
    made.advance(60)
    [command] = repairs(made)
    decide(made, command, "denied", reason="investigating")
    made.advance(8 * 60)
    assert not deleting(made, claim)
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Denied"
    made.advance(61)
    assert deleting(made, claim)
    forced = [c for c in repairs(made) if c["status"].get("forced")]
    assert len(forced) == 1
    assert forced[0]["status"]["forced"].endswith("; a denial by alice could not hold it")


def test_a_pause_holds_an_early_repair_but_not_the_forced_one():
    made, claim, node = one_node(pool=manual_pool())
    made.ctx.paused_until = made.ctx.now + 3600
    sicken(made, node)
    made.advance(60)
    [command] = repairs(made)
    decide(made, command, "approved")
    made.advance(60)
    assert not deleting(made, claim)
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Approved"
    made.advance(8 * 60 + 1)
    assert deleting(made, claim)


def test_a_node_that_recovers_is_not_repaired():
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(5 * 60)
    sicken(made, node, status="True")
    made.advance(10 * 60)
    assert not deleting(made, claim)
    [command] = repairs(made)
    assert (command["status"]["phase"], command["status"]["message"]) == (
        "Expired",
        f"expired: churn (Node {node} is healthy again: Ready=True)",
    )


def test_dry_run_records_the_repair_and_it_is_forced_all_the_same():
    pool = nodepool_doc(disruption={"consolidateAfter": "Never"})
    pool["metadata"]["annotations"] = {"karpui.dev/approval-mode": "dry-run"}
    made, claim, node = one_node(pool=pool)
    sicken(made, node)
    made.advance(60)
    assert [c["status"]["phase"] for c in repairs(made)] == ["DryRun"]
    made.advance(9 * 60 + 1)
    assert deleting(made, claim)
    assert [c["status"].get("forced", "")[-39:] for c in repairs(made) if c["status"]["phase"] != "DryRun"] == [
        "a pause; dry-run mode could not hold it"
    ]


@pytest.mark.parametrize("grace", [None, "1h"])
def test_an_expiry_is_on_the_queue_saying_why_it_is_forced(grace):
    template = {"expireAfter": "1h", **({"terminationGracePeriod": grace} if grace else {})}
    made, claim, node = one_node(pool=nodepool_doc(disruption={"consolidateAfter": "Never"}, template_spec=template))
    made.advance(3600)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Expired"]
    assert command["spec"]["candidates"][0]["nodeclaim"] == claim
    created = made.store.removed[("NodeClaim", "", claim)]["metadata"]["creationTimestamp"]
    drain = (
        "its pods leave within its terminationGracePeriod of 1h, PDBs and do-not-disrupt notwithstanding"
        if grace
        else "with no terminationGracePeriod, a PDB or a do-not-disrupt pod can still hold its drain"
    )
    assert command["status"]["forced"] == (
        f"forced: NodeClaim {claim} expired (expireAfter 1h since {created}); Karpenter deletes an expired NodeClaim "
        f"whatever the approval mode, budgets or a pause; {drain}"
    )
    assert command["status"]["phase"] == "Succeeded"
