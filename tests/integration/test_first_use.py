"""What a new user hit trying karpui (issue 15's bugs): each test fails without its fix."""

from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, rows


def test_a_node_never_seen_is_a_404_and_a_node_that_is_gone_keeps_its_page(lab):
    client = logged_in(user())
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [[node, *_]] = rows("get", "nodes")
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "60s")
    assert rows("get", "nodes") == []

    assert client.get("/nodes/never-existed/").status_code == 404
    gone = client.get(f"/nodes/{node}/")
    assert gone.status_code == 200 and "gone: its record is kept below" in gone.content.decode()


def test_the_disruption_pages_audit_trail_shows_approval_mode_changes(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    client = logged_in(user("alice", "change_nodepool"))
    client.post("/nodepools/default/approval-mode", {"mode": "manual"})

    page = client.get("/disruption/")
    [entry] = page.context["audit"]
    row = entry["event"]
    assert (row.actor_name, row.via, row.action, row.target_kind, row.target_name) == (
        "alice",
        "web",
        "set-approval-mode",
        "NodePool",
        "default",
    )
    assert "<td>set-approval-mode → manual</td><td>NodePool/default</td>" in page.content.decode()
