"""Template filters and tags for the dashboard: durations people read, dictionary lookups with odd keys, and URLs
that stay on the page's cluster."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html

from karpui import links
from karpui.clusters.registry import DEFAULT_CLUSTER
from karpui.kinds import display
from karpui.models import Cluster

register = template.Library()


@register.filter
def seconds(value: float) -> str:
    """Seconds as people say a span, to its two largest units: 45s, 3m20s, 2h (kubectl's AGE says "120m"), 1h30m,
    2d3h."""
    return display.duration(float(value or 0))


@register.filter
def resources(mapping: Any) -> str:
    """A resource list as people write it: `cpu 20, memory 88Gi, nodes 5`."""
    if not mapping:
        return "—"
    return ", ".join(f"{name} {value}" for name, value in sorted(mapping.items()))


@register.filter
def get(mapping: Any, key: str) -> Any:
    """`{{ annotations|get:"karpui.dev/approval-mode" }}`: keys with dots and slashes."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def condition(status: Any, kind: str) -> dict[str, Any] | None:
    """`{{ np.status|condition:"NodeRegistrationHealthy" }}`: one condition of an object's status, or None."""
    conditions = status.get("conditions") if hasattr(status, "get") else None
    return next((c for c in conditions or [] if isinstance(c, dict) and c.get("type") == kind), None)


@register.filter
def ahead(offset: Any) -> str:
    """A clock's distance from wall time, as a person says it: "about 10m ahead of", "45s behind" (to the minute
    from two minutes on: the clocks are compared when the page is made, between two ticks)."""
    total = offset.total_seconds() if hasattr(offset, "total_seconds") else float(offset or 0)
    size = abs(total)
    said = f"about {display.duration(round(size / 60) * 60)}" if size >= 120 else display.duration(size)
    return f"{said} {'ahead of' if total >= 0 else 'behind'}"


@register.filter
def clock(cluster: Any) -> str:
    """The name of the clock a cluster's times are on: "lab time" for a lab, "UTC" (wall time) otherwise."""
    from karpui.web.context_processors import clock_name

    return clock_name(cluster)


def _page_cluster(context: template.Context) -> Cluster | None:
    """The cluster the page shows: its view's `cluster`, else the one the context processor read from the request
    (pages such as the catalog's have no cluster of their own), else None, the default lab."""
    shown = context.get("cluster")
    return shown if isinstance(shown, Cluster) else context.get("page_cluster")


@register.simple_tag(takes_context=True)
def cluster_url(context: template.Context, viewname: str, *args: Any, **query: Any) -> str:
    """`{% cluster_url 'nodes' nodepool=pool.name %}`: `{% url %}` on the page's cluster. Positional arguments are
    the URL's, keyword arguments its query (empty ones left out). Every dashboard link, poll and form uses it: a
    URL without the cluster reads, or acts on, the lab."""
    return links.cluster_url(_page_cluster(context), viewname, *args, **query)


@register.simple_tag(takes_context=True)
def cluster_query(context: template.Context, **query: Any) -> str:
    """`href="?{% cluster_query why=1 %}"`: a query for this page's own URL, on the page's cluster."""
    return links.cluster_query(_page_cluster(context), query)


@register.simple_tag(takes_context=True)
def cluster_field(context: template.Context) -> str:
    """The hidden field that keeps a GET form (filters, the simulate button) on the page's cluster: a browser
    replaces an action's query with the form's fields. Nothing on the default lab."""
    name = links.cluster_name(_page_cluster(context))
    if name == DEFAULT_CLUSTER:
        return ""
    return format_html('<input type="hidden" name="cluster" value="{}">', name)


@register.simple_tag(takes_context=True)
def page_messages(context: template.Context) -> list[Any]:
    """The flash messages for this page's cluster (karpui.web.flash); the others wait for a page of theirs."""
    storage = getattr(context.get("request"), "_messages", None)
    if storage is None:
        return []
    if not hasattr(storage, "for_page"):
        return list(storage)
    return list(storage.for_page(links.cluster_name(_page_cluster(context))))


@register.inclusion_tag("karpui/cluster_switch.html", takes_context=True)
def cluster_switch(context: template.Context) -> dict[str, Any]:
    """The cluster switcher: a GET to karpui.switch_views with this page's URL, which lands on the same page with
    the same filters in the chosen cluster, or from an object's page on the object there (or its list)."""
    request = context["request"]
    return {
        "action": reverse("cluster-switch"),
        "here": request.get_full_path(),
        "clusters": context.get("clusters", ()),
        "page_cluster": context.get("page_cluster"),
    }
