"""Pending pods grouped by owner and by blocking reason, folded, searchable; each group links to its pods."""

from __future__ import annotations

import pytest

from karpui import models
from karpui.insight.owners import Owner, pod_owners
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok

LIMIT = "all available instance types exceed limits for nodepool (remaining cpu=0)"
FIX = "raise the NodePool's spec.limits, or free capacity in it"
LONELY = """\
apiVersion: v1
kind: Pod
metadata:
  name: lonely
spec:
  containers:
    - {name: app, image: pause, resources: {requests: {cpu: "1"}}}
"""


@pytest.fixture
def thirteen_waiting(lab, tmp_path):
    """Twelve pods of the inflate Deployment and one pod of no controller wait: the NodePool's CPU limit is 0."""
    pool = tmp_path / "nodepool.yaml"
    pool.write_text((EXAMPLES / "provisioning" / "nodepool.yaml").read_text() + '  limits:\n    cpu: "0"\n')
    lonely = tmp_path / "lonely.yaml"
    lonely.write_text(LONELY)
    ok("apply", "-f", str(pool), "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"), "-f", str(lonely))
    ok("scale", "deploy/inflate", "--replicas", "12")
    ok("advance", "15s")
    return logged_in(user())


def test_pending_pods_group_by_owner_with_a_count_and_the_pods_folded(thirteen_waiting):
    response = thirteen_waiting.get("/pods/pending/")
    inflate, lonely = response.context["groups"]
    assert (inflate["owner"], inflate["count"], len(inflate["names"]), inflate["more"]) == (
        Owner("Deployment", "default", "inflate"),
        12,
        10,
        2,
    )
    assert inflate["verdicts"] == [
        {
            "nodepool": "default",
            "kind": "limits",
            "label": "default",
            "message": LIMIT,
            "fix": FIX,
            "node_url": "",
            "count": 12,
        }
    ]
    assert inflate["list"] == "group=none&owner=Deployment%2Fdefault%2Finflate"
    assert (lonely["label"], lonely["count"], lonely["names"]) == (
        "pods of no controller in default",
        1,
        [{"label": "default/lonely", "url": "/objects/Pod/default/lonely/"}],
    )
    assert response.context["total"] == 13
    body = response.content.decode()
    assert body.count('<tr class="group"') == 2
    assert f'<details data-fold="{inflate["id"]}"><summary>12 pods</summary>' in body  # folded: no "open"
    assert '<a href="?group=none&amp;owner=Deployment%2Fdefault%2Finflate">and 2 more: list them all</a>' in body


def test_a_groups_link_lists_exactly_its_pods(thirteen_waiting):
    listing = thirteen_waiting.get("/pods/pending/", {"group": "none", "owner": "Deployment/default/inflate"})
    names = [p["name"] for p in listing.context["pods"]]
    assert len(names) == 12 and all(name.startswith("inflate-") for name in names)
    assert {p["owner"] for p in listing.context["pods"]} == {Owner("Deployment", "default", "inflate")}
    assert listing.context["total"] == 12


def test_pending_pods_group_by_blocking_reason(thirteen_waiting):
    [group] = thirteen_waiting.get("/pods/pending/", {"group": "reason"}).context["groups"]
    assert (group["label"], group["count"], group["owner"]) == ("default: limits", 13, None)
    assert group["list"] == "group=none&reason=default%3A+limits"
    assert thirteen_waiting.get("/pods/pending/", {"group": "none", "reason": "default: limits"}).context["total"] == 13
    assert thirteen_waiting.get("/pods/pending/", {"group": "none", "reason": "other: taints"}).context["total"] == 0


def test_pending_pods_search_by_name(thirteen_waiting):
    found = thirteen_waiting.get("/pods/pending/", {"q": "LONE"})
    assert found.context["total"] == 1 and [g["names"] for g in found.context["groups"]] == [
        [{"label": "default/lonely", "url": "/objects/Pod/default/lonely/"}]
    ]
    flat = thirteen_waiting.get("/pods/pending/", {"q": "lone", "group": "none"}).context["pods"]
    assert [p["name"] for p in flat] == ["lonely"]
    assert 'hx-get="/pods/pending/?q=lone&amp;group=none&amp;page=1"' in (
        thirteen_waiting.get("/pods/pending/", {"q": "lone", "group": "none"}, HTTP_HX_REQUEST="true").content.decode()
    )


def test_an_unknown_grouping_is_a_400_naming_the_groupings(thirteen_waiting):
    refused = thirteen_waiting.get("/pods/pending/", {"group": "<script>"})
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "group: must be one of owner, reason, none, got '<script>'\n",
    )


def test_owners_are_the_deployment_behind_a_replicaset_else_the_controller_itself(lab):
    rs = {
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-5d8",
            "namespace": "batch",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
        },
    }
    models.KubeObject.objects.create(
        cluster=lab, kind="ReplicaSet", namespace="batch", name="web-5d8", uid="rs", body=rs
    )
    pods = [
        ("batch", [{"kind": "ReplicaSet", "name": "web-5d8", "controller": True}]),
        ("batch", [{"kind": "ReplicaSet", "name": "orphaned-rs", "controller": True}]),
        ("batch", [{"kind": "Node", "name": "n1"}, {"kind": "Job", "name": "nightly", "controller": True}]),
        ("batch", None),
        ("batch", "not a list"),
    ]
    assert pod_owners(lab, pods) == [
        Owner("Deployment", "batch", "web"),
        Owner("ReplicaSet", "batch", "orphaned-rs"),
        Owner("Job", "batch", "nightly"),
        Owner("", "batch", ""),
        Owner("", "batch", ""),
    ]


TAINTED_FULL = """\
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      taints:
        - {key: dedicated, value: gpu, effect: NoSchedule}
  limits:
    cpu: "0"
"""


def test_the_nearest_fix_for_a_pool_at_its_limits_whose_taint_the_pod_lacks_is_the_toleration(lab):
    """Bug 1 on the page: raising the limits would never help a pod that does not tolerate the pool's taint."""
    ok("apply", "-f", "-", stdin=TAINTED_FULL)
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    ok("advance", "15s")
    page = logged_in(user()).get("/pods/pending/", {"group": "none"}).content.decode()
    row = (
        page.split('<table id="pending-pods" data-csv="?group=none&amp;format=csv">')[1]
        .split("<tbody>")[1]
        .split("</tr>")[0]
    )
    assert "<b>gpu</b>: did not tolerate taint dedicated=gpu:NoSchedule" in row
    assert "<td><div>add a toleration for the NodePool&#x27;s taint, or use a NodePool without it</div></td>" in row
    assert "spec.limits" not in page


def test_a_refresh_of_five_hundred_pending_pods_of_one_deployment_stays_under_50_kb(lab, tmp_path):
    pool = tmp_path / "nodepool.yaml"
    pool.write_text((EXAMPLES / "provisioning" / "nodepool.yaml").read_text() + '  limits:\n    cpu: "0"\n')
    ok("apply", "-f", str(pool), "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "520")
    ok("advance", "15s")
    client = logged_in(user())
    refresh = client.get("/pods/pending/", HTTP_HX_REQUEST="true")
    body = refresh.content.decode()

    assert body.lstrip().startswith('<section id="pending-table"')
    assert '<b id="pending-total">520</b>' in body and body.count('<tr class="group"') == 1
    assert len(refresh.content) < 50 * 1024, len(refresh.content)
    flat = client.get("/pods/pending/", {"group": "none"}, HTTP_HX_REQUEST="true").content
    assert flat.decode().split("<tbody>")[1].count("<tr>") == 50  # the flat list is a page of pods, not all 520
    assert len(flat) < 50 * 1024, len(flat)  # each row links its pod, owner and events
