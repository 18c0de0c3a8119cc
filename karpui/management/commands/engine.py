"""`manage.py engine [--cluster NAME ...]`: run the engines of the kwok and observe clusters, one per cluster.

Each engine keeps its cluster's informer caches warm and runs karpui's controllers every tick while it holds the
cluster's Lease (`karpui-engine` in --lease-namespace). Run the command in as many processes or pods as you like:
for each cluster exactly one leads and the others wait, ready to take over within the lease's 15 s. The cluster
rows are read again every --rescan seconds, so a cluster made in the admin gets its engine without a restart.
SIGTERM or Ctrl-C stops every engine and releases its lease, so a successor takes over at once. Each time round
its loop it touches KARPUI_HEARTBEAT_FILE (when set), which deploy/'s liveness probe checks.

Its output says who leads each cluster whenever that changes (`cluster kwok: this engine (host_1a2b) leads`,
`cluster kwok: host_9f8e leads; this engine (host_1a2b) waits`), and prints the controllers' log lines, one JSON
object per line as Karpenter's (`{"cluster": "kwok", "time": ..., "level": "INFO", "logger": "controller.provisioner",
"message": "created nodeclaim", ...}`), so `kubectl logs deploy/karpui-engine` reads like Karpenter's own logs.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import reset_queries

from karpui import heap, heartbeat, models
from karpui.clusters.engines import Engine

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--cluster", action="append", default=[], help="only these clusters (default: all)")
        parser.add_argument("--lease-namespace", default="default", help="where each cluster's Lease is kept")
        parser.add_argument("--rescan", type=float, default=30.0, help="seconds between reading the cluster rows")
        parser.add_argument("--once", action="store_true", help="one tick of each engine, then stop (for scripts)")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        engines: dict[int, Engine] = {}
        said: dict[int, str] = {}  # cluster -> who leads, as last printed
        scanned = 0.0
        period = settings.KARPUI_TICK_SECONDS
        try:
            while not stop.is_set():
                if time.monotonic() - scanned >= options["rescan"] or not engines:
                    self._scan(engines, options)
                    scanned = time.monotonic()
                # As Django does at each request: with DEBUG on, every query since would stay in the connection's
                # log (up to 9,000 of them, the mirror's writes of thousands of objects among them) for good.
                reset_queries()
                for engine in list(engines.values()):
                    # Said before the step as well as after: a step can wait long (on SQLite, behind a write lock
                    # that a frozen former leader still holds), and who holds the Lease is known before it starts.
                    self._say_who_leads(engine, said)
                    try:
                        engine.step(time.time())
                    except Exception:
                        logger.exception("engine step failed", extra={"cluster_id": engine.cluster_id})
                    self._say_who_leads(engine, said)
                if settings.KARPUI_HEARTBEAT_FILE:  # a waiting engine is alive too: it is ready to take over
                    heartbeat.beat(settings.KARPUI_HEARTBEAT_FILE)
                if options["once"]:
                    break
                heap.trim()  # what the step freed goes back to the system, not held for the next one
                stop.wait(period)
        finally:
            for engine in engines.values():
                engine.stop(release=True)

    def _say_who_leads(self, engine: Engine, said: dict[int, str]) -> None:
        me = engine.elector.config.identity
        holder = me if engine.leading else engine.elector.holder
        if said.get(engine.cluster_id) == holder:
            return
        said[engine.cluster_id] = holder
        if holder == me:
            line = f"cluster {engine.cluster_name}: this engine ({me}) leads"
        elif holder:
            line = f"cluster {engine.cluster_name}: {holder} leads; this engine ({me}) waits"
        else:
            line = f"cluster {engine.cluster_name}: nobody leads yet; this engine ({me}) is a candidate"
        self.stdout.write(line)
        self.stdout.flush()

    def _echo(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _scan(self, engines: dict[int, Engine], options: dict[str, Any]) -> None:
        rows = models.Cluster.objects.filter(mode__in=(models.Cluster.Mode.KWOK, models.Cluster.Mode.OBSERVE))
        if options["cluster"]:
            rows = rows.filter(name__in=options["cluster"])
            missing = set(options["cluster"]) - set(rows.values_list("name", flat=True))
            if missing:
                raise CommandError(f"no kwok or observe cluster named {', '.join(sorted(missing))}")
        for row in rows:
            if row.pk in engines:
                continue
            try:
                engines[row.pk] = Engine.open(row, lease_namespace=options["lease_namespace"])
                engines[row.pk].echo = self._echo
            except Exception as error:  # one unreachable cluster never keeps the others from running
                self.stderr.write(f"cluster {row.name}: cannot start its engine: {type(error).__name__}: {error}")
                continue
            self.stdout.write(f"engine for cluster {row.name} ({row.mode}) started")
