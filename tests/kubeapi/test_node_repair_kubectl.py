"""Node repair through the lab's Kubernetes API: `kubectl patch node --subresource=status` makes a node NotReady (as
Karpenter's regression suite replaces node conditions), and the repair replaces it once kwok's 10-minute toleration
has passed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from karpui.models import Cluster
from tests.karp import EXAMPLES, ok, table


def test_a_node_made_not_ready_with_kubectl_is_repaired(kubectl: Any, settings: Any) -> None:
    from karpui.settings import feature_gates

    settings.KARPUI_FEATURE_GATES = feature_gates("NodeRepair=true")
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "30s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    # v1.15's repair counts the toleration from no earlier than the Node's creation (policy.go Match), so a condition
    # dated before it waits the full 10 minutes from then; the replacement comes up first, then the node goes.
    since = (Cluster.objects.get(name="lab").clock - timedelta(minutes=31)).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": since}]}}
    kubectl.ok("patch", "node", node, "--subresource=status", "--type=strategic", "-p", json.dumps(patch))
    ready = '{.status.conditions[?(@.type=="Ready")].status}'
    ok("advance", "1m")
    assert [r["NAME"] for r in table("get", "nodes")] == [node]  # 1.5 minutes after its creation: tolerated
    ok("advance", "10m")
    nodes = [r["NAME"] for r in table("get", "nodes")]
    assert len(nodes) == 1 and nodes[0] != node
    assert kubectl.ok("get", "node", nodes[0], "-o", f"jsonpath={ready}") == "True"
    repairs = kubectl.ok("get", "disruptioncommands", "-o", "jsonpath={.items[*].spec.reason}")
    assert repairs == "Unhealthy"
