"""Observe mode's Pending pods: beside karpui's verdict (its simulation of Karpenter's batch), Karpenter's own newest
word on each waiting pod, from the cluster's mirrored Events; a lab's events are karpui's own and add nothing."""

from __future__ import annotations

from typing import Any

import pytest

from karpui import models
from karpui.insight.pending import waiting_pods

pytestmark = pytest.mark.django_db

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "huge-1",
        "namespace": "default",
        "uid": "u-huge",
        "creationTimestamp": "2026-12-05T04:00:00Z",
    },
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1000"}}}]},
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}],
    },
}


def event(name: str, reason: str, message: str, when: str, component: str = "karpenter") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "huge-1", "uid": "u-huge"},
        "reason": reason,
        "message": message,
        "lastTimestamp": when,
        "source": {"component": component},
    }


def mirrored(cluster: models.Cluster, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        meta = body["metadata"]
        models.KubeObject.objects.create(
            cluster=cluster,
            kind=body["kind"],
            namespace=meta.get("namespace", ""),
            name=meta["name"],
            uid=meta.get("uid", ""),
            body=body,
            **models.KubeObject.summary(body),
        )


@pytest.mark.parametrize("mode", [models.Cluster.Mode.OBSERVE, models.Cluster.Mode.LAB])
def test_a_waiting_pod_has_karpuis_verdict_and_in_observe_mode_karpenters_newest_word(mode: str) -> None:
    verdict = {"nodepool": "default", "kind": "resources", "message": "no instance type has 1000 CPUs"}
    cluster = models.Cluster.objects.create(
        name="prod", mode=mode, lab_state={"provisioning": {"verdicts": {"u-huge": [verdict]}}}
    )
    mirrored(
        cluster,
        POD,
        event("huge-1.1", "Nominated", "Pod should schedule on: nodeclaim/default-abc", "2026-12-05T04:00:01Z"),
        event(
            "huge-1.2",
            "FailedScheduling",
            "Failed to schedule pod, no instance type has enough resources",
            "2026-12-05T04:00:09Z",
        ),
        event("huge-1.3", "FailedScheduling", "0/1 nodes are available", "2026-12-05T04:00:30Z", "default-scheduler"),
    )
    [pod] = waiting_pods(cluster=cluster)
    said = [(v.label, v.kind, v.message) for v in pod.verdicts]
    karpenters = ("Karpenter", "FailedScheduling", "Failed to schedule pod, no instance type has enough resources")
    mine = ("default", "resources", "no instance type has 1000 CPUs")
    assert said == ([mine, karpenters] if mode == models.Cluster.Mode.OBSERVE else [mine])
    assert pod.reason == (
        "default: resources · Karpenter: FailedScheduling"
        if mode == models.Cluster.Mode.OBSERVE
        else "default: resources"
    )
