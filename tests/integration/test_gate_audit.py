"""Issue 26, case 5: every audit row names its cluster, and each cluster's pages show only its own trail."""

import getpass
import json

from django.contrib.auth.models import Permission, User

from karpui import models
from tests import lab_manifests as manifests
from tests.karp import ok, table

MANUAL = {"karpui.dev/approval-mode": "manual"}


def approver(name):
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in ("approve_disruption", "pause_disruption", "request_disruption"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def empty_node_command(cluster):
    """A manual NodePool whose one node has just gone empty: its Empty command awaits approval. Its name."""
    ok(
        "apply",
        "-f",
        "-",
        "--cluster",
        cluster,
        stdin=manifests.documents(manifests.nodepool(annotations=MANUAL), manifests.deployment("app", 1)),
    )
    ok("advance", "30s", "--cluster", cluster)
    ok("scale", "deploy/app", "--replicas", "0", "--cluster", cluster)
    ok("advance", "40s", "--cluster", cluster)
    [(name, phase)] = [(r["NAME"], r["PHASE"]) for r in table("get", "disruptioncommands", "--cluster", cluster)]
    assert phase == "AwaitingApproval"
    return name


def test_a_staging_decision_shows_on_staging_only_and_the_labs_on_the_lab_only(lab, client):
    alice, bob = approver("alice"), approver("bob")
    ok("cluster", "create", "staging")
    in_lab, in_staging = empty_node_command("lab"), empty_node_command("staging")
    ok("approve", in_lab, "--as", "alice", "--reason", "lab: go")
    ok("pause", "--as", "bob", "--for", "1h", "--reason", "staging freeze", "--cluster", "staging")
    ok("deny", in_staging, "--as", "bob", "--reason", "staging keeps it", "--cluster", "staging")
    trail = {
        (e.cluster_name, e.actor_name, e.action)
        for e in models.AuditEvent.objects.exclude(action__in=("create", "import"))
    }
    assert trail == {("lab", "alice", "approve"), ("staging", "bob", "pause"), ("staging", "bob", "deny")}
    assert models.AuditEvent.objects.get(action="create", target_kind="Cluster").cluster_name == "staging"

    client.force_login(alice)
    staging = client.get("/disruption/?cluster=staging").content.decode()
    audit = staging[staging.index('id="audit"') :]
    assert "staging freeze" in audit and "staging keeps it" in audit
    assert "lab: go" not in audit and in_lab not in audit
    lab_page = client.get("/disruption/").content.decode()
    audit = lab_page[lab_page.index('id="audit"') :]
    assert "lab: go" in audit
    assert "staging freeze" not in audit and "staging keeps it" not in audit and in_staging not in audit
    assert bob.pk


def test_a_deleted_cluster_leaves_its_trail_named(lab):
    approver("alice")
    ok("cluster", "create", "scratch")
    ok("pause", "--as", "alice", "--for", "1h", "--reason", "trying", "--cluster", "scratch")
    models.Cluster.objects.filter(name="scratch").delete()
    [event] = models.AuditEvent.objects.filter(action="pause")
    assert (event.cluster, event.cluster_name, event.reason) == (None, "scratch", "trying")
    assert str(event).split(" ", 2)[2] == "[scratch] alice pause Cluster/scratch"


def test_karp_audit_lists_a_clusters_own_trail_only(lab):
    approver("alice"), approver("bob")
    ok("cluster", "create", "staging")
    in_lab, in_staging = empty_node_command("lab"), empty_node_command("staging")
    ok("approve", in_lab, "--as", "alice", "--reason", "lab: go")
    ok("deny", in_staging, "--as", "bob", "--reason", "staging keeps it", "--cluster", "staging")
    operator = f"cli:{getpass.getuser()}"  # who ran karp apply and karp cluster create on this machine
    lab_rows = [(r["WHO"], r["VIA"], r["ACTION"], r["TARGET"], r["REASON"]) for r in table("audit")]
    assert lab_rows == [
        ("alice", "cli", "approve", f"DisruptionCommand/{in_lab}", "lab: go"),
        (operator, "cli", "create", "NodePool/default", ""),
        (operator, "cli", "create", "KWOKNodeClass/default", ""),
    ]
    staging = json.loads(ok("audit", "--cluster", "staging", "-o", "json"))
    assert staging["cluster"] == "staging"
    assert [(i["cluster"], i["actor"], i["action"], i["target"], i["reason"]) for i in staging["items"]] == [
        ("staging", "bob", "deny", f"DisruptionCommand/{in_staging}", "staging keeps it"),
        ("staging", operator, "create", "NodePool/default", ""),
        ("staging", operator, "create", "KWOKNodeClass/default", ""),
        ("staging", operator, "create", "Cluster/staging", ""),
    ]
