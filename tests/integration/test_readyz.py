"""Issue 11, item 8: /readyz answers 503 while the database, the broker or Redis is unreachable or a lab cluster's
tick is stale, naming each check and leaking no secret; /healthz stays a liveness check."""

import os
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from karpui import models
from karpui.clusters import ticks

CLOSED = "redis://:s3cret-password@127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def ticked(lab):
    models.Cluster.objects.filter(pk=lab.pk).update(ticked_at=timezone.now())


@pytest.fixture
def filesystem_broker(settings, tmp_path):
    folders = {name: tmp_path / name for name in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
    }
    return folders


def readyz():
    response = Client().get("/readyz")
    return response.status_code, response.json()


def test_ready_when_the_database_the_broker_and_the_tick_are_fine_without_a_login(ticked, filesystem_broker):
    status, body = readyz()

    assert status == 200
    assert body["status"] == "ready"
    assert body["checks"] == {"database": {"ok": True}, "broker": {"kind": "filesystem", "ok": True}}
    assert body["ticks"]["lab"]["ok"] is True and body["ticks"]["lab"]["stale_after_seconds"] == 30.0


@pytest.mark.parametrize("setting", ["REDIS_URL", "CELERY_BROKER_URL"])
def test_unreachable_redis_is_a_503_that_names_it_and_leaks_no_secret(ticked, filesystem_broker, settings, setting):
    setattr(settings, setting, CLOSED)

    response = Client().get("/readyz")

    assert response.status_code == 503
    failed = {name for name, check in response.json()["checks"].items() if not check["ok"]}
    assert failed == {"redis" if setting == "REDIS_URL" else "broker"}
    assert response.json()["checks"][failed.pop()]["error"] == "ConnectionError"
    assert "s3cret" not in response.content.decode() and "127.0.0.1" not in response.content.decode()
    assert Client().get("/healthz").status_code == 200  # liveness does not depend on Redis


def test_a_missing_broker_folder_is_a_503(ticked, filesystem_broker):
    filesystem_broker["processed"].rmdir()

    status, body = readyz()

    assert status == 503
    assert body["checks"]["broker"] == {
        "kind": "filesystem",
        "ok": False,
        "error": "processed_folder is missing or not writable",
    }


def test_a_stale_tick_is_a_503_and_the_next_tick_makes_it_ready(lab, filesystem_broker, settings):

    models.Cluster.objects.filter(pk=lab.pk).update(ticked_at=timezone.now() - timedelta(seconds=31))
    status, body = readyz()
    assert status == 503
    assert body["ticks"]["lab"]["ok"] is False and body["ticks"]["lab"]["age_seconds"] >= 31

    ticks.clusters_tick()

    assert readyz()[0] == 200


def test_a_cluster_never_ticked_waits_for_its_first_tick_only_while_it_is_new(lab, filesystem_broker):
    models.Cluster.objects.filter(pk=lab.pk).update(created_at=timezone.now(), ticked_at=None)
    status, body = readyz()
    assert (status, body["ticks"]["lab"]["ok"], body["ticks"]["lab"]["note"]) == (200, True, "never ticked")

    models.Cluster.objects.filter(pk=lab.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    status, body = readyz()
    assert (status, body["ticks"]["lab"]["ok"], body["ticks"]["lab"]["error"]) == (503, False, "never ticked")


def test_an_unreachable_database_is_a_503(ticked, filesystem_broker, monkeypatch):
    def refuse(*args, **kwargs):
        raise OperationalError("connection to server at 127.0.0.1 failed: password authentication failed")

    with monkeypatch.context() as patched:
        patched.setattr(connection, "cursor", refuse)
        status, body = readyz()

    assert status == 503
    assert body["checks"]["database"] == {"ok": False, "error": "OperationalError"}
    assert body["ticks"] == {}


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs a reachable Redis (REDIS_URL)")
def test_reachable_redis_as_broker_and_lock_service_is_ready(ticked, settings):
    settings.REDIS_URL = settings.CELERY_BROKER_URL = os.environ["REDIS_URL"]

    status, body = readyz()

    assert status == 200
    assert body["checks"] == {"database": {"ok": True}, "broker": {"kind": "redis", "ok": True}, "redis": {"ok": True}}


@pytest.mark.parametrize("mode", [models.Cluster.Mode.KWOK, models.Cluster.Mode.OBSERVE])
def test_a_kwok_or_observe_cluster_whose_engine_stopped_stepping_is_a_503(ticked, filesystem_broker, mode):
    """Their tick is the leading engine's step (it sets ticked_at): none for 31 s, no engine is doing the work."""
    cluster = models.Cluster.objects.create(name="real", mode=mode, kubeconfig="/nowhere")
    models.Cluster.objects.filter(pk=cluster.pk).update(ticked_at=timezone.now() - timedelta(seconds=31))

    status, body = readyz()

    assert status == 503
    assert body["ticks"]["real"]["ok"] is False and body["ticks"]["real"]["age_seconds"] >= 31
    assert body["ticks"]["lab"]["ok"] is True

    models.Cluster.objects.filter(pk=cluster.pk).update(ticked_at=timezone.now())  # the engine stepped again
    assert readyz()[0] == 200
