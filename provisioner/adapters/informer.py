"""An informer for one kind, as client-go's reflector: list, then watch from the list's resourceVersion with
bookmarks, and hand every change to the engine as a delta; after a cut watch, watch again from the last version
seen; after 410 Gone (that version is no longer kept), list again; after errors, back off with jitter; and list
again every `resync_seconds` anyway, so a change lost anywhere is corrected within that period.

It runs in a daemon thread and only ever hands deltas to `sink`; it never touches the engine's cache. A refused or
failed list or watch is logged (the first of a run of failures, every tenth, and any whose reason changed), a 429's Retry-After is waited out,
and `failing_for()` says how long it has gone without a working list or watch, for the engine's readiness.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from provisioner.adapters.backoff import Backoff
from provisioner.adapters.cache import Event, Replace, compact
from provisioner.adapters.errors import Expired
from provisioner.adapters.kinds import Resource
from provisioner.adapters.transport import Transport
from provisioner.cluster.objects import APIError, Obj, TooManyRequests

logger = logging.getLogger(__name__)

PAGE_SIZE = 500
# The server ends each watch after a random 5 to 10 minutes (client-go's reflector asks for this spread, so the
# watches of many clients do not all end at once); the client gives up on a silent connection a while after that.
WATCH_SECONDS = (300, 600)
READ_GRACE_SECONDS = 60.0
RESYNC_SECONDS = 600.0
QUIET_RESET_SECONDS = 120.0  # a watch that ran this long without error resets the back-off

Sink = Callable[[Replace | Event], None]


class Informer:
    def __init__(
        self,
        resource: Resource,
        transport: Transport,
        sink: Sink,
        *,
        resync_seconds: float = RESYNC_SECONDS,
        watch_seconds: tuple[int, int] = WATCH_SECONDS,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resource = resource
        self.transport = transport
        self.sink = sink
        self.resync_seconds = resync_seconds
        self.watch_seconds = watch_seconds
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not secrets
        self.clock = clock
        self.backoff = Backoff(rng=self.rng)
        self.version: str | None = None  # the last resourceVersion seen; None: list next
        self.listed = threading.Event()  # the first list has been handed over
        self.stopped = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None
        # What happened, for metrics and tests.
        self.lists = 0
        self.watches = 0
        self.expired = 0
        self.errors = 0
        self.last_error = ""
        self.failures = 0  # in a row, since the last list or watch that worked
        self.failing_since: float | None = None

    @property
    def kind(self) -> str:
        return self.resource.kind.kind

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        watch = self._watch
        if watch is not None:
            watch.close()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        listed_at = 0.0
        while not self.stopped.is_set():
            try:
                if self.version is None or self.clock() - listed_at >= self.resync_seconds:
                    self.version = self._list()
                    listed_at = self.clock()
                started = self.clock()
                events = self._watch_once(self.resync_seconds - (started - listed_at))
                lasted = self.clock() - started
                if lasted >= QUIET_RESET_SECONDS:
                    self.backoff.reset()
                elif events == 0 and lasted < 1.0 and not self.stopped.is_set():
                    # Ended at once with nothing in it: a server (or proxy) that cuts every watch; do not spin.
                    self._failed(APIError("watch ended at once"))
            except Expired:
                self.expired += 1
                self.version = None  # list again at once: nothing is wrong with the server
            except APIError as error:
                self._failed(error)
            except Exception as error:  # a bug must not end the informer: log it, back off, try again
                logger.exception("informer %s failed", self.kind)
                self._failed(error)

    def failing_for(self) -> float:
        """Seconds since the first of the failures in a row (0 while its list and watch work)."""
        since = self.failing_since
        return 0.0 if since is None else max(self.clock() - since, 0.0)

    def _working(self) -> None:
        if self.failures:
            logger.info("informer %s: working again after %d failure(s)", self.kind, self.failures)
        self.failures, self.failing_since = 0, None

    def _failed(self, error: Exception) -> None:
        self.errors += 1
        self.failures += 1
        reason_changed = f"{type(error).__name__}: {error}" != self.last_error
        self.last_error = f"{type(error).__name__}: {error}"
        if self.failing_since is None:
            self.failing_since = self.clock()
        wait = self.backoff.next()
        retry_after = float(getattr(error, "retry_after", 0) or 0)
        if isinstance(error, TooManyRequests) and retry_after > wait:
            wait = retry_after  # the server said when it can take the request: sooner would only be refused
        # The first failure, every tenth, and any whose reason differs from the one before: a cut watch followed
        # by 429s says why it keeps failing at once rather than at the tenth.
        if self.failures == 1 or self.failures % 10 == 0 or reason_changed:
            logger.warning(
                "informer %s: list/watch failed (%d in a row, for %.0f s): %s; retrying in %.1f s",
                self.kind, self.failures, self.failing_for(), self.last_error, wait,
            )  # fmt: skip
        self.stopped.wait(wait)

    def _list(self) -> str:
        """Every object of the kind, a page at a time; handed over as one Replace. A continue token that expired
        (410) starts the list again from the first page."""
        items: list[Obj] = []
        managed: list[bytes | None] = []
        token = ""
        while True:
            query = [("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
            body = self.transport.request("GET", self.resource.collection(), query=query)
            # Each page made compact as the cache keeps it, and the decoded page let go before the next is asked
            # for: a relist of thousands of pods never holds them all as decoded beside the cache's own.
            for item in body.get("items") or []:
                kept, item_managed = compact(self._typed(item))
                items.append(kept)
                managed.append(item_managed)
            token = (body.get("metadata") or {}).get("continue") or ""
            version = str((body.get("metadata") or {}).get("resourceVersion") or "")
            body = None
            if not token:
                break
        self.lists += 1
        self.sink(Replace(self.kind, tuple(items), version, tuple(managed)))
        self.listed.set()
        self.backoff.reset()
        self._working()
        return version

    def _typed(self, obj: Obj) -> Obj:
        # List items come without kind and apiVersion; the engine's objects always carry both. A kind with a status
        # has one, as a typed client reads it, even when the server left an empty one out (a NodeClaim just made).
        obj["kind"] = self.kind
        obj["apiVersion"] = self.resource.api_version
        if self.resource.kind.status:
            obj.setdefault("status", {})
        return obj

    def _watch_once(self, until_resync: float) -> int:
        """One watch request, until the server ends it, it is cut, or it is time to list again; how many events
        (bookmarks included) it brought."""
        timeout = max(1, min(self.rng.randint(*self.watch_seconds), int(until_resync) + 1))
        query = [
            ("watch", "true"),
            ("resourceVersion", self.version or ""),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        self.watches += 1
        self._watch = self.transport.watch(self.resource.collection(), query, timeout + READ_GRACE_SECONDS)
        self._working()  # the server took the watch
        events = 0
        try:
            for event in self._watch:
                events += 1
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:
                        raise Expired(str(obj.get("message") or "too old resource version"))
                    raise APIError(f"watch error {code}: {obj.get('message')}")
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if kind in ("ADDED", "MODIFIED"):
                    kept, managed = compact(self._typed(obj))
                    self.sink(Event(self.kind, kind, kept, compacted=True, managed=managed))
                elif kind == "DELETED":
                    self.sink(Event(self.kind, kind, self._typed(obj)))
                if version:
                    self.version = str(version)  # BOOKMARK events move it on without an object
                if self.stopped.is_set():
                    break
        finally:
            self._watch.close()
            self._watch = None
        return events
