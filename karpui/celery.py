"""The Celery app, configured from Django settings (CELERY_* names)."""

import os
from typing import Any

from celery import Celery
from celery.signals import before_task_publish

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpui.settings")

app = Celery("karpui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["karpui"])


@before_task_publish.connect
def _heartbeat(**_: Any) -> None:
    """Beat sends the cluster tick every KARPUI_TICK_SECONDS: each send is its heartbeat (where the file is set,
    which deploy/ does only for beat)."""
    from django.conf import settings

    from karpui import heartbeat

    if settings.KARPUI_HEARTBEAT_FILE:
        heartbeat.beat(settings.KARPUI_HEARTBEAT_FILE)
