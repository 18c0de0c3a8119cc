"""A fault-injecting HTTP proxy in front of the lab's Kubernetes API: what the kube adapter meets on a bad day.

Everything is forwarded unchanged (responses streamed, so watches stay live) unless a fault says otherwise:

* `latency` seconds before each request is forwarded;
* `fail(status, reason, method=, path=, times=)`: answer the next matching requests with that error Status instead
  of forwarding them (500, 409 on an update, 429 on an eviction, ...); with `forward=True` the request is forwarded
  and done, and only its answer is replaced by the error (a write whose answer was lost);
* `expire_watches(times)`: the next watches get an ERROR event with a 410 Status, as a server that no longer keeps
  the version asked for answers;
* `cut_watches()`: close every open watch mid-stream (the connection just ends, as when a load balancer drops it);
* `down`: refuse service by closing each connection without an answer (an API server that is not there).

It records every request it saw (`seen`), so a test can count what a client wrote.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
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
class Faults:
    latency: float = 0.0
    down: bool = False
    failures: list[Failure] = field(default_factory=list)
    expire: int = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a cut watch, a stopped engine) is what this proxy is for, not a bug
        to print a traceback about."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults = Faults()
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, int]] = []  # method, path, status answered
        self._watches: set[socket.socket] = set()
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

    def expire_watches(self, times: int = 1) -> None:
        with self.lock:
            self.faults.expire += times

    def cut_watches(self) -> int:
        with self.lock:
            watches, self._watches = list(self._watches), set()
        for sock in watches:
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
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=3600)
        try:
            response = self._send(upstream, handler, method, path, body)
        except OSError:
            self._hang_up(handler, method, path)  # the API server is not there: nor is an answer
            return
        self._record(method, path, response.status)
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
                if not watching:
                    break
        except OSError:
            pass  # cut: by cut_watches, or the client went away
        finally:
            with self.lock:
                self._watches.discard(handler.connection)
            upstream.close()

    def _send(
        self, upstream: http.client.HTTPConnection, handler: BaseHTTPRequestHandler, method: str, path: str, body: bytes
    ) -> http.client.HTTPResponse:
        """Send the client's request upstream as it came; the upstream's response."""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(method, self.upstream.path + path, body=body or None, headers=headers)
        return upstream.getresponse()

    def _forward(self, handler: BaseHTTPRequestHandler, method: str, path: str, body: bytes) -> None:
        """Send the request upstream and wait until it is done; its answer is dropped."""
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
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
        with contextlib.suppress(OSError):
            handler.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, handler: BaseHTTPRequestHandler, status: int, body: Any, *, line: bool = False) -> None:
        data = (json.dumps(body) + ("\n" if line else "")).encode()
        handler.send_response(status)
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
