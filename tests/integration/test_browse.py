"""Browsing a cluster: every pod with filters, every workload with its replicas, a search by name across kinds, one
line per cluster; each list also as CSV with every row its filters keep."""

from __future__ import annotations

import csv
import io

import pytest

from karpui import models
from karpui.insight import browse
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, table

CAPPED = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck}
spec:
  replicas: 2
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec:
      nodeSelector: {team: nobody}
      containers: [{name: app, image: pause:3, resources: {requests: {cpu: 250m, memory: 64Mi}}}]
"""


@pytest.fixture
def browsing(lab, tmp_path):
    """Three inflate pods running on one node and two pods of `stuck` that no NodePool can take."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text(CAPPED)
    ok("apply", "-f", str(stuck))
    ok("advance", "30s")
    return logged_in(user())


def parsed(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_pods_list_filters_by_phase_node_owner_name_and_waiting(browsing):
    [node] = [r["NAME"] for r in table("get", "nodes")]
    everything = browsing.get("/pods/")
    assert everything.context["total"] == 5
    on_node = browsing.get("/pods/", {"node": node}).context["pods"]
    assert [(p["phase"], p["node"], p["owner"].kind, p["owner"].name) for p in on_node] == [
        ("Running", node, "Deployment", "inflate")
    ] * 3
    waiting = browsing.get("/pods/", {"pending": "1"}).context["pods"]
    assert [(p["phase"], p["node"], p["owner"].name) for p in waiting] == [("Pending (no node)", "", "stuck")] * 2
    assert browsing.get("/pods/", {"owner": "Deployment/default/inflate"}).context["total"] == 3
    assert browsing.get("/pods/", {"owner": "Deployment/default/stuck", "phase": "Running"}).context["total"] == 0
    assert browsing.get("/pods/", {"q": "STUCK"}).context["total"] == 2
    body = everything.content.decode()
    assert f'<a href="/nodes/{node}/">{node}</a>' in body
    assert '<a href="/objects/Deployment/default/inflate/">Deployment inflate</a>' in body
    refused = browsing.get("/pods/", {"phase": "Sleeping"})
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "phase: must be one of , Pending, Running, Succeeded, Failed, Unknown, got 'Sleeping'\n",
    )


def test_the_pods_list_downloads_every_row_its_filters_keep(browsing, monkeypatch):
    monkeypatch.setattr(browse, "PODS_PAGE_SIZE", 2)
    assert browsing.get("/pods/").context["pages"] == 3
    table = parsed(browsing.get("/pods/", {"format": "csv", "owner": "Deployment/default/inflate"}))
    assert table[0] == [
        "namespace",
        "name",
        "phase",
        "node",
        "owner_kind",
        "owner",
        "cpu_request",
        "memory_request",
        "age_s",
    ]
    assert [(r[0], r[2], r[4], r[5], r[6], r[7]) for r in table[1:]] == [
        ("default", "Running", "Deployment", "inflate", "1", "0")
    ] * 3
    assert browsing.get("/pods/", {"format": "pdf"}).status_code == 400


def test_the_workloads_list_shows_replicas_and_waiting_pods_with_replicasets_under_their_deployment(browsing):
    listing = browsing.get("/workloads/")
    got = [
        (w["kind"], w["name"], w["ready"], w["desired"], w["available"], w["pending"])
        for w in listing.context["workloads"]
    ]
    assert got == [("Deployment", "inflate", 3, 3, 3, 0), ("Deployment", "stuck", 0, 2, 0, 2)]
    replicasets = browsing.get("/workloads/", {"kind": "ReplicaSet"}).context["workloads"]
    assert len(replicasets) == 2 and all(w["kind"] == "ReplicaSet" for w in replicasets)
    body = listing.content.decode()
    assert '<a href="/pods/?owner=Deployment%2Fdefault%2Finflate">3/3</a>' in body
    assert '<a href="/pods/pending/?group=none&amp;owner=Deployment%2Fdefault%2Fstuck">2</a>' in body
    table = parsed(browsing.get("/workloads/", {"format": "csv"}))
    assert table[1][:8] == ["Deployment", "default", "inflate", "3", "3", "3", "3", "0"]


def test_search_finds_objects_of_every_kind_by_a_part_of_their_name(browsing):
    [claim] = table("get", "nodeclaims")
    node = claim["NODE"]  # kwok-<nodeclaim>-...: the NodeClaim's random part is in both names
    results = browsing.get("/search/", {"q": claim["NAME"][-5:].upper()}).context["results"]
    assert [(g["kind"], g["count"]) for g in results][:2] == [("Node", 1), ("NodeClaim", 1)]
    assert results[0]["items"] == [{"label": node, "url": f"/nodes/{node}/"}]
    inflate = browsing.get("/search/", {"q": "inflate"}).context["results"]
    assert [(g["kind"], g["count"]) for g in inflate] == [
        ("Pod", 3),
        ("Deployment", 1),
        ("ReplicaSet", 1),
        ("Event", 3),
    ]
    assert "Nothing in cluster lab is named like “zzz”." in browsing.get("/search/", {"q": "zzz"}).content.decode()


def test_all_clusters_on_one_page(browsing):
    ok("cluster", "create", "b")
    lines = browsing.get("/clusters/").context["lines"]
    assert [(line["cluster"].name, line["nodes"], line["pending"], line["awaiting"]) for line in lines] == [
        ("b", 0, 0, 0),
        ("lab", 1, 2, 0),
    ]
    assert lines[1]["cost_per_hour"] == pytest.approx(0.108590, abs=1e-6)
    body = browsing.get("/clusters/").content.decode()
    assert '<a href="/pods/pending/">2</a>' in body and '<a href="/?cluster=b">b</a>' in body
    assert parsed(browsing.get("/clusters/", {"format": "csv"}))[2][:3] == ["lab", "lab", "0.1086"]
    assert models.Cluster.objects.count() == 2


def test_the_paged_lists_download_every_row_as_csv(browsing, monkeypatch):
    from karpui.insight import capacity

    monkeypatch.setattr(capacity, "NODES_PAGE_SIZE", 1)
    [node] = [row["NAME"] for row in table("get", "nodes")]
    pending = parsed(browsing.get("/pods/pending/", {"format": "csv"}))
    assert pending[0] == [
        "namespace",
        "name",
        "owner_kind",
        "owner",
        "waiting_s",
        "blocked_by",
        "verdicts",
        "scheduler",
    ]
    assert [(r[0], r[2], r[3]) for r in pending[1:]] == [("default", "Deployment", "stuck")] * 2
    assert all(r[5] == "default: requirements" for r in pending[1:])
    nodes = parsed(browsing.get("/nodes/", {"format": "csv"}))
    assert [r[:4] for r in nodes[1:]] == [[node, "default", "c-4x-amd64-linux", "on-demand"]]
    assert nodes[1][7:9] == ["3", "3900m"]
    catalog = parsed(browsing.get("/catalog/", {"format": "csv", "family": "c", "arch": "amd64", "os": "linux"}))
    assert len(catalog) == 1 + 12 and catalog[1][1] == "c-1x-amd64-linux"
    savings = parsed(browsing.get("/savings/", {"format": "csv"}))
    assert savings[0][:3] == ["command", "reason", "decision"]
    body = browsing.get("/nodes/").content.decode()
    assert '<table id="nodes" data-csv="?format=csv">' in body  # the table's CSV link takes every page
