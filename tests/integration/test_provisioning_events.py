"""What provisioning tells as Karpenter v1.15 does: a NodePool left without instance types (NoCompatibleInstanceTypes,
scheduling/events.go; apply refuses requirements no type satisfies, so minValues is how one gets there) (the pod
headed for a node already there, Nominated "nodeclaim/x, node/y", is tests/unit/test_nominated_events.py)."""

import json

import yaml

from tests.karp import EXAMPLES, ok


def told(reason: str) -> list[tuple[str, str, str, int]]:
    return sorted(
        (e["involvedObject"]["kind"], e["type"], e["message"], e["count"])
        for e in json.loads(ok("get", "events", "-A", "-o", "json"))["items"]
        if e["reason"] == reason
    )


def logged(message: str) -> list[dict]:
    return [json.loads(line) for line in ok("logs").splitlines() if json.loads(line)["message"] == message]


def nodepool_with(*requirements: dict) -> str:
    documents = list(yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()))
    documents[1]["spec"]["template"]["spec"]["requirements"].extend(requirements)
    return yaml.safe_dump_all(documents)


def inflate(replicas: int) -> str:
    deployment = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = replicas
    return yaml.safe_dump(deployment)


def test_a_nodepool_whose_min_values_cannot_be_met_says_so(lab):
    ok(
        "apply",
        "-f",
        "-",
        stdin=nodepool_with(
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},  # 36 amd64 linux types, not 50
            {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 50},
        ),
    )
    ok("apply", "-f", "-", stdin=inflate(1))
    ok("advance", "20s")
    assert told("NoCompatibleInstanceTypes") == [
        (
            "NodePool",
            "Warning",
            "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility",
            1,
        )
    ]
    [skipping] = logged("skipping, nodepool requirements filtered out all instance types")[:1]
    assert skipping["minValuesIncompatibleErr"].startswith(
        "the instance types that meet the NodePool's requirements cannot meet its minValues: "
        "node.kubernetes.io/instance-type has "
    )
