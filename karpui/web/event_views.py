"""Events & logs: two tables with a pager each, events grouped by reason unless asked otherwise, and live polls
that fetch only what is newer than the page (nothing at all, a 204, when nothing is), under 50 KB each."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from karpui.insight import eventlog
from karpui.insight.grouping import EVENT_GROUPINGS
from karpui.links import cluster_query
from karpui.web.csv_export import FORMATS, csv_response
from karpui.web.views import _choice, _cluster, _page_number, _query_text, _whole_number, _within

TEMPLATE = "karpui/events/list.html"


@require_GET
def events(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    search, kind, logger = _query_text(request, "q"), _query_text(request, "kind"), _query_text(request, "logger")
    event_type = _choice(request, "type", ("", "Normal", "Warning"), "")
    group = _choice(request, "group", EVENT_GROUPINGS, "reason")
    part = _choice(request, "part", ("", "events", "logs"), "")
    fmt = _choice(request, "format", FORMATS, "html")
    filters = {"q": search, "kind": kind, "type": event_type, "logger": logger}
    narrowed = cluster_query(cluster, {**filters, "group": group})
    context: dict[str, object] = {"cluster": cluster, **filters, "narrowed": narrowed, "groupings": EVENT_GROUPINGS}
    if fmt == "csv":
        return _csv(request, cluster, search, kind, event_type, logger, group)
    if request.htmx and part == "events":  # type: ignore[attr-defined]
        if not eventlog.events_newer(
            cluster=cluster, since=_query_text(request, "since"), search=search, kind=kind, event_type=event_type
        ):
            return HttpResponse(status=204)  # nothing newer: htmx swaps nothing, and the poll stays tiny
        context.update(
            eventlog.events_section(cluster=cluster, search=search, kind=kind, event_type=event_type, group=group)
        )
        return render(request, f"{TEMPLATE}#events-section", context)
    if request.htmx and part == "logs":  # type: ignore[attr-defined]
        newer = eventlog.logs_after(
            cluster=cluster, after=_whole_number(request, "after"), search=search, logger=logger
        )
        if not newer["logs"]:
            return HttpResponse(status=204)
        if newer["more"]:
            # More than a page arrived: the first page again, in place of the section.
            context.update(eventlog.logs_section(cluster=cluster, search=search, logger=logger))
            response = render(request, f"{TEMPLATE}#logs-section", context)
            response["HX-Retarget"] = "#logs-section"
            response["HX-Reswap"] = "outerHTML"
            return response
        context.update(newer)
        return render(request, f"{TEMPLATE}#logs-newer", context)
    events_page, logs_page = _page_number(request, "events_page"), _page_number(request, "logs_page")
    context.update(
        eventlog.events_section(
            cluster=cluster, search=search, kind=kind, event_type=event_type, group=group, page=events_page
        )
    )
    context.update(eventlog.logs_section(cluster=cluster, search=search, logger=logger, page=logs_page))
    _within(request, int(context["events_pages"]), "events_page")  # type: ignore[call-overload]
    _within(request, int(context["logs_pages"]), "logs_page")  # type: ignore[call-overload]
    context["kinds"] = eventlog.EVENT_KINDS
    return render(request, TEMPLATE, context)


def _csv(
    request: HttpRequest, cluster: object, search: str, kind: str, event_type: str, logger: str, group: str
) -> HttpResponse:
    """`?format=csv&table=events` (the rows as grouped) or `&table=logs`: every row the filters keep."""
    table = _choice(request, "table", ("events", "logs"), "events")
    name = getattr(cluster, "name", "lab")
    if table == "events":
        listing = eventlog.events_section(
            cluster=cluster,  # type: ignore[arg-type]
            search=search,
            kind=kind,
            event_type=event_type,
            group=group,
            page=1,
            everything=True,
        )
        return csv_response(
            f"{name}-events",
            ("last_seen", "first_seen", "type", "reason", "objects", "message", "count", "events"),
            (
                (
                    e["last"],
                    e["first"],
                    e["type"],
                    e["reason"],
                    " ".join(o["label"] for o in e["all_objects"]),
                    e["message"],
                    e["count"],
                    e["events"],
                )
                for e in listing["events"]
            ),
        )
    records = eventlog.logs_all(cluster=cluster, search=search, logger=logger)  # type: ignore[arg-type]
    return csv_response(
        f"{name}-logs",
        ("time", "level", "logger", "message", "fields"),
        (
            (r["time"], r["level"], r["logger"], r["message"], " ".join(f"{k}={v}" for k, v in r["fields"]))
            for r in records
        ),
    )
