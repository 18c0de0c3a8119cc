"""DRA: CEL selectors with Kubernetes semantics, claim validation, allocation, and scheduling with devices."""

from dataclasses import replace

import pytest

from provisioner.dra.cel import CELError, Device, matches, validate
from provisioner.dra.claims import (
    DeviceClass,
    DeviceRequest,
    allocate,
    device_class_from_manifest,
    requests_from_claim_spec,
)
from provisioner.manifests import ManifestError
from provisioner.scheduling import results as reasons
from tests.builders import instance_type, pod, schedule

GPU = Device.from_spec(
    {
        "name": "gpu-0",
        "attributes": {"model": {"string": "a100"}, "example.com/pcie": {"int": 3}},
        "capacity": {"memory": {"value": "40Gi"}},
    },
    "gpu.example.com",
    "pool-a",
)
GPU_CLASS = DeviceClass("gpu", ('device.driver == "gpu.example.com"',))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "a100"', True),
        ('device.attributes["example.com"].pcie == 3', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("80Gi"))', False),
        ('device.attributes["unknown.io"].model == "a100"', False),  # unknown domain: an empty map, not an error
        ('"yes"', False),  # not a bool: does not match
    ],
)
def test_selectors_follow_kubernetes_semantics(expression, expected):
    assert matches(expression, GPU) is expected


def test_invalid_cel_is_refused_with_its_position():
    with pytest.raises(CELError, match=r"^line 1, column 17: Syntax error"):
        validate("device.driver ==")


@pytest.mark.parametrize(
    ("expression", "got"),
    [("device.driver", "string"), ("1 + 2", "int"), ('device.attributes["gpu.example.com"]', "map")],
)
def test_a_selector_that_is_not_a_bool_is_refused(expression, got):
    with pytest.raises(CELError) as raised:
        validate(expression)
    assert str(raised.value) == f"must evaluate to bool, got {got}"


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.example.com"].model == "a100"',  # a missing attribute is a miss, not an error
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        "device.allowMultipleAllocations",
    ],
)
def test_bool_selectors_pass_even_when_the_empty_probe_device_lacks_what_they_read(expression):
    validate(expression)


def test_a_device_class_with_bad_cel_names_the_field():
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "a"'}}, {"cel": {"expression": "device.driver =="}}]
        },
    }
    with pytest.raises(ManifestError) as raised:
        device_class_from_manifest(doc)
    assert raised.value.field == "spec.selectors[1].cel.expression"
    assert raised.value.message.startswith("invalid CEL expression: line 1, column 17")


@pytest.mark.parametrize(
    ("exactly", "field"),
    [
        ({"deviceClassName": "gpu", "count": 0}, "spec.devices.requests[0].exactly.count"),
        ({"deviceClassName": "gpu", "count": -1}, "spec.devices.requests[0].exactly.count"),
        ({"count": 1}, "spec.devices.requests[0].exactly.deviceClassName"),
        ({"deviceClassName": "gpu", "allocationMode": "Some"}, "spec.devices.requests[0].exactly.allocationMode"),
    ],
)
def test_bad_requests_name_the_field(exactly, field):
    with pytest.raises(ManifestError) as raised:
        requests_from_claim_spec({"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}, "claim", "spec")
    assert raised.value.field == field


def test_allocation_uses_each_device_once_and_says_why_not():
    devices = [replace(GPU, name=f"gpu-{i}") for i in range(2)]
    requests = [DeviceRequest("c1", "gpu", "gpu"), DeviceRequest("c2", "gpu", "gpu")]
    assert [d.name for _, d in allocate(requests, devices, {"gpu": GPU_CLASS})] == ["gpu-0", "gpu-1"]
    assert allocate([*requests, DeviceRequest("c3", "gpu", "gpu")], devices, {"gpu": GPU_CLASS}) == (
        'cannot allocate request "gpu" of claim "c3" (DeviceClass gpu): 0 matching device(s) free, 1 needed'
    )
    assert (
        allocate(requests, devices, {}) == 'DeviceClass "gpu" not found (request "gpu" of claim "c1" (DeviceClass gpu))'
    )
    assert len(allocate([DeviceRequest("c", "all", "gpu", all=True)], devices, {"gpu": GPU_CLASS})) == 2


def gpu_type(name, gpus, cpu="4", price=None):
    it = instance_type(name, cpu, "16Gi", price=price)
    return replace(it, devices=({"driver": "gpu.example.com", "devices": [{"name": f"gpu-{i}"} for i in range(gpus)]},))


def gpu_pod(claim):
    return replace(pod(cpu="10m"), device_requests=(DeviceRequest(claim, "gpu", "gpu"),))


def test_two_pods_needing_the_only_device_of_a_type_get_two_nodeclaims():
    types = [gpu_type("one-gpu", 1, price=1.0), instance_type("cpu-only", "4", "16Gi", price=0.1)]
    result = schedule([gpu_pod("a"), gpu_pod("b")], types=types, device_classes={"gpu": GPU_CLASS})
    assert [nc.instance_type_names for nc in result.new_nodeclaims] == [["one-gpu"], ["one-gpu"]]


def test_a_type_with_two_devices_takes_both_pods():
    types = [gpu_type("two-gpu", 2, price=1.0)]
    result = schedule([gpu_pod("a"), gpu_pod("b")], types=types, device_classes={"gpu": GPU_CLASS})
    assert [len(nc.pods) for nc in result.new_nodeclaims] == [2]


def test_a_claim_no_type_can_meet_stays_pending_with_a_reason():
    result = schedule([gpu_pod("a")], types=[instance_type("cpu-only", "4", "16Gi")], device_classes={"gpu": GPU_CLASS})
    [failure] = result.failures.values()
    assert failure.reasons[0].kind == reasons.DEVICES
    assert 'request "gpu" of claim "a" (DeviceClass gpu)' in failure.message


def test_existing_nodes_offer_their_free_published_devices():
    from tests.builders import node

    existing = node("gpu-node", cpu="8", memory="16Gi")
    free = {"gpu-node": [GPU]}
    result = schedule(
        [gpu_pod("a"), gpu_pod("b")],
        types=[gpu_type("one-gpu", 1)],
        nodes=[existing],
        node_devices=free,
        device_classes={"gpu": GPU_CLASS},
    )
    assert list(result.placements) == ["gpu-node"] and len(result.placements["gpu-node"]) == 1
    assert len(result.new_nodeclaims) == 1


def test_the_cel_library_is_imported_only_when_a_selector_is_first_compiled():
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from provisioner.dra.cel import validate\n"
        "print(sorted(m for m in ('cel', 'typer', 'prompt_toolkit', 'rich') if m in sys.modules))\n"
        "validate('device.driver == \"gpu.example.com\"')\n"
        "print('cel' in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert ran.stdout.splitlines() == ["[]", "True"]
