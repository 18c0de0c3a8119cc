"""Issue 26: a person's request for a node to go can be withdrawn by them and denied as soon as it exists; a Decide
cell that offers nothing says why; every command has a page, linked from the queue, History and the node page."""

import json
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests.karp import karp, ok, rows


def person(name, *codenames):
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def approver(name):
    return person(name, "approve_disruption", "request_disruption")


def requested(node, by="bob"):
    ok("disrupt", "node", node, "--as", by, "--reason", "noisy neighbour")
    [[name, *_]] = rows("get", "disruptioncommands")
    return name


def phase(name):
    return json.loads(ok("get", "dc", name, "-o", "json"))["status"]["phase"]


def decide_cell(page, name):
    match = re.search(rf'<td id="decide-{name}">(.*?)</td>', page, re.S)
    assert match, f"no Decide cell for {name}"
    return match.group(1)


def test_the_requester_withdraws_their_request_and_no_one_else_can(lab, node):
    bob, alice = approver("bob"), approver("alice")
    name = requested(node)
    ok("advance", "20s")
    assert phase(name) == "AwaitingApproval"
    refused = karp("approve", name, "--as", "bob")[2]
    assert refused == "error: bob asked for this disruption and may not approve it alone (four eyes)\n"
    with pytest.raises(PermissionDenied, match=f"^only bob may withdraw {name}$"):
        disruption.command_withdraw(cluster=lab, name=name, actor=Actor.for_user(alice, "web"))
    disruption.command_withdraw(cluster=lab, name=name, actor=Actor.for_user(bob, "web"), reason="fixed it myself")
    ok("advance", "2s")
    status = json.loads(ok("get", "dc", name, "-o", "json"))["status"]
    assert (status["phase"], status["message"]) == ("Withdrawn", "withdrawn by bob: fixed it myself")
    assert node in [n[0] for n in rows("get", "nodes")]
    event = models.AuditEvent.objects.get(action="withdraw")
    assert (event.actor_name, event.target_name, event.reason, event.cluster_name) == (
        "bob",
        name,
        "fixed it myself",
        "lab",
    )


def test_a_request_can_be_denied_while_it_is_still_being_validated(lab, node):
    approver("bob"), approver("alice")
    name = requested(node)
    assert phase(name) == "Proposed"
    ok("deny", name, "--as", "alice", "--reason", "not during the release")
    ok("advance", "2s")
    status = json.loads(ok("get", "dc", name, "-o", "json"))["status"]
    assert (status["phase"], status["message"]) == ("Denied", "denied by alice: not during the release")


def test_an_empty_decide_cell_says_why(lab, node, client):
    bob, alice = approver("bob"), approver("alice")
    viewer = person("victor")
    name = requested(node)
    client.force_login(alice)
    cell = decide_cell(client.get("/disruption/").content.decode(), name)
    assert "/deny" in cell and "/approve" not in cell
    assert "being validated (Karpenter&#x27;s 15 s): it can be denied now, approved once it awaits approval" in cell
    ok("advance", "20s")
    cell = decide_cell(client.get("/disruption/").content.decode(), name)
    assert "/approve" in cell and "/deny" in cell
    client.force_login(bob)
    cell = decide_cell(client.get("/disruption/").content.decode(), name)
    assert "/approve" not in cell and "/withdraw" in cell
    assert "awaiting another approver: you asked for it (four eyes)" in cell
    client.force_login(viewer)
    cell = decide_cell(client.get("/disruption/").content.decode(), name)
    assert "/approve" not in cell and "/deny" not in cell
    assert "approvers only (the approve_disruption permission)" in cell


def test_a_command_has_a_page_linked_from_the_queue_history_and_node(lab, node, client):
    approver("bob")
    alice = approver("alice")
    name = requested(node)
    ok("advance", "20s")
    ok("approve", name, "--as", "alice", "--reason", "go ahead")
    client.force_login(alice)
    assert f'href="/disruption/{name}/"' in client.get("/disruption/").content.decode()
    ok("advance", "40s")
    assert phase(name) == "Succeeded"
    queue = client.get("/disruption/").content.decode()
    history = queue[queue.index('id="history"') :]
    finished = json.loads(ok("get", "dc", name, "-o", "json"))["status"]["finishedAt"]
    assert f'href="/disruption/{name}/"' in history and finished in history
    assert f'href="/disruption/{name}/"' in client.get(f"/nodes/{node}/").content.decode()
    assert client.get(f"/objects/DisruptionCommand/{name}/").headers["Location"] == f"/disruption/{name}/"
    page = client.get(f"/disruption/{name}/").content.decode()
    for part in ("command-proposal", "command-candidates", "command-risks", "command-decisions", "command-checks"):
        assert f'id="{part}"' in page
    decisions = page[page.index('id="command-decisions"') : page.index('id="command-decide"')]
    assert "bob (cli)" in decisions and "request" in decisions and "noisy neighbour" in decisions
    assert "alice (cli)" in decisions and "approve" in decisions and "go ahead" in decisions
    steps = page[page.index('id="command-steps"') :]
    assert "tainted 1 node(s)" in steps and "every candidate drained and deleted" in steps
    assert "not counted as savings" in page  # a person's request saves nothing on the ledger
    assert client.get("/disruption/no-such-command/").status_code == 404
    assert client.get(f"/disruption/{name}/?cluster=lab").status_code == 200
