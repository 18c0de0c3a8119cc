"""Events grouped so a Node and its NodeClaim share a row (or one row per reason, objects folded), and the pods a
disruption command would evict grouped by owner."""

from __future__ import annotations

from karpui import models
from karpui.gate import disruption
from karpui.insight import grouping
from karpui.insight.owners import Owner
from karpui.people.audit import Actor
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok, table


def test_a_node_and_its_nodeclaim_share_one_event_row_with_the_counts_summed(node, nodeclaim):
    client = logged_in(user())
    events = client.get("/events/", {"q": "cheaper", "group": "object"}).context["events"]
    [row] = events
    assert (row["reason"], row["message"]) == ("Unconsolidatable", "Can't replace with a cheaper node")
    assert row["objects"] == [
        {"label": f"Node/{node}", "url": f"/nodes/{node}/"},
        {"label": f"NodeClaim/{nodeclaim}", "url": f"/nodes/{node}/"},
    ]
    assert (row["events"], row["count"]) == (2, 2)
    body = client.get("/events/", {"q": "cheaper", "group": "object"}).content.decode()
    assert body.count(f'<a href="/nodes/{node}/">') == 2 and body.count('<tr id="fold-') == 1


def test_events_group_by_reason_with_their_objects_folded(node, nodeclaim):
    client = logged_in(user())
    response = client.get("/events/", {"group": "reason", "kind": "Pod"})
    [nominated] = response.context["events"]
    assert (nominated["reason"], nominated["events"], nominated["total_objects"]) == ("Nominated", 3, 3)
    assert all(
        o["label"].startswith("Pod/default/inflate-") and o["url"].startswith("/objects/Pod/default/inflate-")
        for o in nominated["objects"]
    )
    body = response.content.decode()
    assert f'<details data-fold="{nominated["id"]}"><summary>3 objects</summary>' in body
    assert f'Pod should schedule on: nodeclaim/{nodeclaim} <span class="muted">(latest of 3)</span>' in body
    refused = client.get("/events/", {"group": "nonsense"})
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "group: must be one of reason, object, none, got 'nonsense'\n",
    )


def test_the_pods_a_command_would_evict_are_grouped_by_owner(lab):
    """The disruption example in manual mode: the c-2x's one pod is to move, under its Deployment."""
    approver = user("alice", "approve_disruption", "change_nodepool")
    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok("advance", "10s")
    disruption.nodepool_approval_mode_set(
        cluster=lab, nodepool="spot", mode="manual", actor=Actor.for_user(approver, "web")
    )
    ok("scale", "deploy/inflate", "--replicas", "4")
    ok("advance", "60s")
    [command] = [r["NAME"] for r in table("get", "disruptioncommands")]
    response = logged_in(approver).get("/disruption/")
    [group] = response.context["evictions"][command]
    [pod] = group["names"]
    assert (group["label"], group["url"], group["count"], group["more"]) == (
        "Deployment default/inflate",
        "/objects/Deployment/default/inflate/",
        1,
        0,
    )
    assert pod.startswith("default/inflate-")
    assert '<a href="/objects/Deployment/default/inflate/">Deployment default/inflate</a>: <b>1</b></summary>' in (
        response.content.decode()
    )


def test_evictions_fold_many_pods_per_owner_and_name_those_already_gone(lab, node):
    pods = sorted(
        f"default/{name}" for name in models.KubeObject.objects.filter(kind="Pod").values_list("name", flat=True)
    )
    command = {
        "metadata": {"name": "c1"},
        "spec": {"candidates": [{"pods": pods}, {"pods": ["default/evicted-already"]}]},
    }
    inflate, gone = grouping.evictions(lab, [command])["c1"]
    assert (inflate["label"], inflate["count"], inflate["names"]) == ("Deployment default/inflate", 3, pods)
    assert (gone["label"], gone["count"], gone["url"]) == ("pods no longer there", 1, "")
    assert Owner("Deployment", "default", "inflate").label == inflate["label"]
