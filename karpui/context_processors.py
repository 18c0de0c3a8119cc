"""Context every page needs: whether voluntary disruption is paused, and why; and recent reconcile errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest

from karpui.models import Cluster, LogEntry

# How far back (cluster time) the reconcile-error banner looks.
ERROR_WINDOW = timedelta(minutes=10)


def pause_banner(request: HttpRequest) -> dict[str, Any]:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    paused = [c for c in Cluster.objects.exclude(paused_until=None) if c.is_paused(c.clock)]
    return {"paused_clusters": paused}


def reconcile_errors(request: HttpRequest) -> dict[str, Any]:
    """Per cluster, how many "Reconciler error"s were logged in the last ten minutes of its clock, and the latest:
    an object the engine cannot reconcile is skipped, and this is where a person sees that it was."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
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
