"""Template filters for the dashboard: durations people read, and dictionary lookups with odd keys."""

from __future__ import annotations

from typing import Any

from django import template

from karpui.kubectl.printers import human_duration

register = template.Library()


@register.filter
def seconds(value: float) -> str:
    """Seconds as kubectl prints ages: 45s, 3m20s, 5h, 2d3h."""
    return human_duration(float(value or 0))


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
def ahead(offset: Any) -> str:
    """A clock's distance from wall time, as a person says it: "about 10m ahead of", "45s behind" (to the minute
    from two minutes on: the clocks are compared when the page is made, between two ticks)."""
    total = offset.total_seconds() if hasattr(offset, "total_seconds") else float(offset or 0)
    size = abs(total)
    said = f"about {human_duration(round(size / 60) * 60)}" if size >= 120 else human_duration(size)
    return f"{said} {'ahead of' if total >= 0 else 'behind'}"


@register.filter
def clock(cluster: Any) -> str:
    """The name of the clock a cluster's times are on: "lab time" for a lab, "UTC" (wall time) otherwise."""
    from karpui.context_processors import clock_name

    return clock_name(cluster)
