"""Celery tasks: thin wrappers that pass ids and call services."""

from celery import shared_task

from karpui.clusters import ticks


@shared_task(acks_late=True, ignore_result=True)
def clusters_tick() -> None:
    """The periodic per-cluster tick; the lab controllers hang off it (services decide what is due)."""
    ticks.clusters_tick()


@shared_task(acks_late=True, ignore_result=True)
def cluster_tick(cluster_id: int) -> None:
    """A lab cluster's tick right after a write to it (karpui.clusters.lab.nudge)."""
    ticks.cluster_tick(cluster_id=cluster_id)
