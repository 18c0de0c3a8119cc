"""Liveness of the processes without an HTTP port: `manage.py engine` and Celery beat touch KARPUI_HEARTBEAT_FILE as
their loops go round, and `python -m karpui.heartbeat FILE MAX_AGE` (deploy/'s exec probe) fails once it is older."""

import os
import time

import pytest
from celery.signals import before_task_publish
from django.core.management import call_command

from karpui import heartbeat

pytestmark = pytest.mark.django_db


def test_each_time_round_its_loop_the_engine_touches_its_heartbeat(settings, tmp_path):
    settings.KARPUI_HEARTBEAT_FILE = str(tmp_path / "heartbeat")
    assert heartbeat.main([settings.KARPUI_HEARTBEAT_FILE, "120"]) == 1  # none yet: not alive

    call_command("engine", "--once")  # no kwok or observe cluster: a loop that steps nothing is alive too

    assert heartbeat.main([settings.KARPUI_HEARTBEAT_FILE, "120"]) == 0
    hung = time.time() - 121
    os.utime(settings.KARPUI_HEARTBEAT_FILE, (hung, hung))
    assert heartbeat.main([settings.KARPUI_HEARTBEAT_FILE, "120"]) == 1


def test_beat_touches_its_heartbeat_each_time_it_sends_a_task(settings, tmp_path):
    import karpui.celery  # noqa: F401 - connects the handler, as `celery -A karpui beat` imports it

    settings.KARPUI_HEARTBEAT_FILE = str(tmp_path / "heartbeat")

    before_task_publish.send(sender="karpui.tasks.clusters_tick", body=(), exchange="", routing_key="celery")

    assert heartbeat.age(settings.KARPUI_HEARTBEAT_FILE, time.time()) < 60


def test_without_a_heartbeat_file_nothing_is_written(settings, tmp_path, monkeypatch):
    settings.KARPUI_HEARTBEAT_FILE = ""
    monkeypatch.chdir(tmp_path)

    call_command("engine", "--once")
    before_task_publish.send(sender="karpui.tasks.clusters_tick", body=(), exchange="", routing_key="celery")

    assert list(tmp_path.iterdir()) == []
