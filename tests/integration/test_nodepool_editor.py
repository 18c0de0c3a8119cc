"""The NodePool editor: errors at the field, a diff, a what-if preview before saving, and an audited save."""

import html

import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.test import Client

from karpui import models
from tests.karp import EXAMPLES, ok, rows, table


def editor(*perms):
    account = User.objects.create_user("erin", password="pw-only-for-tests")
    for codename in perms:
        account.user_permissions.add(Permission.objects.get(codename=codename))
    client = Client()
    client.force_login(account)
    return client


def form_for(client, name):
    form = client.get(f"/nodepools/{name}/").context["form"]
    return {field: ("" if value is None else value) for field, value in form.initial.items()}


def capped_lab():
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "60s")
    assert sorted(p["STATUS"] for p in table("get", "pods")).count("Pending") == 2


def test_raising_a_limit_previews_the_pods_it_would_schedule_and_saves_with_an_audit_row(lab):
    capped_lab()
    client = editor("change_nodepool")
    data = {**form_for(client, "capped"), "spec.limits": "cpu=32", "action": "preview"}
    response = client.post("/nodepools/capped/", data)
    preview = response.context["whatif"]
    assert len(preview["newly_schedulable"]) == 2 and preview["newly_unschedulable"] == []
    assert round(preview["cost_after"] - preview["cost_before"], 6) == round(2 * 0.10859, 6)  # two more c-4x on-demand
    assert "-    cpu: '16'" in response.context["diff"] and "+    cpu: '32'" in response.context["diff"]
    assert models.NodePool.objects.get(name="capped").spec["limits"]["cpu"] == "16"  # a preview saves nothing
    client.post("/nodepools/capped/", {**data, "action": "save"})
    row = models.NodePool.objects.get(name="capped")
    assert (row.spec["limits"]["cpu"], row.generation) == ("32", 2)
    event = models.AuditEvent.objects.get(action="update", target_name="capped")
    assert (event.actor_name, event.via) == ("erin", "web")
    assert event.before["spec"]["limits"] == {"cpu": "16"} and event.after["spec"]["limits"] == {"cpu": "32"}


def test_a_limit_raised_by_exactly_two_nodes_previews_both_pods_as_the_next_rounds_schedule_them(lab):
    """One provisioning round counts a NodeClaim as its largest option (8 CPU here), so it launches one node into
    8 free CPU; the next round counts the c-4x that launched and takes the second pod. The preview said one pod."""
    capped_lab()
    client = editor("change_nodepool")
    response = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=24", "action": "preview"}
    )
    preview = response.context["whatif"]
    assert len(preview["newly_schedulable"]) == 2 and preview["newly_unschedulable"] == []
    assert [(pool, name, pods) for pool, name, pods in preview["new_nodeclaims_after"]] == [
        ("capped", "c-4x-amd64-linux", 1),
        ("capped", "c-4x-amd64-linux", 1),
    ]
    assert round(preview["cost_after"] - preview["cost_before"], 6) == round(2 * 0.10859, 6)
    client.post("/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=24", "action": "save"})
    ok("advance", "30s")
    assert sorted(p["STATUS"] for p in table("get", "pods")) == ["Running"] * 6  # as previewed


def test_lowering_a_limit_below_what_runs_warns_that_nodes_stay_and_nothing_more_launches(lab):
    capped_lab()  # four c-4x nodes: 16 CPU in use
    client = editor("change_nodepool")
    response = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=8", "action": "preview"}
    )

    assert response.context["whatif"]["over_limits"] == [{"resource": "cpu", "usage": "16", "limit": "8"}]
    assert response.context["whatif"]["drifting"] == []
    assert "Already over the new cpu limit: 16 in use, limit 8." in response.content.decode()
    raised = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=32", "action": "preview"}
    )
    assert raised.context["whatif"]["over_limits"] == []


def test_a_template_change_previews_which_nodes_would_drift(lab):
    capped_lab()
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    doc = yaml.safe_load(data["manifest"])
    doc["spec"]["template"]["metadata"] = {"labels": {"team": "payments"}}
    response = client.post("/nodepools/capped/", {**data, "manifest": yaml.safe_dump(doc), "action": "preview"})
    drifting = response.context["whatif"]["drifting"]
    assert sorted(d["node"] for d in drifting) == sorted(n["NAME"] for n in table("get", "nodes"))
    assert {d["reason"] for d in drifting} == {"NodePoolDrifted"}


def test_errors_are_shown_at_the_field_and_nothing_is_saved(lab):
    capped_lab()
    before = models.NodePool.objects.get(name="capped").resource_version
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    response = client.post("/nodepools/capped/", {**data, "spec.weight": "0", "action": "save"})
    assert response.status_code == 400
    assert response.context["form"].errors["spec.weight"] == ["must be greater than or equal to 1, got 0"]
    bad_yaml = data["manifest"].replace("operator: Lt", "operator: Below")
    response = client.post("/nodepools/capped/", {**data, "manifest": bad_yaml, "action": "save"})
    # An error the YAML's value causes is shown at the form field of that value: the requirement's operator.
    assert (
        response.context["form"]
        .errors["spec.template.spec.requirements[2].operator"][0]
        .startswith('Unsupported value: "Below"')
    )
    assert models.NodePool.objects.get(name="capped").resource_version == before  # nothing written


def test_people_without_the_permission_can_look_but_not_change(lab):
    capped_lab()
    client = editor()
    assert client.get("/nodepools/").status_code == 200
    assert client.post("/nodepools/capped/", {**form_for(client, "capped"), "action": "save"}).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_saving_outside_a_test_transaction_commits_the_pool_and_its_audit_row_together():
    # Requests run in autocommit; select_for_update there is an error on PostgreSQL (SQLite ignores it).
    ok("apply", "-f", str(EXAMPLES / "limits"))
    client = editor("change_nodepool")
    data = {**form_for(client, "capped"), "spec.limits": "cpu=24", "action": "save"}
    assert client.post("/nodepools/capped/", data).status_code == 302
    assert models.NodePool.objects.get(name="capped").spec["limits"]["cpu"] == "24"
    assert models.AuditEvent.objects.filter(action="update", target_name="capped", actor_name="erin").count() == 1


def new_form(client):
    form = client.get("/nodepools/new/").context["form"]
    return {field: ("" if value is None else value) for field, value in form.initial.items()}


def test_a_new_nodepool_is_previewed_then_created_and_audited(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))  # the KWOKNodeClass the starter refers to
    client = editor("add_nodepool", "change_nodepool")
    assert 'href="/nodepools/new/"' in client.get("/nodepools/").content.decode()
    data = new_form(client)
    doc = yaml.safe_load(data["manifest"])
    assert doc["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "default",
    }
    doc["metadata"]["name"] = "batch"
    data = {**data, "manifest": yaml.safe_dump(doc), "spec.weight": "20"}

    preview = client.post("/nodepools/new/", {**data, "action": "preview"})
    diff = preview.context["diff"].splitlines()
    assert diff[:4] == ["--- current", "+++ proposed", "@@ -0,0 +1,23 @@", "+apiVersion: karpenter.sh/v1"]
    assert "+  name: batch" in diff and "+  weight: 20" in diff
    assert not any("approval-mode" in line for line in diff)  # left at its default, so not written
    assert not models.NodePool.objects.filter(name="batch").exists()
    created = client.post("/nodepools/new/", {**data, "action": "save"})

    assert created["Location"] == "/nodepools/batch/"
    assert models.NodePool.objects.get(name="batch").weight == 20
    event = models.AuditEvent.objects.get(action="create", target_name="batch")
    assert (event.actor_name, event.via, event.before) == ("erin", "web", None)


def test_a_new_nodepool_may_not_take_an_existing_name_and_needs_the_add_permission(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    before = models.NodePool.objects.get(name="default").resource_version
    client = editor("add_nodepool")
    data = new_form(client)
    taken = client.post("/nodepools/new/", {**data, "manifest": data["manifest"].replace("new-pool", "default")})
    assert taken.status_code == 400
    assert taken.context["form"].errors["manifest"] == [
        "metadata.name: NodePool 'default' already exists; edit it instead"
    ]
    assert models.NodePool.objects.get(name="default").resource_version == before  # nothing written
    viewer = Client()
    viewer.force_login(User.objects.create_user("vera", password="pw-only-for-tests"))
    assert viewer.post("/nodepools/new/", {**data, "action": "save"}).status_code == 403
    assert not models.NodePool.objects.filter(name="new-pool").exists()


def test_deleting_a_nodepool_needs_its_name_typed_and_the_permission_and_is_audited(lab):
    capped_lab()
    assert editor("change_nodepool").post("/nodepools/capped/delete", {"confirm": "capped"}).status_code == 403
    User.objects.get(username="erin").user_permissions.add(Permission.objects.get(codename="delete_nodepool"))
    deleter = Client()
    deleter.force_login(User.objects.get(username="erin"))

    wrong = deleter.post("/nodepools/capped/delete", {"confirm": "cap"}, follow=True).content.decode()
    assert "confirm: type the NodePool&#x27;s name, capped, to delete it" in wrong
    assert models.NodePool.objects.filter(name="capped").exists()
    done = deleter.post("/nodepools/capped/delete", {"confirm": "capped"}, follow=True).content.decode()

    assert "nodepool.karpenter.sh &quot;capped&quot; deleted; its 4 node(s) will be drained and removed" in done
    assert not models.NodePool.objects.filter(name="capped").exists()
    assert models.AuditEvent.objects.get(action="delete", target_name="capped").actor_name == "erin"
    ok("advance", "60s")
    assert rows("get", "nodes") == []


def test_a_change_no_instance_type_can_satisfy_is_refused_at_the_requirement(lab):
    capped_lab()
    before = models.NodePool.objects.get(name="capped").resource_version
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    impossible = data["manifest"].replace("values:\n        - on-demand", "values:\n        - reserved")
    assert impossible != data["manifest"]
    response = client.post("/nodepools/capped/", {**data, "manifest": impossible, "action": "save"})

    assert response.status_code == 400
    assert response.context["form"].errors == {
        # The requirement's row, at its first field.
        "spec.template.spec.requirements[1].key": [
            "no instance type of the 144 this NodePool's node class offers "
            "satisfies karpenter.sh/capacity-type In [reserved] together with the requirements before it"
        ]
    }
    assert models.NodePool.objects.get(name="capped").resource_version == before  # nothing written


C8X, M8X = 0.217179869184, 0.268719476736  # c-8x-amd64-linux and m-8x-amd64-linux on demand


def test_restricting_a_nodepool_so_its_node_drifts_prices_the_replacement_instead_of_the_drifted_node(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    ok("advance", "30s")
    [(instance_type, node)] = [(r["TYPE"], r["NODE"]) for r in table("get", "nodeclaims")]
    assert instance_type == "c-8x-amd64-linux"
    client = editor("change_nodepool")
    data = form_for(client, "default")
    doc = yaml.safe_load(data["manifest"])
    family = {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": ["m"]}
    doc["spec"]["template"]["spec"]["requirements"].append(family)
    response = client.post("/nodepools/default/", {**data, "manifest": yaml.safe_dump(doc), "action": "preview"})

    preview = response.context["whatif"]
    assert [(d["node"], d["reason"]) for d in preview["drifting"]] == [(node, "RequirementsDrifted")]
    assert preview["new_nodeclaims_after"] == [("default", "m-8x-amd64-linux", 5)]  # its five pods move
    assert (preview["replacements"], preview["stranded"]) == (1, [])
    assert (round(preview["cost_before"], 6), round(preview["cost_after"], 6)) == (round(C8X, 6), round(M8X, 6))
    page = response.content.decode()
    assert "<b>$0.2172</b> → <b>$0.2687</b>" in page
    assert "1 new NodeClaim would replace them" in page


def test_a_form_save_writes_only_the_fields_that_changed(lab):
    capped_lab()
    client = editor("change_nodepool")
    response = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=24", "action": "preview"}
    )
    changed = [line for line in response.context["diff"].splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert changed == ["-    cpu: '16'", "+    cpu: '24'"]  # no approval-mode annotation the YAML never had
    client.post("/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=24", "action": "save"})
    annotations = models.NodePool.objects.get(name="capped").annotations
    assert list(annotations) == ["kubectl.kubernetes.io/last-applied-configuration"]  # karp apply's, kept as it was


def test_a_yaml_edit_is_kept_when_the_form_field_was_not_touched(lab):
    capped_lab()
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    doc = yaml.safe_load(data["manifest"])
    doc["metadata"]["annotations"] = {"karpui.dev/approval-mode": "manual"}
    client.post("/nodepools/capped/", {**data, "manifest": yaml.safe_dump(doc), "action": "save"})
    assert models.NodePool.objects.get(name="capped").annotations == {"karpui.dev/approval-mode": "manual"}


def test_every_invalid_field_shows_its_error_at_once(lab):
    capped_lab()
    before = models.NodePool.objects.get(name="capped").resource_version
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    bad = {
        **data,
        "spec.weight": "0",
        "spec.disruption.consolidateAfter": "soon",
        "spec.limits": "cpu=-5",
        "action": "preview",
    }
    bad["manifest"] = data["manifest"].replace("operator: Lt", "operator: Below")
    response = client.post("/nodepools/capped/", bad)

    assert response.status_code == 400 and "whatif" not in response.context
    assert response.context["form"].errors == {
        "spec.weight": ["must be greater than or equal to 1, got 0"],
        "spec.disruption.consolidateAfter": [
            "invalid duration 'soon': expected \"Never\" or a sequence like 720h, 1h30m or 10s"
        ],
        "spec.limits": ["cpu: must be greater than or equal to 0, got -5"],
        "spec.template.spec.requirements[2].operator": [
            'Unsupported value: "Below": supported values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte'
        ],
    }
    typed = client.post("/nodepools/capped/", {**bad, "spec.weight": "many"}).context["form"].errors
    assert typed["spec.weight"] == ["must be a whole number, got 'many'"] and len(typed) == 4  # it hides no other
    assert models.NodePool.objects.get(name="capped").resource_version == before


def test_a_preview_refuses_a_negative_cpu_limit(lab):
    capped_lab()
    client = editor("change_nodepool")
    response = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=-5", "action": "preview"}
    )
    assert response.status_code == 400 and "whatif" not in response.context
    assert response.context["form"].errors == {"spec.limits": ["cpu: must be greater than or equal to 0, got -5"]}


def test_an_unchanged_limit_is_not_warned_about_even_when_usage_is_over_it(lab):
    capped_lab()  # 16 CPU in use
    client = editor("change_nodepool")
    client.post("/nodepools/capped/", {**form_for(client, "capped"), "spec.limits": "cpu=8", "action": "save"})
    response = client.post(
        "/nodepools/capped/", {**form_for(client, "capped"), "spec.weight": "7", "action": "preview"}
    )
    assert response.context["whatif"]["over_limits"] == []
    assert "Already over" not in response.content.decode()


def test_the_preview_comes_right_under_the_form_before_the_delete_section(lab):
    capped_lab()
    client = editor("change_nodepool", "delete_nodepool")
    page = client.post("/nodepools/capped/", {**form_for(client, "capped"), "action": "preview"}).content.decode()
    assert page.index('<form method="post" class="editor"') < page.index('id="whatif"') < page.index("Delete this")
    assert 'formaction="/nodepools/capped/#whatif">Preview what changes' in page  # the browser scrolls to the answer
    assert '<form method="post" class="editor" action="/nodepools/capped/">' in page  # Save does not


def test_the_editor_hides_managed_fields_and_a_save_keeps_them(lab):
    capped_lab()
    owned = [
        {
            "manager": "ci",
            "operation": "Apply",
            "apiVersion": "karpenter.sh/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:template": {}}},
        }
    ]
    models.NodePool.objects.filter(name="capped").update(managed_fields=owned)
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    assert "managedFields" not in data["manifest"]
    client.post("/nodepools/capped/", {**data, "spec.limits": "cpu=24", "action": "save"})
    row = models.NodePool.objects.get(name="capped")
    # Hidden is not cleared: ci keeps what it owns, and the save is recorded as the dashboard's (issue 27).
    assert row.spec["limits"]["cpu"] == "24"
    assert [(e["manager"], e["fieldsV1"]) for e in row.managed_fields] == [
        ("ci", {"f:spec": {"f:template": {}}}),
        ("karpui-dashboard", {"f:spec": {"f:limits": {"f:cpu": {}}}}),
    ]


def test_a_save_over_a_nodepool_changed_since_the_editor_opened_is_refused_and_loses_nothing(lab):
    capped_lab()
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    opened_at = models.NodePool.objects.get(name="capped").resource_version
    assert data["resource_version"] == opened_at
    ok("label", "nodepool", "capped", "team=a")
    ok("annotate", "nodepool", "capped", "karpui.dev/approval-mode=dry-run", "--overwrite")

    preview = client.post("/nodepools/capped/", {**data, "spec.limits": "cpu=30", "action": "preview"})
    message = (
        f"NodePool capped was changed by someone else since you opened it (resourceVersion {opened_at}, now "
        f"{opened_at + 2}): saving would undo their change. Reload the page to edit the current version."
    )
    assert preview.status_code == 200 and preview.context["conflict"] == message
    saved = client.post("/nodepools/capped/", {**data, "spec.limits": "cpu=30", "action": "save"})
    assert saved.status_code == 409
    assert saved.context["conflict"] == (
        'Operation cannot be fulfilled on nodepools.karpenter.sh "capped": the object has been modified '
        f"(resourceVersion {opened_at} when opened, {opened_at + 2} now); nothing was saved"
    )
    row = models.NodePool.objects.get(name="capped")
    assert (row.labels, row.annotations["karpui.dev/approval-mode"], row.spec["limits"]["cpu"]) == (
        {"team": "a"},
        "dry-run",
        "16",
    )
    assert not models.AuditEvent.objects.filter(action="update", target_name="capped", via="web").exists()

    reopened = form_for(client, "capped")
    assert client.post("/nodepools/capped/", {**reopened, "spec.limits": "cpu=30", "action": "save"}).status_code == 302
    row = models.NodePool.objects.get(name="capped")
    assert (row.labels, row.annotations["karpui.dev/approval-mode"], row.spec["limits"]["cpu"]) == (
        {"team": "a"},
        "dry-run",
        "30",
    )


def test_a_budget_schedule_karpenters_cron_cannot_read_is_saved_and_warned_about_until_fixed(lab):
    """The CRD's pattern takes any five fields, so "0 9 * * fri-mon" is stored; robfig/cron refuses a range that runs
    backwards, Budget.IsActive errors and GetAllowedDisruptions fails closed: the NodePool allows no Drifted
    disruption. The preview and the NodePool's page say so; a readable schedule clears the warning."""
    capped_lab()
    client = editor("change_nodepool")
    data = form_for(client, "capped")
    doc = yaml.safe_load(data["manifest"])
    doc["spec"]["disruption"]["budgets"] = [
        {"nodes": "10%"},
        {"nodes": "0", "schedule": "0 9 * * fri-mon", "duration": "8h", "reasons": ["Drifted"]},
    ]
    preview = client.post("/nodepools/capped/", {**data, "manifest": yaml.safe_dump(doc), "action": "preview"})
    assert preview.context["whatif"]["unreadable_budgets"] == [
        {"number": 2, "schedule": "0 9 * * fri-mon", "reasons": "Drifted"}
    ]
    assert (
        'Disruption budget 2\'s schedule "0 9 * * fri-mon" is not a cron Karpenter can read: it fails closed, so '
        "this NodePool would allow no disruption for Drifted while the budget stands."
    ) in html.unescape(preview.content.decode())
    client.post("/nodepools/capped/", {**data, "manifest": yaml.safe_dump(doc), "action": "save"})
    page = client.get("/nodepools/capped/")
    assert page.context["unreadable_budgets"] == [{"number": 2, "schedule": "0 9 * * fri-mon", "reasons": "Drifted"}]
    assert 'id="budget-schedule-2"' in page.content.decode()
    doc["spec"]["disruption"]["budgets"][1]["schedule"] = "0 9 * * mon-fri"
    client.post("/nodepools/capped/", {**form_for(client, "capped"), "manifest": yaml.safe_dump(doc), "action": "save"})
    fixed = client.get("/nodepools/capped/")
    assert fixed.context["unreadable_budgets"] == []
    assert "budget-schedule-" not in fixed.content.decode()
