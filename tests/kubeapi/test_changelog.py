"""The change log: every write of a cluster's objects, NodePools, node classes and DeviceDeclarations takes the
next resourceVersion of the cluster and is logged with it, in order; the log keeps a retention window."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from karpui import models
from karpui.clusters import changelog, registry
from karpui.clusters import lab as labs
from karpui.people.audit import Actor
from karpui.writes import configs
from tests.karp import EXAMPLES, ok


def log(kind: str | None = None) -> list[tuple[str, str, str]]:
    """The change log, without the namespaces every cluster is made with."""
    entries = models.ChangeLogEntry.objects.exclude(kind="Namespace").order_by("resource_version")
    if kind is not None:
        entries = entries.filter(kind=kind)
    return [(e.type, e.kind, e.name) for e in entries]


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "c"}], "nodeSelector": {"nowhere": "true"}},
    }


def test_a_lab_run_logs_what_it_created_changed_and_deleted_at_the_cluster_s_versions(lab: Any) -> None:
    lab_name = lab.name
    labs.run(lab_name, lambda running: running.store.create(pod("a")))
    labs.run(lab_name, lambda running: running.store.create(pod("b")))

    def change(running: Any) -> None:
        obj = running.store.must_get("Pod", "a", "default")
        obj["metadata"]["labels"]["app"] = "y"
        running.store.update(obj)
        running.store.delete("Pod", "b", "default")
        running.store.create(pod("c"))
        running.store.delete("Pod", "c", "default")  # never seen outside this run

    labs.run(lab_name, change)
    entries = list(models.ChangeLogEntry.objects.filter(kind="Pod").order_by("resource_version"))
    assert [(e.type, e.name) for e in entries] == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert [int(e.body["metadata"]["resourceVersion"]) for e in entries] == [e.resource_version for e in entries]
    lab.refresh_from_db()
    assert lab.resource_version == entries[-1].resource_version


def test_an_object_deleted_and_made_again_in_one_run_is_deleted_then_added(lab: Any) -> None:
    labs.run(lab.name, lambda running: running.store.create(pod("a")))
    old_uid = models.KubeObject.objects.get(name="a").uid

    def recreate(running: Any) -> None:
        running.store.delete("Pod", "a", "default")
        running.store.create(pod("a"))

    labs.run(lab.name, recreate)
    deleted, added = models.ChangeLogEntry.objects.filter(kind="Pod").order_by("resource_version")[1:]
    assert (deleted.type, deleted.body["metadata"]["uid"]) == ("DELETED", old_uid)
    assert (added.type, added.body["metadata"]["uid"]) == ("ADDED", models.KubeObject.objects.get(name="a").uid)
    assert deleted.resource_version < added.resource_version
    assert models.KubeObject.objects.get(name="a").resource_version == added.resource_version


def test_nodepools_and_node_classes_take_the_cluster_s_versions_whoever_writes_them(lab: Any) -> None:
    base = lab.resource_version
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    assert log() == [("ADDED", "KWOKNodeClass", "default"), ("ADDED", "NodePool", "default")]
    row = models.NodePool.objects.get(name="default")
    lab.refresh_from_db()
    assert row.resource_version == lab.resource_version == base + 2
    configs.config_delete(cluster=lab, kind="NodePool", name="default", actor=Actor("t", "cli"))
    [*_, deleted] = models.ChangeLogEntry.objects.order_by("resource_version")
    assert (deleted.type, deleted.kind, deleted.resource_version) == ("DELETED", "NodePool", base + 3)


def test_a_device_declaration_advances_every_cluster_to_one_version(lab: Any) -> None:
    other = registry.cluster_get_or_create("other")
    models.Cluster.objects.filter(pk=other.pk).update(resource_version=40)
    ok("apply", "-f", str(EXAMPLES / "dra" / "declaration.yaml"))
    assert list(models.Cluster.objects.order_by("name").values_list("name", "resource_version")) == [
        ("lab", 41),
        ("other", 41),
    ]
    assert models.DeviceDeclaration.objects.get().resource_version == 41
    entries = models.ChangeLogEntry.objects.exclude(kind="Namespace")
    assert sorted(entries.values_list("cluster__name", "type", "kind")) == [
        ("lab", "ADDED", "DeviceDeclaration"),
        ("other", "ADDED", "DeviceDeclaration"),
    ]


def test_the_log_keeps_a_window_of_time_and_versions_and_moves_the_compaction_point(lab: Any, monkeypatch: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    lab.refresh_from_db()
    newest = lab.resource_version
    versions = sorted(models.ChangeLogEntry.objects.values_list("resource_version", flat=True))
    models.ChangeLogEntry.objects.filter(resource_version__lte=versions[1]).update(
        created_at=timezone.now() - timedelta(seconds=changelog.RETENTION_SECONDS + 1)
    )
    changelog.prune(lab.pk)
    lab.refresh_from_db()
    assert lab.compacted_resource_version == versions[1]
    assert sorted(models.ChangeLogEntry.objects.values_list("resource_version", flat=True)) == versions[2:]
    monkeypatch.setattr(changelog, "MAX_VERSIONS", 2)
    changelog.prune(lab.pk)
    lab.refresh_from_db()
    assert lab.compacted_resource_version == newest - 2
    assert all(v > newest - 2 for v in models.ChangeLogEntry.objects.values_list("resource_version", flat=True))


def test_a_reset_forgets_the_history_but_not_the_sequence(lab: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    lab.refresh_from_db()
    before = lab.resource_version
    lab_name = lab.name
    labs.reset(lab_name)
    lab.refresh_from_db()
    assert lab.resource_version == lab.compacted_resource_version == before + 1
    assert models.ChangeLogEntry.objects.count() == 0
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))  # versions go on from there
    assert min(models.ChangeLogEntry.objects.values_list("resource_version", flat=True)) > before + 1


def test_the_lab_continues_from_the_cluster_s_version(lab: Any) -> None:
    models.Cluster.objects.filter(pk=lab.pk).update(resource_version=500)
    lab_name = lab.name
    labs.run(lab_name, lambda running: running.store.create(pod("a")))
    assert models.KubeObject.objects.get(name="a").resource_version == 501
