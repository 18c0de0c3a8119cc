"""The kwok engine's mirror of the cluster's objects: each row's body is the object as the server sent it, its
managedFields included (the informer cache keeps them apart), however many rows one step writes; at most
MIRROR_LIMIT rows a step, the rest in the steps after."""

from __future__ import annotations

from typing import Any

import pytest

from karpui import models
from karpui.clusters import engines
from karpui.clusters.engines import WRITE_CHUNK, Engine
from provisioner.adapters.cache import Event, Replace
from provisioner.adapters.kube import KubeCluster

pytestmark = pytest.mark.django_db

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]


def pod(index: int, version: int, managed: list[Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"p{index:04d}",
        "namespace": "default",
        "uid": f"u{index}",
        "resourceVersion": str(version),
    }
    if managed is not None:
        meta["managedFields"] = managed
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": {}}


def engine_over(row: models.Cluster, kube: KubeCluster) -> Engine:
    # Only what the mirror reads: the cache (no informers, no leader election, no controllers).
    return Engine(row.pk, row.mode, kube, None, None, None, 0)  # type: ignore[arg-type]


def test_the_mirror_writes_every_changed_object_with_its_managed_fields_in_chunks() -> None:
    row = models.Cluster.objects.create(name="real", mode=models.Cluster.Mode.KWOK)
    kube = KubeCluster(None)  # type: ignore[arg-type]
    count = 2 * WRITE_CHUNK + 1
    kube.cache.replace(Replace("Pod", tuple(pod(i, 10 + i, MANAGED) for i in range(count)), "9999"))
    engine = engine_over(row, kube)
    engine._mirror(row)
    bodies = list(
        models.KubeObject.objects.filter(cluster=row, kind="Pod").order_by("name").values_list("body", flat=True)
    )
    assert len(bodies) == 501
    assert bodies[0] == pod(0, 10, MANAGED)
    assert bodies[500] == pod(500, 510, MANAGED)

    kube.cache.apply(Event("Pod", "MODIFIED", pod(7, 20000)))  # the server sent this one without any
    engine._mirror(row)
    assert models.KubeObject.objects.get(cluster=row, kind="Pod", name="p0007").body == pod(7, 20000)
    assert models.KubeObject.objects.get(cluster=row, kind="Pod", name="p0008").body == pod(8, 18, MANAGED)


def mirrored_pods(row: models.Cluster) -> dict[str, int]:
    return dict(models.KubeObject.objects.filter(cluster=row, kind="Pod").values_list("name", "resource_version"))


def test_the_mirror_writes_at_most_its_limit_a_step_and_the_rest_in_the_steps_after(monkeypatch) -> None:
    monkeypatch.setattr(engines, "MIRROR_LIMIT", 4)
    row = models.Cluster.objects.create(name="real", mode=models.Cluster.Mode.KWOK)
    kube = KubeCluster(None)  # type: ignore[arg-type]
    kube.cache.replace(Replace("Node", ({"kind": "Node", "metadata": {"name": "n1", "resourceVersion": "5"}},), "9"))
    kube.cache.replace(Replace("Pod", tuple(pod(i, 10 + i) for i in range(6)), "99"))
    engine = engine_over(row, kube)
    engine._mirror(row)
    # The few first: the Node, then three pods.
    assert models.KubeObject.objects.filter(cluster=row, kind="Node").count() == 1
    assert mirrored_pods(row) == {"p0000": 10, "p0001": 11, "p0002": 12}
    kube.cache.apply(Event("Pod", "MODIFIED", pod(1, 100)))  # changed while the others wait
    kube.cache.apply(Event("Pod", "DELETED", pod(0, 101)))
    engine._mirror(row)
    assert mirrored_pods(row) == {"p0001": 100, "p0002": 12, "p0003": 13, "p0004": 14, "p0005": 15}
    engine._mirror(row)  # caught up: nothing to write, and the kind is not read again
    assert mirrored_pods(row) == {"p0001": 100, "p0002": 12, "p0003": 13, "p0004": 14, "p0005": 15}
    assert engine.mirrored_versions["Pod"] == kube.kind_version("Pod")
