"""Drill-down: a node's facts and pods with their requests, any object's YAML and events, and the node page's
actions (cordon, uncordon, ask for it to go) as audited, permission-checked POSTs."""

from __future__ import annotations

from django.contrib.auth.models import Permission, User

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, rows, table


def test_a_node_page_shows_what_and_where_the_node_is_and_its_pods_requests(node, nodeclaim):
    response = logged_in(user()).get(f"/nodes/{node}/")
    facts = response.context["facts"]
    assert (facts["instance_type"], facts["capacity_type"], facts["nodepool"], facts["nodeclaim"]) == (
        "c-4x-amd64-linux",
        "on-demand",
        "default",
        nodeclaim,
    )
    assert facts["zone"].startswith("test-zone-") and round(facts["price"], 6) == 0.10859
    assert (facts["state"], facts["cordoned"], facts["taints"]) == ("initialized", False, [])
    assert facts["resources"] == [
        {"resource": "cpu", "allocatable": "3.90 cores", "capacity": "4.00 cores"},
        {"resource": "memory", "allocatable": "8.0 GiB", "capacity": "8.0 GiB"},
        {"resource": "pods", "allocatable": "64", "capacity": "64"},
        {"resource": "ephemeral-storage", "allocatable": "20.0 GiB", "capacity": "20.0 GiB"},
    ]
    assert ("node.kubernetes.io/instance-type", "c-4x-amd64-linux") in facts["labels"]
    assert [(c["of"], c["type"], c["status"]) for c in facts["conditions"]][:6] == [
        ("Node", "MemoryPressure", "False"),  # in the kubelet's order, as kubectl describe node lists them
        ("Node", "DiskPressure", "False"),
        ("Node", "PIDPressure", "False"),
        ("Node", "Ready", "True"),
        ("NodeClaim", "Launched", "True"),
        ("NodeClaim", "Registered", "True"),
    ]
    pods = response.context["pods"]
    assert [(p["owner"].kind, p["owner"].name, p["cpu"], p["memory"], p["phase"]) for p in pods] == [
        ("Deployment", "inflate", 1000, 0, "Running")
    ] * 3
    body = response.content.decode()
    assert "<td>$0.1086</td>" not in body and '<span class="figure">$0.1086</span>' in body
    assert "3.00 / 3.90 (77%)" in body
    assert f'<a href="/objects/Pod/default/{pods[0]["name"]}/">default/{pods[0]["name"]}</a>' in body
    assert '<a href="/objects/Deployment/default/inflate/">Deployment/inflate</a>' in body
    assert "<th>3 pods</th><th></th><th></th><th>3.00</th><th>0</th>" in body


def test_any_object_has_a_page_with_its_yaml_and_events(node, nodeclaim):
    client = logged_in(user())
    [pod, *_] = [p["name"] for p in client.get(f"/nodes/{node}/").context["pods"]]
    page = client.get(f"/objects/Pod/default/{pod}/")
    assert page.status_code == 200
    assert page.context["manifest"]["metadata"]["name"] == pod
    # Keys sorted as kubectl prints them, whatever order the database kept (PostgreSQL's jsonb reorders them).
    assert page.context["yaml"].startswith("apiVersion: v1\nkind: Pod\nmetadata:\n")
    assert f"\n  name: {pod}\n  namespace: default\n" in page.context["yaml"]
    assert [(e["reason"], e["message"]) for e in page.context["events"]] == [
        ("Nominated", f"Pod should schedule on: nodeclaim/{nodeclaim}")
    ]
    assert page.context["node_url"] == f"/nodes/{node}/"
    replicaset = page.context["owners"][0]
    assert (replicaset["kind"], replicaset["url"]) == (
        "ReplicaSet",
        f"/objects/ReplicaSet/default/{replicaset['name']}/",
    )
    deployment = client.get("/objects/deploy/default/inflate/")  # kubectl's short names work too
    assert deployment.context["kind"] == "Deployment" and "replicas: 3" in deployment.context["yaml"]
    nodepool = client.get("/objects/NodePool/default/")
    assert nodepool.context["manifest"]["spec"]["disruption"]["consolidateAfter"] == "10s"
    claim = client.get(f"/objects/NodeClaim/{nodeclaim}/")
    assert [e["reason"] for e in claim.context["events"]][-1] == "Launched"
    assert client.get("/objects/NoSuchKind/x/").status_code == 404
    assert client.get("/objects/Pod/default/no-such-pod/").status_code == 404
    assert client.post(f"/objects/Pod/default/{pod}/").status_code == 405


def test_an_object_page_needs_a_login(client, node):
    response = client.get("/objects/NodePool/default/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_cordon_and_uncordon_need_the_permission_and_are_audited(node):
    viewer = logged_in(user())
    assert viewer.post(f"/nodes/{node}/cordon").status_code == 403
    assert "Cordon</button>" not in viewer.get(f"/nodes/{node}/").content.decode()
    assert table("get", "nodes")[0]["STATUS"] == "Ready"

    operator = logged_in(user("olga", "request_disruption"))
    assert operator.get(f"/nodes/{node}/cordon").status_code == 405  # a GET never writes
    response = operator.post(f"/nodes/{node}/cordon", follow=True)
    assert f"node {node} cordoned" in response.content.decode()
    assert response.context["facts"]["cordoned"] is True and response.context["facts"]["state"] == "cordoned"
    assert table("get", "nodes")[0]["STATUS"] == "Ready,SchedulingDisabled"
    audit = models.AuditEvent.objects.get(action="cordon")
    assert (audit.actor_name, audit.via, audit.target_kind, audit.target_name, audit.after) == (
        "olga",
        "web",
        "Node",
        node,
        {"unschedulable": True},
    )
    # A cordoned node takes no new pods: the fourth one gets a node of its own.
    ok("scale", "deploy/inflate", "--replicas", "4")
    ok("advance", "30s")
    assert len(rows("get", "nodes")) == 2

    again = operator.post(f"/nodes/{node}/cordon", follow=True)
    assert f"node {node} was already cordoned" in again.content.decode()
    assert models.AuditEvent.objects.filter(action="cordon").count() == 1
    operator.post(f"/nodes/{node}/uncordon")
    assert [r["STATUS"] for r in table("get", "nodes") if r["NAME"] == node] == ["Ready"]
    assert models.AuditEvent.objects.get(action="uncordon").after == {"unschedulable": False}
    assert operator.post("/nodes/no-such-node/cordon").status_code == 404


def test_node_actions_need_a_csrf_token(node):
    strict = logged_in(user("olga", "request_disruption"), enforce_csrf_checks=True)
    assert strict.post(f"/nodes/{node}/cordon").status_code == 403
    assert strict.post(f"/nodes/{node}/disrupt", {"reason": "x"}).status_code == 403
    assert models.AuditEvent.objects.filter(via="web").count() == 0


def test_disrupting_a_node_from_its_page_needs_another_persons_approval(node):
    requester = user("olga", "request_disruption", "approve_disruption")
    asking = logged_in(requester)
    refused = asking.post(f"/nodes/{node}/disrupt", {"reason": "  "}, follow=True)
    assert "reason: say why this node should go" in refused.content.decode()
    assert rows("get", "disruptioncommands") == []

    done = asking.post(f"/nodes/{node}/disrupt", {"reason": "noisy neighbour"}, follow=True)
    [command] = [r["NAME"] for r in table("get", "disruptioncommands")]
    assert f"disruption command {command} created" in done.content.decode()
    assert command in done.content.decode()  # the node page lists it
    request = models.AuditEvent.objects.get(action="request")
    assert (request.actor_name, request.via, request.target_name, request.reason) == (
        "olga",
        "web",
        command,
        "noisy neighbour",
    )
    ok("advance", "15s")  # validated, then waiting for a person
    own = asking.post(f"/disruption/{command}/approve", follow=True)
    assert "olga asked for this disruption and may not approve it alone (four eyes)" in own.content.decode()
    logged_in(user("alice", "approve_disruption")).post(f"/disruption/{command}/approve")
    assert models.AuditEvent.objects.get(action="approve").actor_name == "alice"

    assert logged_in(user()).post(f"/nodes/{node}/disrupt", {"reason": "x"}).status_code == 403


def test_a_node_of_no_nodeclaim_cannot_be_disrupted_from_its_page(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    client = logged_in(user("olga", "request_disruption"))
    page = client.get("/nodes/kind-worker/").content.decode()
    assert "Disrupt this node" not in page and "Cordon</button>" in page
    response = client.post("/nodes/kind-worker/disrupt", {"reason": "x"}, follow=True)
    assert "karpui only disrupts the nodes it manages" in response.content.decode()


C4X, C2X = 0.108590, 0.054295  # c-4x- and c-2x-amd64-linux on demand


def manual_request(node_name):
    [command] = [c for c in models.KubeObject.objects.filter(kind="DisruptionCommand") if c.name.startswith("manual-")]
    assert command.body["spec"]["candidates"][0]["node"] == node_name
    return command.body["spec"]


def test_asking_for_a_node_with_pods_to_go_prices_the_replacement_its_pods_need(node):
    logged_in(user("olga", "request_disruption")).post(f"/nodes/{node}/disrupt", {"reason": "noisy neighbour"})
    spec = manual_request(node)

    assert (spec["decision"], round(spec["savings"], 6)) == ("replace", 0.0)  # three 1-CPU pods need a c-4x again
    assert len(spec["candidates"][0]["pods"]) == 3 and all(
        p.startswith("default/inflate-") for p in spec["candidates"][0]["pods"]
    )
    [replacement] = spec["replacements"]
    assert replacement["instanceTypes"][0] == "c-4x-amd64-linux" and replacement["prices"][0] == C4X
    assert spec["text"].endswith(f"[{node}] -> [1 replacement] (savings: $0.00)")
    ok("advance", "15s")
    logged_in(user("alice", "approve_disruption")).post(f"/disruption/{spec['fingerprint']}/approve")
    ok("advance", "60s")  # the replacement launches first, then the node is drained
    [instance_type] = [r["TYPE"] for r in table("get", "nodeclaims")]
    assert instance_type == "c-4x-amd64-linux" and [n["NAME"] for n in table("get", "nodes")] != [node]
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 3


def test_asking_for_a_node_to_go_saves_its_price_less_a_smaller_replacement_and_the_cli_agrees(node):
    User.objects.create_user("olga").user_permissions.add(Permission.objects.get(codename="request_disruption"))
    lab = models.Cluster.objects.get(name="lab")
    disruption.nodepool_approval_mode_set(  # so consolidation itself only proposes
        cluster=lab,
        nodepool="default",
        mode="manual",
        actor=Actor.for_user(user("ed", "change_nodepool"), "web"),
    )
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    ok("disrupt", "node", node, "--as", "olga", "--reason", "too big now")
    spec = manual_request(node)

    assert spec["decision"] == "replace" and len(spec["candidates"][0]["pods"]) == 1
    assert spec["replacements"][0]["instanceTypes"][0] == "c-2x-amd64-linux"
    assert round(spec["savings"], 6) == round(C4X - C2X, 6)  # not the node's whole price


def test_asking_for_an_empty_node_to_go_saves_its_whole_price(node):
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "2s")
    logged_in(user("olga", "request_disruption")).post(f"/nodes/{node}/disrupt", {"reason": "empty"})
    spec = manual_request(node)
    assert (spec["decision"], spec["replacements"], spec["candidates"][0]["pods"]) == ("delete", [], [])
    assert round(spec["savings"], 6) == C4X
