"""Issue 6's scenario through `karp`, and DRA's bad input."""

import json

import pytest

from karpui import models
from tests.karp import EXAMPLES, karp, ok, rows, table, workload_objects

GPU = (EXAMPLES / "dra" / "gpu.yaml").read_text()


def test_two_pods_each_claiming_the_only_device_get_two_nodes_and_their_own_gpu(lab):
    ok("apply", "-f", str(EXAMPLES / "dra" / "gpu.yaml"))
    ok("advance", "5s")
    claims = table("get", "nodeclaims")
    assert [c["TYPE"] for c in claims] == ["m-1x-amd64-linux", "m-1x-amd64-linux"]
    created = [json.loads(line) for line in ok("logs").splitlines() if '"created nodeclaim"' in line]
    assert all(
        r["instance-types"].startswith("m-128x-amd64-linux, m-128x-amd64-windows")
        and r["instance-types"].endswith("and 19 other(s)")
        for r in created
    )
    assert rows("get", "resourceslices") == []  # nodes exist before their devices do
    assert [c["READY"] for c in claims] == ["Unknown", "Unknown"]  # initialization waits for the driver's slices
    ok("advance", "30s")
    slices = table("get", "resourceslices")
    assert sorted(s["NODE"] for s in slices) == sorted(c["NODE"] for c in claims)
    pods = {p["NAME"]: p["NODE"] for p in table("get", "pods", "-o", "wide")}
    assert set(pods.values()) == {c["NODE"] for c in claims}
    for claim in json.loads(ok("get", "resourceclaims", "-o", "json"))["items"]:
        [result] = claim["status"]["allocation"]["devices"]["results"]
        [holder] = claim["status"]["reservedFor"]
        assert (result["driver"], result["device"], result["request"]) == ("gpu.example.com", "gpu-0", "gpu")
        assert result["pool"] == f"gpu.example.com/{pods[holder['name']]}"
    ok("advance", "90s")
    assert len(rows("get", "nodeclaims")) == 2  # moving a GPU pod would need a device nobody has free
    ok("delete", "deployment", "gpu-workload")
    # A 10% budget of two nodes lets one go at a time: each waits consolidateAfter (10 s), a disruption pass (every
    # 10 s) and its 15 s validation, then its termination; the second starts once the first is gone.
    ok("advance", "90s")
    assert rows("get", "resourceclaims") == [] and rows("get", "nodes") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ('expression: device.driver == "gpu.example.com"', "expression: device.driver =="),
            "document 3 DeviceClass/gpu.example.com: spec.selectors[0].cel.expression: invalid CEL expression: line 1, column 17",
        ),
        (
            ("count: 1", "count: 0"),
            "document 5 ResourceClaimTemplate/one-gpu: spec.spec.devices.requests[0].exactly.count: must be greater than or equal to 1, got 0",
        ),
        (
            ("count: 1", "count: -2"),
            "spec.spec.devices.requests[0].exactly.count: must be greater than or equal to 1, got -2",
        ),
        (
            ('operator: In, values: ["m"]', 'operator: Near, values: ["m"]'),
            "document 4 DRAConfig/gpu: spec.pools[0].nodeSelectorTerms[0].matchExpressions[0].operator: unsupported operator 'Near'",
        ),
    ],
)
def test_bad_dra_objects_are_refused_at_apply_and_change_nothing(lab, change, message):
    code, out, err = karp("apply", "-f", "-", stdin=GPU.replace(*change))
    assert code == 1 and out == ""
    assert message in err
    assert workload_objects() == 0 and models.NodePool.objects.count() == 0


def test_a_claim_template_naming_a_missing_device_class_is_refused_at_apply(lab):
    code, out, err = karp(
        "apply", "-f", "-", stdin=GPU.replace("deviceClassName: gpu.example.com", "deviceClassName: tpu.example.com")
    )
    assert (code, out) == (1, "")
    assert (
        err
        == 'error: document 5 ResourceClaimTemplate/one-gpu: spec.spec.devices.requests[0].exactly.deviceClassName: DeviceClass "tpu.example.com" not found\n'
    )
    assert workload_objects() == 0


def test_ignore_dra_requests_restores_karpenters_default(lab, settings):
    settings.KARPUI_IGNORE_DRA_REQUESTS = True
    ok("apply", "-f", str(EXAMPLES / "dra" / "gpu.yaml"))
    ok("advance", "15s")
    assert rows("get", "nodeclaims") == []
    failures = [json.loads(line) for line in ok("logs").splitlines() if '"could not schedule pod"' in line]
    assert (
        failures[-1]["error"]
        == "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
    )


def test_a_draconfig_and_a_device_declaration_of_the_same_devices_count_them_once(lab):
    """examples/dra/ applied as a directory: the DRAConfig (what the lab's driver publishes) and the
    DeviceDeclaration describe the same gpu-0 on the m-family; each m type has one device, not two."""
    ok("apply", "-f", str(EXAMPLES / "dra"))
    ok("advance", "5s")
    claims = table("get", "nodeclaims")
    assert [c["TYPE"] for c in claims] == ["m-1x-amd64-linux", "m-1x-amd64-linux"]  # one GPU each: two nodes at once
    ok("advance", "35s")
    pods = table("get", "pods", "-o", "wide")
    assert [p["STATUS"] for p in pods] == ["Running", "Running"]
    assert len({p["NODE"] for p in pods}) == 2
    from karpui.insight.device_selectors import declared_devices

    assert declared_devices(lab)["m-1x-amd64-linux"] == ["gpu.example.com: gpu-0"]


def test_the_devices_page_shows_both_sources_and_where_the_draconfig_replaces_the_declaration(lab, admin_client):
    ok("apply", "-f", str(EXAMPLES / "dra"))
    page = admin_client.get("/devices/").content.decode()
    table = page[page.index('id="device-declarations"') :]
    assert (
        "<td>DeviceDeclaration <b>m-family-gpu</b></td><td>gpu.example.com</td>"
        "<td><code>karpenter.kwok.sh/instance-family=m,kubernetes.io/arch=amd64</code></td><td>gpu-0</td>"
    ) in table
    assert '<td>24 <span class="muted">(on 24 of them a DRAConfig of the same driver publishes instead)</span>' in table
    assert (
        "<td>DRAConfig <b>gpu (pool gpu)</b></td><td>gpu.example.com</td>"
        "<td><code>karpenter.kwok.sh/instance-family in (m),kubernetes.io/arch in (amd64)</code></td><td>gpu-0</td>"
        "\n  <td>24</td>"
    ) in table
    assert "{&#x27;" not in page  # no Python dict repr anywhere
