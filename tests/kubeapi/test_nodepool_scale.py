"""`kubectl scale nodepool` against the lab's API: Karpenter's NodePool CRD has the scale subresource
(.spec.replicas, .status.nodes), which is how a static NodePool (v1.8+) is resized."""

from __future__ import annotations

from typing import Any

from tests.integration.test_static_lab import STATIC
from tests.karp import ok


def test_kubectl_scales_a_static_nodepool_and_refuses_a_dynamic_one(kubectl: Any, settings: Any) -> None:
    from karpui.settings import feature_gates

    settings.KARPUI_FEATURE_GATES = feature_gates("StaticCapacity=true")
    ok("apply", "-f", "-", stdin=STATIC)
    assert kubectl.ok("scale", "nodepool", "static", "--replicas", "4") == "nodepool.karpenter.sh/static scaled\n"
    assert kubectl.ok("get", "nodepool", "static", "-o", "jsonpath={.spec.replicas}") == "4"
    ok("advance", "10s")
    assert kubectl.ok("get", "nodepool", "static", "-o", "jsonpath={.status.nodes}") == "4"
    ok("apply", "-f", "-", stdin=STATIC.replace("name: static", "name: dynamic").replace("  replicas: 1\n", ""))
    refused = kubectl.run("scale", "nodepool", "dynamic", "--replicas", "2")
    assert refused.returncode == 1
    assert "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset)" in refused.stderr
