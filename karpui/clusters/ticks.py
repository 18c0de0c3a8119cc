"""The periodic tick: every lab cluster moved toward wall time; one failing cluster is logged and the rest still tick."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from karpui import models
from karpui.clusters import lab

logger = logging.getLogger(__name__)


def clusters_tick(*, now: datetime | None = None) -> None:
    """Move each lab cluster toward wall time under its lease. A cluster whose tick fails is logged (and shown on
    the dashboard from its log) and the others still tick: one bad cluster never stops the rest."""
    now = now or timezone.now()
    for cluster in models.Cluster.objects.filter(mode=models.Cluster.Mode.LAB):
        _tick(cluster, now)


def cluster_tick(*, cluster_id: int, now: datetime | None = None) -> None:
    """One lab cluster's tick, out of turn: a write to it asked for one (lab.nudge)."""
    cluster = models.Cluster.objects.filter(pk=cluster_id, mode=models.Cluster.Mode.LAB).first()
    if cluster is not None:
        _tick(cluster, now or timezone.now())


def _tick(cluster: models.Cluster, now: datetime) -> None:
    try:
        lab.tick(cluster, now=now)
    except Exception as error:
        logger.exception("tick failed", extra={"cluster": cluster.name})
        models.LogEntry.objects.create(
            cluster=cluster,
            time=cluster.clock,
            level="ERROR",
            logger="karpui.tick",
            message="Reconciler error",
            fields={"controller": "tick", "error": f"{type(error).__name__}: {error}"},
        )
