"""Per-cluster leases so two workers never reconcile one cluster at once.

With Redis configured, the lease is a Redis key set with NX and an expiry; without, it is a compare-and-swap on
the cluster's row. Each acquisition bumps a fencing epoch; writes check it, so a worker whose lease lapsed (paused,
killed, partitioned) cannot commit over its successor.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from karpui import models

LEASE_SECONDS = 30
logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """The lease lapsed and someone else may be reconciling: abandon this run's writes."""


@dataclass(frozen=True)
class Lease:
    cluster_id: int
    holder: str
    epoch: int
    backend: str

    def still_held(self) -> bool:
        if self.backend == "redis":
            token = _redis().get(_key(self.cluster_id))
            return token is not None and token.decode() == f"{self.holder}:{self.epoch}"
        return models.Cluster.objects.filter(
            id=self.cluster_id, lease_holder=self.holder, lease_epoch=self.epoch
        ).exists()


@cache
def _redis() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def _key(cluster_id: int) -> str:
    return f"{key_prefix()}cluster:{cluster_id}"


def key_prefix(database: Mapping[str, Any] | None = None) -> str:
    """The Redis keys of this database's leases (or of the `database` settings given). A cluster's id is unique
    only within its database, so two installations sharing one Redis (or two test workers, each with a test
    database of its own) would otherwise take each other's clusters for held."""
    database = connection.settings_dict if database is None else database
    where = f"{database.get('HOST') or ''}:{database.get('PORT') or ''}/{database['NAME']}"
    return f"karpui:lease:{hashlib.sha256(where.encode()).hexdigest()[:16]}:"


def try_acquire(cluster_id: int, holder: str | None = None, seconds: int | None = None) -> Lease | None:
    holder = holder or uuid.uuid4().hex
    seconds = seconds or LEASE_SECONDS
    if settings.REDIS_URL:
        client = _redis()
        epoch = int(client.incr(_key(cluster_id) + ":epoch"))
        if client.set(_key(cluster_id), f"{holder}:{epoch}", nx=True, px=seconds * 1000):
            return Lease(cluster_id, holder, epoch, "redis")
        return None
    now = timezone.now()
    try:
        # A run under the row lock (a `karp advance`, a tick's save; on SQLite, the database's write lock) may
        # commit after its lease's expiry: the cluster is busy whatever the expiry says. A rival used to wait for
        # that commit and then take the lease that had lapsed meanwhile; it now gets None at once. (A tick's engine
        # runs without the row: `renewing` keeps its lease from lapsing meanwhile.)
        with _without_lock_waits(), transaction.atomic():
            models.Cluster.objects.select_for_update(nowait=True).filter(id=cluster_id).values_list("id").first()
            claimed = models.Cluster.objects.filter(
                Q(lease_holder="") | Q(lease_expires_at__lt=now) | Q(lease_holder=holder), id=cluster_id
            ).update(
                lease_holder=holder, lease_expires_at=now + timedelta(seconds=seconds), lease_epoch=F("lease_epoch") + 1
            )
            if not claimed:
                return None
            epoch = models.Cluster.objects.filter(id=cluster_id).values_list("lease_epoch", flat=True).get()
    except OperationalError as error:
        if _busy(error):
            return None
        raise
    return Lease(cluster_id, holder, epoch, "db")


@contextmanager
def _without_lock_waits() -> Iterator[None]:
    """SQLite waits up to its busy timeout (20 s) for another connection's write lock; here it must not wait (as
    PostgreSQL's NOWAIT does not). Outside a transaction only: inside one, the lock is already this connection's."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    timeout = int(float(connection.settings_dict.get("OPTIONS", {}).get("timeout", 5)) * 1000)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {timeout}")


def _busy(error: OperationalError) -> bool:
    """Whether the error says another transaction holds the lock (PostgreSQL's lock_not_available, SQLite's
    locked database), rather than that the database failed."""
    return getattr(error.__cause__, "sqlstate", None) == "55P03" or "database is locked" in str(error)


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end
"""


_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end
"""


def renew(lease: Lease, seconds: int | None = None) -> bool:
    """Extend a held lease by `seconds` from now; False if it was lost meanwhile."""
    length = seconds or LEASE_SECONDS
    if lease.backend == "redis":
        token = f"{lease.holder}:{lease.epoch}"
        return bool(_redis().eval(_RENEW, 1, _key(lease.cluster_id), token, int(length * 1000)))
    with transaction.atomic():
        # A row locked by a save (or by a caller's open transaction) is not waited for: that save checks the lease
        # itself, and the next renewal comes a third of a lease later.
        row = models.Cluster.objects.select_for_update(skip_locked=True).filter(id=lease.cluster_id)
        holder = row.values_list("lease_holder", "lease_epoch").first()
        if holder is None:
            return True
        if holder != (lease.holder, lease.epoch):
            return False
        row.update(lease_expires_at=timezone.now() + timedelta(seconds=length))
        return True


@contextmanager
def renewing(lease: Lease, seconds: int | None = None) -> Iterator[None]:
    """Keep a lease alive for the block by renewing it every third of its length from a thread, so a tick that
    runs longer than the lease is not abandoned (the work itself is bounded by the tick's budget). A tick runs its
    engine without holding the cluster's row, so the lease is all that keeps a rival worker out meanwhile."""
    stop = threading.Event()
    length = seconds or LEASE_SECONDS

    def keep() -> None:
        try:
            while not stop.wait(length / 3):
                try:
                    if not renew(lease, length):
                        return  # lost: the save's still_held() check refuses the commit
                except DatabaseError as error:  # busy past its timeout, or the connection lost: try again
                    logger.warning("lease renewal failed", extra={"cluster": lease.cluster_id, "error": str(error)})
                    connection.close()  # the next attempt opens a new one
        finally:
            if lease.backend == "db":
                connection.close()  # this thread's own connection

    keeper = threading.Thread(target=keep, name=f"lease-{lease.cluster_id}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


def taken(cluster: models.Cluster) -> bool:
    """Whether some worker holds the cluster's lease now (read from `cluster` as loaded, for a DB lease)."""
    if settings.REDIS_URL:
        return bool(_redis().exists(_key(cluster.id)))
    return (
        bool(cluster.lease_holder)
        and cluster.lease_expires_at is not None
        and cluster.lease_expires_at > timezone.now()
    )


def release(lease: Lease) -> None:
    if lease.backend == "redis":
        _redis().eval(_RELEASE, 1, _key(lease.cluster_id), f"{lease.holder}:{lease.epoch}")
    else:
        models.Cluster.objects.filter(id=lease.cluster_id, lease_holder=lease.holder, lease_epoch=lease.epoch).update(
            lease_holder="", lease_expires_at=None
        )


@contextmanager
def held(cluster_id: int, holder: str | None = None) -> Iterator[Lease | None]:
    """The lease for the block, or None when another worker holds it (then do nothing)."""
    lease = try_acquire(cluster_id, holder)
    try:
        yield lease
    finally:
        if lease is not None:
            release(lease)
