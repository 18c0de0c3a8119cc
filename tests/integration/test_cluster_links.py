"""Issue 14: every link, poll and form of a cluster's pages stays on that cluster, so reading or acting on cluster
b never reads or acts on the lab."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Permission

from karpui import models
from karpui.gate import disruption
from karpui.people.audit import Actor
from tests.integration.test_dashboard import PAGES, awaiting_command, logged_in, user
from tests.karp import EXAMPLES, ok, table

URL_ATTRIBUTES = ("href", "action", "hx-get", "hx-post", "hx-push-url")
# Pages that are the same whichever cluster is shown: they take no `?cluster=`.
CLUSTER_INDEPENDENT = ("/admin/", "/accounts/", "/static/", "/metrics", "/k8s/", "/clusters/")
STRANDED = """\
apiVersion: v1
kind: Pod
metadata:
  name: stranded
spec:
  nodeSelector: {kubernetes.io/arch: arm64}
  containers:
    - {name: app, image: pause, resources: {requests: {cpu: "1"}}}
"""


class Links(HTMLParser):
    """Every URL a page can lead to or post to, and each GET form with the cluster it submits."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.get_forms: list[tuple[str, str | None]] = []  # (form id or class, the cluster its fields carry)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id") == "cluster-switch":
            return  # the switcher leads to the other clusters
        if tag == "form" and (found.get("method") or "get") == "get":
            # A browser replaces a GET form's query with its fields: the cluster must be one of them.
            self.get_forms.append((found.get("id") or found.get("class") or "", None))
            found = {"hx-push-url": found["hx-push-url"]} if "hx-push-url" in found else {}
        self.urls += [found[a] or "" for a in URL_ATTRIBUTES if a in found]
        if tag == "input" and found.get("name") == "cluster" and self.get_forms:
            self.get_forms[-1] = (self.get_forms[-1][0], found.get("value"))


def astray(body: str) -> list[str]:
    """The same-site URLs of a page that do not name cluster b, and its GET forms that would not submit it."""
    links = Links()
    links.feed(body)
    wrong = []
    for url in links.urls:
        parts = urlsplit(url)
        if parts.netloc or url.startswith("#") or parts.path.startswith(CLUSTER_INDEPENDENT):
            continue
        if parts.path.startswith("/catalog/") and parts.path.endswith("/export"):
            continue  # a catalog file is global
        if parse_qs(parts.query).get("cluster") != ["b"]:
            wrong.append(url)
    return wrong + [f"<form {name}>" for name, cluster in links.get_forms if cluster != "b"]


def form_urls(client, page: str) -> list[str]:
    """The URLs a page's links and forms lead to."""
    links = Links()
    links.feed(client.get(page).content.decode())
    return links.urls


def command_on(cluster: models.Cluster, approver) -> None:
    """Cluster `cluster` in manual mode with a node left half used, whose replacement awaits a person's approval."""
    on = ("--cluster", cluster.name)
    ok(*on, "apply", "-f", str(EXAMPLES / "provisioning"))
    ok(*on, "scale", "deploy/inflate", "--replicas", "2")
    ok(*on, "advance", "5s")
    disruption.nodepool_approval_mode_set(
        cluster=cluster, nodepool="default", mode="manual", actor=Actor.for_user(approver, "web")
    )
    ok(*on, "scale", "deploy/inflate", "--replicas", "1")
    ok(*on, "advance", "40s")


@pytest.fixture
def two_clusters(lab, tmp_path):
    """The lab and cluster b each with an empty node whose command awaits approval; b also has a running pod on a
    second node and a pod no NodePool can take. Returns alice's client and the two commands' names."""
    approver, lab_command = awaiting_command()
    ok("cluster", "create", "b")
    b = models.Cluster.objects.get(name="b")
    command_on(b, approver)
    stranded = tmp_path / "stranded.yaml"
    stranded.write_text(STRANDED)
    ok("--cluster", "b", "apply", "-f", str(stranded))
    ok("--cluster", "b", "advance", "5s")
    [(b_command, phase)] = [(r["NAME"], r["PHASE"]) for r in table("--cluster", "b", "get", "disruptioncommands")]
    assert phase == "AwaitingApproval"
    approver.user_permissions.add(Permission.objects.get(codename="request_disruption"))
    return logged_in(approver), b_command, lab_command


def approvals(cluster: str) -> dict[str, object]:
    """Each command's decision, as a person made it (the engine acts on it at its next tick)."""
    commands = models.KubeObject.objects.filter(cluster__name=cluster, kind="DisruptionCommand")
    return {c.name: c.body["spec"].get("approval") for c in commands}


def test_every_link_poll_and_form_of_cluster_bs_pages_stays_on_cluster_b(two_clusters):
    client, *_ = two_clusters
    nodes = [row["NAME"] for row in table("--cluster", "b", "get", "nodes")]
    claims = [row["NAME"] for row in table("--cluster", "b", "get", "nodeclaims")]
    pods = [row["NAME"] for row in table("--cluster", "b", "get", "pods")]
    pages = [
        *(page for page in PAGES if page != "/clusters/"),  # every cluster's page: it links to each
        *(f"/nodes/{node}/" for node in nodes),
        f"/nodes/{nodes[0]}/?why=1",
        *(f"/objects/Pod/default/{pod}/" for pod in pods),
        f"/objects/NodeClaim/{claims[0]}/",
        "/nodepools/default/",
        "/nodepools/new/",
        "/pods/pending/?group=none",
        "/pods/pending/?group=reason",
        "/events/?group=none",
        "/pods/?pending=1",
        "/workloads/",
        f"/search/?q={nodes[0]}",
    ]
    wrong = {}
    for page in pages:
        url = f"{page}{'&' if '?' in page else '?'}cluster=b"
        for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = client.get(url, **htmx)
            assert response.status_code == 200, url
            if astray(response.content.decode()):
                wrong[url, bool(htmx)] = astray(response.content.decode())
    assert wrong == {}


@pytest.mark.parametrize(("action", "decision"), [("Approve", "approved"), ("Deny", "denied")])
def test_deciding_a_command_on_cluster_bs_page_decides_bs_command(two_clusters, action, decision):
    client, name, lab_command = two_clusters
    [url] = [
        u for u in form_urls(client, "/disruption/?cluster=b") if u.startswith(f"/disruption/{name}/{action.lower()}")
    ]
    response = client.post(url, {"reason": "not during the sale"})
    assert (response.status_code, response["Location"]) == (302, "/disruption/?cluster=b")
    assert (approvals("b")[name]["decision"], approvals("b")[name]["reason"]) == (decision, "not during the sale")
    assert approvals("lab") == {lab_command: None}


def test_cordoning_a_node_on_cluster_bs_node_page_cordons_bs_node(two_clusters):
    client, *_ = two_clusters
    node = table("--cluster", "b", "get", "nodes")[0]["NAME"]
    [url] = [u for u in form_urls(client, f"/nodes/{node}/?cluster=b") if u.startswith(f"/nodes/{node}/cordon")]
    response = client.post(url)
    assert (response.status_code, response["Location"]) == (302, f"/nodes/{node}/?cluster=b")
    assert {row["NAME"]: row["STATUS"] for row in table("--cluster", "b", "get", "nodes")}[
        node
    ] == "Ready,SchedulingDisabled"
    assert {row["STATUS"] for row in table("get", "nodes")} == {"Ready"}


def test_pausing_and_resuming_on_cluster_bs_page_pauses_and_resumes_b_alone(lab):
    ok("cluster", "create", "b")
    client = logged_in(user("alice", "pause_disruption"))
    [pause] = [u for u in form_urls(client, "/disruption/?cluster=b") if u.startswith("/disruption/pause")]
    response = client.post(pause, {"duration": "1h", "reason": "incident 4711"})
    assert (response.status_code, response["Location"]) == (302, "/disruption/?cluster=b")
    paused = {c.name: c.pause_reason for c in models.Cluster.objects.exclude(paused_until=None)}
    assert paused == {"b": "incident 4711"}
    [resume] = [u for u in form_urls(client, "/disruption/?cluster=b") if u.startswith("/disruption/resume")]
    assert client.post(resume)["Location"] == "/disruption/?cluster=b"
    assert list(models.Cluster.objects.exclude(paused_until=None)) == []


def test_saving_a_nodepool_in_cluster_bs_editor_changes_bs_and_comes_back_to_it(two_clusters):
    client, *_ = two_clusters
    form = client.get("/nodepools/default/?cluster=b").context["form"]
    data = {field: ("" if value is None else value) for field, value in form.initial.items()}
    response = client.post("/nodepools/default/?cluster=b", {**data, "spec.weight": "7", "action": "save"})
    assert (response.status_code, response["Location"]) == (302, "/nodepools/default/?cluster=b")
    weights = {row.cluster.name: row.spec.get("weight") for row in models.NodePool.objects.filter(name="default")}
    assert weights == {"lab": None, "b": 7}


def test_templates_build_their_dashboard_urls_with_cluster_url():
    """A bare `{% url %}` drops the page's cluster: a new one must be `{% cluster_url %}`, or be added here with
    why it keeps the cluster anyway (a query string its view builds with the cluster, a GET form's hidden field)."""
    templates = Path(__file__).resolve().parents[2] / "templates"
    bare = sorted(
        (str(path.relative_to(templates)), name)
        for path in templates.rglob("*.html")
        for name in re.findall(r"{% url '([^']+)'", path.read_text())
    )
    assert bare == [
        ("karpui/base.html", "admin:index"),
        ("karpui/base.html", "banners"),  # ?cluster= its own, the lab's included
        ("karpui/base.html", "clusters"),  # every cluster's page
        ("karpui/base.html", "events"),  # a reconcile error's cluster, which may be another
        ("karpui/base.html", "logout"),
        ("karpui/base.html", "search"),  # a GET form: a hidden cluster field
        ("karpui/browse/clusters.html", "clusters"),  # every cluster's page
        ("karpui/browse/pods.html", "pods"),  # ?{{ narrowed }}, built with the cluster
        ("karpui/browse/workloads.html", "workloads"),  # ?{{ narrowed }}, built with the cluster
        ("karpui/catalog/list.html", "catalog-export"),  # catalogs are global
        ("karpui/catalog/list.html", "catalog-export"),
        ("karpui/events/_logs_poll.html", "events"),  # ?{{ narrowed }}, built with the cluster
        ("karpui/events/list.html", "events"),  # ?{{ narrowed }}, built with the cluster
        ("karpui/nodes/_simulate.html", "node-detail"),  # a GET form: {% cluster_field %}
        ("karpui/nodes/_simulate.html", "node-detail"),
        ("karpui/nodes/list.html", "nodes"),  # ?{{ narrowed }}, built with the cluster
        ("karpui/pods/pending.html", "pending"),  # ?{{ narrowed }}, built with the cluster
        ("registration/login.html", "admin:index"),
        ("registration/login.html", "login"),
    ]


class Switcher(HTMLParser):
    """The cluster switcher's action and the fields it submits beside the cluster."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: list[tuple[str, str]] = []
        self.inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = found.get("id") == "cluster-switch"
            if self.inside:
                self.action = found.get("action")
        elif self.inside and tag in ("input", "select"):
            self.fields.append((found.get("name") or "", found.get("value") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def switcher(client, page: str) -> tuple[str | None, list[tuple[str, str]]]:
    parsed = Switcher()
    parsed.feed(client.get(page).content.decode())
    return parsed.action, parsed.fields


def switched(client, page: str, to: str) -> str:
    """Where the switcher on `page` lands when cluster `to` is chosen."""
    action, fields = switcher(client, page)
    assert action == "/switch/"
    query = {name: value for name, value in fields if name != "cluster"}
    response = client.get(action, {**query, "cluster": to})
    assert response.status_code == 302
    return response["Location"]


def test_switching_cluster_keeps_the_pages_filters_and_leaves_its_page_number_behind(two_clusters):
    client, *_ = two_clusters
    page = "/nodes/?cluster=b&nodepool=default&zone=test-zone-a&zone=x&page=1&sort=-age"
    assert switched(client, page, "lab") == "/nodes/?nodepool=default&zone=test-zone-a&zone=x&sort=-age"
    assert switched(client, "/events/?q=Reconciler+error", "b") == "/events/?q=Reconciler+error&cluster=b"
    assert switched(client, "/pods/pending/?group=none&namespace=default", "b") == (
        "/pods/pending/?group=none&namespace=default&cluster=b"
    )


def test_switching_cluster_from_an_objects_page_lands_on_it_there_or_on_its_list_never_a_404(two_clusters):
    client, *_ = two_clusters
    [node, *_] = [row["NAME"] for row in table("--cluster", "b", "get", "nodes")]
    assert client.get(f"/nodes/{node}/").status_code == 404  # not in the lab: the switch does not stay on the page
    assert switched(client, f"/nodes/{node}/?cluster=b&why=1", "lab") == f"/nodes/?q={node}"
    assert switched(client, "/nodepools/default/?cluster=b", "lab") == "/nodepools/default/"  # in both
    gone = client.get("/switch/", {"from": "/objects/Pod/default/nowhere/?cluster=b", "cluster": "lab"})
    assert gone["Location"] == "/search/?q=nowhere"
    away = client.get("/switch/", {"from": "https://elsewhere.example/nodes/", "cluster": "b"})
    assert away["Location"] == "/?cluster=b"  # only this site's own pages are followed


def test_a_flash_message_waits_for_a_page_of_the_cluster_it_is_about(lab):
    ok("cluster", "create", "b")
    client = logged_in(user("alice", "pause_disruption"))
    client.post("/disruption/pause?cluster=b", {"duration": "1h", "reason": "incident 4711"})
    client.post("/disruption/resume?cluster=b")
    said = '<div class="message success">voluntary disruption resumed</div>'  # the cluster tag routes, never shows
    assert said not in client.get("/nodes/").content.decode()  # the lab's page, in another tab
    assert said in client.get("/nodes/?cluster=b").content.decode()
    assert said not in client.get("/nodes/?cluster=b").content.decode()  # said once
