"""`kubectl events --for KIND/NAME` selects Events on their object's kind, name and apiVersion: the lab's Events say
all three, as client-go's recorder does. `karpui.clusters.lab.advance` stands in for the worker's tick."""

from __future__ import annotations

import json
from typing import Any

from karpui.clusters import lab


def test_events_for_a_node_or_nodeclaim_are_found_by_kind_and_api_version(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "2")
    lab.advance("lab", 60)
    [claim] = kubectl.table("get", "nodeclaims")
    name, node = claim["NAME"], claim["NODE"]

    def found(target: str) -> list[tuple[str, str, str, str]]:
        listed = json.loads(kubectl.ok("events", "--for", target, "-o", "json"))["items"]
        return [
            (e["involvedObject"]["apiVersion"], e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
            for e in listed
        ]

    # One Unconsolidatable each (why it cannot be replaced): inside consolidateAfter nothing is told, as in Karpenter.
    assert found(f"node/{node}") == [("v1", "Node", node, "Unconsolidatable")]
    assert found(f"nodeclaim/{name}") == [
        ("karpenter.sh/v1", "NodeClaim", name, "Launched"),
        ("karpenter.sh/v1", "NodeClaim", name, "Unconsolidatable"),
    ]
    [pod] = [p["NAME"] for p in kubectl.table("get", "pods")][:1]
    assert found(f"pod/{pod}") == [("v1", "Pod", pod, "Nominated")]
