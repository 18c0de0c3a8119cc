"""DELETE's options over HTTP, with the outcomes kube-apiserver and its garbage collector give: propagationPolicy
Orphan (the ReplicaSet stays, without its owner reference), Foreground (the owner is marked with the collector's
finalizer and goes once its dependents are gone), Background (the default: the owner goes at once, its dependents
right after), gracePeriodSeconds=0 for a pod, dryRun=All; and kubectl's --cascade and --force."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpui import models
from karpui.clusters import lab as labs
from provisioner.cluster.objects import timestamp
from tests.karp import EXAMPLES, ok
from tests.kubeapi.admin_api import AdminApi

INFLATE = "/apis/apps/v1/namespaces/default/deployments/inflate"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
PODS = "/api/v1/namespaces/default/pods"


def inflate() -> None:
    """The getting-started experiment at three replicas: a Deployment, its ReplicaSet, three running pods."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    labs.advance("lab", 5)


@pytest.fixture
def api(lab: Any) -> AdminApi:
    inflate()
    return AdminApi()


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def test_orphan_leaves_the_replicaset_and_its_pods_without_the_owner_reference(api: AdminApi) -> None:
    [replicaset] = api.items(REPLICASETS)
    pods = api.items(PODS)
    status, deleted = api.send("DELETE", f"{INFLATE}?propagationPolicy=Orphan")
    assert status == 200
    # answered as kube-apiserver answers: marked, with the collector's finalizer, which the collector then removes
    assert deleted["metadata"]["finalizers"] == ["orphan"] and deleted["metadata"]["deletionTimestamp"]
    assert api.get(INFLATE)[0] == 404
    [orphan] = api.items(REPLICASETS)
    assert "ownerReferences" not in orphan["metadata"]
    expected = {k: v for k, v in replicaset["metadata"].items() if k not in ("ownerReferences", "resourceVersion")}
    assert {k: v for k, v in orphan["metadata"].items() if k != "resourceVersion"} == expected
    assert api.items(PODS) == pods  # still the ReplicaSet's, untouched
    labs.advance("lab", 60)
    assert names(api.items(REPLICASETS)) == [replicaset["metadata"]["name"]]
    assert names(api.items(PODS)) == names(pods)


def test_the_deprecated_orphan_dependents_orphans_too(api: AdminApi) -> None:
    [replicaset] = api.items(REPLICASETS)
    status, deleted = api.send("DELETE", f"{INFLATE}?orphanDependents=true")
    assert status == 200 and deleted["metadata"]["finalizers"] == ["orphan"]
    [orphan] = api.items(REPLICASETS)
    assert orphan["metadata"]["uid"] == replicaset["metadata"]["uid"] and "ownerReferences" not in orphan["metadata"]


def test_foreground_keeps_the_owner_marked_until_its_dependents_are_gone(api: AdminApi) -> None:
    [replicaset] = api.items(REPLICASETS)
    rs_path = f"{REPLICASETS}/{replicaset['metadata']['name']}"
    hold = {"metadata": {"finalizers": ["example.com/hold"]}}
    assert api.send("PATCH", rs_path, hold, "application/merge-patch+json")[0] == 200
    status, deleted = api.send("DELETE", INFLATE, {"kind": "DeleteOptions", "propagationPolicy": "Foreground"})
    assert status == 200 and deleted["metadata"]["finalizers"] == ["foregroundDeletion"]
    # The pods went first; the ReplicaSet waits for its own finalizer, and the Deployment for the ReplicaSet.
    assert api.items(PODS) == []
    status, marked_rs = api.get(rs_path)
    assert status == 200 and marked_rs["metadata"]["finalizers"] == ["example.com/hold"]
    assert marked_rs["metadata"]["deletionTimestamp"]
    status, marked = api.get(INFLATE)
    assert status == 200 and marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked["metadata"]["deletionTimestamp"] == deleted["metadata"]["deletionTimestamp"]
    labs.advance("lab", 60)
    assert api.get(INFLATE)[0] == 200 and api.items(PODS) == []  # nothing recreated meanwhile
    release = {"metadata": {"finalizers": None}}
    assert api.send("PATCH", rs_path, release, "application/merge-patch+json")[0] == 200
    assert api.get(rs_path)[0] == 404
    assert api.get(INFLATE)[0] == 404


def test_foreground_with_nothing_holding_on_deletes_the_whole_chain_at_once(api: AdminApi) -> None:
    status, deleted = api.send("DELETE", f"{INFLATE}?propagationPolicy=Foreground")
    assert status == 200 and deleted["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert (api.get(INFLATE)[0], api.items(REPLICASETS), api.items(PODS)) == (404, [], [])


def test_a_daemonset_deleted_in_the_foreground_makes_no_new_pods_while_one_holds_it(lab: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))  # a control plane (tainted) and two workers
    api = AdminApi()
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent"}]},
            },
        },
    }
    daemonsets = "/apis/apps/v1/namespaces/default/daemonsets"
    assert api.send("POST", daemonsets, daemonset)[0] == 201
    on_node = {pod["spec"]["nodeName"]: pod["metadata"]["name"] for pod in api.items(PODS)}
    assert sorted(on_node) == ["kind-worker", "kind-worker2"]
    held = on_node["kind-worker"]
    hold = {"metadata": {"finalizers": ["example.com/hold"]}}
    assert api.send("PATCH", f"{PODS}/{held}", hold, "application/merge-patch+json")[0] == 200
    since = models.ChangeLogEntry.objects.order_by("-resource_version").values_list("resource_version", flat=True)[0]
    assert api.send("DELETE", f"{daemonsets}/agent?propagationPolicy=Foreground")[0] == 200
    version = models.Cluster.objects.get(name="lab").resource_version
    labs.advance("lab", 30)
    # The DaemonSet controller leaves a DaemonSet being deleted alone: kind-worker2 gets no pod again (it used to
    # get one every settle round, which the collector deleted, never settling).
    assert "settle did not converge" not in ok("logs")
    assert models.Cluster.objects.get(name="lab").resource_version == version
    assert names(api.items(PODS)) == [held]
    changes = models.ChangeLogEntry.objects.filter(kind="Pod", resource_version__gt=since).order_by("resource_version")
    assert list(changes.values_list("type", "name")) == [("MODIFIED", held), ("DELETED", on_node["kind-worker2"])]
    release = {"metadata": {"finalizers": None}}
    assert api.send("PATCH", f"{PODS}/{held}", release, "application/merge-patch+json")[0] == 200
    assert (api.items(PODS), api.get(f"{daemonsets}/agent")[0]) == ([], 404)


def test_background_is_the_default_the_owner_goes_at_once_and_its_dependents_after(api: AdminApi) -> None:
    status, deleted = api.send("DELETE", INFLATE)
    assert status == 200
    assert "deletionTimestamp" not in deleted["metadata"] and "finalizers" not in deleted["metadata"]
    assert (api.get(INFLATE)[0], api.items(REPLICASETS), api.items(PODS)) == (404, [], [])


def test_a_pod_deleted_with_a_zero_grace_period_goes_at_once_and_is_replaced(api: AdminApi) -> None:
    before = names(api.items(PODS))
    [replicaset] = api.items(REPLICASETS)
    status, deleted = api.send("DELETE", f"{PODS}/{before[0]}", {"kind": "DeleteOptions", "gracePeriodSeconds": 0})
    assert (status, deleted["metadata"]["name"]) == (200, before[0])
    # As kube-apiserver answers it: the pod as its graceful deletion marked it, at the lab's time, grace 0; and named
    # as the ReplicaSet controller asks for a name (generateName), which clients read.
    now = timestamp(models.Cluster.objects.get(name="lab").clock.timestamp())
    assert (deleted["metadata"]["deletionTimestamp"], deleted["metadata"]["deletionGracePeriodSeconds"]) == (now, 0)
    assert deleted["metadata"]["generateName"] == f"{replicaset['metadata']['name']}-"
    after = names(api.items(PODS))
    assert len(after) == 3 and before[0] not in after and set(before[1:]) < set(after)


def test_a_namespace_deleted_is_answered_terminating(api: AdminApi) -> None:
    assert (
        api.send("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t"}})[0]
        == 201
    )
    status, deleted = api.send("DELETE", "/api/v1/namespaces/t")
    now = timestamp(models.Cluster.objects.get(name="lab").clock.timestamp())
    assert (status, deleted["kind"], deleted["metadata"]["deletionTimestamp"], deleted["status"]["phase"]) == (
        200,
        "Namespace",
        now,
        "Terminating",
    )
    assert api.get("/api/v1/namespaces/t")[0] == 404


def test_a_dry_run_delete_answers_as_a_delete_would_and_writes_nothing(api: AdminApi) -> None:
    counts = (models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count())
    deployment = api.get(INFLATE)[1]
    status, answered = api.send("DELETE", f"{INFLATE}?dryRun=All&propagationPolicy=Foreground")
    assert status == 200 and answered["metadata"]["finalizers"] == ["foregroundDeletion"]
    status, answered = api.send("DELETE", f"{INFLATE}?dryRun=All")
    # Deleted at once (were it not a dry run): kube-apiserver answers a Status naming it, not the Deployment.
    assert (status, answered["kind"], answered["status"]) == (200, "Status", "Success")
    assert answered["details"] == {
        "name": "inflate",
        "group": "apps",
        "kind": "deployments",
        "uid": deployment["metadata"]["uid"],
    }
    assert (models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count()) == counts
    assert api.get(INFLATE)[1] == deployment
    assert len(api.items(REPLICASETS)) == 1 and len(api.items(PODS)) == 3


def test_kubectl_delete_with_cascade_orphan_a_forced_pod_delete_and_cascade_foreground(kubectl: Any) -> None:
    inflate()
    [replicaset] = kubectl.table("get", "replicasets")
    assert kubectl.ok("delete", "deployment", "inflate", "--cascade=orphan") == 'deployment.apps "inflate" deleted\n'
    assert kubectl.run("get", "deployments").stderr == "No resources found in default namespace.\n"
    assert [row["NAME"] for row in kubectl.table("get", "replicasets")] == [replicaset["NAME"]]
    orphan = json.loads(kubectl.ok("get", "replicaset", replicaset["NAME"], "-o", "json"))
    assert "ownerReferences" not in orphan["metadata"]
    pods = kubectl.table("get", "pods")
    assert [row["STATUS"] for row in pods] == ["Running"] * 3
    forced = kubectl.run("delete", "pod", pods[0]["NAME"], "--grace-period=0", "--force")
    assert forced.returncode == 0 and forced.stdout == f'pod "{pods[0]["NAME"]}" force deleted\n'
    assert "Immediate deletion does not wait for confirmation" in forced.stderr
    left = [row["NAME"] for row in kubectl.table("get", "pods")]
    assert pods[0]["NAME"] not in left and len(left) == 3  # the orphaned ReplicaSet still keeps three
    deleted = kubectl.ok("delete", "replicaset", replicaset["NAME"], "--cascade=foreground")
    assert deleted == f'replicaset.apps "{replicaset["NAME"]}" deleted\n'
    assert kubectl.run("get", "replicasets,pods").stderr == "No resources found in default namespace.\n"
