"""Issue 26, case 7: savings are net of the launches a command causes, realised from when it completed, never
counted for drift or expiry; the ledger, the chart and the per-command table agree, checked against each other."""

import json

import pytest

from karpui.gate import disruption
from karpui.insight import selectors
from tests import lab_manifests as manifests
from tests.integration.test_gate_together import actor, approver, three_half_full_nodes
from tests.karp import ok, rows


def agree(cluster):
    """The three accounts of one cluster, checked against each other: the ledger's $/h and $ totals, the chart's
    distance between the cost without consolidation and the cost now, and the per-command table's sums."""
    cluster.refresh_from_db()
    overview = selectors.savings_overview(cluster)
    table = [c for c in overview["commands"] if c["phase"] == "Succeeded" and c["counted"]]
    per_hour = sum(c["savings"] for c in table)
    assert overview["saving_per_hour"] == pytest.approx(per_hour, abs=1e-6)
    assert overview["baseline_now"] - overview["cost_now"] == pytest.approx(per_hour, abs=1e-6)
    assert overview["realised"] == pytest.approx(sum(c["realised"] for c in table), abs=1e-6)
    queue = selectors.disruption_queue(cluster)
    assert sum(e["saving_per_hour"] for _, e in queue["ledger"]) == pytest.approx(per_hour, abs=1e-6)
    return overview


def test_a_command_whose_evictions_made_the_provisioner_launch_a_node_saves_net_of_it(lab):
    """The confirmed two-step plan of test_gate_together: the first step's pods overflow and the provisioner
    launches a c-4x for them. That launch is the first command's: its saving is the c-8x less the c-4x, in every
    account."""
    alice = approver()
    first, second, _ = three_half_full_nodes()
    with pytest.raises(disruption.PlanNeedsConfirmation) as refusal:
        disruption.commands_approve(cluster=lab, names=[first, second], actor=actor(alice))
    disruption.commands_approve(
        cluster=lab, names=[first, second], actor=actor(alice), reason="window", plan=refusal.value.plan.digest
    )
    for _ in range(24):
        ok("advance", "5s")
    command = json.loads(ok("get", "dc", first, "-o", "json"))
    assert command["status"]["phase"] == "Succeeded"
    [(claim, price)] = command["status"]["causedLaunches"].items()
    launched = {c[0]: c[1] for c in rows("get", "nodeclaims")}
    assert launched[claim] == "c-4x-amd64-linux"
    annotations = json.loads(ok("get", "nodeclaim", claim, "-o", "json"))["metadata"]["annotations"]
    assert annotations["karpui.dev/caused-by"] == first
    net = disruption.net_savings(command)
    assert net["caused"] == price and net["net"] == pytest.approx(net["candidates"] - price)
    assert net["estimated"] == pytest.approx(net["candidates"])  # what it said when it was planned: a plain delete
    overview = agree(lab)
    [row] = [c for c in overview["commands"] if c["name"] == first]
    assert row["savings"] == pytest.approx(net["net"])
    ok("advance", "1h")
    overview = agree(lab)
    [row] = [c for c in overview["commands"] if c["name"] == first]
    assert row["realised"] == pytest.approx(net["net"] * 1.0, rel=0.05)


def test_a_drift_replacement_is_never_a_saving_anywhere(lab, client):
    ok("apply", "-f", "-", stdin=manifests.documents(manifests.nodepool(), manifests.deployment("app", 3)))
    ok("advance", "30s")
    body = json.loads(manifests.nodepool().split("---\n")[1])
    body["spec"]["template"]["metadata"] = {"labels": {"team": "blue"}}
    ok("apply", "-f", "-", stdin=json.dumps(body))
    for _ in range(20):
        ok("advance", "30s")
        done = [c for c in rows("get", "disruptioncommands") if c[1] == "Drifted" and c[5] == "Succeeded"]
        if done:
            break
    [[name, *_]] = done
    ok("advance", "1h")
    overview = agree(lab)
    [row] = [c for c in overview["commands"] if c["name"] == name]
    assert (row["counted"], row["realised"]) == (False, 0.0)
    assert overview["saving_per_hour"] == 0.0 and overview["realised"] == 0.0
    assert overview["baseline_now"] == pytest.approx(overview["cost_now"])
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("viewer", password="pw-only-for-tests"))
    page = client.get("/savings/").content.decode()
    assert "Drifted: not a saving" in page
    assert "not counted as savings" in client.get(f"/disruption/{name}/").content.decode()
