"""Storing what a run or a write changed: the objects' rows and change log, controllers' logs, NodePool status,
the clock, the lab's state and costs."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from karpui import models
from karpui.clusters import bulk, changelog, leases, store
from karpui.history import costs
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Key, key_of
from provisioner.cluster.views import UnreadablePod
from provisioner.lab import Lab

Summaries = dict[Key, dict[str, Any]]


def summaries(store: ObjectStore, keys: Iterable[Key] | None = None) -> Summaries:
    """The summary columns of the objects at `keys` (default: every object the store changed). Pods are read
    through the store's views, which the engine has mostly parsed already at their current version (parsing each
    again cost 0.4 s per 3,000 pods)."""
    found: Summaries = {}
    for kind, namespace, name in store.changed if keys is None else keys:
        obj = store.get(kind, name, namespace)
        if obj is None:
            continue
        pod = None
        if kind == "Pod" and obj["metadata"].get("uid"):
            with suppress(UnreadablePod):  # then the summary's own parse says why, as it always did
                pod = store.views.pod(obj)
        found[kind, namespace, name] = models.KubeObject.summary(obj, pod)
    return found


def persist(cluster: models.Cluster, store: ObjectStore, known: Summaries | None = None) -> None:
    """Write the objects a run or a write changed and removed, with their change-log entries; the cluster's
    resourceVersion follows (`changelog.record_lab_run`). `known`: summaries worked out beforehand (they do not
    depend on resourceVersions), so a run can work them out before it takes the row lock."""
    changed = [obj for obj in (store.get(kind, name, namespace) for kind, namespace, name in store.changed) if obj]
    texts: dict[int, str] = {}  # each changed body's JSON, encoded once for its log entry and its row
    changelog.record_lab_run(cluster, changed, store.removed, store.resource_version, texts)
    columns = dict(known or {})
    columns.update(summaries(store, [key for key in store.changed if key not in columns]))
    _upsert(cluster, changed, columns, texts)
    # One DELETE per kind and namespace, not per object: a scale-down removes hundreds of pods at once.
    removed: dict[tuple[str, str], list[str]] = defaultdict(list)
    for kind, namespace, name in store.removed:
        removed[kind, namespace].append(name)
    for (kind, namespace), names in removed.items():
        models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names).delete()


def _upsert(
    cluster: models.Cluster, bodies: list[dict[str, Any]], summarised: Summaries, texts: dict[int, str] | None = None
) -> None:
    """Insert or replace these objects' rows in bulk (`karpui.clusters.bulk`): the ORM's bulk_create spent most of a
    provisioning tick's save building SQL (1.8 s of 3.2 s for 11,565 rows at 5,000 pods)."""
    summaries = models.KubeObject.SUMMARY_FIELDS
    columns = ("cluster_id", "kind", "namespace", "name", "uid", "resource_version", "body", "updated_at", *summaries)
    # The defaults of the summary columns, for kinds whose summary leaves them out.
    defaults = {field: models.KubeObject._meta.get_field(field).get_default() for field in summaries}
    updated = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = []
    for obj in bodies:
        summary = {**defaults, **summarised[key_of(obj)]}
        rows.append(
            (
                cluster.pk,
                obj["kind"],
                key_of(obj)[1],
                obj["metadata"]["name"],
                obj["metadata"].get("uid", ""),
                int(obj["metadata"].get("resourceVersion", 0)),
                changelog.encoded(obj, texts),
                updated,
                *(summary[field] for field in summaries),
            )
        )
    bulk.upsert(models.KubeObject._meta.db_table, columns, rows, unique=("cluster_id", "kind", "namespace", "name"))


def save(
    cluster: models.Cluster,
    lab: Lab,
    lease: leases.Lease | None = None,
    costs_seen: list[tuple[datetime, dict[str, costs.PoolCost]]] | None = None,
    known: Summaries | None = None,
) -> None:
    if lease is not None and not lease.still_held():
        raise leases.LeaseLost(f"lease on cluster {cluster.name} lapsed; abandoning this run")
    persist(cluster, lab.store, known)
    store.logs_save(cluster, lab.logs)
    # A NodePool row a concurrent write holds is skipped (its status is written by the next run): that writer
    # waits for this run's cluster lock to log its change, so waiting for it here would deadlock.
    statuses = lab.nodepool_status()
    for row in models.NodePool.objects.select_for_update(skip_locked=True).filter(cluster=cluster):
        status = statuses.get(row.name)
        if status is not None and status != row.status:
            row.status = status
            row.save(update_fields=["status"])
    cluster.clock = datetime.fromtimestamp(lab.now, UTC)
    cluster.lab_state = lab.to_state()
    cluster.engine_token = uuid.uuid4().hex
    claims = lab.store.list("NodeClaim")
    now = (cluster.clock, costs.by_nodepool(claims, lab.store.list("DisruptionCommand")))
    costs.record(cluster, [*(costs_seen or []), now], claims)
    cluster.save(update_fields=["clock", "lab_state", "cost_state", "engine_token"])
