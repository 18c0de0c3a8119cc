"""Dashboard pages: login required, real data, htmx partials, decisions as audited POSTs, bounded queries."""

import re
from urllib.parse import quote

import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from karpui import models
from karpui.clusters import ticks
from karpui.gate import disruption
from karpui.insight import drilldown
from karpui.people.audit import Actor
from tests.karp import EXAMPLES, ok, rows, table

PAGES = [
    "/",
    "/clusters/",
    "/workloads/",
    "/pods/",
    "/search/?q=inflate",
    "/pods/pending/",
    "/nodes/",
    "/disruption/",
    "/savings/",
    "/trends/",
    "/events/",
    "/nodepools/",
    "/catalog/",
    "/devices/",
]


def user(name="viewer", *perms):
    account = User.objects.create_user(name, password="pw-only-for-tests")
    for codename in perms:
        account.user_permissions.add(Permission.objects.get(codename=codename))
    return account


def logged_in(account, **kwargs):
    client = Client(**kwargs)
    client.force_login(account)
    return client


@pytest.mark.parametrize("page", PAGES)
def test_every_page_needs_a_login(client, lab, page):
    response = client.get(page)
    assert response.status_code == 302 and response["Location"] == f"/accounts/login/?next={quote(page, safe='/')}"


def awaiting_command():
    """A manual-mode lab whose empty node waits for a person's approval."""
    approver = user("alice", "approve_disruption", "pause_disruption", "change_nodepool")
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    disruption.nodepool_approval_mode_set(
        cluster=models.Cluster.objects.get(name="lab"),
        nodepool="default",
        mode="manual",
        actor=Actor.for_user(approver, "web"),
    )
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "40s")
    [command] = table("get", "disruptioncommands")
    assert command["PHASE"] == "AwaitingApproval"
    return approver, command["NAME"]


def test_pages_show_the_lab(lab):
    approver, name = awaiting_command()
    client = logged_in(approver)
    overview = client.get("/").content.decode()
    assert "commands awaiting approval" in overview and "$0.0543" in overview  # one c-2x on-demand running
    nodes = client.get("/nodes/").content.decode()
    assert "c-2x-amd64-linux" in nodes and "initialized" in nodes
    queue = client.get("/disruption/").content.decode()
    assert f'id="command-{name}"' in queue and "Approve" in queue and "$39.64/month" in queue


def test_pending_pods_show_a_verdict_per_nodepool_and_the_nearest_fix(lab):
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "15s")
    page = logged_in(user()).get("/pods/pending/").content.decode()
    assert "all available instance types exceed limits for nodepool" in page
    assert "raise the NodePool&#x27;s spec.limits" in page


def test_htmx_polls_get_only_the_live_region(lab):
    client = logged_in(user())
    response = client.get("/nodes/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<section id="nodes-table"') and "<html" not in body


def test_only_approvers_decide_and_decisions_are_audited(lab):
    approver, name = awaiting_command()
    viewer = logged_in(user())
    assert viewer.post(f"/disruption/{name}/approve").status_code == 403
    assert "Approve" not in viewer.get("/disruption/").content.decode()
    denied = logged_in(approver).post(f"/disruption/{name}/deny", {"reason": ""}, follow=True)
    assert "a reason is required to deny a disruption command" in denied.content.decode()
    response = logged_in(approver).post(f"/disruption/{name}/approve")
    assert response.status_code == 302
    event = models.AuditEvent.objects.get(action="approve")
    assert (event.actor_name, event.via, event.target_name) == ("alice", "web", name)
    ok("advance", "10s")
    assert rows("get", "nodes") == []


def test_posts_without_a_csrf_token_are_refused(lab):
    approver, name = awaiting_command()
    strict = logged_in(approver, enforce_csrf_checks=True)
    assert strict.post(f"/disruption/{name}/approve").status_code == 403
    assert models.AuditEvent.objects.filter(action="approve").count() == 0


def test_pause_shows_a_banner_on_every_page_and_resume_clears_it(lab):
    approver = user("alice", "pause_disruption")
    client = logged_in(approver)
    client.post("/disruption/pause", {"duration": "2h", "reason": "incident 4711"})
    for page in PAGES:
        body = client.get(page).content.decode()
        assert "incident 4711" in body
        # A span as people say it: "2h" (kubectl's AGE would print "120m"), less the seconds since the pause.
        assert re.search(r"is paused for another <b>(2h|1h59m)</b> by alice: incident 4711", body), page
    client.post("/disruption/resume")
    assert "incident 4711" not in client.get("/").content.decode()


def queries(client, page):
    with CaptureQueriesContext(connection) as captured:
        assert client.get(page).status_code == 200
    return len(captured)


@pytest.mark.parametrize("page", PAGES)
def test_query_counts_do_not_grow_with_the_cluster(lab, page):
    client = logged_in(user())
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    ok("advance", "5s")
    small = queries(client, page)
    ok("scale", "deploy/inflate", "--replicas", "40")
    ok("advance", "15s")
    assert queries(client, page) == small


def test_the_catalog_filters_in_the_database(lab):
    client = logged_in(user())
    page = client.get("/catalog/?family=m&arch=amd64&os=linux&min_cpu=8&capacity_type=spot").content.decode()
    assert "m-8x-amd64-linux" in page and "m-4x-amd64-linux" not in page and "c-8x-amd64-linux" not in page
    assert page.index("m-8x-amd64-linux") < page.index("m-16x-amd64-linux")  # cheapest first
    listing = client.get("/catalog/?arch=amd64&os=linux&min_memory=64").context["types"]
    assert min(t.memory_bytes for t in listing) >= 64 * 2**30
    assert [t.name for t in listing][:4] == ["m-8x-amd64-linux", "s-16x-amd64-linux", "m-16x-amd64-linux", "r5.4xlarge"]


def test_the_devices_page_shows_allocations(lab):
    ok("apply", "-f", str(EXAMPLES / "dra" / "gpu.yaml"))
    ok("advance", "40s")
    client = logged_in(user())
    response = client.get("/devices/")
    nodes = sorted(n["NAME"] for n in table("get", "nodes"))
    allocated = sorted((a["driver"], a["pool"], a["device"], a["node"]) for a in response.context["allocations"])
    assert allocated == [("gpu.example.com", f"gpu.example.com/{node}", "gpu-0", node) for node in nodes]
    [gpu] = response.context["classes"]
    assert gpu["selectors"] == ['device.driver == "gpu.example.com"']
    # The DRAConfig's pool selects amd64 m-family types: 12 sizes × linux/windows.
    assert gpu["instance_types"] == sorted(
        f"m-{size}x-amd64-{os}"
        for size in (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
        for os in ("linux", "windows")
    )
    assert f'<a href="/nodes/{nodes[0]}/">{nodes[0]}</a>' in response.content.decode()
    catalog = client.get("/catalog/", {"family": "m", "arch": "amd64", "os": "linux", "min_cpu": "8"})
    assert catalog.context["declared"]["m-8x-amd64-linux"] == ["gpu.example.com: gpu-0"]
    assert "c-8x-amd64-linux" not in catalog.context["declared"]
    assert "<div>gpu.example.com: gpu-0</div>" in catalog.content.decode()


def test_a_node_page_explains_why_it_is_kept_and_keeps_its_history_after_it_is_gone(lab):
    client = logged_in(user())
    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok("advance", "10s")
    big = next(n["NODE"] for n in table("get", "nodeclaims") if n["TYPE"] == "c-8x-amd64-linux")
    small = next(n["NODE"] for n in table("get", "nodeclaims") if n["TYPE"] == "c-2x-amd64-linux")
    page = client.get(f"/nodes/{big}/")
    assert page.context["why"] is None  # the page itself does not simulate; a button asks for it
    # What the last disruption passes said is there at once.
    known = page.context["known"]
    assert (known["said"], known["countdown"]) == (
        ["SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"],
        None,
    )
    assert [e["message"] for e in known["events"]] == known["said"]  # the event, with its time, folded below
    body = page.content.decode()
    # A button (a GET form without JavaScript) with a spinner while the engine runs; its answer replaces the card
    # and stays: the URL becomes ?why=1, so a reload shows it again.
    assert (
        f'<form method="get" class="simulate" action="/nodes/{big}/" hx-get="/nodes/{big}/" hx-target="#why-not"'
        in body
    )
    assert 'hx-indicator="#why-busy" hx-disabled-elt="find button" hx-push-url="?why=1">' in body
    assert '<button type="submit" class="primary">Simulate consolidating it now</button>' in body
    assert '<span id="why-busy" class="htmx-indicator busy" role="status"><span class="spinner"' in body
    card = client.get(f"/nodes/{big}/", {"why": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert card.lstrip().startswith('<section class="card" id="why-not">') and "<html" not in card
    assert '<b id="why-verdict">kept</b>' in card and ">Simulate again</button>" in card
    assert "simulated at" in card and "lab time" in card
    assert "SpotToSpotConsolidation is disabled, can&#x27;t replace a spot node with a spot node" in card
    plain = client.get(f"/nodes/{big}/", {"why": "1"})  # without JavaScript: the whole page, card included
    assert plain.context["why"] == {
        "verdict": "kept",
        "reasons": ["SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"],
        "budget": 1,
    }
    ok("scale", "deploy/inflate", "--replicas", "4")
    ok("advance", "60s")
    gone = client.get(f"/nodes/{small}/")
    assert gone.context["node"] is None
    messages = [t["message"] for t in gone.context["timeline"]]
    assert messages[:4] == ["created nodeclaim", "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"]
    assert "disrupting node(s)" in messages and messages[-1] == "deleted nodeclaim"
    assert "Succeeded" in gone.content.decode()


def _counting_simulations(monkeypatch) -> list[str]:
    """Each loading of the whole cluster into the engine (the part of a node page's simulation that takes seconds
    at scale), by cluster."""
    from karpui.clusters import lab as lab_module

    loads: list[str] = []
    load = lab_module.load

    def counted(cluster, **kwargs):
        loads.append(cluster.name)
        return load(cluster, **kwargs)

    monkeypatch.setattr(lab_module, "load", counted)
    return loads


def test_a_nodes_simulation_is_kept_until_the_cluster_changes(lab, monkeypatch):
    """Issue 15: the simulation took 2.9 s at 20,000 pods on every click and every reload of ?why=1."""
    client = logged_in(user())
    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok("advance", "10s")
    big = next(n["NODE"] for n in table("get", "nodeclaims") if n["TYPE"] == "c-8x-amd64-linux")
    simulations = _counting_simulations(monkeypatch)

    card = client.get(f"/nodes/{big}/", {"why": "1"}, HTTP_HX_REQUEST="true")
    again = client.get(f"/nodes/{big}/", {"why": "1"}, HTTP_HX_REQUEST="true")
    reloaded = client.get(f"/nodes/{big}/", {"why": "1"})
    assert simulations == ["lab"]
    assert card.context["why"] == again.context["why"] == reloaded.context["why"]
    assert card.context["why"]["verdict"] == "kept"
    assert card.context["simulated_at"] == reloaded.context["simulated_at"]
    assert again.content == card.content  # the same card: button, spinner and all

    ok("label", "node", big, "team=web")  # any write is a new revision
    simulations.clear()
    client.get(f"/nodes/{big}/", {"why": "1"}, HTTP_HX_REQUEST="true")
    assert simulations == ["lab"]


def test_a_kept_not_yet_counts_down_and_is_simulated_again_once_consolidate_after_elapsed(lab, monkeypatch):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [node] = [r["NAME"] for r in table("get", "nodes")]
    client = logged_in(user())
    simulations = _counting_simulations(monkeypatch)
    first = client.get(f"/nodes/{node}/", {"why": "1"}).context["why"]
    assert first["verdict"] == "not yet" and 3 < first["countdown"] <= 10

    # The clock moves without a write (as a lab tick with nothing to do): the same revision, 3 s later.
    lab.refresh_from_db()
    models.Cluster.objects.filter(pk=lab.pk).update(clock=lab.clock + timezone.timedelta(seconds=3))
    later = client.get(f"/nodes/{node}/", {"why": "1"}).context["why"]
    assert simulations == ["lab"] and later == {**first, "countdown": first["countdown"] - 3}

    models.Cluster.objects.filter(pk=lab.pk).update(clock=lab.clock + timezone.timedelta(seconds=11))
    elapsed = client.get(f"/nodes/{node}/", {"why": "1"}).context["why"]
    # Simulated again: the countdown has run out (the claim becomes Consolidatable at the next disruption pass).
    assert simulations == ["lab", "lab"] and elapsed["countdown"] == 0.0


def test_a_fresh_node_counts_down_its_consolidate_after(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [node] = table("get", "nodes")
    client = logged_in(user())
    known = client.get(f"/nodes/{node['NAME']}/").context["known"]
    assert known["said"] == [] and 0 < known["countdown"] <= 10
    why = client.get(f"/nodes/{node['NAME']}/", {"why": "1"}).context["why"]
    assert why["verdict"] == "not yet" and 0 < why["countdown"] <= 10
    assert why["reasons"] == ["consolidateAfter (10s) has not elapsed since the last pod event"]


def test_the_catalog_pages_through_every_type_and_keeps_the_filters(lab, monkeypatch):
    from karpui import models
    from karpui.insight import selectors

    monkeypatch.setattr(selectors, "CATALOG_PAGE_SIZE", 10)
    amd64 = set(models.InstanceType.objects.filter(arch="amd64").values_list("name", flat=True))
    total = len(amd64)
    client = logged_in(user())
    first = client.get("/catalog/?arch=amd64").content.decode()
    pages = -(-total // 10)
    assert pages > 2
    assert f"page 1 of {pages} ({total} instance types)" in first
    assert 'href="?arch=amd64&amp;page=2"' in first
    shown = set()
    for number in range(1, pages + 1):
        body = client.get(f"/catalog/?arch=amd64&page={number}").content.decode()
        shown |= {
            name for name in models.InstanceType.objects.values_list("name", flat=True) if f"<td>{name}</td>" in body
        }
    assert shown == amd64


def test_bulk_approval_approves_each_ticked_command_and_names_those_it_cannot(lab):
    approver, name = awaiting_command()
    client = logged_in(approver)
    queue = client.get("/disruption/").content.decode()
    assert f'name="commands" value="{name}" form="bulk-approve"' in queue
    assert f'id="reason-{name}" hx-preserve' in queue  # a reason being typed survives the 2 s poll

    response = client.post("/disruption/approve", {"commands": [name, "empty-gone"], "reason": "tidy"}, follow=True)
    page = response.content.decode()
    assert f"1 approved: {name}" in page
    assert "empty-gone not approved: disruption command &quot;empty-gone&quot; not found" in page
    [event] = models.AuditEvent.objects.filter(action="approve")
    assert (event.actor_name, event.target_name, event.reason) == ("alice", name, "tidy")
    ok("advance", "10s")
    assert rows("get", "nodes") == []


def test_bulk_approval_needs_the_permission_and_a_selection(lab):
    approver, name = awaiting_command()
    assert logged_in(user()).post("/disruption/approve", {"commands": [name]}).status_code == 403
    page = logged_in(approver).post("/disruption/approve", {}, follow=True).content.decode()
    assert "select at least one command to approve" in page
    assert models.AuditEvent.objects.filter(action="approve").count() == 0


def test_the_queue_sets_a_nodepools_approval_mode_for_editors_only(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    editor, viewer = logged_in(user("erin", "change_nodepool")), logged_in(user())
    assert 'aria-label="approval mode of default"' in editor.get("/disruption/").content.decode()
    assert 'aria-label="approval mode of default"' not in viewer.get("/disruption/").content.decode()
    assert viewer.post("/nodepools/default/approval-mode", {"mode": "manual"}).status_code == 403

    page = editor.post("/nodepools/default/approval-mode", {"mode": "auto-below", "threshold": "x"}, follow=True)
    assert "threshold: not a number of $/h: &#x27;x&#x27;" in page.content.decode()
    page = editor.post("/nodepools/default/approval-mode", {"mode": "auto-below"}, follow=True)
    assert "auto-below needs a non-negative savings threshold in $/h" in page.content.decode()
    for endless in ("inf", "nan", "-1", "1e999"):  # float() takes the first two; the engine would leave it out
        page = editor.post(
            "/nodepools/default/approval-mode", {"mode": "auto-below", "threshold": endless}, follow=True
        )
        assert "auto-below needs a non-negative savings threshold in $/h" in page.content.decode()
    assert "karpui.dev/approval-mode" not in models.NodePool.objects.get(name="default").annotations

    page = editor.post("/nodepools/default/approval-mode", {"mode": "auto-below", "threshold": "$0.05"}, follow=True)
    assert "NodePool default: approval mode auto-below" in page.content.decode()
    annotations = models.NodePool.objects.get(name="default").annotations
    assert (annotations["karpui.dev/approval-mode"], annotations["karpui.dev/approval-threshold"]) == (
        "auto-below",
        "0.0500",
    )
    event = models.AuditEvent.objects.get(action="set-approval-mode")
    assert (event.actor_name, event.via, event.target_name) == ("erin", "web", "default")
    assert editor.post("/nodepools/nothing/approval-mode", {"mode": "manual"}).status_code == 404


def test_the_role_groups_exist_with_their_permissions(lab):
    from django.contrib.auth.models import Group

    def codenames(group):
        return sorted(Group.objects.get(name=group).permissions.values_list("codename", flat=True))

    assert codenames("viewers") == []
    assert codenames("approvers") == ["approve_disruption", "pause_disruption", "request_disruption"]
    assert codenames("editors") == [  # the lab's objects (workloads, nodes) are "kubeobject"
        "add_catalog",
        "add_devicedeclaration",
        "add_kubeobject",
        "add_nodeclass",
        "add_nodepool",
        "change_catalog",
        "change_devicedeclaration",
        "change_kubeobject",
        "change_nodeclass",
        "change_nodepool",
        "delete_catalog",
        "delete_devicedeclaration",
        "delete_kubeobject",
        "delete_nodeclass",
        "delete_nodepool",
    ]
    member = user("ed")
    member.groups.add(Group.objects.get(name="editors"))
    assert User.objects.get(username="ed").has_perm("karpui.change_nodepool")
    assert not User.objects.get(username="ed").has_perm("karpui.approve_disruption")


def test_events_and_logs_filter_and_link_to_the_objects_they_name(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [(claim, node)] = [(r["NAME"], r["NODE"]) for r in table("get", "nodeclaims")]
    client = logged_in(user())

    response = client.get("/events/", {"kind": "NodeClaim"})
    launched = [(e["reason"], e["objects"]) for e in response.context["events"]]
    assert launched == [("Launched", [{"label": f"NodeClaim/{claim}", "url": f"/nodes/{node}/"}])]
    assert f'<a href="/nodes/{node}/">NodeClaim/{claim}</a>' in response.content.decode()
    pods = client.get("/events/", {"kind": "Pod"}).context["events"]
    assert {o["label"].split("/")[0] for e in pods for o in e["objects"]} == {"Pod"}
    assert client.get("/events/", {"type": "Warning"}).context["events"] == []

    logs = client.get("/events/", {"logger": "controller.provisioner"}).context["logs"]
    assert {entry["logger"] for entry in logs} == {"controller.provisioner"}
    lifecycle = client.get("/events/", {"logger": "controller.nodeclaim.lifecycle"}).context["logs"]
    # The NodeClaim's first records name no node yet: its link is the NodeClaim's, which leads to its node's page.
    assert {"label": f"NodeClaim/{claim}", "url": f"/nodes/{claim}/"} in lifecycle[0]["objects"]
    assert client.get(f"/nodes/{claim}/", follow=True).request["PATH_INFO"] == f"/nodes/{node}/"
    body = client.get("/events/?kind=NodeClaim&logger=x").content.decode()
    # The polls keep the filters and ask only for what is newer than the page.
    assert 'hx-get="/events/?kind=NodeClaim&amp;logger=x&amp;group=reason&amp;part=events&amp;since=' in body
    assert 'hx-get="/events/?kind=NodeClaim&amp;logger=x&amp;group=reason&amp;part=logs&amp;after=0"' in body


def test_pending_pods_page_through_with_a_total_and_keep_the_filters(lab, monkeypatch):
    from karpui.insight import pending

    monkeypatch.setattr(pending, "PAGE_SIZE", 4)
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("scale", "deploy/big", "--replicas", "10")
    ok("advance", "60s")  # the capped pool takes 4 (16 CPU); 6 wait
    client = logged_in(user())
    flat = {"namespace": "default", "nodepool": "capped", "group": "none"}
    first = client.get("/pods/pending/", flat)
    second = client.get("/pods/pending/", {**flat, "page": "2"})

    assert (first.context["total"], first.context["pages"], len(first.context["pods"])) == (6, 2, 4)
    assert len(second.context["pods"]) == 2
    names = [p["name"] for p in first.context["pods"] + second.context["pods"]]
    assert len(set(names)) == 6 and names == sorted(names)
    assert (
        'href="?namespace=default&amp;nodepool=capped&amp;group=none&amp;page=2">next →</a>' in first.content.decode()
    )
    assert 'group=none&amp;page=2" hx-trigger="every 2s"' in second.content.decode()  # the poll stays on page 2
    assert {v["nodepool"] for p in first.context["pods"] for v in p["verdicts"]} == {"capped"}
    past = client.get("/pods/pending/", {"group": "none", "page": "99"})
    assert (past.status_code, past.content.decode()) == (400, "page: 99 is past the last page, 2\n")
    polled = client.get("/pods/pending/", {"group": "none", "page": "99"}, HTTP_HX_REQUEST="true")
    assert polled.context["page"] == 2  # a live poll of a list that shrank gets the last page
    refused = client.get("/pods/pending/", {"group": "namespace"})
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "group: must be one of owner, reason, none, got 'namespace'\n",
    )


def test_people_who_are_not_staff_log_in_on_karpuis_own_page_and_out_again(client, lab):
    from django.contrib.auth.models import Group

    person = user("viktor")
    person.groups.add(Group.objects.get(name="approvers"))
    assert not person.is_staff  # the admin's login page would refuse this account
    page = client.get("/accounts/login/?next=/disruption/").content.decode()
    assert 'name="next" value="/disruption/"' in page and "<nav>" not in page

    refused = client.post("/accounts/login/", {"username": "viktor", "password": "wrong", "next": "/"})
    assert "Please enter a correct username and password" in refused.content.decode()
    response = client.post(
        "/accounts/login/", {"username": "viktor", "password": "pw-only-for-tests", "next": "/disruption/"}
    )
    assert response.status_code == 302 and response["Location"] == "/disruption/"
    assert client.get("/disruption/").context["can_pause"] is True
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"
    assert client.get("/")["Location"] == "/accounts/login/?next=/"


def test_pods_pending_on_devices_show_the_classes_they_ask_for_and_which_types_would_declare_them(lab):
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "dra" / "gpu.yaml").read_text()) if d["kind"] != "DRAConfig"]
    ok("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))  # no driver declares gpu devices anywhere
    ok("advance", "15s")
    response = logged_in(user()).get("/devices/")

    pending = response.context["pending"]
    assert len(pending) == 2 and all(p["classes"] == ["gpu.example.com"] for p in pending)
    assert response.context["classes"] == [
        {"name": "gpu.example.com", "selectors": ['device.driver == "gpu.example.com"'], "instance_types": []}
    ]
    page = response.content.decode()
    assert '<a href="#class-gpu.example.com">gpu.example.com</a>' in page
    assert "no instance type declares a device these selectors accept" in page


def test_every_page_says_which_clock_its_times_are_on_and_the_clock_is_live(lab):
    client = logged_in(user())
    for page in PAGES:
        body = client.get(page).content.decode()
        assert "Times on this page: <b>lab time</b> of cluster <b>lab</b> (lab (simulated))" in body, page
        assert 'id="banners" hx-get="/banners/?cluster=lab" hx-trigger="every 5s"' in body, page
    ticks.clusters_tick(now=timezone.now())  # in step with wall time (the row was made when the tests began)
    ok("advance", "10m")  # now ten minutes ahead of it
    lab.refresh_from_db()
    live = client.get("/banners/?cluster=lab", HTTP_HX_REQUEST="true").content.decode()
    assert live.lstrip().startswith('<div id="banners"') and "<html" not in live
    assert f'<time id="page-clock-now" datetime="{lab.clock.isoformat()}">{lab.clock:%Y-%m-%d %H:%M:%S}</time>' in live
    assert "(about 10m ahead of wall time, after <code>karp advance</code>)" in live


def test_every_page_says_which_cluster_and_mode_and_its_links_stay_on_that_cluster(lab):
    """Issue 14: one karpui shows several clusters; each page says which and in which mode, and switches."""
    models.Cluster.objects.create(name="prod", mode=models.Cluster.Mode.OBSERVE)
    client = logged_in(user())
    body = client.get("/nodes/?cluster=prod").content.decode()
    assert "Times on this page: <b>UTC</b> of cluster <b>prod</b> (observe (real Karpenter))" in body
    assert '<option value="lab">lab (lab)</option><option value="prod" selected>prod (observe)</option>' in body
    assert '<a href="/pods/pending/?cluster=prod">Pending pods</a>' in body
    home = client.get("/").content.decode()
    assert '<a href="/pods/pending/">Pending pods</a>' in home and '<option value="lab" selected>' in home


def test_a_pause_banner_and_the_resume_button_go_by_themselves_when_the_ttl_passes(lab):
    client = logged_in(user("alice", "pause_disruption"))
    ticks.clusters_tick(now=timezone.now())
    ok("advance", "10m")  # the lab is ahead of wall time: a pause's end is on its clock, the audit on wall time
    client.post("/disruption/pause", {"duration": "5m", "reason": "incident 4711"})
    banner = client.get("/banners/", HTTP_HX_REQUEST="true").content.decode()
    assert "is paused for another <b>5m</b> by alice: incident 4711" in banner
    queue = client.get("/disruption/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="paused-for">Paused for another <b>5m</b>' in queue and "Resume disruption" in queue
    assert '<time datetime="' in queue and "0s ago</time>" in queue  # the audit row: an age, not a wall-clock time
    assert "UTC (wall clock)" in queue

    ok("advance", "5m")  # the TTL passes; no reload, the next polls say so
    assert "incident 4711" not in client.get("/banners/", HTTP_HX_REQUEST="true").content.decode()
    queue = client.get("/disruption/", HTTP_HX_REQUEST="true").content.decode()
    assert "Resume disruption" not in queue and "Pause disruption" in queue


def test_the_favicon_is_served_at_favicon_ico_and_linked_from_every_page(client, lab):
    response = client.get("/favicon.ico")  # no login: browsers ask before anyone logs in
    assert response.status_code == 200 and response["Content-Type"] == "image/vnd.microsoft.icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
    page = logged_in(user()).get("/").content.decode()
    assert '<link rel="icon" href="/static/karpui/favicon.svg" type="image/svg+xml">' in page


def test_the_catalog_shows_allocatable_sorts_by_any_column_folds_offerings_and_prices_to_four_places(lab):
    client = logged_in(user())
    response = client.get("/catalog/?family=c&arch=amd64&os=linux&sort=-cpu")
    page = response.content.decode()
    names = [t.name for t in response.context["types"]]
    assert names[:2] == ["c-256x-amd64-linux", "c-192x-amd64-linux"]  # the most vCPU first
    assert [t.name for t in client.get("/catalog/?family=c&arch=amd64&os=linux&sort=name").context["types"]][:2] == [
        "c-128x-amd64-linux",
        "c-16x-amd64-linux",
    ]
    row = page.split("<td>c-8x-amd64-linux</td>")[1].split("</tr>\n")[0]
    # 8 vCPU, 16 GiB, 128 pods; allocatable as the scheduler counts it: 7900m CPU, 16374Mi
    assert '<td class="num">8.00</td><td class="num">16.0</td><td class="num">128</td>' in row
    assert '<td class="num nowrap">7.90 · 16.0 · 128</td>' in row
    assert '<td class="num">$0.1520</td>' in row  # the cheapest: spot, $0.152026/h, to four places as offerings are
    assert "<div>on-demand $0.2172: test-zone-a, test-zone-b, test-zone-c, test-zone-d</div>" in row
    assert '<details class="offerings"><summary>8 offerings</summary>' in row
    prices = [p.split("<")[0].split(":")[0] for p in row.split("$")[1:]]
    assert len(prices) == 3 and all(len(p.split(".")[1]) == 4 for p in prices)  # one precision for every price
    assert (
        '<th aria-sort="descending"><a href="?family=c&amp;arch=amd64&amp;os=linux&amp;sort=cpu" class="sort">vCPU ▼</a></th>'
        in page
    )
    assert client.get("/catalog/?sort=bogus").context["sort"] == "cheapest"


def test_times_do_not_wrap_on_the_node_page_and_the_audit_trail(node):
    client = logged_in(user("alice", "pause_disruption"))
    page = client.get(f"/nodes/{node}/").content.decode()
    events = page.split('id="node-events"')[1].split("</table>")[0]
    lifecycle = page.split('id="node-lifecycle"')[1].split("</table>")[0]
    assert '<td class="time">' in events and '<td class="time">' in lifecycle
    client.post("/disruption/pause", {"duration": "1h", "reason": "quiet"})
    audit = client.get("/disruption/").content.decode().split('id="audit"')[1].split("</table>")[0]
    assert '<td class="time"><time datetime=' in audit


def test_a_refusal_names_the_permission_and_the_group_that_gives_it(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    viewer = logged_in(user("vera"))
    refused = viewer.post("/nodepools/default/approval-mode", {"mode": "manual"})
    assert refused.status_code == 403
    assert (
        "vera may not edit NodePools: that needs the karpui.change_nodepool permission, which the editors group "
        "give" in refused.content.decode()
    )
    refused = viewer.post("/disruption/nothing/approve")
    assert refused.status_code == 403
    assert (
        "vera may not approve or deny disruption: that needs the karpui.approve_disruption permission, which the "
        "approvers group gives" in refused.content.decode()
    )
    page = viewer.get("/nodepools/default/").content.decode()
    assert (
        '<p class="muted" id="read-only">Read only: editing NodePools needs the karpui.change_nodepool permission, '
        "which the editors group gives.</p>" in page
    )
    assert 'value="save"' not in page


def test_not_found_pages_say_what_is_missing(lab):
    viewer = logged_in(user("vera"))
    missing = viewer.get("/nodepools/nothing/")
    assert missing.status_code == 404
    assert '<p role="alert">No NodePool matches the given query.</p>' in missing.content.decode()
    unknown = viewer.get("/no-such-page/")
    assert unknown.status_code == 404 and "Nothing is at /no-such-page/." in unknown.content.decode()


def test_a_nodeclaims_name_leads_to_its_nodes_page_when_kwok_names_the_node_apart(lab):
    """Karpenter's kwok provider names a node `<nodeclaim>-<suffix>`: a link by the NodeClaim's name finds it."""
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "uid": "uid-claim"},
        "spec": {},
        "status": {"nodeName": "default-abcde-x7k2p"},
    }
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "default-abcde-x7k2p", "uid": "uid-node"}}
    for body in (claim, node):
        meta = body["metadata"]
        models.KubeObject.objects.create(cluster=lab, kind=body["kind"], name=meta["name"], uid=meta["uid"], body=body)
    client = logged_in(user())

    response = client.get("/nodes/default-abcde/", {"cluster": "lab"})
    assert (response.status_code, response["Location"]) == (302, "/nodes/default-abcde-x7k2p/?cluster=lab")
    assert client.get("/nodes/default-abcde-x7k2p/").context["name"] == "default-abcde-x7k2p"
    assert drilldown.claims_of_node(lab, "default-abcde-x7k2p") == ["default-abcde"]
    assert client.get("/nodes/no-such-claim/").status_code == 404  # nothing ever recorded that name
