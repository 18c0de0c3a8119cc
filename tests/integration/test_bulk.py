"""Rows in bulk (karpui.clusters.bulk): COPY on PostgreSQL, executemany on SQLite; both must insert, and upsert must
replace the non-key columns of existing rows, also twice in one transaction. CI runs this on PostgreSQL."""

from __future__ import annotations

import json

from django.db import transaction

from karpui import models
from karpui.clusters import bulk

COLUMNS = ("cluster_id", "kind", "namespace", "name", "uid", "resource_version", "body", "updated_at")
COLUMNS += models.KubeObject.SUMMARY_FIELDS  # phase, node_name, unschedulable, cpu_millis, memory_bytes
UNIQUE = ("cluster_id", "kind", "namespace", "name")


def row(cluster: models.Cluster, name: str, version: int, phase: str) -> tuple[object, ...]:
    body = {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "resourceVersion": str(version)}}
    summary = (phase, "", False, 100 * version, 0)
    return (cluster.pk, "Pod", "default", name, f"uid-{name}", version, json.dumps(body), cluster.clock, *summary)


def stored(cluster: models.Cluster) -> list[tuple[str, int, str, int, str]]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="Pod").order_by("name")
    return [(o.name, o.resource_version, o.phase, o.cpu_millis, o.body["metadata"]["resourceVersion"]) for o in rows]


def test_upsert_inserts_new_rows_and_replaces_the_columns_of_existing_ones_twice_in_one_transaction(lab):
    table = models.KubeObject._meta.db_table
    bulk.upsert(table, COLUMNS, [row(lab, "a", 1, "Pending"), row(lab, "b", 2, "Pending")], UNIQUE)
    with transaction.atomic():
        bulk.upsert(table, COLUMNS, [row(lab, "b", 3, "Running"), row(lab, "c", 4, "Pending")], UNIQUE)
        bulk.upsert(table, COLUMNS, [row(lab, "c", 5, "Running")], UNIQUE)
    bulk.upsert(table, COLUMNS, [], UNIQUE)
    assert stored(lab) == [("a", 1, "Pending", 100, "1"), ("b", 3, "Running", 300, "3"), ("c", 5, "Running", 500, "5")]


def test_insert_writes_every_row_with_its_json_body(lab):
    table = models.ChangeLogEntry._meta.db_table
    columns = ("cluster_id", "resource_version", "type", "kind", "namespace", "name", "body", "created_at")
    bodies = [{"kind": "Pod", "metadata": {"name": f"p{i}", "labels": {"app": "ü"}}} for i in range(3)]
    rows = [
        (lab.pk, 900 + i, "ADDED", "Pod", "default", f"p{i}", json.dumps(b), lab.clock) for i, b in enumerate(bodies)
    ]
    bulk.insert(table, columns, rows)
    bulk.insert(table, columns, [])
    logged = models.ChangeLogEntry.objects.filter(cluster=lab, resource_version__gte=900).order_by("resource_version")
    assert [(e.resource_version, e.type, e.name, e.body) for e in logged] == [
        (900 + i, "ADDED", f"p{i}", bodies[i]) for i in range(3)
    ]
