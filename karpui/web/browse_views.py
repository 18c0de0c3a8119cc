"""The browsing pages: every pod with filters, every workload, a search by name across kinds, and every cluster
on one page; each list also downloads as CSV (`?format=csv`, every row its filters keep)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from karpui.insight import browse
from karpui.kinds import display
from karpui.links import cluster_query
from karpui.web.csv_export import csv_response
from karpui.web.views import _choice, _cluster, _csv, _page, _page_number, _query_text, _within


@require_GET
def pods(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    phase = _choice(request, "phase", ("", *browse.PHASES), "")
    filters = browse.PodFilters(
        namespace=_query_text(request, "namespace"),
        node=_query_text(request, "node"),
        phase=phase,
        owner=_query_text(request, "owner"),
        search=_query_text(request, "q"),
        pending=_query_text(request, "pending") == "1",
    )
    if _csv(request):
        rows = browse.pods_page(cluster=cluster, filters=filters, everything=True)["pods"]
        return csv_response(
            f"{cluster.name}-pods",
            ("namespace", "name", "phase", "node", "owner_kind", "owner", "cpu_request", "memory_request", "age_s"),
            (
                (
                    p["namespace"],
                    p["name"],
                    p["phase"],
                    p["node"],
                    p["owner"].kind,
                    p["owner"].name,
                    display.quantity("cpu", p["cpu"]),
                    display.quantity("memory", p["memory"] * 1000),
                    int(p["age"]),
                )
                for p in rows
            ),
        )
    listing = browse.pods_page(cluster=cluster, filters=filters, page=_page_number(request))
    _within(request, listing["pages"])
    narrowed = cluster_query(cluster, filters.query())
    context = {"cluster": cluster, "filters": filters, "narrowed": narrowed, "phases": browse.PHASES, **listing}
    return _page(request, "karpui/browse/pods.html", "pods-table", context)


@require_GET
def workloads(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    kind = _choice(request, "kind", ("", *browse.WORKLOAD_KINDS), "")
    namespace, search = _query_text(request, "namespace"), _query_text(request, "q")
    if _csv(request):
        rows = browse.workloads_page(cluster=cluster, kind=kind, namespace=namespace, search=search, everything=True)
        return csv_response(
            f"{cluster.name}-workloads",
            ("kind", "namespace", "name", "desired", "ready", "up_to_date", "available", "pods_pending", "images"),
            (
                (
                    w["kind"],
                    w["namespace"],
                    w["name"],
                    w["desired"],
                    w["ready"],
                    w["updated"],
                    w["available"],
                    w["pending"],
                    w["images"],
                )
                for w in rows["workloads"]
            ),
        )
    listing = browse.workloads_page(
        cluster=cluster, kind=kind, namespace=namespace, search=search, page=_page_number(request)
    )
    _within(request, listing["pages"])
    narrowed = cluster_query(cluster, {"kind": kind, "namespace": namespace, "q": search})
    context = {"cluster": cluster, "kind": kind, "namespace": namespace, "q": search, "narrowed": narrowed, **listing}
    return _page(request, "karpui/browse/workloads.html", "workloads-table", context)


@require_GET
def search(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    text = _query_text(request, "q").strip()
    results = browse.search(cluster=cluster, text=text)
    if _csv(request):
        return csv_response(
            f"{cluster.name}-search",
            ("kind", "name"),
            ((group["kind"], item["label"]) for group in results for item in group["items"]),
        )
    return _page(request, "karpui/browse/search.html", "results", {"cluster": cluster, "q": text, "results": results})


@require_GET
def clusters(request: HttpRequest) -> HttpResponse:
    # The page is about every cluster, but a ?cluster= it is given must still name one (as on every other page):
    # an unknown one is a 404 and a name no cluster can have a 400, never a page that seems to show it.
    if "cluster" in request.GET:
        _cluster(request)
    lines = browse.clusters_overview()
    if _csv(request):
        return csv_response(
            "clusters",
            ("cluster", "mode", "cost_per_hour", "nodes", "pods_pending", "awaiting_approval", "paused"),
            (
                (
                    line["cluster"].name,
                    line["cluster"].mode,
                    f"{line['cost_per_hour']:.4f}",
                    line["nodes"],
                    line["pending"],
                    line["awaiting"],
                    "yes" if line["paused"] else "no",
                )
                for line in lines
            ),
        )
    return _page(request, "karpui/browse/clusters.html", "clusters-table", {"lines": lines})
