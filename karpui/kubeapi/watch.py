"""Watch: a chunked stream of `{"type": ..., "object": ...}` lines, replayed from the change log after the client's
resourceVersion and then polled for new changes until `timeoutSeconds`.

As the API server does: without a resourceVersion (or with "0") the stream starts with an ADDED event for every
object there is; a version older than the log keeps gets an ERROR event with a 410 Status (the client lists
again); `allowWatchBookmarks=true` adds BOOKMARK events carrying the version seen so far, including one just before
the stream ends, so a client resumes without replaying; with a label or field selector, an object that starts or
stops matching is ADDED or DELETED for the watcher. Tables (`kubectl get -w`) come one row per event, the column
definitions with the first.

The stream reads the database every POLL_SECONDS (nothing pushes to it); whoever writes takes its version under the
cluster row's lock, so versions follow commit order and "every change up to the version read before a query" is
exactly what that query returns.

Each open watch holds one of the web server's threads for as long as it lasts (up to half an hour), so a process
serves at most max_watches() at once, fewer than its threads: the rest stay free for every other request (sixteen
`kubectl get pods -w` took all of gunicorn's sixteen threads, and the next request, the dashboard's too, waited
with no end). A watch past the limit is answered 429 TooManyRequests with Retry-After, which client-go and kubectl
retry, as kube-apiserver's max-in-flight limit answers.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import OperationalError
from django.http import HttpRequest

from karpui import models
from karpui.clusters import storage
from karpui.kinds.resources import Resource
from karpui.kinds.versions import at_version
from karpui.kubeapi import tables
from karpui.kubeapi.errors import Status
from karpui.kubeapi.selectors import FieldSelector
from provisioner.cluster.objects import Obj, key_of
from provisioner.selectors import LabelSelector

POLL_SECONDS = 0.2
BOOKMARK_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 1800.0  # kube-apiserver's --min-request-timeout
BATCH = 500
MAX_POLL_FAILURES = 25  # in a row: five seconds of polls
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
RETRY_AFTER_SECONDS = 1


def max_watches() -> int | None:
    """How many watches this process serves at once: KARPUI_MAX_WATCHES, else the web server's threads
    (KARPUI_WEB_THREADS, which gunicorn_conf.py sets to the worker's real count) less a quarter of them, at least
    two kept for other requests. None, no limit, under a server that gives each connection a thread of its own
    (runserver, the tests' live server), which says neither."""
    given = os.environ.get("KARPUI_MAX_WATCHES", "").strip()
    if given:
        return max(int(given), 0)
    threads = os.environ.get("KARPUI_WEB_THREADS", "").strip()
    if not threads:
        return None
    return max(int(threads) - max(int(threads) // 4, 2), 1)


class WatchSlots:
    """The watches open in this process, counted against max_watches()."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = 0

    def take(self) -> Callable[[], None]:
        """A slot for one more watch, or a 429 Status; call what is returned (any number of times) to give the
        slot back."""
        limit = max_watches()
        with self._lock:
            if limit is not None and self.open >= limit:
                raise Status(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                    retry_after=RETRY_AFTER_SECONDS,
                )
            self.open += 1
        given_back = threading.Event()

        def give_back() -> None:
            with self._lock:
                if not given_back.is_set():
                    given_back.set()
                    self.open -= 1

        return give_back


SLOTS = WatchSlots()


class Stream:
    """What a watch's response iterates: its lines, holding its slot until the stream ends, the server closes it
    (the client went away) or, never iterated, it is collected."""

    def __init__(self, lines: Iterator[bytes], give_back: Callable[[], None]) -> None:
        self._lines = lines
        self._give_back = weakref.finalize(self, give_back)

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._lines
        finally:
            self._give_back()

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()
        self._give_back()


@dataclass
class WatchRequest:
    cluster: models.Cluster
    resource: Resource
    version: str
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    since: int | None  # None: start with the current state
    bookmarks: bool
    initial_events_end: bool  # sendInitialEvents=true: a bookmark marks the end of the initial ADDED events
    timeout: float
    table: bool
    include: str
    now: Callable[[], datetime]
    # Objects known to match the selectors (or, with none, known to exist): decides ADDED / MODIFIED / DELETED.
    visible: set[tuple[str, str, str]] = field(default_factory=set)
    headers_sent: bool = False


def _line(event_type: str, obj: Any) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n").encode()


def error_line(status: Status) -> bytes:
    return _line("ERROR", status.body())


class Watch:
    """One client's watch; iterate it for the stream's lines."""

    def __init__(self, request: WatchRequest, client_gone: Callable[[], bool]) -> None:
        self.request = request
        self.client_gone = client_gone
        self.selective = bool(request.labels.terms) or bool(
            request.fields.fields - {"metadata.name", "metadata.namespace"}
        )

    def _matches(self, body: Obj) -> bool:
        request = self.request
        if request.namespace is not None and request.resource.namespaced and key_of(body)[1] != request.namespace:
            return False
        return request.labels.matches(body["metadata"].get("labels") or {}) and request.fields.matches(body)

    def _event(self, event_type: str, body: Obj) -> bytes:
        request = self.request
        served = at_version(body, request.resource.group, request.version, namespaced=request.resource.namespaced)
        if not request.table:
            return _line(event_type, served)
        table = tables.table(
            request.resource,
            request.version,
            [served],
            request.now(),
            include=request.include,
            metadata={"resourceVersion": served["metadata"].get("resourceVersion", "")},
            headers=not request.headers_sent,
        )
        request.headers_sent = True
        return _line(event_type, table)

    def _bookmark(self, version: int, *, initial_events_end: bool = False) -> bytes:
        resource = self.request.resource
        metadata: dict[str, Any] = {"resourceVersion": str(version), "creationTimestamp": None}
        if initial_events_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        api_version = f"{resource.group}/{self.request.version}" if resource.group else self.request.version
        return _line("BOOKMARK", {"kind": resource.kind, "apiVersion": api_version, "metadata": metadata})

    def __iter__(self) -> Iterator[bytes]:
        # The status line and headers go out now, as kube-apiserver flushes them when a watch starts, not with the
        # first event (which may be the bookmark 10 s away, or the timeout): a WSGI server sends them when the
        # response yields its first chunk, and gunicorn and wsgiref do for an empty one (writing no body, and no
        # end of the chunked stream). client-go waits for them before it counts a watch as started; `kubectl wait`
        # waited 10 s for each object.
        yield b""
        request = self.request
        deadline = time.monotonic() + request.timeout
        if request.since is None:
            items, last = storage.list_objects(
                request.cluster, request.resource, request.namespace, request.fields.equal("spec.nodeName")
            )
            for body in items:
                if self._matches(body):
                    request.visible.add(key_of(body))
                    yield self._event("ADDED", body)
            if request.initial_events_end:
                yield self._bookmark(last, initial_events_end=True)
        else:
            last = request.since
            compacted = storage.compacted_version(request.cluster)
            if last < compacted:
                yield error_line(Status(410, "Expired", f"too old resource version: {last} ({compacted})"))
                return
        last_bookmark = time.monotonic()
        quiet_since = time.monotonic()
        failures = 0
        while True:  # at least once: a short timeout still replays what is already there
            try:
                head = storage.current_version(request.cluster)
                entries = list(self._entries_after(last))
                failures = 0
            except OperationalError:
                # A poll that meets a locked database (SQLite while a lab run writes) tries again at the next one.
                failures += 1
                if failures > MAX_POLL_FAILURES:
                    raise
                head, entries = last, []
            for entry in entries:
                line = self._change(entry)
                if line is not None:
                    yield line
                last = entry.resource_version
            if len(entries) < BATCH:
                # Every change up to `head` was committed before we read it, so the query above returned them.
                last = max(last, head)
            if request.bookmarks and time.monotonic() - last_bookmark >= BOOKMARK_SECONDS:
                yield self._bookmark(last)
                last_bookmark = time.monotonic()
            if time.monotonic() >= deadline:
                break
            if entries:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since >= 1.0:
                if self.client_gone():
                    return
                quiet_since = time.monotonic()
            time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))
        if request.bookmarks:
            yield self._bookmark(last)

    def _entries_after(self, last: int) -> Iterator[models.ChangeLogEntry]:
        request = self.request
        entries = models.ChangeLogEntry.objects.filter(
            cluster=request.cluster, kind=request.resource.kind, resource_version__gt=last
        )
        if request.resource.namespaced and request.namespace is not None:
            entries = entries.filter(namespace=request.namespace)
        name = request.fields.equal("metadata.name")
        if name is not None:
            entries = entries.filter(name=name)
        return iter(entries.order_by("resource_version")[:BATCH])

    def _change(self, entry: models.ChangeLogEntry) -> bytes | None:
        """The event this change is for this watcher, if any (see the Kubernetes watch cache's rules)."""
        body = entry.body
        key = key_of(body)
        passes_now = entry.type != "DELETED" and self._matches(body)
        if key in self.request.visible:
            passed_before = True
        elif entry.type == "ADDED":
            passed_before = False
        elif entry.type == "DELETED":
            passed_before = self._matches(body)  # a deletion's body is the object as it last was
        elif not self.selective:
            passed_before = True  # it existed before this change
        else:
            passed_before = self._passed_before(entry)
        if passes_now:
            self.request.visible.add(key)
        else:
            self.request.visible.discard(key)
        if passes_now:
            return self._event("MODIFIED" if passed_before else "ADDED", body)
        if passed_before:
            return self._event("DELETED", body)
        return None

    def _passed_before(self, entry: models.ChangeLogEntry) -> bool:
        """Whether the object matched before this change, from its previous change in the log; an object unchanged
        since before the log's window is taken to have matched as it matches now."""
        previous = (
            models.ChangeLogEntry.objects.filter(
                cluster_id=entry.cluster_id,
                kind=entry.kind,
                namespace=entry.namespace,
                name=entry.name,
                resource_version__lt=entry.resource_version,
            )
            .order_by("-resource_version")
            .first()
        )
        if previous is None:
            return self._matches(entry.body)
        return previous.type != "DELETED" and self._matches(previous.body)


def _find_socket(stream: Any) -> socket.socket | None:
    """The client's socket behind a WSGI input stream, where the server exposes it: gunicorn names it; Django's
    development server wraps it in a LimitedStream over a buffered SocketIO."""
    for _ in range(5):
        if isinstance(stream, socket.socket):
            return stream
        inner = next(
            (getattr(stream, a) for a in ("_sock", "raw", "stream", "_stream") if getattr(stream, a, None) is not None),
            None,
        )
        if inner is None:
            return None
        stream = inner
    return None


def client_gone_check(request: HttpRequest) -> Callable[[], bool]:
    """A cheap test of whether the watching client hung up, so a quiet watch ends then rather than at its timeout
    (the stream is only written to when something happens). Servers that hide the socket get `False` always."""
    sock = request.META.get("gunicorn.socket") or _find_socket(request.META.get("wsgi.input"))

    def gone() -> bool:
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    return gone
