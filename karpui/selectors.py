"""Read-only queries for views: each returns plain data in a fixed number of queries."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from karpui import models


def overview() -> dict[str, Any]:
    clusters = list(models.Cluster.objects.order_by("name"))
    nodepools = list(models.NodePool.objects.select_related("cluster").order_by("cluster__name", "-weight", "-name"))
    catalogs = list(models.Catalog.objects.annotate(types=Count("instance_types")).order_by("name"))
    return {"clusters": clusters, "nodepools": nodepools, "catalogs": catalogs}
