"""Issue 26, case 4: a command's risks are true (PDB headroom and eviction rounds, single replicas, local storage,
do-not-disrupt, the replacement's launch), and a command past the eviction or savings threshold asks for a
confirmation with a note before it is approved."""

import json

from django.contrib.auth.models import Permission, User

from karpui import models
from karpui.gate import disruption
from tests import lab_manifests as manifests
from tests.karp import karp, ok, table

POOL = manifests.nodepool(
    annotations={"karpui.dev/approval-mode": "manual"},
    requirements=(*manifests.ON_DEMAND_AMD64, ("karpenter.kwok.sh/instance-family", ("c",))),
)


def web(replicas, cpu="100m", pdb_max_unavailable=2, volumes=()):
    return manifests.documents(
        manifests.deployment("web", replicas, cpu, volumes=volumes),
        manifests.pdb("web", max_unavailable=pdb_max_unavailable),
    )


def person(name, *codenames):
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in codenames or ("approve_disruption", "request_disruption"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def command_json(name):
    return json.loads(ok("get", "dc", name, "-o", "json"))


def test_a_drain_of_149_pods_under_a_pdb_of_2_says_75_rounds_and_asks_for_a_confirmation_with_a_note(lab):
    person("bob"), person("alice")
    ok("apply", "-f", "-", stdin=manifests.documents(POOL, web(149)))
    ok("advance", "40s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    ok("disrupt", "node", node, "--as", "bob", "--reason", "kernel update")
    ok("advance", "20s")
    [(name, phase)] = [(r["NAME"], r["PHASE"]) for r in table("get", "disruptioncommands")]
    assert phase == "AwaitingApproval"
    spec = command_json(name)["spec"]
    assert "PDB default/web allows 2 of its 149 evicted pods at a time: 75 eviction rounds" in spec["risks"]
    assessment = spec["assessment"]
    assert (assessment["evicted"], assessment["evictionRounds"]) == (149, 75)
    assert assessment["evictions"] == [
        {
            "namespace": "default",
            "kind": "ReplicaSet",
            "name": assessment["evictions"][0]["name"],
            "count": 149,
            "running": 149,
        }
    ]
    assert "default/ReplicaSet/" in spec["risks"][1] and spec["risks"][1].endswith(
        "all 149 running replicas are evicted"
    )
    # One click is refused: 149 evictions are past KARPUI_CONFIRM_EVICTIONS (50).
    code, _, err = karp("approve", name, "--as", "alice")
    assert code == 1
    assert err == (
        f'error: disruption command "{name}" evicts 149 pods (more than 50): confirm it and say why in a note '
        "(nothing was approved)\n"
    )
    code, _, err = karp("approve", name, "--as", "alice", "--confirm")
    assert code == 1 and "confirm it and say why in a note" in err
    assert "approval" not in command_json(name)["spec"]
    assert not models.AuditEvent.objects.filter(action="approve").exists()
    ok("approve", name, "--as", "alice", "--confirm", "--reason", "maintenance window, web team told")
    approval = command_json(name)["spec"]["approval"]
    assert approval["confirmed"] == "evicts 149 pods (more than 50)"
    assert approval["reason"] == "maintenance window, web team told"


def test_the_queue_page_shows_rounds_score_and_a_confirmation_box(lab, client):
    person("bob")
    alice = person("alice")
    ok("apply", "-f", "-", stdin=manifests.documents(POOL, web(149)))
    ok("advance", "40s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    ok("disrupt", "node", node, "--as", "bob", "--reason", "kernel update")
    ok("advance", "20s")
    [name] = [r["NAME"] for r in table("get", "disruptioncommands")]
    client.force_login(alice)
    page = client.get("/disruption/").content.decode()
    assert "75 eviction rounds" in page
    assert "149 evictions in 75 round(s) · disruption cost 150.00" in page
    assert "This command evicts 149 pods (more than 50)." in page
    assert f'id="confirm-{name}"' in page
    response = client.post(f"/disruption/{name}/approve", {"reason": ""})
    assert response.status_code == 302
    assert "approval" not in command_json(name)["spec"]
    client.post(f"/disruption/{name}/approve", {"reason": "window", "confirm": "yes"})
    assert command_json(name)["spec"]["approval"]["by"] == "alice"


def test_local_storage_and_a_single_replica_are_risks_and_a_small_command_needs_one_click(lab):
    person("bob"), person("alice")
    ok("apply", "-f", "-", stdin=manifests.documents(POOL, web(1, cpu="1", pdb_max_unavailable=1, volumes=["scratch"])))
    ok("advance", "40s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    ok("disrupt", "node", node, "--as", "bob", "--reason", "kernel update")
    ok("advance", "20s")
    [name] = [r["NAME"] for r in table("get", "disruptioncommands")]
    spec = command_json(name)["spec"]
    [pod] = [p["NAME"] for p in table("get", "pods")]
    assert spec["risks"] == [
        f"default/ReplicaSet/{spec['assessment']['evictions'][0]['name']} has a single running replica, evicted",
        f"default/{pod} loses local storage (scratch)",
    ]
    assert spec["assessment"]["evictionRounds"] == 1
    assert disruption.confirmation_needed(command_json(name)) is None
    ok("approve", name, "--as", "alice")
