"""Running a lab cluster: load its objects into the engine, run the controllers, write back what changed.

Every run stores its result in one transaction that locks the cluster's row, so the saves of one cluster are
serial and a crash leaves the last committed state, from which the next run simply continues (names and the RNG
state are part of that state, so a retried run makes the same decisions and never a duplicate NodeClaim). A
worker's tick runs the engine before it takes that lock (`run_detached`), so writes wait for its save, not its
work, and the tick's result is put after them (`rebase`) or, if the lab ran elsewhere meanwhile, dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from karpui import models
from karpui.clusters import changelog, configuration, leases, saves, warm
from karpui.clusters.rowstore import RowStore
from karpui.history import costs
from provisioner.cluster.api import ClusterAPI
from provisioner.lab import Lab

T = TypeVar("T")
logger = logging.getLogger(__name__)
# A worker that ticked within this many tick periods is taken to be running.
ENGINE_ALIVE_TICKS = 5


def load(cluster: models.Cluster, *, components: str | None = None) -> Lab:
    """The cluster's lab loaded cold from its rows (a NodePool that does not parse is left out, with an Event saying
    why); `components` overrides which of the lab's components run."""
    lab, problems = warm.loaded(cluster, components)
    warm.report(lab, problems)
    return lab


# Callers drop a warm lab through this module, as they run one.
forget = warm.forget


def run(cluster_name: str, change: Callable[[Lab], T], *, lease: leases.Lease | None = None) -> T:
    """Lock the cluster, take its lab (warm from memory where this process has it, else loaded), apply `change`
    (which may advance time), and save: all or nothing."""
    with _let_go_on_failure(), transaction.atomic():  # a failed commit drops the lab too
        cluster = _locked(cluster_name)
        if cluster.mode != models.Cluster.Mode.LAB:
            # A kwok or observe cluster's engine runs elsewhere: its mirrored objects are read, nothing runs here,
            # and only what `change` wrote is stored (the engine's own state is its to write).
            mirror = load(cluster, components="none")
            result = change(mirror)
            saves.persist(cluster, mirror.store)
            return result
        running = warm.engine(cluster)
        recorder = costs.Recorder()
        running.lab.observers.append(recorder)
        result = change(running.lab)
        saves.save(cluster, running.lab, lease, recorder.timeline)
        warm.keep_warm(cluster, running.lab, running.config_key)
        return result


@contextmanager
def _let_go_on_failure() -> Iterator[None]:
    """A run that raises drops its lab (it may hold half a change the database never saw)."""
    try:
        yield
    except BaseException:
        warm.let_go()
        raise


def run_detached(cluster_name: str, change: Callable[[Lab], None], *, lease: leases.Lease | None = None) -> bool:
    """Run `change` on the cluster's lab without holding its row lock, then lock the row only to store what it did:
    a write meanwhile waits for that save alone, never for the engine. False if nothing could be stored.

    Writes committed meanwhile (from their rows, `writing`) come first: this run's resourceVersions are moved past
    theirs, and where one changed an object this run also changed, theirs stands and this run's change of it is
    dropped (the controllers are level-triggered: the next run sees the object as it now is). That is kube-apiserver's
    answer to a controller's update from a stale cache (409 Conflict); for a delete racing an update it is stricter
    than kube-apiserver, whose delete without preconditions would win. If the lab itself ran elsewhere meanwhile (a
    `karp advance`, a reset: a new engine token), or its configuration changed (a NodePool edited, disruption
    paused: what the run decided from may no longer be allowed), this run is dropped whole and the next one loads
    the lab again."""
    cluster = models.Cluster.objects.defer("lab_state").get(name=cluster_name)
    if cluster.mode != models.Cluster.Mode.LAB:
        run(cluster_name, change, lease=lease)
        return True
    token = cluster.engine_token
    with _let_go_on_failure():
        running = warm.engine(cluster)
        lab = running.lab
        recorder = costs.Recorder()
        lab.observers.append(recorder)
        change(lab)
        known = saves.summaries(lab.store)  # before the lock: a write waits for the save alone
        with transaction.atomic():
            current = _locked(cluster_name)
            if (
                current.mode != models.Cluster.Mode.LAB
                or current.engine_token != token
                or configuration.config_key(current) != running.config_key
                or not warm.rebase(current, lab, running.seen)
            ):
                logger.info("lab run dropped: the cluster changed meanwhile", extra={"cluster": cluster_name})
                warm.let_go()
                return False
            saves.save(current, lab, lease, recorder.timeline, known)
            warm.keep_warm(current, lab, running.config_key)
            return True


@dataclass
class RowRun:
    """What a change needs that reads and writes a few objects and runs no controller: the store and the time."""

    store: RowStore
    now: float


def run_rows(cluster_name: str, change: Callable[[RowRun], T]) -> T:
    """Lock the cluster, let `change` read and write the few objects it names (from their rows), and store what it
    wrote: a person's decision on a command, in any cluster's mode, without loading the cluster."""
    with transaction.atomic():
        cluster = _locked(cluster_name)
        rows = RowStore(cluster)
        result = change(RowRun(rows, cluster.clock.timestamp()))
        saves.persist(cluster, rows)
        return result


def _locked(cluster_name: str) -> models.Cluster:
    # The lab state is read only when the lab is loaded cold: decoding it on every warm run would cost as much as
    # the run itself at 20,000 pods.
    return models.Cluster.objects.select_for_update().defer("lab_state").get(name=cluster_name)


def engine_alive(cluster: models.Cluster) -> bool:
    """Whether a worker is ticking this cluster: it ticked within the last few tick periods, or holds the lease now
    (a tick longer than those periods must not make a write run the whole lab itself, loading it a second time)."""
    if leases.taken(cluster):
        return True
    if cluster.ticked_at is None:
        return False
    since = (timezone.now() - cluster.ticked_at).total_seconds()
    return since < ENGINE_ALIVE_TICKS * settings.KARPUI_TICK_SECONDS


@contextmanager
def writing(cluster_name: str) -> Iterator[ClusterAPI]:
    """The cluster's object API for one all-or-nothing write from the CLI, the web or the Kubernetes API: what is
    written inside the block is committed together (or not at all, if the block raises).

    While a worker ticks the cluster (or for a kwok or observe cluster, whose engine runs elsewhere), the write is
    stored at once from the few rows it reads (an API server's write), and the engine reacts at its next tick,
    having caught up from the change log: the write never loads the cluster, whatever its size. With no engine running (the CLI alone, the tests), the cluster's own
    components react here, at the current time, as a real cluster's would."""
    running: warm.Engine | None = None
    try:
        with transaction.atomic():
            cluster = _locked(cluster_name)
            if cluster.mode != models.Cluster.Mode.LAB or engine_alive(cluster):
                rows = RowStore(cluster)
                yield rows
                saves.persist(cluster, rows)
                if cluster.mode == models.Cluster.Mode.LAB and (rows.changed or rows.removed):
                    transaction.on_commit(lambda: nudge(cluster.pk))
                return
            running = warm.engine(cluster)
            yield running.lab.store
            running.lab.settle()
            saves.save(cluster, running.lab)
            warm.keep_warm(cluster, running.lab, running.config_key)
    except BaseException:
        if running is not None:  # a failed write (or commit) drops the lab it ran
            warm.let_go()
        raise


# A write asks for at most one tick this often: a burst of them (a kubectl apply of a folder) costs one.
NUDGE_SECONDS = 1


def nudge(cluster_id: int) -> None:
    """Have the worker tick a lab cluster now: a write was stored while its engine ran elsewhere, and a real
    cluster's controllers react to one within milliseconds (their watches), not at the next periodic tick; so a
    scale-up's pods exist, Pending, a moment after `kubectl scale` returns, as seed 000's first sample shows them."""
    from django.core.cache import cache

    from karpui.celery import app

    if not settings.KARPUI_TICK_ON_WRITE or not cache.add(f"karpui:nudged:{cluster_id}", 1, NUDGE_SECONDS):
        return
    try:
        app.send_task("karpui.tasks.cluster_tick", args=[cluster_id], expires=settings.KARPUI_TICK_SECONDS)
    except Exception:  # the periodic tick reacts instead, within a tick period
        logger.warning("could not ask for a tick after a write", exc_info=True, extra={"cluster_id": cluster_id})


def advance(cluster_name: str, seconds: float) -> Lab:
    def step(lab: Lab) -> Lab:
        lab.advance(seconds)
        return lab

    return run(cluster_name, step)


# Wall seconds of engine steps one tick may run (it stops between two steps, the lab staying at the moment it was
# settling, and the next tick goes on from there): well inside the 30 s lease, and the lab keeps up with wall time.
# The steps run before the row lock is taken: a write waits only for the save.
TICK_BUDGET_SECONDS = 1.0
# Objects one tick may change before it stops, likewise between two steps: the save holds the row lock (about
# 0.4 s for this many on SQLite), and the budget above does not see it coming, so a large scale-up is written back
# over several ticks and a write waits well under two seconds for any of them.
TICK_MAX_CHANGES = 2500


def tick(cluster: models.Cluster, *, now: datetime, budget: float = TICK_BUDGET_SECONDS) -> bool:
    """Move a lab cluster's clock on with wall time, reacting to every write on the way, if no other worker holds
    the cluster; False if one does.

    The clock moves by the wall time since the last tick, or up to wall time when it is further behind than that
    (it catches up after a slow tick or a restart). A lab that `karp advance` put ahead of wall time so keeps
    running at wall time's rate, that far ahead, instead of standing still until wall time caught up with it.
    """
    with leases.held(cluster.id) as lease:
        if lease is None:
            return False
        stop_at = time.monotonic() + budget
        # Read under the lease: another worker may have ticked since `cluster` was loaded.
        last = models.Cluster.objects.filter(id=cluster.id).values_list("ticked_at", flat=True).first()
        elapsed = max((now - last).total_seconds(), 0.0) if last is not None else 0.0

        def step(lab: Lab) -> None:
            seconds = max(now.timestamp() - lab.now, elapsed)

            def out_of_time() -> bool:
                return time.monotonic() > stop_at or len(lab.store.changed) + len(lab.store.removed) >= TICK_MAX_CHANGES

            lab.advance(seconds, out_of_time=out_of_time, writes_at_end=True)

        with leases.renewing(lease):
            stored = run_detached(cluster.name, step, lease=lease)
        if stored:  # else the next tick makes up the time this one could not store
            models.Cluster.objects.filter(id=cluster.id).update(ticked_at=now)
        return True


def reset(cluster_name: str) -> None:
    with transaction.atomic():
        cluster = models.Cluster.objects.select_for_update().get(name=cluster_name)
        models.KubeObject.objects.filter(cluster=cluster).exclude(kind="Namespace").delete()
        models.LogEntry.objects.filter(cluster=cluster).delete()
        models.NodePool.objects.filter(cluster=cluster).update(status={})
        cluster.lab_state = {}
        cluster.engine_token = ""  # no process may go on from the lab it kept in memory
        cluster.save(update_fields=["lab_state", "engine_token"])
        changelog.compact(cluster.pk)  # objects went without DELETED events: watchers must list again


def objects(cluster: models.Cluster, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind=kind)
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    return [row.body for row in rows.order_by("namespace", "name")]
