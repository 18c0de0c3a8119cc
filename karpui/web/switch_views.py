"""The cluster switcher: the page a person is on, in another cluster, with its filters; an object's page where the
object exists there too, else the list it belongs to, searched for its name (never a 404)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import Resolver404, resolve
from django.views.decorators.http import require_GET

from karpui import models
from karpui.kinds.resources import BY_KIND
from karpui.links import cluster_url
from karpui.web.views import _cluster

# An object's page (by URL name) and the list it belongs to in another cluster.
OBJECT_PAGE_LISTS = {
    "node-detail": "nodes",
    "nodepool-edit": "nodepools",
    "object-detail": "search",
    "object-detail-namespaced": "search",
}
# Query parameters of this cluster's view of a page, not filters: a switch leaves them behind (page 3 of one
# cluster's nodes is not page 3 of another's).
NOT_CARRIED = frozenset({"cluster", "page", "events_page", "logs_page", "why", "part", "since", "after"})


def _exists(cluster: models.Cluster, url_name: str, kwargs: dict[str, str]) -> bool:
    name = kwargs.get("name", "")
    if url_name == "node-detail":
        return models.KubeObject.objects.filter(cluster=cluster, kind="Node", name=name).exists()
    if url_name == "nodepool-edit":
        return models.NodePool.objects.filter(cluster=cluster, name=name).exists()
    kind = kwargs.get("kind", "")
    resource = BY_KIND.get(kind)
    if resource is None:
        return False
    return models.KubeObject.objects.filter(
        cluster=cluster, kind=kind, namespace=kwargs.get("namespace", "") if resource.namespaced else "", name=name
    ).exists()


@require_GET
def cluster_switch(request: HttpRequest) -> HttpResponse:
    """`?cluster=B&from=/nodes/?nodepool=x`: that page in cluster B. Only this site's own pages are followed."""
    target = _cluster(request)
    came_from = urlsplit(request.GET.get("from", "/"))
    try:
        match = resolve(came_from.path) if not came_from.netloc and not came_from.scheme else None
    except Resolver404:
        match = None
    if match is None or match.url_name in (None, "cluster-switch") or match.app_name == "admin":
        return HttpResponseRedirect(cluster_url(target, "home"))
    carried: dict[str, list[str]] = {}
    for key, value in parse_qsl(came_from.query):
        if key not in NOT_CARRIED:
            carried.setdefault(key, []).append(value)
    listing = OBJECT_PAGE_LISTS.get(match.url_name)
    if listing is not None:
        if _exists(target, match.url_name, match.kwargs):
            return HttpResponseRedirect(cluster_url(target, match.url_name, *match.args, *match.kwargs.values()))
        return HttpResponseRedirect(cluster_url(target, listing, q=match.kwargs.get("name", "")))
    return HttpResponseRedirect(cluster_url(target, match.url_name, *match.args, *match.kwargs.values(), **carried))
