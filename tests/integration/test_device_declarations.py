"""DeviceDeclarations: devices declared on catalog types by selector, from a manifest, the CLI and the admin."""

import json

import pytest
from django.contrib.auth.models import User

from karpui import models
from tests.karp import EXAMPLES, karp, ok, rows, table

DECLARATION = (EXAMPLES / "dra" / "declaration.yaml").read_text()


def devices_of(name):
    listing = json.loads(ok("get", "instancetypes", "-o", "json"))
    return next(i["spec"]["devices"] for i in listing["items"] if i["metadata"]["name"] == name)


def test_a_declaration_adds_devices_to_exactly_the_types_it_selects(lab):
    assert (
        ok("apply", "-f", str(EXAMPLES / "dra" / "declaration.yaml"))
        == "devicedeclaration.karpui.dev/m-family-gpu created\n"
    )
    assert devices_of("m-4x-amd64-linux") == [
        {
            "driver": "gpu.example.com",
            "pool": "gpu.example.com/m-family-gpu",
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "example-1"}}}],
        }
    ]
    assert devices_of("m-4x-arm64-linux") == [] and devices_of("c-4x-amd64-linux") == []
    assert rows("get", "devicedeclarations") == [
        ["m-family-gpu", "gpu.example.com", "1", "karpenter.kwok.sh/instance-family=m,kubernetes.io/arch=amd64"]
    ]
    assert models.AuditEvent.objects.filter(target_kind="DeviceDeclaration", action="create").count() == 1


def test_declared_devices_steer_provisioning_without_a_dra_config(lab):
    gpu = (EXAMPLES / "dra" / "gpu.yaml").read_text()
    without_config = "\n---\n".join(doc for doc in gpu.split("\n---\n") if "kind: DRAConfig" not in doc)
    ok("apply", "-f", "-", stdin=without_config + "\n---\n" + DECLARATION)
    ok("advance", "5s")
    assert [c["TYPE"] for c in table("get", "nodeclaims")] == ["m-1x-amd64-linux", "m-1x-amd64-linux"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("  driver: gpu.example.com\n", ""), "spec.driver"),
        (("    - name: gpu-0\n", "    - name: GPU_0\n"), "spec.devices[0].name"),
        (("matchLabels:", "matchLabel:"), "spec.instanceTypeSelector.matchLabel"),
    ],
)
def test_bad_declarations_name_the_field(lab, change, field):
    code, _, err = karp("apply", "-f", "-", stdin=DECLARATION.replace(*change))
    assert code == 1 and f" {field}: " in err
    assert models.DeviceDeclaration.objects.count() == 0


def test_the_admin_edits_declarations_as_yaml(client, lab):
    User.objects.create_superuser("root", "", "pw-for-tests-only")
    client.login(username="root", password="pw-for-tests-only")
    response = client.post("/admin/karpui/devicedeclaration/add/", {"manifest": DECLARATION})
    assert response.status_code == 302
    assert models.DeviceDeclaration.objects.get().spec["driver"] == "gpu.example.com"
    ok("delete", "devicedeclaration", "m-family-gpu")
    assert models.DeviceDeclaration.objects.count() == 0
