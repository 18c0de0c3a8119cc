"""One bad object or one bad cluster never stops reconciliation of the others (issue 11, the reconcile loop)."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from karpui import models
from karpui.clusters import ticks, warm
from tests.karp import EXAMPLES, ok, table


def provisioned(replicas="3"):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", replicas)


def poison_nodeclaim(cluster):
    """A NodeClaim whose requirements are not a list: written straight to storage, as an older version or a bug
    elsewhere might leave it (apply would refuse it)."""
    body = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "poison",
            "uid": "uid-poison",
            "resourceVersion": "1",
            "creationTimestamp": cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finalizers": [],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": "not-a-list",
        },
        "status": {},
    }
    models.KubeObject.objects.create(
        cluster=cluster, kind="NodeClaim", namespace="", name="poison", uid="uid-poison", body=body
    )


def unreadable_pod(cluster):
    """A Pod with requests.cpu "lots", written straight to storage (apply would refuse it)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "unreadable",
            "namespace": "default",
            "uid": f"uid-unreadable-{cluster.name}",
            "resourceVersion": "1",
            "creationTimestamp": cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "lots"}}}]},
        "status": {"phase": "Pending"},
    }
    models.KubeObject.objects.create(
        cluster=cluster, kind="Pod", namespace="default", name="unreadable", uid=body["metadata"]["uid"], body=body
    )


def test_a_bad_nodeclaim_is_logged_and_skipped_and_the_other_pods_still_get_nodes(lab):
    poison_nodeclaim(lab)
    provisioned()
    ok("advance", "10s")
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 3
    errors = [json.loads(line) for line in ok("logs").splitlines() if '"Reconciler error"' in line]
    assert errors[0]["controller"] == "nodeclaim.lifecycle"
    assert errors[0]["NodeClaim"] == {"name": "poison", "namespace": ""}
    assert errors[0]["error"].startswith("AttributeError")
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    warning = next(e for e in events if e["reason"] == "ReconcileError")
    assert (warning["involvedObject"]["name"], warning["type"]) == ("poison", "Warning")


def test_a_cluster_whose_tick_fails_does_not_stop_the_others(lab):
    broken = models.Cluster.objects.create(name="broken", lab_state={"rng": "not a random state"})
    provisioned()
    start = timezone.now()
    models.Cluster.objects.filter(name="lab").update(clock=start, ticked_at=start)
    models.Cluster.objects.filter(name="broken").update(clock=start, ticked_at=start)
    ticks.clusters_tick(now=start + timedelta(seconds=10))
    healthy = models.Cluster.objects.get(name="lab")
    assert healthy.clock == start + timedelta(seconds=10)
    assert models.KubeObject.objects.filter(cluster=healthy, kind="NodeClaim").count() == 1
    failure = models.LogEntry.objects.get(cluster=broken, level="ERROR")
    assert (failure.message, failure.fields["controller"]) == ("Reconciler error", "tick")
    assert models.Cluster.objects.get(name="broken").clock == start


def test_the_dashboard_says_which_cluster_has_reconcile_errors(lab, admin_client):
    poison_nodeclaim(lab)
    provisioned()
    ok("advance", "2s")
    page = admin_client.get("/").content.decode()
    assert "reconcile error" in page and "<b>lab</b>" in page
    assert "nodeclaim.lifecycle" in page and "AttributeError" in page


def test_a_stored_nodepool_that_no_longer_parses_is_left_out_and_the_good_one_still_provisions(lab):
    """A NodePool row with an approval threshold the gate cannot read (stored before the rule, or by hand) used to
    make every load of the lab fail: no tick, no karp scale, for the whole cluster."""
    provisioned()
    bad = models.NodePool.objects.get(name="default")
    nodepool = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text().split("---")[1]
    ok("apply", "-f", "-", stdin=nodepool.replace("  name: default\n", "  name: other\n", 1))
    models.NodePool.objects.filter(pk=bad.pk).update(annotations={"karpui.dev/approval-threshold": "lots"})
    ok("advance", "10s")
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 3
    assert {c["NAME"].rsplit("-", 1)[0] for c in table("get", "nodeclaims")} == {"other"}
    errors = [json.loads(line) for line in ok("logs").splitlines() if '"Reconciler error"' in line]
    assert errors[0]["controller"] == "nodepool"
    assert errors[0]["NodePool"] == {"name": "default", "namespace": ""}
    assert "metadata.annotations" in errors[0]["error"] and "lots" in errors[0]["error"]
    conditions = {
        c["type"]: c for c in json.loads(ok("get", "nodepool", "default", "-o", "json"))["status"]["conditions"]
    }
    assert (conditions["Ready"]["status"], conditions["ValidationSucceeded"]["status"]) == ("False", "False")
    assert conditions["ValidationSucceeded"]["reason"] == "NodePoolValidationFailed"
    assert conditions["ValidationSucceeded"]["message"].startswith("left out until fixed: metadata.annotations")


@pytest.mark.django_db(transaction=True)  # the lab is kept warm only when a run commits
def test_a_nodepool_that_stops_parsing_while_the_lab_is_warm_is_reported(lab):
    """The warm engine took the new configuration and left the NodePool out, but cleared the log its error went to
    when the run began: nothing said why the NodePool stopped provisioning."""
    provisioned()
    ok("advance", "1s")
    assert lab.pk in warm._warm
    models.NodePool.objects.filter(name="default").update(annotations={"karpui.dev/approval-threshold": "lots"})
    ok("advance", "10s")
    errors = [json.loads(line) for line in ok("logs").splitlines() if '"Reconciler error"' in line]
    assert [(e["controller"], e["NodePool"]["name"]) for e in errors] == [("nodepool", "default")]
    assert "metadata.annotations" in errors[0]["error"] and "lots" in errors[0]["error"]


def test_a_stored_pod_that_cannot_be_read_is_reported_once_and_the_others_still_get_nodes(lab):
    """A Pod with requests.cpu "lots" (stored before a rule, or by an observed cluster karpui reads more strictly)
    used to stop the provisioning and disruption controllers for its whole cluster: three inflate pods stayed
    Pending for good."""
    unreadable_pod(lab)
    provisioned()
    ok("advance", "10s")
    ok("advance", "60s")
    phases = {p["NAME"]: p["STATUS"] for p in table("get", "pods")}
    assert sorted(phases.values()) == ["Pending", "Running", "Running", "Running"]
    assert phases["unreadable"] == "Pending"
    errors = [json.loads(line) for line in ok("logs", "--since", "60s").splitlines() if '"Reconciler error"' in line]
    # Once in the last minute's run, not at each of its steps (a process that loads the lab says it again).
    assert [(e["controller"], e["Pod"]["name"]) for e in errors] == [("pods", "unreadable")]
    assert "lots" in errors[0]["error"]
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    warning = next(e for e in events if e["reason"] == "ReconcileError")
    assert warning["involvedObject"]["name"] == "unreadable"


def test_a_poison_pod_in_one_cluster_leaves_the_healthy_cluster_reconciling_in_the_same_tick(lab):
    """Issue 11's check: a poison object next to a healthy cluster. One clusters_tick moves both clocks; the healthy
    lab gets its NodeClaim; b reports the pod (a Reconciler error and a Warning Event) and runs its other pods."""
    ok("cluster", "create", "b")
    b = models.Cluster.objects.get(name="b")
    unreadable_pod(b)
    for cluster in ("lab", "b"):
        ok("apply", "-f", str(EXAMPLES / "provisioning"), "--cluster", cluster)
        ok("scale", "deploy/inflate", "--replicas", "3", "--cluster", cluster)
    start = timezone.now()
    models.Cluster.objects.filter(name__in=("lab", "b")).update(clock=start, ticked_at=start)
    ticks.clusters_tick(now=start + timedelta(seconds=10))
    healthy, poisoned = models.Cluster.objects.get(name="lab"), models.Cluster.objects.get(name="b")
    assert (healthy.clock, poisoned.clock) == (start + timedelta(seconds=10), start + timedelta(seconds=10))
    assert models.KubeObject.objects.filter(cluster=healthy, kind="NodeClaim").count() == 1
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 3
    phases = {p["NAME"]: p["STATUS"] for p in table("get", "pods", "--cluster", "b")}
    assert sorted(phases.values()) == ["Pending", "Running", "Running", "Running"]
    assert phases["unreadable"] == "Pending"
    # Reported once by the tick (the apply and the scale, loading b, reported it before).
    [error] = models.LogEntry.objects.filter(cluster=poisoned, message="Reconciler error", time__gte=start)
    assert (error.fields["controller"], error.fields["Pod"]["name"]) == ("pods", "unreadable")
    assert not models.LogEntry.objects.filter(cluster=healthy, message="Reconciler error").exists()
    events = json.loads(ok("get", "events", "-o", "json", "--cluster", "b"))["items"]
    warning = next(e for e in events if e["reason"] == "ReconcileError")
    assert (warning["involvedObject"]["name"], warning["type"]) == ("unreadable", "Warning")
