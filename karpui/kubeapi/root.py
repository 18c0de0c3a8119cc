"""The Kubernetes API at the server's root, for clients that drop the cluster's path: kubectl 1.32's `get --raw
PATH` and client-go's OpenAPI v3 fetches send PATH from the server's root, not under the kubeconfig's `server` path
(later client-go keeps it). Every path a cluster's API serves is served here too, kube-apiserver's non-resource paths
(`/version`, `/api`, `/apis`, `/openapi/v2`, `/openapi/v3/...`, `/livez`, `/healthz`, `/readyz`, and `/` listing
them) and its resource paths (`/api/v1/namespaces/default/pods`, `/apis/karpenter.sh/v1/nodepools`, watches and
writes alike), for the cluster the request's token was made for (`karp kubeconfig --cluster NAME`), as a
kube-apiserver serves the one cluster its kubeconfig reaches; a request with no such token reaches the default lab.

`/`, `/healthz` and `/readyz` are also the dashboard's and its probes': a request with a bearer token (kubectl, a
client library) gets kube-apiserver's answer, anything else the dashboard's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

from karpui.clusters.registry import DEFAULT_CLUSTER
from karpui.kubeapi import auth, views

View = Callable[..., HttpResponse]


def _bearer(request: HttpRequest) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def root_cluster(request: HttpRequest) -> str:
    """The cluster a request at the root reaches: its token's, else the default lab."""
    return auth.token_cluster(request) or DEFAULT_CLUSTER


def at_root(view: View) -> View:
    """An endpoint of the cluster API (karpui.kubeapi.views) answered at the root, for the request's cluster."""

    @csrf_exempt
    @login_not_required
    def handle(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return view(request, cluster=root_cluster(request), **kwargs)

    return handle


def api_or(api: View, dashboard: View) -> View:
    """kube-apiserver's answer for a request with a bearer token, the dashboard's otherwise."""

    @login_not_required  # an API client has no session; the dashboard's own view says whether it needs one
    def handle(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        if _bearer(request):
            return csrf_exempt(api)(request, cluster=root_cluster(request), **kwargs)
        if getattr(dashboard, "login_required", True) and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return dashboard(request)

    return handle


def health(endpoint: str, dashboard: View) -> View:
    def api(request: HttpRequest, cluster: str) -> HttpResponse:
        return views.health_check(request, cluster=cluster, endpoint=endpoint)  # type: ignore[no-any-return]

    return api_or(api, dashboard)


def urlpatterns(home: View, healthz: View, readyz: View) -> list[Any]:
    """The root's routes; `home`, `healthz` and `readyz` are the dashboard's views of the paths both serve."""
    return [
        re_path(r"^$", api_or(views.paths, home), name="home"),
        re_path(r"^healthz/?$", health("healthz", healthz), name="healthz"),
        re_path(r"^readyz/?$", health("readyz", readyz), name="readyz"),
        re_path(r"^(?P<endpoint>livez|readyz|healthz)(?:/(?P<check>.+))$", at_root(views.health_check)),
        re_path(r"^livez/?$", at_root(views.health_check), {"endpoint": "livez"}),
        re_path(r"^version/?$", at_root(views.version)),
        re_path(r"^api/?$", at_root(views.core_root)),
        re_path(r"^apis/?$", at_root(views.groups_root)),
        re_path(r"^api/(?P<version>v1)/?$", at_root(views.group_version)),
        re_path(r"^apis/(?P<group>[^/]+)/?$", at_root(views.group)),
        re_path(r"^apis/(?P<group>[^/]+)/(?P<version>[^/]+)/?$", at_root(views.group_version)),
        re_path(r"^openapi/v2/?$", at_root(views.openapi_v2)),
        re_path(r"^openapi/v3/?$", at_root(views.openapi_v3_index)),
        re_path(r"^openapi/v3/(?P<path>.+)$", at_root(views.openapi_v3)),
        re_path(r"^api/(?P<version>v1)/(?P<rest>.+)$", at_root(views.resource)),
        re_path(r"^apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<rest>.+)$", at_root(views.resource)),
        # What is left under /api and /apis (`/api/v2/...`) is kube-apiserver's 404, as a Status.
        re_path(r"^apis?/.+$", at_root(views.not_served)),
    ]
