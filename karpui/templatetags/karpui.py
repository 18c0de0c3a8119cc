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
