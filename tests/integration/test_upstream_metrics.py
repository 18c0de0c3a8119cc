"""Karpenter v1.15.0's metrics suites (pkg/controllers/metrics/node, pod and nodepool suite_test.go) ported onto
karpui's /metrics, each test naming the It it follows.

Karpenter's metrics controllers keep gauges as objects change; karpui reads the stored objects at scrape time, so
each test writes the objects as the Go test applies them (rows, or the lab for a NodePool's status) and scrapes
where the Go test reconciles. Every series also carries karpui's `cluster` label.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from karpui import models
from tests.integration.test_metrics import LIMITED, scrape
from tests.karp import ok

RESOURCES = {"pods": "100", "cpu": "5000", "memory": "32Gi"}  # metrics/node suite_test.go BeforeEach
GIB = 2**30


@pytest.fixture(autouse=True)
def whole_second(db, lab):
    """The lab's clock on a whole second, so ages counted from timestamps (whole seconds) are exact."""
    lab.clock = lab.clock.replace(microsecond=0)
    lab.save(update_fields=["clock"])


def put(lab, body: dict[str, Any]) -> dict[str, Any]:
    """ExpectApplied: the object stored (created or replaced) in the lab cluster's rows."""
    meta = body["metadata"]
    meta.setdefault("uid", f"uid-{body['kind']}-{meta['name']}")
    meta.setdefault("creationTimestamp", _at(lab, 0))
    models.KubeObject.objects.update_or_create(
        cluster=lab,
        kind=body["kind"],
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        defaults={"uid": meta["uid"], "body": body, **models.KubeObject.summary(body)},
    )
    return body


def delete(lab, kind: str, name: str, namespace: str = "") -> None:
    """ExpectDeleted."""
    models.KubeObject.objects.filter(cluster=lab, kind=kind, namespace=namespace, name=name).delete()


def _at(lab, seconds_ago: float) -> str:
    return (lab.clock - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_body(name: str = "plain", **options: Any) -> dict[str, Any]:
    """test.Node: no labels but the hostname one, allocatable as given."""
    labels = {"kubernetes.io/hostname": name, **options.pop("labels", {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, **options.pop("metadata", {})},
        "spec": options.pop("spec", {}),
        "status": {"allocatable": dict(RESOURCES), **options},
    }


def pod_body(name: str = "p", **spec: Any) -> dict[str, Any]:
    """test.Pod: a pending pause pod in `default`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause"}], **spec},
        "status": {"phase": "Pending"},
    }


def series(values, metric: str, /, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """FindMetricWithLabelValues, every match: the series of `name` whose labels include `labels`."""
    return {
        key: value
        for (found, key), value in values.items()
        if found == metric and all((label, wanted) in key for label, wanted in labels.items())
    }


def by_resource(values, metric: str, /, **labels: str) -> dict[str, float]:
    found = series(values, metric, **labels)
    return {dict(key)["resource_type"]: value for key, value in found.items()}


# metrics/node/suite_test.go --------------------------------------------------------------------------------------


def test_node_allocatable_metric(client, lab):
    """Node Metrics: should update the allocatable metric (a plain Node: managed=false)"""
    put(lab, node_body())
    values = scrape(client)
    assert by_resource(values, "karpenter_nodes_allocatable", node_name="plain", managed="false") == {
        "cpu": 5000.0,
        "memory": 32.0 * GIB,
        "pods": 100.0,
    }
    [labels] = series(values, "karpenter_nodes_allocatable", node_name="plain", resource_type="cpu")
    assert {k: v for k, v in labels if v} == {
        "cluster": "lab",
        "node_name": "plain",
        "managed": "false",
        "resource_type": "cpu",
    }


def test_node_metrics_managed_label(client, lab):
    """Node Metrics: should set the managed label on per-node metrics for Karpenter-managed nodes"""
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "claim", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}},
        "status": {"providerID": "kwok://managed", "allocatable": dict(RESOURCES)},
    }
    put(lab, claim)
    put(
        lab,
        node_body(
            "managed",
            labels={"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"},
            spec={"providerID": "kwok://managed"},
        ),
    )
    values = scrape(client)
    assert by_resource(values, "karpenter_nodes_allocatable", node_name="managed", managed="true") == {
        "cpu": 5000.0,
        "memory": 32.0 * GIB,
        "pods": 100.0,
    }
    [labels] = series(values, "karpenter_nodes_allocatable", node_name="managed", resource_type="pods")
    assert dict(labels)["nodepool"] == "default"


def test_node_lifetime_and_cluster_utilization_metrics(client, lab):
    """Node Metrics: should update the node lifetime and cluster utilization metrics"""
    put(lab, node_body(metadata={"creationTimestamp": _at(lab, 120)}))
    values = scrape(client)
    assert list(
        series(values, "karpenter_nodes_current_lifetime_seconds", node_name="plain", managed="false").values()
    ) == [120.0]
    assert by_resource(values, "karpenter_cluster_utilization_percent") == {"cpu": 0.0, "memory": 0.0, "pods": 0.0}


def test_node_metric_removed_when_the_node_is_deleted(client, lab):
    """Node Metrics: should remove the node metric gauge when the node is deleted"""
    put(lab, node_body())
    assert series(scrape(client), "karpenter_nodes_allocatable", node_name="plain")
    delete(lab, "Node", "plain")
    assert not series(scrape(client), "karpenter_nodes_allocatable", node_name="plain")


def test_node_requests_overhead_and_utilization_of_bound_pods(client, lab):
    """metrics/node controller.go buildMetrics and buildClusterUtilizationMetric: requests of the pods bound to the
    node that have not finished (DaemonSet pods also apart), capacity less allocatable, requests over allocatable"""
    put(lab, node_body("n", capacity={"cpu": "4", "memory": "8Gi"}, allocatable={"cpu": "3900m", "memory": "7Gi"}))
    requests = {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    put(lab, pod_body("app", nodeName="n", containers=[{"name": "c", "image": "pause", **requests}]))
    daemon = pod_body("ds", nodeName="n", containers=[{"name": "c", "image": "pause", **requests}])
    daemon["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d"}]
    put(lab, daemon)
    done = pod_body("done", nodeName="n", containers=[{"name": "c", "image": "pause", **requests}])
    done["status"]["phase"] = "Succeeded"
    put(lab, done)
    values = scrape(client)
    assert by_resource(values, "karpenter_nodes_total_pod_requests", node_name="n") == {"cpu": 2.0, "memory": 2.0 * GIB}
    assert by_resource(values, "karpenter_nodes_total_daemon_requests", node_name="n") == {
        "cpu": 1.0,
        "memory": 1.0 * GIB,
    }
    assert by_resource(values, "karpenter_nodes_system_overhead", node_name="n") == {"cpu": 0.1, "memory": 1.0 * GIB}
    assert by_resource(values, "karpenter_cluster_utilization_percent") == {
        "cpu": 100 * (2000 / 3900),  # Go divides first
        "memory": 100 * (2 / 7),
    }


# metrics/nodepool/suite_test.go ----------------------------------------------------------------------------------
# "should update the nodepool limit metrics": tests/integration/test_metrics.py
# test_nodepool_limit_metrics_are_named_as_karpenters.


def test_nodepool_usage_metrics(client, lab):
    """Metrics: should update the nodepool usage metrics (status.resources as the counter writes it: every
    well-known resource, 0 where unused)"""
    ok("apply", "-f", "-", stdin=LIMITED)
    ok("advance", "1s")
    assert by_resource(scrape(client), "karpenter_nodepools_usage", nodepool="limited") == {
        "cpu": 0.0,
        "ephemeral_storage": 0.0,
        "memory": 0.0,
        "nodes": 0.0,
        "pods": 0.0,
    }


def test_nodepool_state_metrics_deleted_with_the_nodepool(client, lab):
    """Metrics: should delete the nodepool state metrics on nodepool delete"""
    ok("apply", "-f", "-", stdin=LIMITED)
    ok("advance", "1s")
    names = ("karpenter_nodepools_limit", "karpenter_nodepools_usage")
    assert all(series(scrape(client), name, nodepool="limited") for name in names)
    ok("delete", "nodepool", "limited")
    assert not any(series(scrape(client), name, nodepool="limited") for name in names)


# metrics/pod/suite_test.go ---------------------------------------------------------------------------------------


def test_pod_state_metric(client, lab):
    """Pod Metrics: should update the pod state metrics"""
    put(lab, pod_body())
    assert series(scrape(client), "karpenter_pods_state", name="p", namespace="default") == {
        (
            ("arch", ""),
            ("capacity_type", ""),
            ("cluster", "lab"),
            ("instance_type", ""),
            ("managed", "false"),
            ("name", "p"),
            ("namespace", "default"),
            ("node", ""),
            ("nodepool", ""),
            ("owner", ""),
            ("phase", "Pending"),
            ("ready", "false"),
            ("scheduled", "false"),
            ("zone", ""),
        ): 1.0
    }


def test_pod_state_managed_label(client, lab):
    """Pod Metrics: should set the managed label based on whether the pod's node is Karpenter-managed"""
    managed = put(lab, node_body("managed", labels={"karpenter.sh/nodepool": "default"}))
    unmanaged = put(lab, node_body("unmanaged"))
    put(lab, pod_body("on-managed", nodeName=managed["metadata"]["name"]))
    put(lab, pod_body("on-unmanaged", nodeName=unmanaged["metadata"]["name"]))
    values = scrape(client)
    assert series(values, "karpenter_pods_state", name="on-managed", managed="true", nodepool="default")
    assert series(values, "karpenter_pods_state", name="on-unmanaged", managed="false", nodepool="")


def test_pod_state_phase_label(client, lab):
    """Pod Metrics: should update the pod state metrics with pod phase"""
    pod = put(lab, pod_body())
    assert series(scrape(client), "karpenter_pods_state", name="p", phase="Pending")
    pod["status"]["phase"] = "Running"
    put(lab, pod)
    values = scrape(client)
    assert series(values, "karpenter_pods_state", name="p", phase="Running")
    assert not series(values, "karpenter_pods_state", name="p", phase="Pending")


def _condition(kind: str, status: str, lab, seconds_ago: float = 0) -> dict[str, str]:
    return {"type": kind, "status": status, "lastTransitionTime": _at(lab, seconds_ago)}


def test_pod_bound_and_unbound_time_metrics(client, lab):
    """Pod Metrics: should update the pod bound and unbound time metrics (the unbound gauge; the bound-duration
    histograms and provisioning_* series need Karpenter's scheduling times, which karpui does not keep)"""
    pod = pod_body()
    pod["metadata"]["creationTimestamp"] = _at(lab, 3600)
    put(lab, pod)
    unbound = {"name": "p", "namespace": "default", "dynamic_resources": "false"}
    assert list(series(scrape(client), "karpenter_pods_unbound_time_seconds", **unbound).values()) == [3600.0]
    pod["status"]["conditions"] = [_condition("PodScheduled", "Unknown", lab)]
    put(lab, pod)
    assert list(series(scrape(client), "karpenter_pods_unbound_time_seconds", **unbound).values()) == [3600.0]
    # Still pending but bound (600 s ago): the gauge keeps the value it had at the bind.
    pod["status"]["conditions"] = [_condition("PodScheduled", "True", lab, 600)]
    put(lab, pod)
    assert list(series(scrape(client), "karpenter_pods_unbound_time_seconds", **unbound).values()) == [3000.0]
    pod["status"]["phase"] = "Running"
    put(lab, pod)
    assert not series(scrape(client), "karpenter_pods_unbound_time_seconds", name="p")


def test_pod_binding_metrics_labelled_with_dynamic_resources(client, lab):
    """Pod Metrics: should label the pod binding metrics with dynamic_resources (when the pod does not request
    dynamic resources / when the pod requests dynamic resources via a pod-level resource claim)"""
    put(lab, pod_body("plain"))
    put(lab, pod_body("dra", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}]))
    values = scrape(client)
    assert series(values, "karpenter_pods_unbound_time_seconds", name="plain", dynamic_resources="false")
    assert series(values, "karpenter_pods_unbound_time_seconds", name="dra", dynamic_resources="true")


def test_pod_startup_and_unstarted_time_metrics(client, lab):
    """Pod Metrics: should update the pod startup and unstarted time metrics (the unstarted gauge)"""
    pod = pod_body()
    pod["metadata"]["creationTimestamp"] = _at(lab, 3600)
    put(lab, pod)
    assert list(series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p").values()) == [3600.0]
    pod["status"]["phase"] = "Running"  # running, no Ready condition yet
    put(lab, pod)
    assert list(series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p").values()) == [3600.0]
    pod["status"]["conditions"] = [_condition("Ready", "Unknown", lab)]
    put(lab, pod)
    assert series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p")
    pod["status"]["conditions"] = [_condition("Ready", "True", lab)]
    put(lab, pod)
    assert not series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p")


def _finished(client, lab, phase: str) -> None:
    pod = put(lab, pod_body())
    assert series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p")
    pod["status"] = {
        "phase": phase,
        "conditions": [_condition("Ready", "False", lab), _condition("PodScheduled", "True", lab)],
    }
    put(lab, pod)
    assert not series(scrape(client), "karpenter_pods_unstarted_time_seconds", name="p")


def test_pod_unstarted_time_metric_when_the_pod_has_succeeded(client, lab):
    """Pod Metrics: should update the pod unstarted time metrics when the pod has succeeded"""
    _finished(client, lab, "Succeeded")


def test_pod_unstarted_time_metric_when_the_pod_has_failed(client, lab):
    """Pod Metrics: should update the pod unstarted time metrics when the pod has failed"""
    _finished(client, lab, "Failed")


def test_pod_unbound_and_unstarted_metrics_deleted_with_the_pod(client, lab):
    """Pod Metrics: should delete pod unbound and unstarted time metrics on pod delete"""
    put(lab, pod_body())
    names = ("karpenter_pods_unbound_time_seconds", "karpenter_pods_unstarted_time_seconds")
    values = scrape(client)
    assert all(series(values, metric, name="p", namespace="default") for metric in names)
    delete(lab, "Pod", "p", "default")
    values = scrape(client)
    assert not any(series(values, metric, name="p") for metric in names)


def test_pod_state_metric_deleted_with_the_pod(client, lab):
    """Pod Metrics: should delete the pod state metric on pod delete"""
    put(lab, pod_body())
    assert series(scrape(client), "karpenter_pods_state", name="p")
    delete(lab, "Pod", "p", "default")
    assert not series(scrape(client), "karpenter_pods_state", name="p")
