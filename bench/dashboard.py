"""Dashboard render times and sizes on a big lab: prints a table; asserts nothing.

Usage: python bench/dashboard.py [--pods 20000] [--nodes PODS/10] [--database sqlite|postgres] [--pg-name NAME]
                                 [--only /events/]      (e.g. --pods 2000 for the small lab)
Builds the lab straight into a throwaway database: SQLite in a temporary directory (KARPUI_VAR_DIR, if set, is used
instead; the repository's var/ is never touched), or a PostgreSQL database on 127.0.0.1 dropped and created again
(--pg-name; PGPASSWORD as `source /tmp/env.sh` sets it), analyzed once built. Then requests each page (or those
starting with --only) and its htmx partial in-process with Django's test client, timing the server side: one warm-up
request per page, then the median of five. A page without a live region answers htmx with the whole page, so both
columns then measure the same.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = Path(os.environ.get("KARPUI_VAR_DIR") or tempfile.mkdtemp(prefix="karpui-bench-dashboard-"))
os.environ["KARPUI_VAR_DIR"] = str(VAR)
os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
os.environ["ALLOWED_HOSTS"] = "testserver"
# The simulated row clears the cache before each request: a per-process cache, never a Redis others share.
os.environ.pop("REDIS_URL", None)
SQLITE = VAR / "bench-dashboard.sqlite3"

import django  # noqa: E402

PAGES = [
    "/",
    "/banners/",
    "/pods/pending/",
    "/pods/pending/?group=reason",
    "/pods/pending/?group=none",
    "/pods/pending/?q=pod-0001",
    "/nodes/",
    "/nodes/?nodepool=default&sort=-cpu",
    "/nodes/?q=default-0001",
    "/nodes/default-00007/",
    "/nodes/default-00007/?why=1",
    "/objects/Pod/default/pod-000001/",
    "/objects/NodeClaim/default-00007/",
    "/disruption/",
    "/savings/",
    "/savings/?window=24h",
    "/trends/",
    "/trends/?window=24h",
    "/events/",
    "/events/?group=reason",
    "/events/?group=object",
    "/events/?q=default-0001",
    "/nodepools/",
    "/catalog/",
    "/catalog/?sort=-cpu",
    "/devices/",
    "/clusters/",
    "/workloads/",
    "/pods/",
    "/pods/?phase=Running&page=3",
    "/events/?group=none&events_page=3&logs_page=5",
    "/events/?part=events&group=object",  # the events poll when something is newer: the section (its partial) again
    "/search/?q=default-0001",
]
# The node page's simulation is kept per cluster revision, so its row in PAGES measures it kept; this row simulated.
UNCACHED = "/nodes/default-00007/?why=1"
COMMANDS = 1000  # finished disruption commands in the history
LOG_RECORDS = 1  # controller log records per pod: 20,000 at 20,000 pods (a few hours of a busy lab)
RUNS = 5  # timed requests per page and partial; the median is printed (a stray GC pause is not the page)
HISTORY_DAYS = 30  # of cost and trend samples, one per NodePool (and pending pods) every 10 minutes


def build(nodes: int, pods: int) -> None:
    from django.core.management import call_command

    from karpui import models
    from karpui.clusters import registry

    call_command("migrate", verbosity=0)
    cluster = registry.cluster_get_or_create()
    rows = []
    for i in range(nodes):
        name = f"default-{i:05d}"
        labels = {
            "karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": "c-8x-amd64-linux",
            "karpenter.sh/capacity-type": "spot",
            "topology.kubernetes.io/zone": "test-zone-a",
            "kubernetes.io/hostname": name,
        }
        ready = [
            {"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-11-29T20:00:00Z"}
            for t in ("Launched", "Registered", "Initialized", "Ready")
        ]
        rows.append(
            models.KubeObject(
                cluster=cluster,
                kind="Node",
                namespace="",
                name=name,
                uid=f"n{i}",
                body={
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "uid": f"n{i}",
                        "labels": labels,
                        "creationTimestamp": "2026-11-29T20:00:00Z",
                    },
                    "spec": {"taints": []},
                    "status": {
                        "allocatable": {"cpu": "7900m", "memory": "16374Mi", "pods": "128"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )
        )
        rows.append(
            models.KubeObject(
                cluster=cluster,
                kind="NodeClaim",
                namespace="",
                name=name,
                uid=f"c{i}",
                body={
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodeClaim",
                    "metadata": {
                        "name": name,
                        "uid": f"c{i}",
                        "labels": labels,
                        "annotations": {"karpui.dev/price": "0.152026"},
                        "creationTimestamp": "2026-11-29T20:00:00Z",
                    },
                    "spec": {},
                    "status": {"nodeName": name, "conditions": ready},
                },
            )
        )
    for i in range(pods):
        node = f"default-{i % nodes:05d}" if i % 50 else ""
        status = (
            {"phase": "Running"}
            if node
            else {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2000 nodes are available",
                    }
                ],
            }
        )
        rows.append(
            models.KubeObject(
                cluster=cluster,
                kind="Pod",
                namespace="default",
                name=f"pod-{i:06d}",
                uid=f"p{i}",
                body={
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"pod-{i:06d}",
                        "namespace": "default",
                        "uid": f"p{i}",
                        "creationTimestamp": "2026-11-29T20:00:00Z",
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}],
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
                    },
                    "status": status,
                },
            )
        )
    for i in range(COMMANDS):
        rows.append(_command(cluster, i))
    rows += _events(cluster, nodes, pods)
    for row in rows:
        for field, value in models.KubeObject.summary(row.body).items():
            setattr(row, field, value)
    models.KubeObject.objects.bulk_create(rows, batch_size=2000)
    _cost_history(cluster, [row.body for row in rows if row.kind == "NodeClaim"])
    _trend_history(cluster, nodes, pods)
    _log_records(cluster, pods)


def _event(i: int, kind: str, namespace: str, name: str, reason: str, message: str, event_type: str = "Normal") -> Any:
    """One Event body, seen `i` seconds before 20:59:59 (the hour the API server keeps)."""
    seen = f"2026-11-29T20:{59 - (i // 60) % 60:02d}:{59 - i % 60:02d}Z"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{kind.lower()}.{i:08x}",
            "namespace": namespace or "default",
            "uid": f"e{kind}{i}",
        },
        "involvedObject": {"kind": kind, "namespace": namespace, "name": name, "apiVersion": "v1"},
        "type": event_type,
        "reason": reason,
        "message": message,
        "count": 1 + i % 7,
        "firstTimestamp": seen,
        "lastTimestamp": seen,
        "source": {"component": "karpenter"},
    }


def _events(cluster: Any, nodes: int, pods: int) -> list[Any]:
    """What an hour of a busy cluster leaves: a FailedScheduling per pending pod, Unconsolidatable on each node and
    its NodeClaim, and a Nominated for one pod in ten."""
    from karpui import models

    bodies = []
    for i in range(0, pods, 50):
        bodies.append(
            _event(
                i,
                "Pod",
                "default",
                f"pod-{i:06d}",
                "FailedScheduling",
                'Failed to schedule pod, incompatible with nodepool "default", all available instance types exceed '
                "limits for nodepool (remaining cpu=0)",
                "Warning",
            )
        )
    for i in range(nodes):
        for kind in ("Node", "NodeClaim"):
            bodies.append(
                _event(
                    i,
                    kind,
                    "",
                    f"default-{i:05d}",
                    "Unconsolidatable",
                    "Can't replace with a cheaper node",
                )
            )
    for i in range(1, pods, 10):
        node = f"default-{i % nodes:05d}"
        bodies.append(
            _event(i, "Pod", "default", f"pod-{i:06d}", "Nominated", f"Pod should schedule on: nodeclaim/{node}")
        )
    return [
        models.KubeObject(
            cluster=cluster,
            kind="Event",
            namespace=b["metadata"]["namespace"],
            name=b["metadata"]["name"],
            uid=b["metadata"]["uid"],
            body=b,
        )
        for b in bodies
    ]


def _log_records(cluster: Any, pods: int) -> None:
    """Controller log records, as the lab writes them: provisioning, NodeClaim lifecycle and disruption."""
    from datetime import timedelta

    from karpui import models

    now = cluster.clock
    records = []
    for i in range(LOG_RECORDS * pods):
        node = f"default-{i % 2000:05d}"
        kind = i % 4
        if kind == 0:
            message, logger = "found provisionable pod(s)", "controller.provisioner"
            fields = {"Pods": f"default/pod-{i:06d}, default/pod-{i + 1:06d}", "duration": "12.3ms"}
        elif kind == 1:
            message, logger = "created nodeclaim", "controller.provisioner"
            fields = {
                "NodePool": {"name": "default"},
                "NodeClaim": {"name": node},
                "requests": {"cpu": "7550m", "memory": "14Gi", "pods": "16"},
                "instance-types": "c-8x-amd64-linux, c-8x-arm64-linux, m-8x-amd64-linux and 55 other(s)",
            }
        elif kind == 2:
            message, logger = "launched nodeclaim", "controller.nodeclaim.lifecycle"
            fields = {
                "NodeClaim": {"name": node},
                "instance-type": "c-8x-amd64-linux",
                "zone": "test-zone-a",
                "capacity-type": "spot",
                "allocatable": {"cpu": "7900m", "memory": "16374Mi", "pods": "128"},
            }
        else:
            message, logger = "disrupting node(s)", "controller.disruption"
            fields = {
                "command": f"Underutilized/delete [{node}]",
                "decision": "delete",
                "disrupted-node-count": 1,
                "replacement-node-count": 0,
                "pod-count": 8,
                "disrupted-nodes": [{"Node": {"name": node}, "NodeClaim": {"name": node}}],
            }
        records.append(
            models.LogEntry(
                cluster=cluster,
                time=now - timedelta(seconds=i),
                level="INFO",
                logger=logger,
                message=message,
                fields=fields,
            )
        )
    models.LogEntry.objects.bulk_create(records, batch_size=5000)


def _command(cluster: Any, i: int) -> Any:
    from karpui import models

    phase = "Denied" if i % 4 == 0 else "Succeeded"
    return models.KubeObject(
        cluster=cluster,
        kind="DisruptionCommand",
        namespace="",
        name=f"underutilized-{i:08x}",
        uid=f"d{i}",
        body={
            "apiVersion": "karpui.dev/v1alpha1",
            "kind": "DisruptionCommand",
            "metadata": {"name": f"underutilized-{i:08x}", "uid": f"d{i}"},
            "spec": {
                "reason": "Underutilized",
                "decision": "delete",
                "nodepools": [f"pool-{i % 3}"],
                "savings": 0.152026,
                "text": f"Underutilized/underutilized-{i:08x}: delete",
                "candidates": [
                    {
                        "node": f"gone-{i:05d}",  # nodes consolidated away long ago
                        "nodeclaim": f"gone-{i:05d}",
                        "nodepool": f"pool-{i % 3}",
                        "instanceType": "c-8x-amd64-linux",
                        "capacityType": "spot",
                        "zone": "test-zone-a",
                        "price": 0.152026,
                        "pods": [],
                    }
                ],
                "replacements": [],
                "approval": {"decision": phase.lower(), "by": "alice"},
            },
            "status": {
                "phase": phase,
                "completedAt": "2026-11-29T20:00:00Z",
                "finishedAt": "2026-11-29T20:00:00Z",
                "message": "command succeeded",
            },
        },
    )


def _cost_history(cluster: Any, claims: list[dict[str, Any]]) -> None:
    """What the lab runs would have written: a sample per NodePool every 10 minutes, and the cost state now."""
    from datetime import timedelta

    from karpui import models
    from karpui.history import costs

    now = cluster.clock.replace(second=0, microsecond=0)
    steps = HISTORY_DAYS * 24 * 6
    models.CostSample.objects.bulk_create(
        (
            models.CostSample(
                cluster=cluster,
                time=now - timedelta(minutes=10 * step),
                nodepool=f"pool-{pool}",
                cost_per_hour=100.0 + (step % 37),
                nodeclaims=600 + step % 37,
                saved_per_hour=5.0 + step % 5,
            )
            for step in range(1, steps + 1)
            for pool in range(3)
        ),
        batch_size=5000,
    )
    costs.record(cluster, [(cluster.clock, costs.by_nodepool(claims, []))], claims)
    cluster.save(update_fields=["cost_state"])


def _trend_history(cluster: Any, nodes: int, pods: int) -> None:
    """What the lab runs would have written for the Trends page: pending pods and each NodePool's nodes every 10
    minutes, and a minute of pod starts (latencies from 1 s to 60 s) and disruptions every 10 minutes."""
    from datetime import timedelta

    from karpui import models
    from karpui.history import trends

    now = cluster.clock.replace(second=0, microsecond=0)
    steps = HISTORY_DAYS * 24 * 6
    gauges = [
        models.TrendSample(
            cluster=cluster,
            time=now - timedelta(minutes=10 * step),
            series=series,
            key=key,
            value=float(value),
        )
        for step in range(1, steps + 1)
        for series, key, value in (
            ("pending", "", (pods // 50) + step % 17),
            *(("nodes", f"pool-{pool}", nodes // 3 + step % 7) for pool in range(3)),
        )
    ]
    models.TrendSample.objects.bulk_create(gauges, batch_size=5000)
    models.ActivitySample.objects.bulk_create(
        (
            models.ActivitySample(
                cluster=cluster,
                time=now - timedelta(minutes=10 * step),
                started=60,
                latency={str(s): 1 for s in range(1, 61)},
                disrupted={"Underutilized": step % 3, "Empty": 1},
            )
            for step in range(1, steps + 1)
        ),
        batch_size=5000,
    )
    trends.roll_up(cluster, now.replace(minute=0))  # the hours the recorder would have rolled up as they ended


def _dated_pages() -> list[str]:
    """Pages whose query names the lab's own times or rows: a chart zoomed to the last six hours of its 30 days, and
    the Events page's logs poll with one record newer than the page (its partial is that row alone)."""
    from datetime import timedelta

    from karpui import models

    cluster = models.Cluster.objects.get()
    end = cluster.clock.replace(second=0, microsecond=0)
    span = f"from={end - timedelta(hours=6):%Y-%m-%dT%H:%M:%SZ}&to={end:%Y-%m-%dT%H:%M:%SZ}"
    newest = models.LogEntry.objects.order_by("-id").values_list("id", flat=True).first() or 1
    return [f"/trends/?window=30d&{span}", f"/savings/?window=30d&{span}", f"/events/?part=logs&after={newest - 1}"]


def measure(only: str = "") -> None:
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_superuser("bench", "", "bench-password-not-used"))
    print(f"{'page':<38}{'full ms':>9}{'full KB':>9}{'partial ms':>12}{'partial KB':>12}")
    for page, simulated in [*((page, False) for page in [*PAGES, *_dated_pages()]), (UNCACHED, True)]:
        if not page.startswith(only):
            continue
        client.get(page)  # warm-up: the first request of a process pays for lazy imports (the CEL library, ...)
        full_ms, partial_ms = [], []
        for _ in range(RUNS):
            if simulated:
                cache.clear()  # as after any write to the cluster: a new revision, simulated again
            start = time.perf_counter()
            full = client.get(page)
            full_ms.append((time.perf_counter() - start) * 1000)
            if simulated:
                cache.clear()
            start = time.perf_counter()
            partial = client.get(page, HTTP_HX_REQUEST="true")
            partial_ms.append((time.perf_counter() - start) * 1000)
            if full.status_code == 404:
                break  # a page this tree does not have (a before-and-after run on an older one)
            assert full.status_code == partial.status_code == 200, page
        label = f"{page} simulated" if simulated else page
        if full.status_code == 404:
            print(f"{label:<38}{'—':>9}")
            continue
        print(
            f"{label:<38}{statistics.median(full_ms):>9.0f}{len(full.content) / 1024:>9.1f}"
            f"{statistics.median(partial_ms):>12.0f}{len(partial.content) / 1024:>12.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20000, help="pods in the lab (one in 50 pending); 2000 or 20000")
    parser.add_argument("--nodes", type=int, default=None, help="nodes (default: one per 10 pods)")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="karpui_bench_dashboard", help="the scratch PostgreSQL database")
    parser.add_argument("--only", default="", help="only the pages starting with this, e.g. /events/")
    args = parser.parse_args()
    if args.database == "sqlite":
        SQLITE.unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{SQLITE}"
        where = f"SQLite in {VAR}"
    else:
        import subprocess

        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", args.pg_name], check=True)
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", args.pg_name], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{args.pg_name}"
        where = f"PostgreSQL {args.pg_name}"
    django.setup()
    build(args.nodes or max(args.pods // 10, 1), args.pods)
    if args.database == "postgres":
        from django.db import connection

        # As autovacuum would within a minute of the bulk load: a table never analyzed looks empty to the planner,
        # which then took the (cluster, kind, node_name) index for a NodeClaim looked up by name (0.4 s a page).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(f"{args.pods} pods on {args.nodes or max(args.pods // 10, 1)} nodes, database {where}")
    measure(args.only)


if __name__ == "__main__":
    main()
