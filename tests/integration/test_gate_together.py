"""Issue 26, case 1: commands approved together are simulated as one plan; a set that would strand pods or launch
nodes is refused unless the approver confirms that plan; approved one by one, each is re-checked with the ones
before it gone, so none strands pods or buys a node."""

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests import lab_manifests as manifests
from tests.karp import ok, rows

SPOT = manifests.nodepool(
    "batch-spot",
    annotations={"karpui.dev/approval-mode": "manual"},
    requirements=(
        ("kubernetes.io/arch", ("amd64",)),
        ("karpenter.sh/capacity-type", ("spot",)),
        ("karpenter.kwok.sh/instance-family", ("c",)),
    ),
    budgets=[{"nodes": "100%"}],
)


def approver(name="alice"):
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in ("approve_disruption", "request_disruption"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def three_half_full_nodes():
    """Three spot c-8x nodes with ten 500m pods each (2.9 CPU free on each): any one node's pods fit on the other
    two, no two nodes' pods fit on the third. Built by cordoning each node before the next workload arrives."""
    ok("apply", "-f", "-", stdin=SPOT)
    for app in ("a", "b", "c"):
        ok("apply", "-f", "-", stdin=manifests.deployment(app, 10, "500m"))
        ok("advance", "15s")
        for node in rows("get", "nodes"):
            ok("cordon", node[0])
    for node in rows("get", "nodes"):
        ok("uncordon", node[0])
    nodes = rows("get", "nodeclaims")
    assert sorted(n[1] for n in nodes) == ["c-8x-amd64-linux"] * 3
    ok("advance", "2m")  # consolidateAfter, then one delete command per pass for each node in turn
    commands = [c for c in rows("get", "disruptioncommands") if c[5] == "AwaitingApproval"]
    assert [(c[1], c[2]) for c in commands] == [("Underutilized", "delete")] * 3
    # In the queue's order: first proposed first.
    return sorted(
        (c[0] for c in commands), key=lambda n: json.loads(ok("get", "dc", n, "-o", "json"))["status"]["proposedAt"]
    )


def spec(name):
    return json.loads(ok("get", "dc", name, "-o", "json"))["spec"]


def pending_pods():
    return [p for p in rows("get", "pods") if p[2] == "Pending"]


def actor(user):
    return Actor.for_user(user, "web")


def test_three_deletes_each_fine_alone_show_what_ties_them(lab, client):
    """Alone, each command's only risk is that it takes a whole workload at once (each node holds one app's ten
    pods); what makes two of them together strand pods is the tie the queue shows."""
    alice = approver()
    names = three_half_full_nodes()
    for name in names:
        [risk] = spec(name)["risks"]
        assert risk.endswith(": all 10 running replicas are evicted")
    client.force_login(alice)
    page = client.get("/disruption/").content.decode()
    for name in names:
        others = [n for n in names if n != name]
        assert any(f"which {other} removes" in page for other in others)


def test_approving_two_together_that_would_strand_pods_is_refused_and_approves_nothing(lab, client):
    alice = approver()
    first, second, _ = three_half_full_nodes()
    with pytest.raises(disruption.PlanNeedsConfirmation) as refusal:
        disruption.commands_approve(cluster=lab, names=[first, second], actor=actor(alice))
    plan = refusal.value.plan
    assert plan.evicted == 20 and plan.planned_launches == 0 and plan.extra_launches >= 1
    assert "approval" not in spec(first) and "approval" not in spec(second)
    assert not models.AuditEvent.objects.filter(action="approve").exists()
    # The web page says the same before and at the approval, and offers to confirm exactly this plan.
    client.force_login(alice)
    preview = client.get("/disruption/plan", {"commands": [first, second]})
    assert preview.status_code == 200
    assert b"more than the commands launch on their own" in preview.content
    refused = client.post("/disruption/approve", {"commands": [first, second]})
    assert refused.status_code == 409
    assert f'name="plan" value="{plan.digest}"'.encode() in refused.content
    ok("advance", "1m")
    assert pending_pods() == [] and len(rows("get", "nodeclaims")) == 3


def test_approved_one_by_one_the_others_are_rechecked_with_the_first_gone_and_nothing_is_stranded(lab):
    """Approving the first takes the room the other two counted on: re-checked with its node on the way out, they
    expire at once (saying why), so the approver cannot approve the second; the first runs, its pods land on the
    other two nodes, and no pod waits and no node is bought."""
    alice = approver()
    first, second, third = three_half_full_nodes()
    disruption.command_approve(cluster=lab, name=first, actor=actor(alice))
    ok("advance", "2s")
    phases = {c[0]: c[5] for c in rows("get", "disruptioncommands")}
    assert (phases[second], phases[third]) == ("Expired", "Expired")
    message = json.loads(ok("get", "dc", second, "-o", "json"))["status"]["message"]
    # Its pods (and the first's) now need a new node, and a spot node is not replaced by a spot node.
    assert message == (
        "expired: scheduling (SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node)"
    )
    with pytest.raises(ValidationError, match=f'"{second}" is Expired, not awaiting approval'):
        disruption.command_approve(cluster=lab, name=second, actor=actor(alice))
    for _ in range(12):
        ok("advance", "5s")
        assert not [p for p in pending_pods() if "Unschedulable" in p]
    assert {c[0]: c[5] for c in rows("get", "disruptioncommands")}[first] == "Succeeded"
    assert len(rows("get", "nodeclaims")) == 2 and pending_pods() == []


def test_a_confirmed_plan_runs_step_by_step_holding_the_later_steps_nodes(lab):
    alice = approver()
    first, second, _ = three_half_full_nodes()
    with pytest.raises(disruption.PlanNeedsConfirmation) as refusal:
        disruption.commands_approve(cluster=lab, names=[second, first], actor=actor(alice))
    digest = refusal.value.plan.digest
    approved, refused = disruption.commands_approve(
        cluster=lab, names=[second, first], actor=actor(alice), reason="batch window", plan=digest
    )
    assert approved == [first, second] and refused == {}
    batch = spec(second)["approval"]["batch"]
    assert (batch["step"], batch["of"], batch["steps"], batch["confirmed"]) == (2, 2, [first, second], True)
    ok("advance", "3s")
    waiting = json.loads(ok("get", "dc", second, "-o", "json"))["status"]
    assert waiting["held"] is True
    assert waiting["message"] == f"waiting: step 1 of its batch ({first}) has not finished"
    for _ in range(24):
        ok("advance", "5s")
    phases = {c[0]: c[5] for c in rows("get", "disruptioncommands")}
    assert phases[first] == "Succeeded"
    # The first step's pods filled the third node and the rest waited for the node the plan said it would need (the
    # launch the approver confirmed). On that cluster the second step's pods fit nowhere without another spot node,
    # which consolidation does not launch: it does not run, and its node is let go.
    assert phases[second] == "Expired"
    status = json.loads(ok("get", "dc", second, "-o", "json"))["status"]
    assert status["message"] == (
        "expired after approval: scheduling (SpotToSpotConsolidation is disabled, can't replace a spot node with a "
        "spot node)"
    )
    assert "held" not in status
    assert [c[1] for c in sorted(rows("get", "nodeclaims"), key=lambda c: c[1])] == [
        "c-4x-amd64-linux",
        "c-8x-amd64-linux",
        "c-8x-amd64-linux",
    ]
    assert pending_pods() == []
    taints = [
        t["key"] for n in json.loads(ok("get", "nodes", "-o", "json"))["items"] for t in n["spec"].get("taints") or []
    ]
    assert "karpenter.sh/disrupted" not in taints
