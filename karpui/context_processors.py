"""Context every page needs: whether voluntary disruption is paused, and why."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from karpui.models import Cluster


def pause_banner(request: HttpRequest) -> dict[str, Any]:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    paused = [c for c in Cluster.objects.exclude(paused_until=None) if c.is_paused(c.clock)]
    return {"paused_clusters": paused}
