"""Context every page needs: the page's clock, whether voluntary disruption is paused (and for how long), and
recent reconcile errors. All three sit in the base template's live region (`banners`), polled by every page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from karpui.clusters.registry import DEFAULT_CLUSTER
from karpui.models import Cluster, LogEntry

# How far back (cluster time) the reconcile-error banner looks.
ERROR_WINDOW = timedelta(minutes=10)
# A lab whose clock is within this of wall time is said to follow it; further ahead or behind, the clock says so.
IN_STEP = timedelta(seconds=5)


def _signed_in(request: HttpRequest) -> bool:
    return bool(getattr(request, "user", None) and request.user.is_authenticated)


def clock_name(cluster: Cluster | None) -> str:
    """What a page's times are: a lab's own clock ("lab time", which `karp advance` moves on), or wall time."""
    return "lab time" if cluster is not None and cluster.mode == Cluster.Mode.LAB else "UTC"


def _page_clock(request: HttpRequest) -> dict[str, Any]:
    """The clock every time on the page is read on: the page's cluster's (`?cluster=`, else the lab), named, and
    how far it is from wall time when it is not in step with it."""
    name = request.GET.get("cluster") or DEFAULT_CLUSTER
    cluster = Cluster.objects.filter(name=name).first() if "\x00" not in name else None
    if cluster is None:
        return {}
    drift = cluster.clock - timezone.now()
    return {
        "page_cluster": cluster,
        "clock_name": clock_name(cluster),
        "clock_ahead": drift if abs(drift) > IN_STEP and cluster.mode == Cluster.Mode.LAB else None,
    }


def pause_banner(request: HttpRequest) -> dict[str, Any]:
    """The page's clock (it heads the same live region), and each cluster paused at its own clock with the seconds
    left: the banner says how long, not a time on a clock the page may not be using."""
    if not _signed_in(request):
        return {}
    paused = [
        {"cluster": c, "left": (c.paused_until - c.clock).total_seconds()}
        for c in Cluster.objects.exclude(paused_until=None)
        if c.is_paused(c.clock)
    ]
    return {
        **_page_clock(request),
        "paused_clusters": paused,
        # Every cluster, to switch to; the page's own is carried in every link by `{% cluster_url %}`.
        "clusters": list(Cluster.objects.order_by("name").values_list("name", "mode")),
    }


def reconcile_errors(request: HttpRequest) -> dict[str, Any]:
    """Per cluster, how many "Reconciler error"s were logged in the last ten minutes of its clock, and the latest:
    an object the engine cannot reconcile is skipped, and this is where a person sees that it was."""
    if not _signed_in(request):
        return {}
    failing = []
    for cluster in Cluster.objects.all():
        recent = LogEntry.objects.filter(
            cluster=cluster, level="ERROR", message="Reconciler error", time__gte=cluster.clock - ERROR_WINDOW
        )
        latest = recent.order_by("-time", "-id").first()
        if latest is not None:
            failing.append({"cluster": cluster.name, "count": recent.count(), "latest": latest.fields})
    return {"reconcile_errors": failing}
