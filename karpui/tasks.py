"""Celery tasks: thin wrappers that pass ids and call services."""

from celery import shared_task

from karpui import services


@shared_task(acks_late=True, ignore_result=True)
def clusters_tick() -> None:
    """The periodic per-cluster tick; the lab controllers hang off it (services decide what is due)."""
    services.clusters_tick()
