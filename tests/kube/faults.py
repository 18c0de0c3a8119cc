"""A fault-injecting HTTP proxy in front of the lab's Kubernetes API: what the kube adapter meets on a bad day.

Everything is forwarded unchanged (responses streamed, so watches stay live) unless a fault says otherwise:

* `latency` seconds before each request is forwarded;
* `fail(status, reason, method=, path=, times=)`: answer the next matching requests with that error Status instead
  of forwarding them (500, 409 on an update, 429 on an eviction, ...); with `forward=True` the request is forwarded
  and done, and only its answer is replaced by the error (a write whose answer was lost);
* `expire_watches(times)`: the next watches get an ERROR event with a 410 Status, as a server that no longer keeps
  the version asked for answers;
* `cut_watches()`: close every open watch mid-stream, on both sides (the connection just ends, as when a load balancer
  drops it), so the watch is recorded and done at once even where the API server had nothing more to send;
* `down`: refuse service by closing each connection without an answer (an API server that is not there);
* `conflict_first_writes()`: the first write to each path (a create to a collection, an update, patch or delete of
  an object) is answered 409 Conflict without being forwarded; the next one to that path goes through.

It records every request it saw (`seen`), so a test can count what a client wrote; with `record_bodies` on, every
exchange too, request and answer bodies (a watch's events as they came), for tests/kube/apidiff.py. In front of a real
kube-apiserver it speaks TLS upstream (`ssl_context`: the cluster's CA and the admin's client certificate; `token_context`:
the CA alone, for a client that brings a bearer token of its own), while its clients talk plain HTTP to it on loopback.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

WRITES = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Failure:
    status: int
    reason: str
    method: str
    path: str  # a regular expression searched in the path (with its query)
    times: int
    forward: bool = False
    message: str = "injected by the fault proxy"


@dataclass
class Exchange:
    """One request and its answer, as a client saw them."""

    method: str
    path: str
    request: bytes
    status: int
    content_type: str
    answer: bytes


@dataclass
class Faults:
    latency: float = 0.0
    down: bool = False
    failures: list[Failure] = field(default_factory=list)
    expire: int = 0
    first_writes: bool = False
    written: set[tuple[str, str]] = field(default_factory=set)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a cut watch, a stopped engine) is what this proxy is for, not a bug
        to print a traceback about."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FaultProxy:
    def __init__(
        self, upstream: str, ssl_context: ssl.SSLContext | None = None, token_context: ssl.SSLContext | None = None
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.ssl_context = ssl_context
        # kube-apiserver authenticates a client certificate before a bearer token: a client that sends a token is
        # forwarded without the certificate, so it is who its token says.
        self.token_context = token_context or ssl_context
        self.headers: dict[str, str] = {}  # added to every request forwarded (a token for a client that sends none)
        self.record_bodies = False
        self.exchanges: list[Exchange] = []
        self.faults = Faults()
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, int]] = []  # method, path, status answered
        self._watches: set[socket.socket] = set()
        self._upstreams: dict[socket.socket, socket.socket] = {}  # a watch's client connection -> its upstream one
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.cut_watches()
        self.server.shutdown()
        self.server.server_close()

    # Faults -------------------------------------------------------------------------------------------------

    def fail(
        self, status: int, reason: str, *, method: str = "", path: str = "", times: int = 1, forward: bool = False
    ) -> None:
        with self.lock:
            self.faults.failures.append(Failure(status, reason, method, path, times, forward))

    def conflict_first_writes(self) -> None:
        with self.lock:
            self.faults.first_writes = True

    def _first_write(self, method: str, path: str) -> bool:
        if method not in WRITES:
            return False
        key = (method, path.split("?", 1)[0])
        with self.lock:
            if not self.faults.first_writes or key in self.faults.written:
                return False
            self.faults.written.add(key)
            return True

    def expire_watches(self, times: int = 1) -> None:
        with self.lock:
            self.faults.expire += times

    def cut_watches(self) -> int:
        with self.lock:
            watches, self._watches = list(self._watches), set()
            upstreams, self._upstreams = list(self._upstreams.values()), {}
        # The upstream side too: until the API server sends another event, the thread forwarding a watch waits on it
        # and never learns its client has gone.
        for sock in [*watches, *upstreams]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return len(watches)

    def open_watches(self) -> int:
        with self.lock:
            return len(self._watches)

    def writes(self, path: str = "") -> list[tuple[str, str, int]]:
        """Write requests seen (optionally only those whose path matches), with what they were answered."""
        with self.lock:
            return [s for s in self.seen if s[0] in WRITES and re.search(path, s[1])]

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()

    def _take_failure(self, method: str, path: str) -> Failure | None:
        with self.lock:
            for failure in self.faults.failures:
                if failure.times > 0 and method.startswith(failure.method) and re.search(failure.path, path):
                    failure.times -= 1
                    return failure
        return None

    def _take_expiry(self) -> bool:
        with self.lock:
            if self.faults.expire > 0:
                self.faults.expire -= 1
                return True
        return False

    # Serving ------------------------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def _any(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any  # noqa: N815 - http.server's names

        return Handler

    def _record(self, method: str, path: str, status: int) -> None:
        with self.lock:
            self.seen.append((method, path, status))

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        method, path = handler.command, handler.path
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if self.faults.latency:
            time.sleep(self.faults.latency)
        if self.faults.down:
            self._hang_up(handler, method, path)
            return
        watching = re.search(r"[?&]watch=(true|1)", path) is not None
        if self._first_write(method, path):
            message = "Operation cannot be fulfilled: the object has been modified (injected by the fault proxy)"
            self._answer(handler, 409, _status(409, "Conflict", message))
            self._record(method, path, 409)
            return
        failure = self._take_failure(method, path)
        if failure is not None:
            if failure.forward:
                self._forward(handler, method, path, body)
            self._answer(handler, failure.status, _status(failure.status, failure.reason, failure.message))
            self._record(method, path, failure.status)
            return
        if watching and self._take_expiry():
            event = {"type": "ERROR", "object": _status(410, "Expired", "too old resource version")}
            self._answer(handler, 200, event, line=True)
            self._record(method, path, 200)
            return
        if watching:  # from now on: a cut may come before the server has answered anything
            with self.lock:
                self._watches.add(handler.connection)
        upstream = self._connect(3600, handler)
        try:
            upstream.connect()  # here rather than in request(), so that a cut can reach the upstream socket
            if watching and upstream.sock is not None:
                with self.lock:
                    if handler.connection in self._watches:
                        self._upstreams[handler.connection] = upstream.sock
            response = self._send(upstream, handler, method, path, body)
        except OSError:
            self._hang_up(handler, method, path)  # the API server is not there: nor is an answer
            return
        self._record(method, path, response.status)
        kept: list[bytes] | None = [] if self.record_bodies else None
        handler.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                handler.send_header(key, value)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        try:
            while True:
                chunk = response.read1(65536) if watching else response.read()
                if not chunk:
                    break
                handler.wfile.write(chunk)
                handler.wfile.flush()
                if kept is not None:
                    kept.append(chunk)
                if not watching:
                    break
        except (OSError, http.client.HTTPException):
            pass  # cut: by cut_watches, the client went away, or the API server died mid-answer (IncompleteRead)
        finally:
            with self.lock:
                self._watches.discard(handler.connection)
                self._upstreams.pop(handler.connection, None)
                if kept is not None:
                    content_type = response.getheader("Content-Type") or ""
                    self.exchanges.append(Exchange(method, path, body, response.status, content_type, b"".join(kept)))
            upstream.close()

    def _connect(self, timeout: float, handler: BaseHTTPRequestHandler) -> http.client.HTTPConnection:
        if self.upstream.scheme == "https":
            token = handler.headers.get("Authorization", "").startswith("Bearer ")
            context = self.token_context if token else self.ssl_context
            return http.client.HTTPSConnection(
                self.upstream.hostname, self.upstream.port, timeout=timeout, context=context
            )
        return http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=timeout)

    def _send(
        self, upstream: http.client.HTTPConnection, handler: BaseHTTPRequestHandler, method: str, path: str, body: bytes
    ) -> http.client.HTTPResponse:
        """Send the client's request upstream as it came; the upstream's response."""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
        for key, value in self.headers.items():
            headers.setdefault(key, value)
        upstream.request(method, self.upstream.path + path, body=body or None, headers=headers)
        return upstream.getresponse()

    def _forward(self, handler: BaseHTTPRequestHandler, method: str, path: str, body: bytes) -> None:
        """Send the request upstream and wait until it is done; its answer is dropped."""
        upstream = self._connect(60, handler)
        try:
            self._send(upstream, handler, method, path, body).read()
        finally:
            upstream.close()

    def _hang_up(self, handler: BaseHTTPRequestHandler, method: str, path: str) -> None:
        """Close the client's connection without an answer."""
        self._record(method, path, 0)
        handler.close_connection = True
        with self.lock:
            self._watches.discard(handler.connection)
            self._upstreams.pop(handler.connection, None)
        with contextlib.suppress(OSError):
            handler.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, handler: BaseHTTPRequestHandler, status: int, body: Any, *, line: bool = False) -> None:
        data = (json.dumps(body) + ("\n" if line else "")).encode()
        handler.send_response(status)
        if status == 429:
            handler.send_header("Retry-After", "1")  # as kube-apiserver's priority and fairness answers
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        handler.wfile.write(data)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
