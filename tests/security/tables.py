"""Every row of every karpui table, to show that refused input wrote nothing."""

from __future__ import annotations

from typing import Any

from django.apps import apps


def dump() -> dict[str, list[dict[str, Any]]]:
    """Each karpui model's rows, all columns but a request's own bookkeeping, in primary-key order."""
    return {
        model._meta.label: [
            {column: value for column, value in row.items() if column not in BOOKKEEPING}
            for row in model.objects.order_by("pk").values()
        ]
        for model in apps.get_app_config("karpui").get_models()
    }


# Written by any authenticated request, refused or not: when the API token was last used (to the minute).
BOOKKEEPING = frozenset({"last_used_at"})
