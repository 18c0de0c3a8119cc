"""The Celery app, configured from Django settings (CELERY_* names)."""

import os
from typing import Any

from celery import Celery
from celery.signals import before_task_publish
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "karpui.settings")
# `filesystem://` is karpui's filesystem transport: kombu's, with messages written whole (karpui.broker).
TRANSPORT_ALIASES["filesystem"] = "karpui.broker:Transport"

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
