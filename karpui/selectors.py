"""Read-only queries for views: each returns plain data in a fixed number of queries, whatever the row count."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q
from django.utils import timezone

from karpui import costs, disruption, grouping, lab, models, services, store, trends
from karpui.links import cluster_url

FIXES = {
    "taints": "add a toleration for the NodePool's taint, or use a NodePool without it",
    "requirements": "relax the pod's node selector/affinity, or let the NodePool offer that label",
    "limits": "raise the NodePool's spec.limits, or free capacity in it",
    "resources": "lower the pod's requests, or allow larger instance types in the NodePool",
    "devices": "create the DeviceClass, or declare matching devices on instance types (DeviceDeclaration)",
    "topology": "relax the spread/affinity constraint, or let the NodePool offer more domains",
    "host-ports": "drop the hostPort, or let pods spread to more nodes",
    "min-values": "lower minValues, or widen the NodePool's instance types",
    "no-instance-types": "widen the NodePool's requirements: no instance type satisfies them",
    "no-nodepool": "create a NodePool (karp apply -f examples/provisioning/nodepool.yaml)",
    "validation": "remove restricted keys (karpenter.sh/*, kubernetes.io/hostname) from the pod's node selection",
}


def cluster_get(*, name: str) -> models.Cluster:
    """The cluster called `name`; reading never creates one (clusters are made by admins and operators).
    Raises ValidationError for a name no cluster can have, LookupError for one that does not exist."""
    services.cluster_name_check(name)
    cluster = models.Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise LookupError(f'cluster "{name}" not found')
    return cluster


def _age(clock: datetime, stamp: str | None) -> float:
    """Seconds from `stamp` to `clock`: 0 without a stamp, or for one still ahead."""
    if not stamp:
        return 0.0
    return max((clock - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds(), 0.0)


def _left(clock: datetime, stamp: str) -> float:
    """Seconds from `clock` to `stamp`: 0 once it has passed (negating `_age`, which is never negative, gave -0
    for every deadline still ahead)."""
    return max((datetime.fromisoformat(stamp.replace("Z", "+00:00")) - clock).total_seconds(), 0.0)


def overview(cluster: models.Cluster) -> dict[str, Any]:
    """Cost and NodeClaim counts come from the cluster row (kept by every lab run), not from reading each claim."""
    state = cluster.cost_state or {}
    last = (state.get("last") or {}).values()
    pods = models.KubeObject.objects.filter(cluster=cluster, kind="Pod")
    ledger = disruption.savings_ledger(cluster)
    return {
        "cost_per_hour": sum(entry["value"][0] for entry in last),
        "nodeclaims": sum(entry["value"][1] for entry in last),
        "nodes": models.KubeObject.objects.filter(cluster=cluster, kind="Node").count(),
        "pending": pods.filter(unschedulable=True).count(),
        "running": pods.filter(phase="Running").count(),
        "awaiting": models.KubeObject.objects.filter(
            cluster=cluster, kind="DisruptionCommand", phase="AwaitingApproval"
        ).count(),
        "realised": sum(e["realised"] for e in ledger.values()),
        "saving_per_hour": sum(e["saving_per_hour"] for e in ledger.values()),
        # Named in display order: PostgreSQL's jsonb does not keep the stored key order.
        "by": {
            key: sorted(((state.get("by") or {}).get(key) or {}).items()) for key in ("nodepool", "capacity", "zone")
        },
        "nodepools": list(models.NodePool.objects.filter(cluster=cluster).order_by("-weight", "-name")),
        "catalogs": catalogs(),
    }


def disruption_queue(cluster: models.Cluster) -> dict[str, Any]:
    """The live commands, the history, the ledger and the audit trail. The audit is recorded on wall time and the
    commands on the cluster's clock, so the page shows ages and time left (the same on either clock) rather than
    times on two clocks."""
    wall = timezone.now()
    commands = lab.objects(cluster, "DisruptionCommand")
    live = ("Proposed", "AwaitingApproval", "Approved", "Executing")
    for command in commands:
        status = command.get("status") or {}
        command["age"] = _age(cluster.clock, status.get("proposedAt"))
        # Durations, not times: a time here would be on the lab's clock, beside an audit trail on wall time.
        command["expires_in"] = _left(cluster.clock, status["expiresAt"]) if status.get("expiresAt") else None
        command["monthly"] = command["spec"]["savings"] * 730
    order = {"AwaitingApproval": 0, "Proposed": 1, "Approved": 2, "Executing": 3}
    return {
        "live": sorted(
            (c for c in commands if c["status"].get("phase") in live),
            key=lambda c: (order[c["status"]["phase"]], c["metadata"]["name"]),
        ),
        "history": sorted(
            (c for c in commands if c["status"].get("phase") not in live),
            key=lambda c: c["status"].get("finishedAt", ""),
            reverse=True,
        )[:100],
        "ledger": sorted(disruption.savings_ledger(cluster).items()),
        "nodepools": list(models.NodePool.objects.filter(cluster=cluster).order_by("-weight", "-name")),
        # Approval-mode changes decide what later commands may do, so they belong beside the decisions.
        "audit": [
            {"event": event, "ago": max((wall - event.created_at).total_seconds(), 0.0)}
            for event in models.AuditEvent.objects.filter(
                Q(target_kind__in=("DisruptionCommand", "Cluster"))
                | Q(target_kind="NodePool", action="set-approval-mode")
            ).order_by("-created_at", "-id")[:50]
        ],
        "paused_left": (cluster.paused_until - cluster.clock).total_seconds()
        if cluster.is_paused(cluster.clock)
        else 0,
    }


SAVINGS_WINDOWS = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
COMMANDS_PAGE_SIZE = 50  # a row is ~0.4 KB: the polled section stays well under 50 KB
LIVE_PHASES = ("Proposed", "AwaitingApproval", "Approved", "Executing")
FORGONE_PHASES = disruption.FORGONE_PHASES


def _window(window: str, end: datetime, samples: Any) -> tuple[str, datetime]:
    """A chart's window and its start: one of SAVINGS_WINDOWS back from `end`, or "auto": from the first of
    `samples` (a queryset with a `time`), at least 10 minutes and at most 30 days."""
    if window in SAVINGS_WINDOWS:
        return window, end - SAVINGS_WINDOWS[window]
    first = samples.aggregate(first=Min("time"))["first"]
    return "auto", max(min(first or end, end - timedelta(minutes=10)), end - SAVINGS_WINDOWS["30d"])


def savings_overview(cluster: models.Cluster, window: str = "auto", page: int = 1) -> dict[str, Any]:
    """Cost over time against the baseline without consolidation, and every finished command's realised or
    forgone savings, a page at a time. "auto" spans the whole history (at least 10 minutes, at most 30 days)."""
    end = cluster.clock
    window, start = _window(window, end, models.CostSample.objects.filter(cluster=cluster))
    chart = costs.history(cluster, start, end)
    now = (cluster.cost_state or {}).get("last") or {}
    finished = models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand").exclude(
        phase__in=LIVE_PHASES
    )
    total = finished.count()
    ledger, still_forgone = disruption.savings_accounts(cluster)
    offset = (max(page, 1) - 1) * COMMANDS_PAGE_SIZE
    commands = []
    for row in finished.order_by("-updated_at", "-id")[offset : offset + COMMANDS_PAGE_SIZE]:
        spec, status = row.body["spec"], row.body.get("status") or {}
        commands.append(
            {
                "name": row.name,
                "reason": spec["reason"],
                "decision": spec["decision"],
                "nodepool": (spec.get("nodepools") or [""])[0],
                "phase": status.get("phase", ""),
                "finished": status.get("finishedAt") or status.get("completedAt") or "",
                "by": (spec.get("approval") or {}).get("by", ""),
                "nodes": [c["node"] for c in spec.get("candidates") or []],
                "savings": spec["savings"],
                "realised": disruption.realised(row.body, end),
                "forgone": still_forgone.get(row.name, 0.0),
                # Denied or dry-run, but its node went another way (or a newer command speaks for it).
                "no_longer_forgone": status.get("phase") in FORGONE_PHASES and row.name not in still_forgone,
                "message": status.get("message", ""),
            }
        )
    return {
        "window": window,
        "windows": ["auto", *SAVINGS_WINDOWS],
        "chart": chart.as_chart(),
        # Now, not the last bucket's average: a node launched a minute ago is a fraction of a 3-minute bucket.
        "cost_now": sum(entry["value"][0] for entry in now.values()),
        "baseline_now": sum(entry["value"][0] + entry["value"][2] for entry in now.values()),
        "realised": sum(e["realised"] for e in ledger.values()),
        "saving_per_hour": sum(e["saving_per_hour"] for e in ledger.values()),
        "forgone_per_hour": sum(e["forgone_per_hour"] for e in ledger.values()),
        "ledger": sorted(ledger.items()),
        "commands": commands,
        "total": total,
        "page": max(page, 1),
        "pages": max((total + COMMANDS_PAGE_SIZE - 1) // COMMANDS_PAGE_SIZE, 1),
    }


def trends_overview(cluster: models.Cluster, window: str = "auto") -> dict[str, Any]:
    """Pending pods, nodes per NodePool, pod start latency and disruptions over a window (the savings chart's),
    and each gauge now, in buckets on whole multiples of their width (trends.history). At most ten queries,
    whatever the window."""
    end = cluster.clock
    window, start = _window(window, end, models.TrendSample.objects.filter(cluster=cluster))
    history = trends.history(cluster, start, end)
    now = ((cluster.cost_state or {}).get("trends") or {}).get("gauges") or {}
    nodes = {name.partition("/")[2]: int(gauge["value"]) for name, gauge in now.items() if name.startswith("nodes/")}
    return {
        "window": window,
        "windows": ["auto", *SAVINGS_WINDOWS],
        "chart": history.as_chart(),
        "totals": history.totals,
        "pending_now": int((now.get("pending/") or {}).get("value") or 0),
        "nodes_now": sorted(nodes.items()),
        "nodes_total": sum(nodes.values()),
    }


EVENTS_PAGE_SIZE = 200  # event rows, and log records, a page


def _link(cluster: models.Cluster, kind: str, name: str) -> str:
    """The dashboard page, in `cluster`, of an object an event or log record names, or "" when there is none."""
    if kind in ("Node", "NodeClaim"):
        return cluster_url(cluster, "node-detail", name)
    if kind == "NodePool":
        return cluster_url(cluster, "nodepool-edit", name)
    if kind == "DisruptionCommand":
        return f"{cluster_url(cluster, 'savings')}#saving-{name}"
    return ""


def _log_objects(cluster: models.Cluster, fields: dict[str, Any]) -> list[dict[str, str]]:
    """The nodes a log record names (its NodeClaim/Node, or the nodes a command disrupts), each with its page."""
    named = [("NodeClaim", fields.get("NodeClaim")), ("Node", fields.get("Node"))]
    named += [("NodeClaim", node.get("NodeClaim")) for node in fields.get("disrupted-nodes") or []]
    seen: dict[str, dict[str, str]] = {}
    for kind, ref in named:
        if isinstance(ref, dict) and ref.get("name") and ref["name"] not in seen:
            seen[ref["name"]] = {"label": f"{kind}/{ref['name']}", "url": _link(cluster, kind, ref["name"])}
    return list(seen.values())


def events_list(
    cluster: models.Cluster,
    search: str = "",
    kind: str = "",
    event_type: str = "",
    logger: str = "",
    group: str = "object",
    page: int = 1,
) -> dict[str, Any]:
    """Kubernetes events, grouped (karpui.grouping), and controller log records, filtered, newest first, each linked
    to the objects it names. Both tables page together: page N holds the Nth EVENTS_PAGE_SIZE event rows and log
    records, and a page past the end is the last. Events expire after an hour (the API server's TTL), so they are
    few enough to filter in Python."""
    needle = search.lower()
    events = []
    for event in sorted(lab.objects(cluster, "Event"), key=lambda e: e.get("lastTimestamp", ""), reverse=True):
        involved = event["involvedObject"]
        if (kind and involved.get("kind") != kind) or (event_type and event.get("type") != event_type):
            continue
        if needle and needle not in (event.get("message", "") + event.get("reason", "") + involved["name"]).lower():
            continue
        events.append(event)
    group = group if group in grouping.EVENT_GROUPINGS else "object"
    logs = models.LogEntry.objects.filter(cluster=cluster).order_by("-time", "-id")
    if search:
        logs = logs.filter(message__icontains=search)
    if logger:
        logs = logs.filter(logger=logger)
    rows = grouping.event_rows(cluster, events, group)
    log_count = logs.count()
    pages = max(-(-len(rows) // EVENTS_PAGE_SIZE), -(-log_count // EVENTS_PAGE_SIZE), 1)
    page = min(max(page, 1), pages)
    start, stop = (page - 1) * EVENTS_PAGE_SIZE, page * EVENTS_PAGE_SIZE
    # order_by("logger") replaces Meta.ordering (time, id): DISTINCT takes in the ordering's columns, which made it
    # one logger a record rather than a logger once.
    loggers = models.LogEntry.objects.filter(cluster=cluster).order_by("logger").values_list("logger", flat=True)
    return {
        "events": rows[start:stop],
        "event_count": len(events),
        "group": group,
        "groupings": grouping.EVENT_GROUPINGS,
        "logs": [{**entry.as_dict(), "objects": _log_objects(cluster, entry.fields)} for entry in logs[start:stop]],
        "log_count": log_count,
        "kinds": ("DisruptionCommand", "Node", "NodeClaim", "NodePool", "Pod"),
        "loggers": list(loggers.distinct()),
        "page": page,
        "pages": pages,
    }


CATALOG_PAGE_SIZE = 50  # a row with its folded offerings is ~0.5 KB: a page stays near 30 KB
# The catalog's sortable columns and their order in the database (name breaks ties).
CATALOG_SORTS = {
    "name": ("name",),
    "catalog": ("catalog__name", "name"),
    "cpu": ("cpu_millis", "name"),
    "memory": ("memory_bytes", "name"),
    "pods": ("pods", "name"),
    "cheapest": ("cheapest", "name"),
}


def catalog_list(
    family: str = "",
    arch: str = "",
    os: str = "",
    min_cpu: int = 0,
    min_memory_gib: int = 0,
    capacity_type: str = "",
    zone: str = "",
    page: int = 1,
    sort: str = "cheapest",
) -> dict[str, Any]:
    """One page of instance types with their cheapest matching offering and what they leave pods (allocatable:
    capacity less kube-reserved, system-reserved and the eviction threshold), filtered and sorted in the
    database (`sort` a CATALOG_SORTS key, "-" first for descending); four queries."""
    from django.db.models import Min, Prefetch, Q

    types = models.InstanceType.objects.select_related("catalog")
    if family:
        types = types.filter(family=family)
    if arch:
        types = types.filter(arch=arch)
    if os:
        types = types.filter(os=os)
    if min_cpu:
        types = types.filter(cpu_millis__gte=min_cpu * 1000)
    if min_memory_gib:
        types = types.filter(memory_bytes__gte=min_memory_gib * 2**30)
    offer_filter = Q(offerings__available=True)
    if capacity_type:
        offer_filter &= Q(offerings__capacity_type=capacity_type)
    if zone:
        offer_filter &= Q(offerings__zone=zone)
    types = types.annotate(cheapest=Min("offerings__price", filter=offer_filter)).exclude(cheapest=None)
    if sort.removeprefix("-") not in CATALOG_SORTS:
        sort = "cheapest"
    order = CATALOG_SORTS[sort.removeprefix("-")]
    order = tuple(f"-{field}" for field in order) if sort.startswith("-") else order
    total = types.count()
    pages = max(1, -(-total // CATALOG_PAGE_SIZE))
    page = min(page, pages)
    start = (page - 1) * CATALOG_PAGE_SIZE
    rows = list(
        types.order_by(*order)[start : start + CATALOG_PAGE_SIZE].prefetch_related(
            Prefetch("offerings", queryset=models.Offering.objects.order_by("price", "zone", "capacity_type"))
        )
    )
    for row in rows:
        # Offerings folded as people read them: one line per capacity type and price, with its zones.
        groups: dict[tuple[str, float, bool], list[str]] = {}
        for offering in row.offerings.all():
            groups.setdefault((offering.capacity_type, offering.price, offering.available), []).append(offering.zone)
        row.offer_groups = [  # type: ignore[attr-defined]
            {"capacity_type": kind, "price": price, "available": available, "zones": sorted(zones)}
            for (kind, price, available), zones in groups.items()
        ]
        allocatable = store.instance_type_domain(row).allocatable
        row.allocatable_cpu = allocatable.get("cpu", 0)  # type: ignore[attr-defined]
        row.allocatable_memory = allocatable.get("memory", 0) // 1000  # type: ignore[attr-defined]
        row.allocatable_pods = allocatable.get("pods", 0) // 1000  # type: ignore[attr-defined]
    families = sorted(set(models.InstanceType.objects.values_list("family", flat=True)))
    return {"types": rows, "families": families, "page": page, "pages": pages, "total": total, "sort": sort}


def catalogs() -> list[models.Catalog]:
    """Every stored catalog with its instance-type count (one query)."""
    return list(models.Catalog.objects.annotate(types=Count("instance_types")).order_by("name"))
