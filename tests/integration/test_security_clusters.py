"""Issue 11, items 3 and 13: reading never creates a cluster (an unknown one is a 404, a name no cluster can have a
400, on every page, partial and action), clusters are made by admins and operators with an audit row, and the
admin never changes a cluster's pause behind the audit trail's back."""

import pytest
from django.contrib.auth.models import User

from karpui import models
from tests.integration.test_dashboard import PAGES, logged_in, user
from tests.karp import EXAMPLES, karp, ok, rows

READS = [*PAGES, "/nodepools/new/", "/nodepools/default/", "/nodes/some-node/"]
ACTIONS = [
    "/disruption/pause",
    "/disruption/resume",
    "/disruption/approve",
    "/disruption/some-command/approve",
    "/disruption/some-command/deny",
    "/nodepools/new/",
    "/nodepools/default/",
    "/nodepools/default/delete",
    "/nodepools/default/approval-mode",
]


def clusters() -> list[str]:
    return sorted(models.Cluster.objects.values_list("name", flat=True))


@pytest.fixture
def superuser_client(lab):
    return logged_in(User.objects.create_superuser("root", password="pw-only-for-tests"))


@pytest.mark.parametrize("page", READS)
@pytest.mark.parametrize("htmx", [False, True])
def test_a_read_of_an_unknown_cluster_is_a_404_and_creates_nothing(lab, superuser_client, page, htmx):
    headers = {"HX-Request": "true"} if htmx else {}

    response = superuser_client.get(page, {"cluster": "staging"}, headers=headers)

    assert response.status_code == 404
    assert clusters() == ["lab"]


@pytest.mark.parametrize("name", ["x" * 64, "a b", "lab\x00", "ｌａｂ", "../lab"])
def test_a_name_no_cluster_can_have_is_a_400(lab, name):
    response = logged_in(user()).get("/nodepools/", {"cluster": name})

    assert response.status_code == 400
    assert clusters() == ["lab"]


@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_on_an_unknown_cluster_is_a_404_and_writes_nothing(lab, superuser_client, action):
    response = superuser_client.post(
        f"{action}?cluster=staging", {"duration": "1h", "reason": "x", "mode": "manual", "confirm": "default"}
    )

    assert response.status_code == 404
    assert clusters() == ["lab"]
    assert models.AuditEvent.objects.filter(target_kind__in=("Cluster", "NodePool")).count() == 0


def test_metrics_never_create_the_cluster_they_report_on(lab):
    lab.delete()

    assert logged_in(user()).get("/metrics").status_code == 200
    assert clusters() == []


def test_the_default_lab_cluster_still_answers_without_and_with_its_name(lab):
    client = logged_in(user())
    assert client.get("/nodepools/").status_code == 200
    assert client.get("/nodepools/", {"cluster": "lab"}).status_code == 200


def test_an_admin_makes_a_cluster_and_the_audit_trail_says_so(superuser_client):
    response = superuser_client.post("/admin/karpui/cluster/add/", {"name": "staging", "mode": "lab"})

    assert response.status_code == 302
    assert clusters() == ["lab", "staging"]
    event = models.AuditEvent.objects.get(target_kind="Cluster")
    assert (event.action, event.target_name, event.actor_name, event.via, event.after) == (
        "create",
        "staging",
        "root",
        "admin",
        {"mode": "lab"},
    )
    assert superuser_client.get("/nodepools/", {"cluster": "staging"}).status_code == 200


def test_the_admin_refuses_a_cluster_name_that_is_not_a_slug(superuser_client):
    response = superuser_client.post("/admin/karpui/cluster/add/", {"name": "a b", "mode": "lab"})

    assert response.status_code == 200
    assert "Enter a valid “slug”" in response.content.decode()
    assert clusters() == ["lab"]


def test_the_admin_shows_a_cluster_but_never_changes_its_pause(superuser_client, lab):
    page = superuser_client.get(f"/admin/karpui/cluster/{lab.pk}/change/")
    assert page.status_code == 200 and 'name="paused_until_0"' not in page.content.decode()

    changed = superuser_client.post(
        f"/admin/karpui/cluster/{lab.pk}/change/",
        {"name": "lab", "mode": "lab", "paused_until_0": "2030-01-01", "paused_until_1": "00:00:00", "paused_by": "x"},
    )

    assert changed.status_code == 403
    lab.refresh_from_db()
    assert (lab.paused_until, lab.paused_by) == (None, "")
    assert superuser_client.post(f"/admin/karpui/cluster/{lab.pk}/delete/", {"post": "yes"}).status_code == 403
    assert clusters() == ["lab"]


def test_the_cli_refuses_an_unknown_cluster_until_the_operator_creates_it(lab):
    assert karp("--cluster", "staging", "get", "nodes") == (
        1,
        "",
        'error: cluster "staging" not found: clusters are made in the admin, or by the operator with '
        "`karp cluster create NAME`\n",
    )
    assert clusters() == ["lab"]

    assert ok("cluster", "create", "staging") == "cluster.karpui.dev/staging created (lab)\n"
    ok("--cluster", "staging", "apply", "-f", str(EXAMPLES / "provisioning"))
    ok("--cluster", "staging", "scale", "deploy/inflate", "--replicas", "1")
    ok("--cluster", "staging", "advance", "5s")

    assert len(rows("--cluster", "staging", "get", "nodes")) == 1
    assert rows("get", "nodes") == []  # the default lab is untouched
    event = models.AuditEvent.objects.get(target_kind="Cluster")
    assert (event.action, event.target_name, event.via) == ("create", "staging", "cli")


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (["cluster", "create", "lab"], 'error: cluster "lab" already exists\n'),
        (["cluster", "create", "a" * 64], "error: cluster: Ensure this value has at most 63 characters (it has 64).\n"),
        (
            ["cluster", "make", "x"],
            "error: usage: karp cluster create NAME [--mode lab|kwok|observe] [--kubeconfig FILE] [--context CTX] "
            "[--components all|cluster|none]\n",
        ),
        (
            ["--cluster", "a b", "get", "nodes"],
            "error: cluster: Enter a valid “slug” consisting of letters, numbers, underscores or hyphens.\n",
        ),
        (
            ["cluster", "create", "x", "--components", "some"],
            "error: components: must be one of all, cluster, none, got 'some'\n",
        ),
        (
            ["cluster", "create", "x", "--mode", "kwok", "--components", "cluster"],
            "error: components: only a lab cluster runs components of karpui's; this one is reached\n",
        ),
    ],
)
def test_the_cli_refuses_bad_cluster_names_naming_the_field(lab, words, error):
    assert karp(*words) == (1, "", error)
    assert clusters() == ["lab"]


def test_a_lab_made_with_components_cluster_is_a_plain_cluster_karpui_never_provisions(lab):
    """`--components cluster`: the lab's cluster side runs (the Deployment's pods are made, and its scheduler finds
    no node for them), karpui's controllers do not (no NodeClaim for them): a cluster for kwok mode to drive."""
    assert ok("cluster", "create", "plain", "--components", "cluster") == (
        "cluster.karpui.dev/plain created (lab, components cluster)\n"
    )
    assert models.Cluster.objects.get(name="plain").lab_components == "cluster"
    event = models.AuditEvent.objects.get(target_kind="Cluster", target_name="plain")
    assert event.after == {"mode": "lab", "components": "cluster"}
    ok("--cluster", "plain", "apply", "-f", str(EXAMPLES / "provisioning"))
    ok("--cluster", "plain", "scale", "deploy/inflate", "--replicas", "3")
    ok("--cluster", "plain", "advance", "30s")
    assert rows("--cluster", "plain", "get", "nodeclaims") == []
    assert {row[2] for row in rows("--cluster", "plain", "get", "pods")} == {"Pending"}
