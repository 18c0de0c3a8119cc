"""What provisioning and termination tell as Karpenter v1.15 does: NoCompatibleInstanceTypes on a NodePool left
without instance types (scheduling/events.go; apply refuses requirements no type satisfies, so minValues is how one
gets there), the warnings about pods' preferences, and "deleted node". A pod headed for a node already there
(Nominated "nodeclaim/x, node/y") is tests/unit/test_nominated_events.py."""

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


def test_pending_pods_with_preferences_are_warned_about_once_each(lab):
    """Karpenter's consolidationWarnings: a preferred anti-affinity or a ScheduleAnyway spread can keep
    consolidation from moving a pod; each such pending pod is named once (its change monitor), ten a line."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    deployment = yaml.safe_load(inflate(3))
    deployment["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "inflate"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }
    ok("apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    ok("advance", "30s")
    pods = sorted(f"default/{p['metadata']['name']}" for p in json.loads(ok("get", "pods", "-o", "json"))["items"])
    [warned] = logged("pod(s) have a preferred Anti-Affinity which can prevent consolidation")
    assert sorted(warned["pods"].split(", ")) == pods
    assert logged("pod(s) have a preferred TopologySpreadConstraint which can prevent consolidation") == []


def test_the_node_a_deleted_nodeclaim_let_go_is_logged_as_deleted(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    ok("apply", "-f", "-", stdin=inflate(1))
    ok("advance", "20s")
    [claim] = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    ok("delete", "nodeclaim", claim["metadata"]["name"])
    ok("advance", "30s")
    [deleted] = logged("deleted node")
    assert (deleted["logger"], deleted["Node"]) == (
        "controller.node.termination",
        {"name": claim["status"]["nodeName"]},
    )
