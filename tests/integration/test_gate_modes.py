"""Issue 27, point 10: taking a NodePool's approval mode from manual to auto (or auto-below) is itself a decision
that needs an approver, and under four eyes a second person, on every path that writes a NodePool: karp apply and
annotate, the NodePool editor, the admin, the Kubernetes API and the Disruption page."""

import json

import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.test import Client

from karpui import models
from karpui.kubeapi.auth import token_create
from tests import lab_manifests as manifests
from tests.karp import karp, ok

MANUAL = manifests.nodepool(annotations={"karpui.dev/approval-mode": "manual"})
AUTO = manifests.nodepool(annotations={"karpui.dev/approval-mode": "auto"}, node_class=False)


def person(name, *codenames, superuser=False):
    if superuser:
        return User.objects.create_superuser(name, "", "pw-only-for-tests")
    user = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def editor(name="eddie"):
    return person(name, "change_nodepool", "add_nodepool", "change_kubeobject")


def approver(name):
    return person(name, "approve_disruption", "request_disruption")


def mode():
    return models.NodePool.objects.get(name="default").annotations.get("karpui.dev/approval-mode")


@pytest.fixture
def manual(lab):
    ok("apply", "-f", "-", stdin=MANUAL)
    assert mode() == "manual"
    return lab


REFUSED = 'nodepools.karpenter.sh "default": taking karpui.dev/approval-mode from manual to auto lets commands run'


def test_karp_apply_and_annotate_cannot_take_manual_away(manual):
    code, _, err = karp("apply", "-f", "-", stdin=AUTO)
    assert code == 1 and REFUSED in err and "nothing was written" in err
    code, _, err = karp("annotate", "nodepool", "default", "karpui.dev/approval-mode=auto", "--overwrite")
    assert code == 1 and REFUSED in err
    code, _, err = karp("annotate", "nodepool", "default", "karpui.dev/approval-mode-")
    assert code == 1 and REFUSED in err
    assert mode() == "manual"
    # Tightening, or a mode in which nothing runs, needs nobody.
    ok("annotate", "nodepool", "default", "karpui.dev/approval-mode=dry-run", "--overwrite")
    assert mode() == "dry-run"


def test_the_nodepool_editor_and_the_admin_refuse_it_and_say_why(manual):
    eddie = editor()
    client = Client()
    client.force_login(eddie)
    body = json.loads(AUTO)
    form = client.get("/nodepools/default/").context["form"]
    data = {field: ("" if value is None else value) for field, value in form.initial.items()}
    response = client.post("/nodepools/default/", {**data, "approval_mode": "auto", "action": "save"})
    assert response.status_code == 403
    assert REFUSED in response.content.decode().replace("&quot;", '"')
    assert mode() == "manual"
    admin = Client()
    admin.force_login(person("root", superuser=True))
    row = models.NodePool.objects.get(name="default")
    changed = admin.post(
        f"/admin/karpui/nodepool/{row.pk}/change/", {"cluster": manual.pk, "manifest": yaml.safe_dump(body)}
    )
    assert changed.status_code == 200  # the form again, with the error at the manifest
    assert REFUSED in changed.content.decode().replace("&quot;", '"')
    assert mode() == "manual"


def test_the_kubernetes_api_refuses_it_even_for_a_superuser_under_four_eyes(manual):
    token = token_create(user=person("root", superuser=True))
    patch = {"metadata": {"annotations": {"karpui.dev/approval-mode": "auto"}}}
    response = Client().patch(
        "/k8s/clusters/lab/apis/karpenter.sh/v1/nodepools/default",
        json.dumps(patch),
        content_type="application/merge-patch+json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 403
    status = json.loads(response.content)
    assert status["reason"] == "Forbidden" and REFUSED in status["message"]
    assert mode() == "manual"


def test_an_approver_writing_it_with_four_eyes_off_decides_alone_and_is_audited(manual, settings):
    settings.KARPUI_FOUR_EYES = False
    token = token_create(user=approver("alice"))
    eddie_token = token_create(user=editor())
    patch = json.dumps({"metadata": {"annotations": {"karpui.dev/approval-mode": "auto"}}})
    path = "/k8s/clusters/lab/apis/karpenter.sh/v1/nodepools/default"
    kind = "application/merge-patch+json"
    refused = Client().patch(path, patch, content_type=kind, headers={"Authorization": f"Bearer {eddie_token}"})
    assert refused.status_code == 403 and "a decision for an approver" in json.loads(refused.content)["message"]
    # An approver may not write NodePools at all without the editors' permission; with it, the write is the decision.
    alice = User.objects.get(username="alice")
    alice.user_permissions.add(Permission.objects.get(codename="change_nodepool"))
    response = Client().patch(path, patch, content_type=kind, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert mode() == "auto"
    event = models.AuditEvent.objects.get(action="approve-mode-change")
    assert (event.actor_name, event.cluster_name, event.after) == ("alice", "lab", {"karpui.dev/approval-mode": "auto"})


def test_an_editor_asks_an_approver_decides_and_the_change_is_made(manual):
    editor("eddie"), approver("alice")
    code, _, err = karp("approval-mode", "default", "auto", "--as", "eddie")
    assert code == 1 and "reason: say why" in err
    out = ok("approval-mode", "default", "auto", "--as", "eddie", "--reason", "the pool is stateless now")
    [request] = models.ApprovalModeRequest.objects.all()
    assert (
        out
        == f"approvalmoderequest/{request.pk} created: an approver decides (karp approval-mode approve {request.pk})\n"
    )
    assert mode() == "manual"
    code, _, err = karp("approval-mode", "approve", str(request.pk), "--as", "eddie")
    assert code == 1 and err == "error: eddie may not approve disruption\n"
    assert ok("approval-mode", "approve", str(request.pk), "--as", "alice") == (
        f"approvalmoderequest/{request.pk} approved and applied\n"
    )
    assert mode() == "auto"
    trail = [(e.action, e.actor_name, e.cluster_name) for e in models.AuditEvent.objects.filter(target_kind="NodePool")]
    assert ("request-mode-change", "eddie", "lab") in trail and ("approve-mode-change", "alice", "lab") in trail


def test_under_four_eyes_the_approver_who_asked_needs_another(manual, client):
    alice, bob = approver("alice"), approver("bob")
    alice.user_permissions.add(Permission.objects.get(codename="change_nodepool"))
    client.force_login(alice)
    client.post("/nodepools/default/approval-mode", {"mode": "auto", "reason": "weekend batch"})
    [request] = models.ApprovalModeRequest.objects.filter(decision="")
    assert mode() == "manual"
    page = client.get("/disruption/").content.decode()
    assert "awaiting another approver: you asked for it (four eyes)" in page
    code, _, err = karp("approval-mode", "approve", str(request.pk), "--as", "alice")
    assert code == 1 and "alice asked for this change and may not approve it alone (four eyes)" in err
    code, _, err = karp("approval-mode", "deny", str(request.pk), "--as", "bob")
    assert code == 1 and "a reason is required" in err
    ok("approval-mode", "approve", str(request.pk), "--as", "bob", "--reason", "ok for the weekend")
    assert mode() == "auto"
    assert bob.pk


def test_the_nodepool_page_shows_every_change_as_a_diff_with_who_and_when_to_a_viewer(manual, client):
    editor("eddie"), approver("alice")
    ok("approval-mode", "default", "auto", "--as", "eddie", "--reason", "stateless now")
    [request] = models.ApprovalModeRequest.objects.all()
    ok("approval-mode", "approve", str(request.pk), "--as", "alice", "--reason", "agreed")
    ok("annotate", "nodepool", "default", "team=blue")
    ok("cluster", "create", "staging")
    ok("apply", "-f", "-", "--cluster", "staging", stdin=MANUAL)
    client.force_login(person("victor"))  # a viewer: may read NodePools, nothing more
    page = client.get("/nodepools/default/").content.decode()
    history = page[page.index('id="nodepool-history"') :]
    assert "set-approval-mode" in history and "alice (cli)" in history and "agreed" in history
    assert "request-mode-change" in history and "eddie (cli)" in history and "stateless now" in history
    assert "-karpui.dev/approval-mode: manual\n+karpui.dev/approval-mode: auto" in history
    assert "+    team: blue" in history and "last-applied-configuration" not in history
    assert history.index("+    team: blue") < history.index("+karpui.dev/approval-mode: auto")  # newest first
    # The staging NodePool of the same name has its own history: only its creation.
    staging = client.get("/nodepools/default/?cluster=staging").content.decode()
    staging_history = staging[staging.index('id="nodepool-history"') :]
    assert "request-mode-change" not in staging_history and "create" in staging_history
