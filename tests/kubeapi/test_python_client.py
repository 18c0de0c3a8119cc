"""The official Python client against the lab's API, as a script or the kube adapter would use it: typed clients,
the dynamic client (which discovers through the legacy group-version documents), and paging."""

from __future__ import annotations

from typing import Any

from kubernetes import client, dynamic

from karpui.clusters import lab
from tests.karp import EXAMPLES, ok


def test_typed_and_dynamic_clients_read_pods_nodes_and_nodeclaims(kube_client: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    lab.advance("lab", 5)
    core = client.CoreV1Api(kube_client)
    pods = core.list_namespaced_pod("default", label_selector="app=inflate")
    assert [p.status.phase for p in pods.items] == ["Running"] * 3
    [node] = core.list_node().items
    assert node.status.allocatable == {"cpu": "3900m", "ephemeral-storage": "20Gi", "memory": "8182Mi", "pods": "64"}
    deployment = client.AppsV1Api(kube_client).read_namespaced_deployment("inflate", "default")
    assert deployment.spec.replicas == 3
    nodeclaims = dynamic.DynamicClient(kube_client).resources.get(api_version="karpenter.sh/v1", kind="NodeClaim")
    [claim] = nodeclaims.get().items
    assert claim.status.nodeName == node.metadata.name
    assert claim.metadata.labels["node.kubernetes.io/instance-type"] == "c-4x-amd64-linux"


def test_the_client_pages_through_a_long_list(kube_client: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    core = client.CoreV1Api(kube_client)
    names, token = [], None
    while True:
        page = core.list_namespaced_pod("default", limit=2, _continue=token)
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == sorted(names) and len(names) == 5
