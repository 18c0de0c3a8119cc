"""The change log a watch replays: one row per change of an object, at the cluster's resourceVersion.

Every write takes its resourceVersion from the cluster's sequence (`Cluster.resource_version`) under the cluster
row's lock, and logs the change in the same transaction, so versions follow commit order and a watcher that has
seen version N has seen every change up to N. Writers:

* a lab run (`karpui.clusters.saves.save`) logs the objects it changed and removed (`record_lab_run`);
* NodePools, node classes and DeviceDeclarations live in their own tables, whoever writes them (services, the
  dashboard, the admin): signals log their saves and deletes (`connect`). A DeviceDeclaration applies to every
  cluster, so its write advances every cluster to one common version.

The log keeps the changes of the last `RETENTION_SECONDS` of wall time, and at most `MAX_VERSIONS` versions per
cluster; what is pruned moves `Cluster.compacted_resource_version`, below which a watch answers 410 Gone (as an
API server does after etcd compaction) and the client lists again.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from karpui import models
from karpui.clusters import bulk, store
from provisioner.cluster.objects import Key, Obj, key_of

# Watchers further behind than this must list again. Kubernetes' own window (etcd compaction) is 5 minutes.
RETENTION_SECONDS: float = getattr(settings, "KARPUI_WATCH_RETENTION_SECONDS", 15 * 60)
MAX_VERSIONS: int = getattr(settings, "KARPUI_WATCH_MAX_VERSIONS", 100_000)

ADDED, MODIFIED, DELETED = models.ChangeLogEntry.Type


Entry = tuple[int, int, str, str, str, str, Obj]  # cluster, resourceVersion, type, kind, namespace, name, body


def _entry(cluster_id: int, entry_type: str, body: Obj, resource_version: int) -> Entry:
    kind, namespace, name = key_of(body)
    return (cluster_id, resource_version, str(entry_type), kind, namespace, name, body)


def encoded(body: Obj, texts: dict[int, str] | None = None) -> str:
    """`body` as the JSON a row stores; `texts` keeps it by the body's identity, for the object's own row to reuse
    (a lab run logs as many bodies as it saves, and encoding each twice was a tenth of a save at 20,000 pods)."""
    if texts is None:
        return json.dumps(body, separators=(",", ":"))
    text = texts.get(id(body))
    if text is None:
        text = texts[id(body)] = json.dumps(body, separators=(",", ":"))
    return text


def _insert(entries: list[Entry], texts: dict[int, str] | None = None) -> None:
    """Write log entries in bulk (`karpui.clusters.bulk`): the ORM's bulk_create spends twice as long as executemany on
    them (measured: 0.55 s against 0.26 s for 2,000 pods), and COPY half as long again on PostgreSQL."""
    created = connection.ops.adapt_datetimefield_value(timezone.now())
    bulk.insert(
        models.ChangeLogEntry._meta.db_table,
        ("cluster_id", "resource_version", "type", "kind", "namespace", "name", "body", "created_at"),
        [(*entry[:6], encoded(entry[6], texts), created) for entry in entries],
    )


def _stamped(body: Obj, resource_version: int) -> Obj:
    """A copy of `body` at `resource_version`: a DELETED event carries the version of the deletion."""
    body = copy.deepcopy(body)
    body["metadata"]["resourceVersion"] = str(resource_version)
    return body


def record_lab_run(
    cluster: models.Cluster,
    changed: list[Obj],
    removed: Mapping[Key, Obj],
    resource_version: int,
    texts: dict[int, str] | None = None,
) -> int:
    """Log what a lab run changed (bodies carrying the versions the run gave them) and removed; returns the
    cluster's new resourceVersion. Called before the rows are written, so it can tell new objects from changed
    ones: an object created and deleted within one run was never visible outside it and is not logged, and one
    deleted and created again under the same name is logged as DELETED then ADDED (its uid changed). `texts`
    collects the changed bodies' JSON by identity (`encoded`), for their rows."""
    stored = _stored_uids(cluster, [key_of(obj) for obj in changed] + list(removed))
    replaced = {
        key_of(obj): obj
        for obj in changed
        if key_of(obj) in stored and stored[key_of(obj)] != obj["metadata"].get("uid")
    }
    replaced_removed = [
        key for key, obj in removed.items() if key in stored and stored[key] != obj["metadata"].get("uid")
    ]
    entries: list[Entry] = []
    version = resource_version
    for body in _stored_bodies(cluster, [*replaced, *replaced_removed]):
        version += 1
        entries.append(_entry(cluster.pk, DELETED, _stamped(body, version), version))
    for obj in changed:
        key = key_of(obj)
        if key in replaced:
            version += 1
            obj["metadata"]["resourceVersion"] = str(version)  # after its predecessor's DELETED
        entry_type = MODIFIED if key in stored and key not in replaced else ADDED
        entries.append(_entry(cluster.pk, entry_type, obj, int(obj["metadata"]["resourceVersion"])))
    for key, obj in removed.items():
        if key in stored and stored[key] == obj["metadata"].get("uid"):
            version += 1
            entries.append(_entry(cluster.pk, DELETED, _stamped(obj, version), version))
    _insert(entries, texts)
    models.Cluster.objects.filter(pk=cluster.pk).update(resource_version=version)
    cluster.resource_version = version
    prune(cluster.pk)
    return version


def _by_group(keys: Iterable[Key]) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for kind, namespace, name in keys:
        groups[kind, namespace].append(name)
    return groups


def _stored_uids(cluster: models.Cluster, keys: Iterable[Key]) -> dict[Key, str]:
    """The uid of each of these objects as stored before this run (one query per kind and namespace)."""
    uids: dict[Key, str] = {}
    table = models.KubeObject._meta.db_table
    for (kind, namespace), names in _by_group(keys).items():
        if connection.vendor == "postgresql":
            # The names as one array: psycopg parsed the 2,500 placeholders of `name__in` in Python, 0.1 s a save.
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT name, uid FROM {table} WHERE cluster_id = %s AND kind = %s AND namespace = %s"  # noqa: S608
                    " AND name = ANY(%s)",
                    [cluster.pk, kind, namespace, names],
                )
                found = cursor.fetchall()
        else:
            rows = models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names)
            found = list(rows.values_list("name", "uid"))
        for name, uid in found:
            uids[kind, namespace, name] = uid
    return uids


def _stored_bodies(cluster: models.Cluster, keys: Iterable[Key]) -> list[Obj]:
    bodies: list[Obj] = []
    for (kind, namespace), names in _by_group(keys).items():
        rows = models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names)
        bodies.extend(rows.values_list("body", flat=True))
    return bodies


def take_version(cluster_id: int) -> int:
    """The next version of a cluster's sequence, under its row lock (held until the transaction ends)."""
    current = models.Cluster.objects.select_for_update().values_list("resource_version", flat=True).get(pk=cluster_id)
    models.Cluster.objects.filter(pk=cluster_id).update(resource_version=current + 1)
    return int(current) + 1


def prune(cluster_id: int) -> None:
    """Drop changes older than the retention window or beyond the most recent MAX_VERSIONS versions."""
    horizon = timezone.now() - timedelta(seconds=RETENTION_SECONDS)
    entries = models.ChangeLogEntry.objects.filter(cluster_id=cluster_id)
    # The version of the newest expired change, found through the (cluster, created_at) index. Max(version) over
    # the expired ones made PostgreSQL walk the version index past every newer change (67 ms a save at 64,000).
    newest = entries.filter(created_at__lt=horizon).order_by("-created_at", "-resource_version")
    expired = newest.values_list("resource_version", flat=True).first() or 0
    current, compacted = models.Cluster.objects.values_list("resource_version", "compacted_resource_version").get(
        pk=cluster_id
    )
    cutoff = max(expired, current - MAX_VERSIONS)
    if cutoff > compacted:
        entries.filter(resource_version__lte=cutoff).delete()
        models.Cluster.objects.filter(pk=cluster_id).update(compacted_resource_version=cutoff)


def compact(cluster_id: int) -> None:
    """Forget the whole history (after a lab reset removed objects without DELETED events): watchers list again."""
    with transaction.atomic():
        version = take_version(cluster_id)
        models.ChangeLogEntry.objects.filter(cluster_id=cluster_id).delete()
        models.Cluster.objects.filter(pk=cluster_id).update(compacted_resource_version=version)


# Rows of the configuration tables -------------------------------------------------------------------------------


def _log_row(row: models.NodePool | models.NodeClass, entry_type: str) -> None:
    with transaction.atomic():
        version = take_version(row.cluster_id)
        type(row).objects.filter(pk=row.pk).update(resource_version=version)
        row.resource_version = version
        body = store.nodepool_manifest(row) if isinstance(row, models.NodePool) else store.nodeclass_manifest(row)
        models.ChangeLogEntry.objects.create(
            cluster_id=row.cluster_id,
            resource_version=version,
            type=entry_type,
            kind=body["kind"],
            name=row.name,
            body=body,
        )
        prune(row.cluster_id)


def _log_declaration(row: models.DeviceDeclaration, entry_type: str) -> None:
    """A declaration belongs to every cluster: all advance to one version, so the row has one resourceVersion."""
    with transaction.atomic():
        clusters = list(models.Cluster.objects.select_for_update().order_by("pk").values_list("pk", "resource_version"))
        version = max([current for _, current in clusters], default=0) + 1
        models.Cluster.objects.update(resource_version=version)
        models.DeviceDeclaration.objects.filter(pk=row.pk).update(resource_version=version)
        row.resource_version = version
        body = store.declaration_manifest(row)
        models.ChangeLogEntry.objects.bulk_create(
            models.ChangeLogEntry(
                cluster_id=pk,
                resource_version=version,
                type=entry_type,
                kind="DeviceDeclaration",
                name=row.name,
                body=body,
            )
            for pk, _ in clusters
        )
        for pk, _ in clusters:
            prune(pk)


def _saved(sender: type, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    if raw:  # loading fixtures
        return
    entry_type = ADDED if created else MODIFIED
    if isinstance(instance, models.DeviceDeclaration):
        _log_declaration(instance, entry_type)
    else:
        _log_row(instance, entry_type)


def _deleted(sender: type, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    if isinstance(origin, models.Cluster):  # the whole cluster goes, its log with it
        return
    if isinstance(instance, models.DeviceDeclaration):
        _log_declaration(instance, DELETED)
    else:
        _log_row(instance, DELETED)


def connect() -> None:
    """Log every save and delete of the configuration tables, whichever code makes it (called at app start)."""
    for model in (models.NodePool, models.NodeClass, models.DeviceDeclaration):
        post_save.connect(_saved, sender=model, dispatch_uid=f"changelog-save-{model.__name__}")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"changelog-delete-{model.__name__}")
