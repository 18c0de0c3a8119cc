"""Template helpers for tables people scan: sortable headers, and one unit and one precision per column."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html

register = template.Library()

GIB = 2**30
MIB = 2**20


@register.simple_tag(takes_context=True)
def sort_header(context: dict[str, Any], column: str, label: str) -> str:
    """A column heading that sorts by `column` (descending on a second click), keeping the page's filters (the
    context's `narrowed` query) and saying the current order."""
    current = str(context.get("sort") or "")
    order = "ascending" if current == column else "descending" if current == f"-{column}" else "none"
    narrowed = str(context.get("narrowed") or "")
    return format_html(
        '<th aria-sort="{}"><a href="?{}sort={}" class="sort">{}{}</a></th>',
        order,
        f"{narrowed}&" if narrowed else "",
        f"-{column}" if order == "ascending" else column,
        label,
        {"ascending": " ▲", "descending": " ▼", "none": ""}[order],
    )


@register.filter
def price(value: Any) -> str:
    """Dollars per hour to four places, the one precision every price on the dashboard uses."""
    try:
        return f"${float(value or 0):.4f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def gib(size: Any) -> str:
    """Bytes in GiB to one place (node sizes)."""
    return f"{int(size or 0) / GIB:.1f}"


@register.filter
def mib(size: Any) -> str:
    """Bytes in MiB, whole (pod requests)."""
    return f"{int(size or 0) / MIB:.0f}"


@register.filter
def cores(millis: Any) -> str:
    """Millicores in cores to two places."""
    return f"{int(millis or 0) / 1000:.2f}"
