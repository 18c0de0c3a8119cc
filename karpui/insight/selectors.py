"""Read-only queries for views: each returns plain data in a fixed number of queries, whatever the row count."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q
from django.utils import timezone

from karpui import models
from karpui.clusters import lab, registry, store
from karpui.gate import disruption
from karpui.history import costs, trend_series
from karpui.insight import grouping, whatif
from provisioner.disruption import accounting

FIXES = {
    "taints": "add a toleration for the NodePool's taint, or use a NodePool without it",
    "requirements": "relax the pod's node selector/affinity, or let the NodePool offer that label",
    "limits": "raise the NodePool's spec.limits, or free capacity in it",
    "resources": "lower the pod's requests, or allow larger instance types in the NodePool",
    "devices": "create the DeviceClass, or declare matching devices on instance types (DeviceDeclaration)",
    "volumes": "create the PVC (or its WaitForFirstConsumer StorageClass), or bind it to a PersistentVolume that exists",
    "topology": "relax the spread/affinity constraint, or let the NodePool offer more domains",
    "host-ports": "drop the hostPort, or let pods spread to more nodes",
    "volume-limits": "let pods spread to more nodes, or allow instance types whose CSI drivers attach more volumes",
    "min-values": "lower minValues, or widen the NodePool's instance types",
    "no-instance-types": "widen the NodePool's requirements: no instance type satisfies them",
    "no-nodepool": "create a NodePool (karp apply -f examples/provisioning/nodepool.yaml)",
    "validation": "remove restricted keys (karpenter.sh/*, kubernetes.io/hostname) from the pod's node selection",
}


def cluster_get(*, name: str) -> models.Cluster:
    """The cluster called `name`; reading never creates one (clusters are made by admins and operators).
    Raises ValidationError for a name no cluster can have, LookupError for one that does not exist."""
    registry.cluster_name_check(name)
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
        "nodepools": list(models.NodePool.objects.filter(cluster=cluster)),
        "catalogs": catalogs(),
    }


def disruption_queue(cluster: models.Cluster, user: Any = None) -> dict[str, Any]:
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
        # A repair is forced when its toleration ends: its deadline is when it happens, not when it lapses.
        force_at = command["spec"].get("forceAt")
        command["forced_in"] = _left(cluster.clock, force_at) if force_at else None
        command["monthly"] = command["spec"]["savings"] * 730
        command["confirm"] = disruption.confirmation_needed(command)
        command["assessment_lines"] = disruption.assessment_lines(command["spec"])
        command["decide"] = disruption.decide_options(command, user)
    order = {"AwaitingApproval": 0, "Proposed": 1, "Approved": 2, "Executing": 3}
    queued = [c for c in commands if c["status"].get("phase") in live]
    dependencies = disruption.dependencies(cluster, queued)
    for command in queued:
        command["depends"] = dependencies.get(command["metadata"]["name"], [])
    return {
        # A command keeps its place in the queue when a re-check replaces it: ordered by when its line was queued.
        "live": sorted(
            queued,
            key=lambda c: (
                order[c["status"]["phase"]],
                c["spec"].get("queuedAt") or c["status"].get("proposedAt") or "",
                c["metadata"]["name"],
            ),
        ),
        "history": sorted(
            (c for c in commands if c["status"].get("phase") not in live),
            key=lambda c: c["status"].get("finishedAt", ""),
            reverse=True,
        )[:100],
        "ledger": sorted(disruption.savings_ledger(cluster).items()),
        "nodepools": list(models.NodePool.objects.filter(cluster=cluster)),
        "mode_requests": list(
            models.ApprovalModeRequest.objects.filter(
                cluster=cluster, decision=models.ApprovalModeRequest.Decision.PENDING
            ).order_by("requested_at", "id")
        ),
        # Approval-mode changes decide what later commands may do, so they belong beside the decisions.
        "audit": [
            {"event": event, "ago": max((wall - event.created_at).total_seconds(), 0.0)}
            for event in models.AuditEvent.objects.filter(
                Q(target_kind__in=("DisruptionCommand", "Cluster"))
                | Q(
                    target_kind="NodePool",
                    action__in=("set-approval-mode", "request-mode-change", "approve-mode-change", "deny-mode-change"),
                ),
                cluster=cluster,
            ).order_by("-created_at", "-id")[:50]
        ],
        "paused_left": (cluster.paused_until - cluster.clock).total_seconds()
        if cluster.is_paused(cluster.clock)
        else 0,
    }


def command_detail(cluster: models.Cluster, name: str, user: Any = None) -> dict[str, Any]:
    """One command's page: its proposal and simulation, risks, each decision with who, when and the note, its
    re-checks, the steps it ran and its net savings, and the commands of its line (what it superseded or followed,
    what superseded it). Raises LookupError when the cluster has no such command."""
    body = (
        models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand", name=name)
        .values_list("body", flat=True)
        .first()
    )
    if body is None:
        raise LookupError(f'disruptioncommand.karpui.dev "{name}" not found')
    spec, status = body["spec"], body.get("status") or {}
    line = spec.get("lineage") or name
    relatives = [
        {"name": other["metadata"]["name"], "phase": (other.get("status") or {}).get("phase", "")}
        for other in models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand")
        .filter(Q(name=line) | Q(body__spec__lineage=line))
        .order_by("body__status__proposedAt", "name")
        .values_list("body", flat=True)
    ]
    decisions = list(
        models.AuditEvent.objects.filter(cluster=cluster, target_kind="DisruptionCommand", target_name=name).order_by(
            "created_at", "id"
        )
    )
    net = disruption.net_savings(body)
    return {
        "command": body,
        "name": name,
        "spec": spec,
        "status": status,
        "line": relatives if len(relatives) > 1 else [],
        "decisions": decisions,
        "assessment_lines": disruption.assessment_lines(spec),
        "confirm": disruption.confirmation_needed(body),
        "decide": disruption.decide_options(body, user),
        "evictions": grouping.evictions(cluster, [body]).get(name, []),
        "net": net,
        "realised": disruption.realised(body, cluster.clock),
        "counted": accounting.counts_as_savings(body),
    }


def nodepool_history(cluster: models.Cluster, name: str, limit: int = 50) -> list[dict[str, Any]]:
    """Every audited change and decision about one NodePool of this cluster, newest first: who, through what, when
    (wall clock), why, and the change as a diff of the NodePool (or of its approval mode) before and after."""
    events = models.AuditEvent.objects.filter(cluster=cluster, target_kind="NodePool", target_name=name).order_by(
        "-created_at", "-id"
    )[:limit]
    return [
        {"event": event, "diff": whatif.manifest_diff(event.before, event.after, "before", "after")} for event in events
    ]


def plan_view(plan: disruption.CombinedPlan, names: list[str]) -> dict[str, Any]:
    """Several commands as one plan, for the page that shows it before they are approved together."""
    return {
        "plan": plan,
        "names": names,
        "sentences": plan.sentences(),
        "launches": [
            {
                "nodepool": p.nodepool,
                "type": p.cheapest.instance_type.name if p.options else "",
                "price": p.cheapest.price if p.options else 0.0,
            }
            for p in plan.launches
        ],
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


def _window(
    window: str, end: datetime, samples: Any, span: tuple[datetime, datetime] | None = None
) -> tuple[str, datetime, datetime]:
    """A chart's window and its start: one of SAVINGS_WINDOWS back from `end`, or "auto": from the first of
    `samples` (a queryset with a `time`), at least 10 minutes and at most 30 days; or `span`, a range a person
    zoomed to within the window, its end no later than `end` (the window is kept, for the way back out)."""
    if span is not None:
        return window, span[0], min(span[1], end)
    if window in SAVINGS_WINDOWS:
        return window, end - SAVINGS_WINDOWS[window], end
    first = samples.aggregate(first=Min("time"))["first"]
    return "auto", max(min(first or end, end - timedelta(minutes=10)), end - SAVINGS_WINDOWS["30d"]), end


def savings_overview(
    cluster: models.Cluster,
    window: str = "auto",
    page: int = 1,
    everything: bool = False,
    span: tuple[datetime, datetime] | None = None,
) -> dict[str, Any]:
    """Cost over time against the baseline without consolidation, and every finished command's realised or
    forgone savings, a page at a time. "auto" spans the whole history (at least 10 minutes, at most 30 days)."""
    window, start, end = _window(window, cluster.clock, models.CostSample.objects.filter(cluster=cluster), span)
    chart = costs.history(cluster, start, end)
    now = (cluster.cost_state or {}).get("last") or {}
    finished = models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand").exclude(
        phase__in=LIVE_PHASES
    )
    total = finished.count()
    ledger, still_forgone = disruption.savings_accounts(cluster)
    offset = (max(page, 1) - 1) * COMMANDS_PAGE_SIZE
    commands = []
    ordered = finished.order_by("-updated_at", "-id")
    for row in ordered if everything else ordered[offset : offset + COMMANDS_PAGE_SIZE]:
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
                # Net of what it launched and of what the provisioner launched for its pods (accounting); drift,
                # expiry and requests save nothing, here as in the ledger and the chart.
                "savings": accounting.net_savings(row.body).net,
                "counted": accounting.counts_as_savings(row.body),
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
        "span": span,
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


def trends_overview(
    cluster: models.Cluster, window: str = "auto", span: tuple[datetime, datetime] | None = None
) -> dict[str, Any]:
    """Pending pods, nodes per NodePool, pod start latency and disruptions over a window (the savings chart's),
    and each gauge now, in buckets on whole multiples of their width (trend_series.history). At most ten queries,
    whatever the window."""
    window, start, end = _window(window, cluster.clock, models.TrendSample.objects.filter(cluster=cluster), span)
    history = trend_series.history(cluster, start, end)
    now = ((cluster.cost_state or {}).get("trends") or {}).get("gauges") or {}
    nodes = {name.partition("/")[2]: int(gauge["value"]) for name, gauge in now.items() if name.startswith("nodes/")}
    return {
        "window": window,
        "windows": ["auto", *SAVINGS_WINDOWS],
        "span": span,
        "chart": history.as_chart(),
        "totals": history.totals,
        "pending_now": int((now.get("pending/") or {}).get("value") or 0),
        "nodes_now": sorted(nodes.items()),
        "nodes_total": sum(nodes.values()),
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
    everything: bool = False,
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
        (
            types.order_by(*order) if everything else types.order_by(*order)[start : start + CATALOG_PAGE_SIZE]
        ).prefetch_related(
            Prefetch("offerings", queryset=models.Offering.objects.order_by("price", "zone", "capacity_type"))
        )
    )
    for row in rows:
        # Offerings folded as people read them: one line per capacity type and price, with its zones.
        groups: dict[tuple[str, float, bool, str, str, int], list[str]] = {}
        for offering in row.offerings.all():
            key = (
                offering.capacity_type,
                offering.price,
                offering.available,
                offering.reservation_id,
                offering.reservation_type,
                offering.reservation_capacity,
            )
            groups.setdefault(key, []).append(offering.zone)
        row.offer_groups = [  # type: ignore[attr-defined]
            {
                "capacity_type": kind,
                "price": price,
                "available": available,
                "zones": sorted(zones),
                "reservation": {"id": rid, "type": rtype, "capacity": capacity} if rid else None,
            }
            for (kind, price, available, rid, rtype, capacity), zones in groups.items()
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
