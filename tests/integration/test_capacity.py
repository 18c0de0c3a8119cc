"""Capacity at a glance: requests against allocatable per cluster, NodePool and node; limit use; the nodes list
sorted and filtered."""

from __future__ import annotations

import uuid

import pytest

from karpui import models
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok

CAPPED = (EXAMPLES / "limits" / "nodepool.yaml").read_text()


def _capped_at(tmp_path, cpu: str):
    path = tmp_path / f"capped-{cpu}.yaml"
    path.write_text(CAPPED.replace('cpu: "16"', f'cpu: "{cpu}"'))
    return str(path)


def _four_capped_nodes():
    """The limits example: ten 3-CPU pods with hostname anti-affinity; four c-4x nodes (3.9 cores each) reach the
    16-CPU limit, so four pods run and six wait."""
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("scale", "deploy/big", "--replicas", "10")
    ok("advance", "60s")


@pytest.fixture
def viewer(lab):
    return logged_in(user())


def test_the_overview_shows_cluster_and_nodepool_requests_against_allocatable_and_limit_use(lab, viewer):
    _four_capped_nodes()
    response = viewer.get("/")
    total, [pool] = response.context["total"], response.context["pools"]
    assert (total.cpu_requested, total.cpu_allocatable) == (12_000, 15_600)
    assert [bar["text"] for bar in total.bars()] == ["12.00 / 15.60", "0.0 / 32.0"]
    assert (pool.name, pool.nodes, round(pool.price, 6)) == ("capped", 4, 0.434360)
    assert [(u.resource, u.used, u.limit, u.percent, u.level, u.over) for u in pool.limits] == [
        ("cpu", "16", "16", 100.0, "full", False)
    ]
    body = response.content.decode()
    assert '<tr id="capacity-capped" class="level-full">' in body
    assert 'cpu 16 / 16 <b>100%</b> <span class="badge">at limit</span>' in body
    assert "12.00 / 15.60 (77%)" in body  # the cluster row


def test_a_nodepool_over_its_limit_is_flagged_red(lab, viewer, tmp_path):
    _four_capped_nodes()
    ok("apply", "-f", _capped_at(tmp_path, "10"))  # lowered below what its four nodes already hold
    [pool] = viewer.get("/").context["pools"]
    assert [(u.percent, u.level, u.over) for u in pool.limits] == [(160.0, "full", True)]
    partial = viewer.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert (
        '<div class="limit level-full" data-resource="cpu">cpu 16 / 10 <b>160%</b> <span class="badge">over limit</span></div>'
        in partial
    )
    ok("apply", "-f", _capped_at(tmp_path, "20"))
    [pool] = viewer.get("/").context["pools"]
    assert [(u.percent, u.level) for u in pool.limits] == [(80.0, "high")]
    ok("apply", "-f", _capped_at(tmp_path, "100"))
    [pool] = viewer.get("/").context["pools"]
    assert [(u.percent, u.level) for u in pool.limits] == [(16.0, "ok")] and pool.level == "ok"


def test_the_overview_header_is_part_of_the_live_region(lab, viewer):
    ok("advance", "5s")
    clock = models.Cluster.objects.get(name="lab").clock
    partial = viewer.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section id="summary"')
    assert f'<span id="cluster-clock">{clock:%Y-%m-%d %H:%M:%S}</span>' in partial


GIB = 2**30


def _node(lab, name, pool, instance_type, zone, capacity_type, cpu, memory_gib, price):
    labels = {
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": capacity_type,
    }
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),  # a uid is a UUID: 36 characters, any name
            "labels": labels,
            "annotations": {"karpui.dev/price": price},
            "creationTimestamp": "2026-11-30T10:00:00Z",
        },
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": f"{memory_gib}Gi", "pods": "110"}},
    }
    models.KubeObject.objects.create(cluster=lab, kind="Node", name=name, uid=body["metadata"]["uid"], body=body)


def _pod(lab, name, node, cpu, memory):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": "Running"},
    }
    models.KubeObject.objects.create(
        cluster=lab, kind="Pod", namespace="default", name=name, uid=name, body=body, **models.KubeObject.summary(body)
    )


@pytest.fixture
def three_nodes(lab):
    _node(lab, "a-big", "general", "m-8x", "zone-a", "on-demand", "8", 32, "0.40")
    _node(lab, "b-small", "general", "c-2x", "zone-b", "spot", "2", 4, "0.03")
    _node(lab, "c-gpu", "gpu", "g-4x", "zone-a", "on-demand", "4", 16, "1.20")
    _pod(lab, "p1", "a-big", "2", "4Gi")  # 25 % cpu, 12.5 % memory
    _pod(lab, "p2", "b-small", "1500m", "1Gi")  # 75 % cpu, 25 % memory
    _pod(lab, "p3", "c-gpu", "1", "12Gi")  # 25 % cpu, 75 % memory
    _pod(lab, "p4", "c-gpu", "500m", "2Gi")  # with p3: 37.5 % cpu, 87.5 % memory


def _shown(viewer, **query):
    return [row["node"].name for row in viewer.get("/nodes/", query).context["nodes"]]


def test_nodes_sort_by_any_column_both_ways(three_nodes, viewer):
    assert _shown(viewer) == ["a-big", "b-small", "c-gpu"]
    assert _shown(viewer, sort="cpu") == ["a-big", "c-gpu", "b-small"]
    assert _shown(viewer, sort="-cpu") == ["b-small", "c-gpu", "a-big"]
    assert _shown(viewer, sort="-memory") == ["c-gpu", "b-small", "a-big"]
    assert _shown(viewer, sort="utilisation") == ["a-big", "b-small", "c-gpu"]
    assert _shown(viewer, sort="-price") == ["c-gpu", "a-big", "b-small"]
    assert _shown(viewer, sort="pods") == ["a-big", "b-small", "c-gpu"]
    assert _shown(viewer, sort="-pods") == ["c-gpu", "a-big", "b-small"]
    assert _shown(viewer, sort="zone") == ["a-big", "c-gpu", "b-small"]
    assert _shown(viewer, sort="no-such-column") == ["a-big", "b-small", "c-gpu"]


def test_nodes_filter_by_pool_type_zone_capacity_type_utilisation_and_name(three_nodes, viewer):
    assert _shown(viewer, nodepool="general") == ["a-big", "b-small"]
    assert _shown(viewer, instance_type="g-4x") == ["c-gpu"]
    assert _shown(viewer, zone="zone-a", sort="-price") == ["c-gpu", "a-big"]
    assert _shown(viewer, capacity_type="spot") == ["b-small"]
    assert _shown(viewer, max_util="30") == ["a-big"]  # 25 %
    assert _shown(viewer, min_util="75") == ["b-small", "c-gpu"]  # 75 % and 88 %
    assert _shown(viewer, min_util="76", max_util="100") == ["c-gpu"]
    assert _shown(viewer, q="SMALL") == ["b-small"]
    response = viewer.get("/nodes/", {"nodepool": "general", "sort": "-cpu"})
    assert response.context["choices"] == {
        "nodepool": ["general", "gpu"],
        "instance_type": ["c-2x", "g-4x", "m-8x"],
        "zone": ["zone-a", "zone-b"],
        "capacity_type": ["on-demand", "spot"],
    }
    body = response.content.decode()
    # Sorting keeps the filters; the poll keeps filters, sort and page.
    assert (
        '<th aria-sort="descending"><a href="?nodepool=general&amp;sort=cpu" class="sort">CPU (cores) ▼</a></th>'
        in body
    )
    assert 'hx-get="/nodes/?nodepool=general&amp;sort=-cpu&amp;page=1"' in body


def test_node_rows_show_requests_in_cores_and_gib_with_one_price_precision(three_nodes, viewer):
    body = viewer.get("/nodes/", {"q": "c-gpu"}).content.decode()
    assert "1.50 / 4.00 (38%)" in body and "14.0 / 16.0 (88%)" in body
    assert '<td class="use level-high" style="--w:88%">14.0 / 16.0 (88%)</td>' in body
    assert "<td>$1.2000</td>" in body
    [general, gpu] = viewer.get("/nodes/").context["pools"]
    assert (general.name, general.nodes, general.usage.cpu_requested, general.usage.cpu_allocatable) == (
        "general",
        2,
        3500,
        10_000,
    )
    assert (gpu.usage.memory_requested, gpu.usage.memory_allocatable) == (14 * GIB, 16 * GIB)


def test_a_full_page_of_nodes_with_long_names_and_labels_stays_under_50_kb(lab, viewer):
    """Issue 15: a refresh stays under 50 KB. A page is 75 nodes; these have 63-character names (as long as a
    hostname label may be) and long NodePool, type and zone labels, and the cluster switcher lists three clusters.
    Rows of ~850 bytes made this page 65.3 KB and its partial 62.0 KB."""
    for other in ("staging-eu-central-1-observe", "production-eu-central-1-kwok"):
        models.Cluster.objects.create(name=other, mode=models.Cluster.Mode.OBSERVE)
    pools = ["batch-processing-spot-arm64", "latency-critical-on-demand", "general-purpose-x86"]
    for i in range(80):
        name = f"ip-10-{i:03d}-{i * 7 % 256:03d}-{i * 13 % 256:03d}.eu-central-1.compute.internal-amd64-general-1"
        instance_type = f"m7i-flex-{i % 4 * 4 + 4}xlarge-amd64-linux"
        _node(
            lab, name, pools[i % 3], instance_type, f"eu-central-1{'abc'[i % 3]}-zone", "on-demand", "15900m", 64, "1.2"
        )
        _pod(lab, f"pod-{i}", name, "12345m", "48Gi")

    for query in ({}, {"sort": "-cpu"}):
        full = viewer.get("/nodes/", query)
        partial = viewer.get("/nodes/", query, HTTP_HX_REQUEST="true")
        assert len(full.context["nodes"]) == 75 and "<html" not in partial.content.decode()
        assert (len(full.content) < 50_000, len(partial.content) < 50_000) == (True, True)


def test_the_nodes_page_has_no_blank_cluster_row(three_nodes, viewer):
    """The capacity table on the nodes page took the page's node count for the cluster's usage: a "cluster" row with
    no figures and $0.0000. The overview has the cluster's row; the nodes page has the NodePools'."""
    body = viewer.get("/nodes/").content.decode()
    assert 'id="capacity-cluster"' not in body and 'id="capacity-general"' in body
