"""Dashboard URLs in a cluster: every link, poll, form and redirect of a page stays on the page's cluster (its
`?cluster=`), and the default lab's URLs stay without one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse

from karpui.clusters.registry import DEFAULT_CLUSTER


def cluster_name(cluster: Any) -> str:
    """A cluster's name from a Cluster, a name, or nothing (the default lab)."""
    return str(getattr(cluster, "name", cluster) or DEFAULT_CLUSTER)


def cluster_query(cluster: Any, query: Mapping[str, Any] | None = None) -> str:
    """`query` urlencoded with the cluster added: the part after `?` of a URL on the same page in that cluster.
    Empty values are left out, as a filter left empty is no filter."""
    kept = {key: value for key, value in (query or {}).items() if value not in (None, "") and key != "cluster"}
    name = cluster_name(cluster)
    if name != DEFAULT_CLUSTER:
        kept["cluster"] = name
    return urlencode(kept, doseq=True)


def cluster_url(cluster: Any, viewname: str, *args: Any, **query: Any) -> str:
    """The dashboard URL `viewname` (with its arguments) in `cluster`, with `query` as its query string."""
    url = reverse(viewname, args=args)
    params = cluster_query(cluster, query)
    return f"{url}?{params}" if params else url


def cluster_redirect(request: HttpRequest, viewname: str, *args: Any) -> HttpResponseRedirect:
    """After an action, back to `viewname` in the cluster the action was on (the request's `?cluster=`, which the
    view has already checked): without it, acting on cluster b landed on the lab's page."""
    return HttpResponseRedirect(cluster_url(request.GET.get("cluster"), viewname, *args))
