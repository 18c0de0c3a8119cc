"""The Node kwok makes for a launched NodeClaim carries what `kubectl describe node` reads."""

from provisioner.cloudprovider.kwok import node_for
from provisioner.cluster.objects import parse_timestamp


def test_a_registered_node_reports_conditions_as_of_now_its_kubelet_and_addresses():
    claim = {
        "metadata": {
            "name": "default-abcde",
            "labels": {"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux"},
            "annotations": {"karpui.dev/price": "0.1"},
        },
        "status": {"providerID": "kwok://default-abcde", "capacity": {"cpu": "4"}, "allocatable": {"cpu": "3900m"}},
    }
    now = parse_timestamp("2026-12-04T10:00:00Z")
    status = node_for(claim, now)["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    assert {(c["lastHeartbeatTime"], c["lastTransitionTime"]) for c in status["conditions"]} == {
        ("2026-12-04T10:00:00Z", "2026-12-04T10:00:00Z")
    }
    assert status["nodeInfo"]["architecture"] == "arm64" and status["nodeInfo"]["operatingSystem"] == "linux"
    assert status["nodeInfo"]["kubeletVersion"] == "kwok-v0.6.1"
    assert status["addresses"] == [  # the internal address is the name's CRC-32 in 10.0.0.0/8: stable across runs
        {"type": "InternalIP", "address": "10.75.32.161"},
        {"type": "Hostname", "address": "default-abcde"},
    ]
