"""The Events & logs page's reads: events (filtered, grouped and paged in SQL, newest first) and controller log
records, each with a pager of its own, and what is newer than a page a person has open, so a poll fetches only that.

Events are read as a few JSON paths per row inside the database, never as whole manifests, and only a page's rows
come out of it; log records a page at a time. A poll of
events answers only whether any is newer than the page's newest (the page then re-reads its first page); a poll of
logs gets just the records added since the page's newest, to put above it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db.models import Q, QuerySet

from karpui import models
from karpui.insight import grouping, paging
from karpui.links import cluster_url

EVENTS_PAGE_SIZE = 50  # event rows (a reason's row folds its objects): ~0.5 KB each
LOGS_PAGE_SIZE = 50  # log records: ~0.5 KB each
FIELD_SHOWN = 160  # characters of one log field's value; the rest is in the record's title
EVENT_KINDS = ("DisruptionCommand", "Node", "NodeClaim", "NodePool", "Pod")
# Fields every log record has, shown in their own columns.
OWN_COLUMNS = frozenset({"time", "level", "logger", "message"})


def _events(cluster: models.Cluster, search: str, kind: str, event_type: str) -> QuerySet[models.KubeObject]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="Event")
    if kind:
        rows = rows.filter(body__involvedObject__kind=kind)
    if event_type:
        rows = rows.filter(body__type=event_type)
    if search:
        rows = rows.filter(
            Q(body__message__icontains=search)
            | Q(body__reason__icontains=search)
            | Q(body__involvedObject__name__icontains=search)
        )
    return rows


def events_section(
    *,
    cluster: models.Cluster,
    search: str = "",
    kind: str = "",
    event_type: str = "",
    group: str = "reason",
    page: int = 1,
    everything: bool = False,
) -> dict[str, Any]:
    """One page of event rows (all of them with `everything`, for a CSV; grouping.event_rows: by reason, by object,
    or each event), newest first, and the newest time among them all (a poll asks for anything later). Grouped and
    paged in the database: one query (two for a page past the last), plus one for the nodes of the NodeClaims it
    shows, if any."""
    found = _events(cluster, search, kind, event_type)
    wanted = max(page, 1)
    size = None if everything else EVENTS_PAGE_SIZE
    shown, totals = grouping.event_rows(
        cluster, found, group, 0 if everything else (wanted - 1) * EVENTS_PAGE_SIZE, size
    )
    pages = max(-(-totals["rows"] // EVENTS_PAGE_SIZE), 1)
    page = min(wanted, pages)
    if page < wanted and not everything:  # past the last page (which the page answers with a 400): the last's rows
        shown, totals = grouping.event_rows(cluster, found, group, (page - 1) * EVENTS_PAGE_SIZE, size)
    return {
        "events": shown if everything else grouping.with_urls(cluster, shown),
        "event_count": totals["events"],
        "event_rows": totals["rows"],
        "events_page": page,
        "events_pages": pages,
        "events_since": totals["since"],
        "group": group,
    }


def events_newer(
    *, cluster: models.Cluster, since: str, search: str = "", kind: str = "", event_type: str = ""
) -> bool:
    """Whether any event the filters keep was seen after `since` (the page's newest): one query."""
    rows = _events(cluster, search, kind, event_type)
    if since:
        rows = rows.filter(body__lastTimestamp__gt=since)
    return rows.exists()


def _logs(cluster: models.Cluster, search: str, logger: str) -> QuerySet[models.LogEntry]:
    rows = models.LogEntry.objects.filter(cluster=cluster)
    if search:
        rows = rows.filter(Q(message__icontains=search) | Q(full_message__icontains=search))
    if logger:
        rows = rows.filter(logger=logger)
    return rows.order_by("-time", "-id")


def _link(cluster: models.Cluster, kind: str, name: str) -> str:
    """The dashboard page, in `cluster`, of an object a log record names, or "" when there is none."""
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
    named += [
        ("NodeClaim", node.get("NodeClaim")) for node in fields.get("disrupted-nodes") or [] if isinstance(node, dict)
    ]
    seen: dict[str, dict[str, str]] = {}
    for kind, ref in named:
        if isinstance(ref, dict) and ref.get("name") and ref["name"] not in seen:
            seen[ref["name"]] = {"label": f"{kind}/{ref['name']}", "url": _link(cluster, kind, ref["name"])}
    return list(seen.values())


def field_text(value: Any) -> str:
    """A log field's value as Karpenter's JSON logs write it: text as it is, anything else as compact JSON (never a
    Python repr such as {'name': 'x'})."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=False, default=str)


def _record(cluster: models.Cluster, entry: models.LogEntry) -> dict[str, Any]:
    fields = [(key, field_text(value)) for key, value in entry.fields.items() if key not in OWN_COLUMNS]
    return {
        "id": entry.pk,
        "time": entry.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "level": entry.level,
        "logger": entry.logger,
        "message": entry.text,
        "objects": _log_objects(cluster, entry.fields),
        "fields": [
            {"key": key, "text": text if len(text) <= FIELD_SHOWN else f"{text[:FIELD_SHOWN]}…", "full": text}
            for key, text in fields
        ],
    }


def logs_section(*, cluster: models.Cluster, search: str = "", logger: str = "", page: int = 1) -> dict[str, Any]:
    """One page of log records, newest first, with the loggers to filter by; four queries."""
    rows = _logs(cluster, search, logger)
    total = rows.count()
    page, pages = paging.page_within(total, page, LOGS_PAGE_SIZE)
    shown = list(rows[(page - 1) * LOGS_PAGE_SIZE : page * LOGS_PAGE_SIZE])
    # order_by("logger") replaces Meta.ordering (time, id): DISTINCT takes in the ordering's columns.
    loggers = models.LogEntry.objects.filter(cluster=cluster).order_by("logger").values_list("logger", flat=True)
    return {
        "logs": [_record(cluster, entry) for entry in shown],
        "log_count": total,
        "logs_page": page,
        "logs_pages": pages,
        "logs_after": max((entry.pk for entry in shown), default=0),
        "loggers": list(loggers.distinct()),
    }


def logs_all(*, cluster: models.Cluster, search: str = "", logger: str = "") -> Iterator[dict[str, Any]]:
    """Every record the filters keep, newest first, each with its fields as key and JSON text (a CSV's rows)."""
    for entry in _logs(cluster, search, logger).iterator(chunk_size=2000):
        yield {
            "time": entry.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "level": entry.level,
            "logger": entry.logger,
            "message": entry.text,
            "fields": [(key, field_text(value)) for key, value in entry.fields.items() if key not in OWN_COLUMNS],
        }


def logs_after(*, cluster: models.Cluster, after: int, search: str = "", logger: str = "") -> dict[str, Any]:
    """The records added since record `after` (a page's newest), newest first, at most a page of them; `more` when
    there are more than that (the page then reloads its first page instead). Two queries."""
    rows = list(_logs(cluster, search, logger).filter(id__gt=after)[: LOGS_PAGE_SIZE + 1])
    return {
        "logs": [_record(cluster, entry) for entry in rows[:LOGS_PAGE_SIZE]],
        "more": len(rows) > LOGS_PAGE_SIZE,
        "logs_after": max((entry.pk for entry in rows), default=after),
        "log_count": _logs(cluster, search, logger).count(),
    }
