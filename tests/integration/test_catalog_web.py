"""Importing and downloading instance catalogs from the dashboard: editors only, all or nothing, errors named."""

import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from karpui import models
from tests.integration.test_dashboard import logged_in, user

CATALOG = """\
apiVersion: karpui.dev/v1alpha1
kind: InstanceCatalog
metadata:
  name: tiny
spec:
  description: two types
  nodeClassKinds: [KWOKNodeClass]
  instanceTypes:
  - name: t-2x
    labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}
    capacity: {cpu: "2", memory: 4Gi, pods: "32"}
    offerings:
    - {zone: test-zone-a, capacityType: on-demand, price: 0.05}
  - name: t-4x
    labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}
    capacity: {cpu: "4", memory: 8Gi, pods: "64"}
    offerings:
    - {zone: test-zone-a, capacityType: on-demand, price: 0.1}
"""


def editor():
    from django.contrib.auth.models import User

    account = User.objects.filter(username="erin").first() or user("erin", "change_catalog")
    return logged_in(account)


def test_an_editor_imports_a_catalog_file_and_it_is_audited(lab):
    upload = SimpleUploadedFile("tiny.yaml", CATALOG.encode(), content_type="application/yaml")
    page = editor().post("/catalog/import", {"file": upload}, follow=True).content.decode()

    assert "catalog tiny: 2 instance types imported" in page
    assert list(models.InstanceType.objects.filter(catalog__name="tiny").values_list("name", flat=True)) == [
        "t-2x",
        "t-4x",
    ]
    event = models.AuditEvent.objects.get(action="import", target_name="tiny")
    assert (event.actor_name, event.via, event.before, event.after) == ("erin", "web", None, {"instanceTypes": 2})


def test_a_pasted_catalog_with_a_bad_quantity_is_refused_naming_the_field_and_changes_nothing(lab):
    editor().post("/catalog/import", {"text": CATALOG})
    broken = CATALOG.replace('cpu: "4"', "cpu: four")
    page = editor().post("/catalog/import", {"text": broken}, follow=True).content.decode()

    assert (
        "document 1 InstanceCatalog/tiny: spec.instanceTypes[1].capacity.cpu: quantities must match the regular "
        "expression of Kubernetes quantities: &#x27;four&#x27;"
    ) in page
    assert models.InstanceType.objects.get(catalog__name="tiny", name="t-4x").cpu_millis == 4000
    assert models.AuditEvent.objects.filter(action="import", target_name="tiny").count() == 1


def test_empty_oversized_and_binary_uploads_are_refused(lab):
    client = editor()
    assert "file: choose a catalog file or paste one" in client.post("/catalog/import", follow=True).content.decode()
    binary = SimpleUploadedFile("x.yaml", b"\xff\xfe\x00", content_type="application/yaml")
    page = client.post("/catalog/import", {"file": binary}, follow=True).content.decode()
    assert "file: not UTF-8 text (expected a YAML or JSON catalog)" in page
    with override_settings(KARPUI_CATALOG_MAX_BYTES=100):
        big = SimpleUploadedFile("big.yaml", CATALOG.encode(), content_type="application/yaml")
        page = client.post("/catalog/import", {"file": big}, follow=True).content.decode()
    assert f"file: {len(CATALOG)} bytes is over the 100 limit" in page
    assert not models.Catalog.objects.filter(name="tiny").exists()


def test_only_editors_see_and_use_the_import(lab):
    viewer = logged_in(user())
    assert 'id="catalog-import"' not in viewer.get("/catalog/").content.decode()
    assert viewer.post("/catalog/import", {"text": CATALOG}).status_code == 403
    assert 'id="catalog-import"' in editor().get("/catalog/").content.decode()
    assert not models.Catalog.objects.filter(name="tiny").exists()


def test_a_downloaded_catalog_imports_back_unchanged(lab):
    client = editor()
    response = client.get("/catalog/kwok/export")
    assert response["Content-Disposition"] == 'attachment; filename="kwok.yaml"'
    manifest = yaml.safe_load(response.content)
    assert (manifest["metadata"]["name"], len(manifest["spec"]["instanceTypes"])) == ("kwok", 144)
    before = list(models.Offering.objects.filter(instance_type__catalog__name="kwok").values_list("price", flat=True))

    page = client.post(
        "/catalog/import", {"text": response.content.decode(), "overwrite_builtin": "on"}, follow=True
    ).content.decode()

    assert "catalog kwok: 144 instance types imported" in page
    after = list(models.Offering.objects.filter(instance_type__catalog__name="kwok").values_list("price", flat=True))
    assert after == before
    assert client.get("/catalog/kwok/export?format=json").json() == manifest
    assert client.get("/catalog/nothing/export").status_code == 404


def test_an_editor_deletes_a_catalog_by_typing_its_name_and_it_is_audited(lab):
    client = editor()
    client.post("/catalog/import", {"text": CATALOG})
    viewer = logged_in(user())
    assert 'action="/catalog/tiny/delete"' not in viewer.get("/catalog/").content.decode()
    assert viewer.post("/catalog/tiny/delete", {"confirm": "tiny"}).status_code == 403
    deleter = logged_in(user("dana", "change_catalog", "delete_catalog"))
    assert 'action="/catalog/tiny/delete"' in deleter.get("/catalog/").content.decode()

    page = deleter.post("/catalog/tiny/delete", {"confirm": "tiny"}, follow=True).content.decode()

    assert "catalog tiny deleted" in page
    assert not models.Catalog.objects.filter(name="tiny").exists()
    assert not models.InstanceType.objects.filter(name__in=("t-2x", "t-4x")).exists()
    event = models.AuditEvent.objects.get(action="delete", target_name="tiny")
    assert (event.actor_name, event.via, event.target_kind, event.before, event.after) == (
        "dana",
        "web",
        "InstanceCatalog",
        {"instanceTypes": 2, "nodeClassKinds": ["KWOKNodeClass"]},
        None,
    )
    assert deleter.post("/catalog/tiny/delete", {"confirm": "tiny"}).status_code == 404


def test_an_editor_cannot_replace_a_built_in_catalog_without_saying_so_and_doing_so_is_audited(lab):
    """Issue 27, point 10: an editor's import named kwok replaced Karpenter's kwok catalog for every cluster,
    without a word."""
    client = editor()
    mine = CATALOG.replace("name: tiny", "name: kwok")
    response = client.post("/catalog/import", {"text": mine})
    assert response.status_code == 400
    assert (
        "overwrite_builtin: catalog &quot;kwok&quot; is built in: replacing it changes the instance types of every "
        "cluster&#x27;s NodePools of KWOKNodeClass"
    ) in response.content.decode()
    assert models.InstanceType.objects.filter(catalog__name="kwok").count() == 144
    assert not models.AuditEvent.objects.filter(action="import", target_name="kwok", via="web").exists()

    page = client.post("/catalog/import", {"text": mine, "overwrite_builtin": "on"}, follow=True).content.decode()
    assert "catalog kwok: 2 instance types imported" in page
    assert models.InstanceType.objects.filter(catalog__name="kwok").count() == 2
    event = models.AuditEvent.objects.get(action="import", target_name="kwok", via="web")
    assert (event.actor_name, event.reason, event.before, event.after) == (
        "erin",
        "overwrote the built-in catalog",
        {"instanceTypes": 144},
        {"instanceTypes": 2},
    )


def test_a_kwok_instance_types_file_uploaded_with_the_box_replaces_the_kwok_catalog(lab):
    from pathlib import Path

    text = (
        Path(__file__).resolve().parents[2] / "bench/workloads/karpenter-1.x/reserved-capacity/instance-types.json"
    ).read_bytes()
    client = editor()
    upload = SimpleUploadedFile("instance_types.json", text, content_type="application/json")
    page = client.post("/catalog/import", {"file": upload}, follow=True).content.decode()
    assert "overwrite_builtin: catalog &quot;kwok&quot; is built in" in page
    assert models.InstanceType.objects.filter(catalog__name="kwok").count() == 144

    upload = SimpleUploadedFile("instance_types.json", text, content_type="application/json")
    page = client.post("/catalog/import", {"file": upload, "overwrite_builtin": "on"}, follow=True).content.decode()
    assert "catalog kwok: 3 instance types imported" in page
    assert sorted(models.InstanceType.objects.filter(catalog__name="kwok").values_list("name", flat=True)) == [
        "c-2x-amd64-linux",
        "c-4x-amd64-linux",
        "c-8x-amd64-linux",
    ]
