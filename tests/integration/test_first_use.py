"""What a new user hit trying karpui (issue 15's bugs): each test fails without its fix."""

import re

import pytest
from django.core.management import call_command

from karpui import models
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, rows, table


def test_a_node_never_seen_is_a_404_and_a_node_that_is_gone_keeps_its_page(lab):
    client = logged_in(user())
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
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


def test_karp_help_names_every_verb_the_readmes_use(capsys):
    """Bug 11: `karp --help` left out approve, deny, pause, resume, disrupt and savings."""
    with pytest.raises(SystemExit):
        call_command("karp", "--help")
    words = set(re.findall(r"[a-z]+", capsys.readouterr().out))
    verbs = ["approve", "deny", "pause", "resume", "disrupt", "savings", "label", "annotate", "cordon", "drain"]
    assert [verb for verb in verbs if verb not in words] == []


def test_every_example_folder_has_a_readme():
    """Bug 11: the README promises one per example; anti-affinity, limits and provisioning had none."""
    folders = sorted(path.name for path in EXAMPLES.iterdir() if path.is_dir())
    assert [name for name in folders if not (EXAMPLES / name / "README.md").is_file()] == []


def test_the_limits_example_beside_the_provisioning_one_leaves_two_pods_pending_in_the_capped_pool(lab):
    """Bug 11: beside the provisioning example's `default` NodePool, the pods past the cap went there instead."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "60s")

    pods = table("get", "pods", "-l", "app=big", "-o", "wide")
    assert sorted(pod["STATUS"] for pod in pods) == ["Pending", "Pending", "Running", "Running", "Running", "Running"]
    pools = {pool["NAME"]: pool["NODES"] for pool in table("get", "nodepools")}
    assert pools == {"capped": "4", "default": "0"}
    assert {pod["NODE"] for pod in pods if pod["STATUS"] == "Running"} == {
        c["NODE"] for c in table("get", "nodeclaims")
    }


def test_the_disruption_readmes_annotate_command_sets_the_approval_mode(lab):
    """Bug 11: the README said "annotate the NodePool" without a command to do it."""
    readme = (EXAMPLES / "disruption" / "README.md").read_text()
    [command] = re.findall(r"^\$K (annotate nodepool .*)$", readme, flags=re.MULTILINE)
    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok(*command.split())
    assert models.NodePool.objects.get(name="spot").annotations["karpui.dev/approval-mode"] == "manual"
