"""Object pages a platform engineer reads: a summary first (status, conditions, requests against allocatable, the
owner chain, pods with their nodes, a waiting pod's verdicts, recent events, the commands about it), live, and the
YAML folded below without kubectl's last-applied copy of the file."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_dashboard import logged_in, user
from tests.integration.test_pending_verdicts import walk  # noqa: F401 (a fixture)
from tests.karp import EXAMPLES, ok, table

AGENT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: agent:1, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
"""


@pytest.fixture
def inflated(lab, tmp_path):
    """Three inflate pods (one CPU each) and a DaemonSet's pod on one Ready node."""
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT)
    ok("apply", "-f", str(EXAMPLES / "provisioning"), "-f", str(agent))
    ok("scale", "deploy/inflate", "--replicas", "3")
    ok("advance", "40s")
    return logged_in(user())


def test_a_pods_page_says_phase_node_qos_requests_and_owners_first(inflated):
    [node] = [r["NAME"] for r in table("get", "nodes")]
    pods = json.loads(ok("get", "pods", "-l", "app=inflate", "-o", "json"))["items"]
    pod = pods[0]
    name, replicaset = pod["metadata"]["name"], pod["metadata"]["ownerReferences"][0]["name"]
    response = inflated.get(f"/objects/Pod/default/{name}/")
    summary = response.context["summary"]
    assert (summary["status"], summary["node"], summary["qos"], summary["requests"]) == (
        "Running",
        node,
        "Burstable",
        "cpu 1",
    )
    assert summary["owner_chain"] == [
        {"kind": "ReplicaSet", "name": replicaset, "url": f"/objects/ReplicaSet/default/{replicaset}/"},
        {"kind": "Deployment", "name": "inflate", "url": "/objects/Deployment/default/inflate/"},
    ]
    assert [c["type"] for c in summary["conditions"]] == [c["type"] for c in pod["status"]["conditions"]]
    assert [(c["name"], c["requests"], c["limits"]) for c in summary["containers"]] == [("inflate", "cpu 1", "—")]
    body = response.content.decode()
    assert body.index('id="object-summary"') < body.index('<details class="yaml-fold"')  # the summary first
    assert f'<a href="/nodes/{node}/">{node}</a>' in body
    assert 'Owned by <a href="/objects/ReplicaSet/default/' in body and " ← " in body


def test_a_waiting_pods_page_says_what_blocks_it_first(walk):  # noqa: F811
    response = walk.get("/objects/Pod/default/pinned/")
    summary = response.context["summary"]
    assert summary["status"] == "Pending (waiting for a node)"
    assert [(v["label"], v["kind"]) for v in summary["verdicts"]] == [
        ("node kind-worker", "scheduler"),
        ("all", "validation"),
    ]
    assert "Insufficient cpu on kind-worker" in response.content.decode()


def test_a_deployments_page_has_its_replicas_replicasets_pods_with_nodes_and_no_last_applied_blob(inflated):
    [node] = [r["NAME"] for r in table("get", "nodes")]
    response = inflated.get("/objects/Deployment/default/inflate/")
    summary = response.context["summary"]
    assert (summary["ready"], summary["desired"], summary["updated"], summary["available"]) == (3, 3, 3, 3)
    [replicaset] = summary["replicasets"]
    assert (replicaset["revision"], replicaset["ready"], replicaset["desired"]) == ("1", 3, 3)
    assert (summary["pod_count"], summary["pods_waiting"], summary["spread_nodes"], summary["busiest_node"]) == (
        3,
        0,
        1,
        3,
    )
    assert {p["node"] for p in summary["pods"]} == {node}
    assert summary["pod_phases"] == [("Running", 3)]
    body = response.content.decode()
    assert "kubectl.kubernetes.io/last-applied-configuration" not in body.split('id="object-yaml"')[1]
    assert "(kubectl's last-applied-configuration annotation, " in body
    assert '<a href="/pods/?owner=Deployment%2Fdefault%2Finflate">all of them</a>' in body


def test_a_daemonsets_page_counts_its_pods_per_node(inflated):
    summary = inflated.get("/objects/DaemonSet/default/agent/").context["summary"]
    assert (summary["desired"], summary["ready"], summary["pod_count"], summary["spread_nodes"]) == (1, 1, 1, 1)


def test_a_nodeclaims_page_says_its_lifecycle_requests_against_allocatable_node_and_nodepool(inflated):
    [claim] = [r["NAME"] for r in table("get", "nodeclaims")]
    response = inflated.get(f"/objects/NodeClaim/{claim}/")
    summary = response.context["summary"]
    assert (summary["status"], summary["nodepool"], summary["instance_type"], summary["capacity_type"]) == (
        "Ready",
        "default",
        "c-4x-amd64-linux",
        "on-demand",
    )
    assert summary["node_url"] == f"/nodes/{summary['node']}/"
    cpu = next(r for r in summary["resources"] if r["resource"] == "cpu")
    assert (cpu["requested"], cpu["allocatable"]) == ("3100m", "3900m")  # 3 pods and the DaemonSet's 100m
    assert [bar["resource"] for bar in summary["bars"]] == ["cpu", "memory"]


def test_the_summary_is_live_and_says_when_the_object_is_gone(inflated):
    pods = json.loads(ok("get", "pods", "-l", "app=inflate", "-o", "json"))["items"]
    name = pods[0]["metadata"]["name"]
    page = inflated.get(f"/objects/Pod/default/{name}/").content.decode()
    assert 'hx-get="?part=summary" hx-trigger="every 3s"' in page
    live = inflated.get(f"/objects/Pod/default/{name}/", {"part": "summary"}, HTTP_HX_REQUEST="true")
    assert live.content.decode().lstrip().startswith('<section id="object-summary"')
    ok("delete", "pod", name)
    gone = inflated.get(f"/objects/Pod/default/{name}/", {"part": "summary"}, HTTP_HX_REQUEST="true").content.decode()
    assert "it is gone" in gone and "hx-trigger" not in gone


def test_a_nodepools_page_says_its_nodes_usage_against_limits_and_nodeclaims_before_the_editor(inflated):
    [claim] = [row["NAME"] for row in table("get", "nodeclaims")]
    response = inflated.get("/nodepools/default/")
    summary = response.context["summary"]
    assert (summary["nodes"], summary["nodeclaim_count"]) == (1, 1)
    [shown] = summary["nodeclaims"]
    assert (shown["name"], shown["type"], shown["state"]) == (claim, "c-4x-amd64-linux", "Ready")
    body = response.content.decode()
    assert body.index('id="nodepool-summary"') < body.index('<form method="post" class="editor"')
    assert f'<a href="/objects/NodeClaim/{claim}/">{claim}</a>' in body
