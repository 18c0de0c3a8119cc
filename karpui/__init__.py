"""karpui: the Django project and dashboard around the provisioner engine."""

from karpui.celery import app as celery_app

__all__ = ["celery_app"]
