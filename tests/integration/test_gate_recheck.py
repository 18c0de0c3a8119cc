"""Issue 26, cases 2, 3 and 6: a command is planned again on the cluster of the moment before it runs (a limit used
up between its preview and its approval stops it), a command whose plan changed is superseded by one that keeps its
place and its approver's note, and a denial blocks only what it denied."""

import json

from django.contrib.auth.models import Permission, User

from karpui.gate import disruption
from karpui.people.audit import Actor
from provisioner.quantity import parse_quantity
from tests import lab_manifests as manifests
from tests.karp import karp, ok, rows

MANUAL = {"karpui.dev/approval-mode": "manual"}
C_ON_DEMAND = (*manifests.ON_DEMAND_AMD64, ("karpenter.kwok.sh/instance-family", ("c",)))


def approver(name="alice", *codenames):
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in codenames or ("approve_disruption", "request_disruption", "pause_disruption"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def actor(user):
    return Actor.for_user(user, "web")


def command(name):
    return json.loads(ok("get", "dc", name, "-o", "json"))


def hostname(node):
    """A node's kubernetes.io/hostname label, which a pod selects it by: kwok labels it with the NodeClaim's name."""
    return json.loads(ok("get", "node", node, "-o", "json"))["metadata"]["labels"]["kubernetes.io/hostname"]


def commands(phase=None):
    return [c[0] for c in rows("get", "disruptioncommands") if phase is None or c[5] == phase]


def pool_cpu(pool):
    """CPU of a NodePool's NodeClaims (launched or launching), in cores."""
    claims = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    return sum(
        parse_quantity((c.get("status") or {}).get("capacity", {}).get("cpu") or "0") // 1000
        for c in claims
        if c["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
    )


def capped(template_labels=None, cpu="24"):
    text = manifests.nodepool("capped", annotations=MANUAL, requirements=C_ON_DEMAND, limits={"cpu": cpu})
    if template_labels:
        body = json.loads(text.split("---\n")[1])
        body["spec"]["template"]["metadata"] = {"labels": template_labels}
        text = manifests.NODE_CLASS + "---\n" + json.dumps(body)
    return text


def drifted_node_awaiting_approval():
    """NodePool capped (cpu limit 24) with one c-8x holding seven 1-CPU pods, drifted by a template label: its
    drift command (a c-8x replacement: cpu 16 of 24 while both run) awaits approval. Its name."""
    ok("apply", "-f", "-", stdin=manifests.documents(capped(), manifests.deployment("app", 7)))
    ok("advance", "30s")
    assert pool_cpu("capped") == 8
    ok("apply", "-f", "-", stdin=capped({"team": "blue"}))
    for _ in range(20):
        ok("advance", "30s")
        if commands("AwaitingApproval"):
            break
    [name] = commands("AwaitingApproval")
    spec = command(name)["spec"]
    assert (spec["reason"], spec["decision"], [r["instanceTypes"][0] for r in spec["replacements"]]) == (
        "Drifted",
        "replace",
        ["c-8x-amd64-linux"],
    )
    [launch] = spec["assessment"]["launches"]
    assert launch["limits"] == [{"resource": "cpu", "after": "16", "limit": "24", "over": False}]
    return name


def use_up_the_limit():
    """The pool's cpu limit lowered to 4, below the drifted node's 8: a 4-cpu node takes some of its pods, the rest
    fit nowhere. (Other pods taking the pool to its limit would not stop it: as Karpenter's, a replacement reuses the
    share of the node it replaces, the simulation leaving the candidate out, and launches in a pool not over its
    limits.)"""
    ok("apply", "-f", "-", stdin=capped({"team": "blue"}, cpu="4"))


def test_a_limit_used_up_between_preview_and_approval_stops_the_drift_replacement(lab):
    alice = approver()
    name = drifted_node_awaiting_approval()
    use_up_the_limit()
    for _ in range(6):
        ok("advance", "5s")
        assert pool_cpu("capped") == 8
    drift = command(name)
    assert drift["status"]["phase"] == "Expired"
    assert drift["status"]["message"].startswith("expired: scheduling (Not all pods would schedule, default/app-")
    assert "all available instance types exceed limits for nodepool (remaining cpu=0)" in drift["status"]["message"]
    code, _, err = karp("approve", name, "--as", "alice")
    assert code == 1 and "is Expired, not awaiting approval" in err
    # Nor is it proposed again while the pool is full: the node says why it stays.
    ok("advance", "2m")
    assert commands("AwaitingApproval") == [] and pool_cpu("capped") == 8
    assert alice.pk


def test_an_approved_drift_held_by_a_pause_is_rechecked_when_it_may_start(lab):
    alice = approver()
    name = drifted_node_awaiting_approval()
    disruption.command_approve(cluster=lab, name=name, actor=actor(alice), reason="roll the label")
    disruption.disruption_pause(cluster=lab, actor=actor(alice), reason="release", seconds=600)
    ok("advance", "5s")
    assert command(name)["status"]["phase"] == "Approved"
    use_up_the_limit()
    ok("advance", "30s")
    assert command(name)["status"]["phase"] == "Approved"  # paused: nothing starts, nothing is re-checked yet
    disruption.disruption_resume(cluster=lab, actor=actor(alice))
    ok("advance", "5s")
    status = command(name)["status"]
    assert status["phase"] == "Expired"
    assert status["message"].startswith("expired after approval: scheduling (Not all pods would schedule, ")
    assert pool_cpu("capped") == 8
    assert status["checks"][-1]["result"] == "invalid"


# A plan that changed is superseded -------------------------------------------------------------------------------


def empty_and_busy():
    """A manual pool with two nodes: one empty (its Empty command awaits approval) and one busy."""
    pool = manifests.nodepool(annotations=MANUAL, requirements=C_ON_DEMAND)
    ok("apply", "-f", "-", stdin=manifests.documents(pool, manifests.deployment("keep", 1, "1")))
    ok("advance", "20s")
    ok("apply", "-f", "-", stdin=manifests.deployment("gone", 7, "1"))
    ok("advance", "20s")
    ok("scale", "deploy/gone", "--replicas", "0")
    ok("advance", "40s")
    return commands("AwaitingApproval")


def test_a_denial_blocks_only_the_node_it_denied_and_the_next_pass_proposes_the_others(lab):
    """Case 6: two empty nodes under a budget of one node at a time; the first is denied, and the next pass
    proposes the second instead of the denied one again; once the denied node's pods change, it is asked again."""
    alice = approver()
    pool = manifests.nodepool(annotations=MANUAL, requirements=C_ON_DEMAND, budgets=[{"nodes": "1"}])
    ok("apply", "-f", "-", stdin=manifests.documents(pool, manifests.deployment("one", 7, "1")))
    ok("advance", "20s")
    ok("apply", "-f", "-", stdin=manifests.deployment("two", 7, "1"))
    ok("advance", "20s")
    nodes = sorted(n[0] for n in rows("get", "nodes"))
    assert len(nodes) == 2
    ok("scale", "deploy/one", "--replicas", "0")
    ok("scale", "deploy/two", "--replicas", "0")
    ok("advance", "40s")
    [first] = commands("AwaitingApproval")
    denied_node = command(first)["spec"]["candidates"][0]["node"]
    disruption.command_deny(cluster=lab, name=first, actor=actor(alice), reason="keep one warm")
    ok("advance", "30s")
    [second] = commands("AwaitingApproval")
    [other] = [n for n in nodes if n != denied_node]
    assert command(second)["spec"]["candidates"][0]["node"] == other
    disruption.command_approve(cluster=lab, name=second, actor=actor(alice))
    ok("advance", "1m")
    assert [n[0] for n in rows("get", "nodes")] == [denied_node]
    assert commands("AwaitingApproval") == []  # the denied node, in the same state, is not asked about again
    said = {
        e["message"]
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "Unconsolidatable" and e["involvedObject"]["name"] == denied_node
    }
    assert "a person denied disrupting this node for Empty while its pods are the ones it has now" in said
    # A pod arriving changes the node's state: the denial no longer speaks for it.
    ok("scale", "deploy/one", "--replicas", "1")
    ok("advance", "10s")
    ok("scale", "deploy/one", "--replicas", "0")
    ok("advance", "40s")
    [again] = commands("AwaitingApproval")
    assert command(again)["spec"]["candidates"][0]["node"] == denied_node


def small_node_delete():
    """Two nodes of a manual pool: a c-8x with six 1-CPU pods and a small node with two 500m pods that fit in the
    c-8x's room: the small node's delete awaits approval. (name, small node)"""
    pool = manifests.nodepool(annotations=MANUAL, requirements=C_ON_DEMAND)
    ok("apply", "-f", "-", stdin=manifests.documents(pool, manifests.deployment("big", 6, "1")))
    ok("advance", "20s")
    [[big, *_]] = rows("get", "nodes")
    ok("cordon", big)
    ok("apply", "-f", "-", stdin=manifests.deployment("small", 2, "500m"))
    ok("advance", "20s")
    ok("uncordon", big)
    ok("advance", "40s")
    [name] = commands("AwaitingApproval")
    spec = command(name)["spec"]
    [small] = [c["node"] for c in spec["candidates"]]
    assert small != big and (spec["decision"], len(spec["candidates"][0]["pods"])) == ("delete", 2)
    return name, small


def approve_while_paused(lab, user, name, note):
    disruption.command_approve(cluster=lab, name=name, actor=actor(user), reason=note)
    disruption.disruption_pause(cluster=lab, actor=actor(user), reason="hold", seconds=600)
    ok("advance", "2s")
    assert command(name)["status"]["phase"] == "Approved"


def test_fewer_evictions_is_not_material_the_successor_carries_the_approval_and_runs(lab):
    alice = approver()
    name, small = small_node_delete()
    queued = command(name)["status"]["proposedAt"]
    approve_while_paused(lab, alice, name, "small node, fine")
    ok("scale", "deploy/small", "--replicas", "1")
    ok("advance", "5s")
    disruption.disruption_resume(cluster=lab, actor=actor(alice))
    ok("advance", "2s")
    old = command(name)
    assert old["status"]["phase"] == "Superseded"
    successor = command(old["status"]["supersededBy"])
    assert old["status"]["message"] == (
        f"superseded by {successor['metadata']['name']} (carries its approval): evicts 1 pods, 1 fewer"
    )
    assert successor["spec"]["supersedes"] == name and successor["spec"]["queuedAt"] == queued
    assert successor["spec"]["changes"] == ["evicts 1 pods, 1 fewer"]
    assert (successor["spec"]["approval"]["by"], successor["spec"]["approval"]["reason"]) == (
        "alice",
        "small node, fine",
    )
    assert successor["spec"]["approval"]["carriedFrom"] == name
    ok("advance", "30s")
    assert command(successor["metadata"]["name"])["status"]["phase"] == "Succeeded"
    assert small not in [n[0] for n in rows("get", "nodes")]


def test_more_evictions_is_material_the_successor_keeps_the_note_place_and_deadline_and_asks_again(lab, client):
    alice = approver()
    name, small = small_node_delete()
    deadline = command(name)["status"]["expiresAt"]
    approve_while_paused(lab, alice, name, "small node, fine")
    # A pod that prefers the small node lands there: one more pod to evict than was approved.
    extra = json.loads(manifests.deployment("extra", 1, "100m"))
    extra["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname(small)]}
                        ]
                    },
                }
            ]
        }
    }
    ok("apply", "-f", "-", stdin=json.dumps(extra))
    ok("advance", "5s")
    assert {p[0].split("-")[0]: p[5] for p in rows("get", "pods", "-o", "wide")}["extra"] == small
    disruption.disruption_resume(cluster=lab, actor=actor(alice))
    ok("advance", "2s")
    old = command(name)
    assert old["status"]["phase"] == "Superseded"
    successor = command(old["status"]["supersededBy"])
    assert old["status"]["message"].endswith("(needs approving again): evicts 3 pods, 1 more than approved")
    assert successor["status"]["phase"] == "AwaitingApproval"
    assert successor["status"]["expiresAt"] == deadline
    assert successor["spec"]["previousApproval"]["reason"] == "small node, fine"
    assert "approval" not in successor["spec"]
    assert small in [n[0] for n in rows("get", "nodes")]
    client.force_login(alice)
    page = client.get(f"/disruption/{successor['metadata']['name']}/").content.decode()
    assert "Approved before by alice" in page and "small node, fine" in page
    assert f'href="/disruption/{name}/"' in page
    queue = client.get("/disruption/").content.decode()
    assert f"replaces {name}: evicts 3 pods, 1 more than approved" in queue


def test_a_command_that_expired_and_comes_back_keeps_its_place_its_deadline_and_stays_out_of_the_ledger(lab):
    """Case 3: a command waiting for approval that its re-check finds no longer possible expires (saying why); when
    its node is a candidate again the same question comes back in its place (queued since the first proposal, with
    the first one's deadline), and the expired one is no line of the savings ledger."""
    pool = manifests.nodepool(annotations=MANUAL, requirements=C_ON_DEMAND)
    ok("apply", "-f", "-", stdin=manifests.documents(pool, manifests.deployment("app", 1, "1")))
    ok("advance", "30s")
    [[node, *_]] = rows("get", "nodes")
    ok("scale", "deploy/app", "--replicas", "0")
    ok("advance", "40s")
    [first] = commands("AwaitingApproval")
    queued, deadline = command(first)["status"]["proposedAt"], command(first)["status"]["expiresAt"]
    pinned = json.loads(manifests.deployment("pinned", 1, "100m"))
    pinned["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": hostname(node)}
    ok("apply", "-f", "-", stdin=json.dumps(pinned))
    ok("advance", "5s")
    status = command(first)["status"]
    assert status["phase"] == "Expired"
    assert status["message"] == f"expired: churn ({node}: {node} is no longer empty)"
    ok("delete", "deployment", "pinned")
    ok("advance", "60s")
    [again] = commands("AwaitingApproval")
    spec, status = command(again)["spec"], command(again)["status"]
    assert (spec["follows"], spec["lineage"], spec["queuedAt"]) == (first, first, queued)
    assert status["expiresAt"] == deadline
    assert spec["candidates"][0]["node"] == node
    assert rows("savings") == []  # neither the expired command nor the waiting one is a line of the ledger
