"""The admin lists NodePools and instance types and edits NodePools as YAML through the audited service."""

from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import call_command

from karpui import models

ROOT = Path(__file__).parent.parent.parent


@pytest.fixture
def admin_client(client, lab):
    User.objects.create_superuser("root", "", "pw-for-tests-only")
    client.login(username="root", password="pw-for-tests-only")
    return client


def test_the_admin_requires_login(client, lab):
    response = client.get("/admin/karpui/nodepool/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/admin/karpui/nodepool/"


def test_the_overview_requires_login_then_lists_nodepools(client, admin_client):
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"), stdout=None)
    response = admin_client.get("/")
    assert response.status_code == 200
    assert b"WhenEmptyOrUnderutilized after 1m" in response.content
    assert b"<td>kwok</td><td>144</td>" in response.content


def test_the_admin_lists_nodepools_and_the_144_kwok_instance_types(admin_client):
    call_command("karp", "apply", "-f", str(ROOT / "examples"), stdout=None)
    listing = admin_client.get("/admin/karpui/nodepool/")
    assert listing.status_code == 200
    assert b"spot-v1beta1" in listing.content and b"KWOKNodeClass/default" in listing.content
    kwok = models.Catalog.objects.get(name="kwok")
    types = admin_client.get(f"/admin/karpui/instancetype/?catalog__id__exact={kwok.id}")
    assert types.status_code == 200
    assert b"144 instance types" in types.content
    assert b"c-8x-amd64-linux" in types.content


def test_a_nodepool_created_in_the_admin_from_yaml_is_validated_and_audited(admin_client, lab):
    text = (ROOT / "tests" / "fixtures" / "nodepool-docs-v1.yaml").read_text()
    response = admin_client.post("/admin/karpui/nodepool/add/", {"cluster": lab.id, "manifest": text})
    assert response.status_code == 302
    row = models.NodePool.objects.get(name="default")
    assert row.weight == 10 and row.spec["limits"]["memory"] == "1000Gi"
    event = models.AuditEvent.objects.get(target_kind="NodePool")
    assert (event.actor_name, event.via, event.action) == ("root", "admin", "create")


def test_the_admin_shows_yaml_and_refuses_bad_yaml_naming_the_field(admin_client, lab):
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"), stdout=None)
    row = models.NodePool.objects.get(name="default")
    version = row.resource_version
    page = admin_client.get(f"/admin/karpui/nodepool/{row.id}/change/")
    shown = yaml.safe_load(page.context["adminform"].form["manifest"].value())
    assert shown["spec"]["disruption"]["consolidateAfter"] == "1m"
    shown["spec"]["weight"] = 0
    response = admin_client.post(
        f"/admin/karpui/nodepool/{row.id}/change/", {"cluster": lab.id, "manifest": yaml.safe_dump(shown)}
    )
    assert response.status_code == 200
    assert "spec.weight: must be greater than or equal to 1, got 0" in response.content.decode()
    row.refresh_from_db()
    assert row.resource_version == version and "weight" not in row.spec  # as created


def test_renaming_through_the_admin_is_refused(admin_client, lab):
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"), stdout=None)
    row = models.NodePool.objects.get(name="default")
    text = (
        (ROOT / "tests" / "fixtures" / "nodepool-docs-v1.yaml")
        .read_text()
        .replace("name: default\nspec", "name: other\nspec")
    )
    response = admin_client.post(f"/admin/karpui/nodepool/{row.id}/change/", {"cluster": lab.id, "manifest": text})
    assert "cannot rename" in response.content.decode()
    assert list(models.NodePool.objects.values_list("name", flat=True)) == ["default"]


def test_audit_events_cannot_be_changed_in_the_admin(admin_client, lab):
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"), stdout=None)
    event = models.AuditEvent.objects.filter(target_kind="NodePool").get()
    assert admin_client.post(f"/admin/karpui/auditevent/{event.id}/delete/", {"post": "yes"}).status_code == 403
    assert models.AuditEvent.objects.filter(id=event.id).exists()


def test_the_admin_refuses_a_nodepool_no_instance_type_can_satisfy(admin_client, lab):
    text = (ROOT / "examples" / "nodepool-kwok.yaml").read_text()
    doc = next(d for d in yaml.safe_load_all(text) if d["kind"] == "NodePool")
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m9.huge"]}
    ]
    response = admin_client.post("/admin/karpui/nodepool/add/", {"cluster": lab.id, "manifest": yaml.safe_dump(doc)})

    assert response.status_code == 200
    assert (
        "spec.template.spec.requirements[0]: no instance type of the 144 this NodePool&#x27;s node class offers "
        "satisfies node.kubernetes.io/instance-type In [m9.huge]"
    ) in response.content.decode()
    assert not models.NodePool.objects.exists()


def test_the_admin_hides_managed_fields_and_a_save_keeps_them(admin_client, lab):
    call_command("karp", "apply", "-f", str(ROOT / "examples" / "nodepool-kwok.yaml"), stdout=None)
    owned = [
        {
            "manager": "ci",
            "operation": "Apply",
            "apiVersion": "karpenter.sh/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:template": {}}},
        }
    ]
    models.NodePool.objects.filter(name="default").update(managed_fields=owned)
    row = models.NodePool.objects.get(name="default")
    page = admin_client.get(f"/admin/karpui/nodepool/{row.id}/change/")
    shown = yaml.safe_load(page.context["adminform"].form["manifest"].value())
    assert "managedFields" not in shown["metadata"]
    shown["spec"]["weight"] = 7
    response = admin_client.post(
        f"/admin/karpui/nodepool/{row.id}/change/", {"cluster": lab.id, "manifest": yaml.safe_dump(shown)}
    )
    assert response.status_code == 302
    row.refresh_from_db()
    # Hidden is not cleared: ci keeps what it owns, and the save is recorded as the admin's (issue 27).
    assert row.spec["weight"] == 7
    assert [(e["manager"], e["fieldsV1"]) for e in row.managed_fields] == [
        ("ci", {"f:spec": {"f:template": {}}}),
        ("karpui-admin", {"f:spec": {"f:weight": {}}}),
    ]
