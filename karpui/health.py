"""Readiness for /readyz: the database answers, the broker (and Redis) answer, and every cluster ticked lately.

Each check says only whether it passed and, if not, the kind of failure: never a URL, host or message that could
carry a password.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError, connection

from karpui import models

Check = dict[str, Any]
TIMEOUT_SECONDS = 2.0


def _failed(error: Exception) -> Check:
    return {"ok": False, "error": type(error).__name__}


def database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        return _failed(error)
    return {"ok": True}


def _redis(url: str) -> Check:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=TIMEOUT_SECONDS, socket_timeout=TIMEOUT_SECONDS)
    try:
        client.ping()
    except (redis.RedisError, OSError) as error:
        return _failed(error)
    finally:
        client.close()
    return {"ok": True}


def broker() -> Check:
    """Redis is pinged; the filesystem broker's folders must be there and writable; anything else is connected to."""
    url = settings.CELERY_BROKER_URL
    scheme = urlsplit(url).scheme
    if scheme in ("redis", "rediss"):
        return {"kind": "redis", **_redis(url)}
    if scheme == "filesystem":
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for folder in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
            path = options.get(folder)
            if path and not (os.path.isdir(path) and os.access(path, os.W_OK)):
                return {"kind": "filesystem", "ok": False, "error": f"{folder} is missing or not writable"}
        return {"kind": "filesystem", "ok": True}
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=TIMEOUT_SECONDS) as broker_connection:
            broker_connection.ensure_connection(max_retries=1)
    except Exception as error:  # any transport's failure means not ready
        return {"kind": scheme, **_failed(error)}
    return {"kind": scheme, "ok": True}


def ticks(now: datetime) -> dict[str, Check]:
    """Each cluster's last successful tick (a lab's periodic tick; a kwok or observe cluster's last step by the
    engine leading it), stale after KARPUI_TICK_STALE_SECONDS. A cluster not ticked yet passes only while it is
    younger than that (a fresh install waits for its first tick, an engine for its informers and its Lease). A kwok
    or observe cluster whose engine's list or watch of some kind has failed for longer than that (refused with 429,
    say) fails too: its engine steps on a mirror that has gone stale."""
    stale = settings.KARPUI_TICK_STALE_SECONDS
    engines = models.Cluster.objects.filter(mode__in=(models.Cluster.Mode.KWOK, models.Cluster.Mode.OBSERVE))
    failing = dict(engines.values_list("name", "lab_state__informers"))
    checks = {}
    for cluster in models.Cluster.objects.defer("lab_state").order_by("name"):
        since = cluster.ticked_at or cluster.created_at
        age = max((now - since).total_seconds(), 0.0)
        check: Check = {"ok": age <= stale, "stale_after_seconds": stale}
        if cluster.ticked_at is None:
            check["error" if age > stale else "note"] = "never ticked"
        else:
            check["age_seconds"] = round(age, 1)
        watches = {
            kind: facts for kind, facts in (failing.get(cluster.name) or {}).items() if facts["failing_seconds"] > stale
        }
        if watches and check["ok"]:
            check["ok"] = False
            check["error"] = "; ".join(
                f"{kind} list/watch failing for {facts['failing_seconds']:.0f} s ({facts['error']})"
                for kind, facts in watches.items()
            )
        checks[cluster.name] = check
    return checks


def readiness(now: datetime) -> tuple[bool, dict[str, Any]]:
    """Whether karpui is ready, and the JSON body naming each check (the ticks need the database)."""
    checks = {"database": database(), "broker": broker()}
    if settings.REDIS_URL:  # leases and the login throttle's counts live there
        checks["redis"] = _redis(settings.REDIS_URL)
    clusters = ticks(now) if checks["database"]["ok"] else {}
    ready = all(check["ok"] for check in [*checks.values(), *clusters.values()])
    return ready, {"status": "ready" if ready else "not ready", "checks": checks, "ticks": clusters}
