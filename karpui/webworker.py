"""gunicorn's threaded worker, made to survive slow clients (slowloris): no thread waits for a client.

gunicorn's gthread worker gives each new connection a thread as soon as a byte arrives, and that thread then blocks
reading the rest of the headers, the body, or a TLS handshake for as long as the client takes: forty connections
sending a byte every few seconds took every thread, so the dashboard, the API and /healthz stopped answering. Here
the worker's own event loop does all of that without blocking (the TLS handshake, the request line and headers, and
a body of up to MAX_BODY_BYTES), under time limits (KARPUI_WEB_HEADER_TIMEOUT for the handshake and headers,
KARPUI_WEB_BODY_TIMEOUT for the body), and only a request that has arrived whole is handed to a thread. Connections
still arriving are bounded (KARPUI_WEB_SLOW_CONNECTIONS per worker): past that, the one that has been arriving the
longest is closed, so a flood of slow clients costs each other their places, never a real request's. A client that
stops reading its answer is cut off after KARPUI_WEB_SEND_TIMEOUT without progress (a kernel send timeout), so
writing to it cannot hold a thread either. Watches, which hold a thread for as long as they last, are bounded by
the app (karpui.kubeapi.watch.max_watches) below the thread count.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import selectors
import socket
import ssl
import struct
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn import sock as gsock
from gunicorn.workers.gthread import TConn, ThreadWorker


def _setting(name: str, default: float) -> float:
    return float(os.environ.get(name, "").strip() or default)


HEADER_TIMEOUT = _setting("KARPUI_WEB_HEADER_TIMEOUT", 10)
BODY_TIMEOUT = _setting("KARPUI_WEB_BODY_TIMEOUT", 30)
SEND_TIMEOUT = _setting("KARPUI_WEB_SEND_TIMEOUT", 30)
SLOW_CONNECTIONS = int(_setting("KARPUI_WEB_SLOW_CONNECTIONS", 1000))
MAX_HEADER_BYTES = 64 * 1024
# The largest body read ahead of the app: a catalog upload (KARPUI_CATALOG_MAX_BYTES, 4 MiB) in a multipart form.
MAX_BODY_BYTES = 16 * 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*([^\s]*)[ \t]*\r?$", re.I | re.M)
_CHUNKED = re.compile(rb"^transfer-encoding[ \t]*:.*chunked", re.I | re.M)
_EXPECT_CONTINUE = re.compile(rb"^expect[ \t]*:[ \t]*100-continue", re.I | re.M)


@dataclass(eq=False)
class _Arriving:
    """A connection whose next request is still arriving."""

    conn: TConn
    deadline: float
    since: float
    handshaking: bool = False
    idle: bool = False  # a kept-alive connection waiting for its next request (the keepalive time limit)
    writing: bool = False  # TLS wants to write before it can read on
    buffer: bytearray = field(default_factory=bytearray)
    header_end: int = -1  # offset just past the blank line once the headers are in
    continued: bool = False  # "100 Continue" sent


def request_end(buffer: bytes | bytearray, header_end: int) -> int | None:
    """Where the request whose headers end at `header_end` ends in `buffer` (None: not all of it yet; -1: its
    framing is not one this reads ahead, leave it to gunicorn's parser, which answers it)."""
    head = bytes(buffer[:header_end])
    if _CHUNKED.search(head):
        return _chunked_end(buffer, header_end)
    lengths = _CONTENT_LENGTH.findall(head)
    if not lengths:
        return header_end
    if len(set(lengths)) != 1 or not lengths[0].isdigit():
        return -1
    end = header_end + int(lengths[0])
    return end if len(buffer) >= end else None


def _chunked_end(buffer: bytes | bytearray, at: int) -> int | None:
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        size_text = bytes(buffer[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return -1
        if size == 0:
            trailer_end = buffer.find(b"\r\n", line_end + 2)
            while trailer_end >= 0 and trailer_end != line_end + 2 and buffer[trailer_end - 2 : trailer_end] != b"\r\n":
                trailer_end = buffer.find(b"\r\n", trailer_end + 2)
            if trailer_end < 0:
                return None
            return trailer_end + 2
        at = line_end + 2 + size + 2
        if len(buffer) < at:
            return None


class SlowClientSafeWorker(ThreadWorker):
    """gthread with every request read whole by the event loop before a thread serves it (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arriving: dict[int, _Arriving] = {}  # by id, oldest first
        self.tls: ssl.SSLContext | None = None

    def init_process(self) -> None:
        if self.cfg.is_ssl:
            self.tls = gsock.ssl_context(self.cfg)
        super().init_process()

    # Connections in -------------------------------------------------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            client, address = listener.accept()
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        if len(self.arriving) >= SLOW_CONNECTIONS or self.nr_conns >= self.worker_connections:
            self._evict_oldest()
        client.setblocking(False)
        # A client that stops reading what it asked for cannot hold a thread writing to it: the kernel gives up on a
        # send that makes no progress for SEND_TIMEOUT (in blocking mode too, which the threads use).
        seconds = int(SEND_TIMEOUT)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, 0))
        if self.tls is not None:
            client = self.tls.wrap_socket(
                client, server_side=True, do_handshake_on_connect=False, suppress_ragged_eofs=True
            )
        conn = TConn(self.cfg, client, address, listener.getsockname())
        now = time.monotonic()
        self._arrive(_Arriving(conn, now + HEADER_TIMEOUT, now, handshaking=self.tls is not None))

    def finish_request(self, conn: TConn, fs: Future[Any]) -> None:
        """A thread is done with a request: the connection waits (here, not in a thread) for its next one."""
        try:
            keepalive = bool(fs.result()) if not fs.cancelled() else False
        except Exception:  # gunicorn's handle logs its own failures
            keepalive = False
        if keepalive and self.alive:
            now = time.monotonic()
            leftover = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
            arriving = _Arriving(conn, now + self.cfg.keepalive, now, idle=not leftover, buffer=bytearray(leftover))
            self._arrive(arriving)
            if leftover:  # a pipelined request may be here already
                self._progress(arriving)
            return
        self.nr_conns -= 1
        conn.close()

    def _arrive(self, arriving: _Arriving) -> None:
        self.arriving[id(arriving)] = arriving
        arriving.conn.sock.setblocking(False)
        self.poller.register(arriving.conn.sock, selectors.EVENT_READ, partial(self._ready, arriving))

    # Reading a request ----------------------------------------------------------------------------------------------

    def _ready(self, arriving: _Arriving, _sock: Any) -> None:
        sock = arriving.conn.sock
        wants_write = False
        try:
            if arriving.handshaking:
                sock.do_handshake()
                arriving.handshaking = False
                if gsock.is_http2_negotiated(sock):  # only HTTP/1.1 is offered; a client forcing h2 is not served
                    self._drop(arriving)
                    return
            while True:
                data = sock.recv(65536)
                if not data:
                    self._drop(arriving)
                    return
                arriving.buffer += data
                if not (isinstance(sock, ssl.SSLSocket) and sock.pending()) and len(data) < 65536:
                    break
        except ssl.SSLWantWriteError:
            wants_write = True
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            pass
        except (OSError, ValueError):
            self._drop(arriving)
            return
        if wants_write != arriving.writing:
            arriving.writing = wants_write
            events = selectors.EVENT_WRITE if wants_write else selectors.EVENT_READ
            self.poller.modify(sock, events, partial(self._ready, arriving))
        if arriving.idle and arriving.buffer:
            arriving.idle = False  # a kept-alive connection's next request began: the header time limit now
            arriving.deadline = time.monotonic() + HEADER_TIMEOUT
        self._progress(arriving)

    def _progress(self, arriving: _Arriving) -> None:
        if self._complete(arriving):
            self.poller.unregister(arriving.conn.sock)
            del self.arriving[id(arriving)]
            self._hand_over(arriving)

    def _complete(self, arriving: _Arriving) -> bool:
        """Whether the request is all here (to be handed to a thread); one too large is refused and let go."""
        buffer = arriving.buffer
        if arriving.header_end < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEADER_BYTES:
                    self._refuse(arriving, 431, "Request Header Fields Too Large")
                return False
            arriving.header_end = end + 4
            arriving.deadline = time.monotonic() + BODY_TIMEOUT
        request_stop = request_end(buffer, arriving.header_end)
        if request_stop is None:
            if len(buffer) - arriving.header_end > MAX_BODY_BYTES:
                self._refuse(arriving, 413, "Request Entity Too Large")
                return False
            if not arriving.continued and _EXPECT_CONTINUE.search(bytes(buffer[: arriving.header_end])):
                arriving.continued = True
                self._send_quietly(arriving.conn.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
            return False
        return True

    def _hand_over(self, arriving: _Arriving) -> None:
        conn = arriving.conn
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.parser.unreader.unread(bytes(arriving.buffer))
        conn.initialized = True  # TLS is already wrapped and shaken: gunicorn's init must not wrap it again
        conn.data_ready = True
        self.enqueue_req(conn)

    # Time limits and bounds -------------------------------------------------------------------------------------

    def murder_keepalived(self) -> None:
        """Called by the loop at least once a second: the time limits, and room for new connections."""
        super().murder_keepalived()
        now = time.monotonic()
        for arriving in [a for a in self.arriving.values() if a.deadline <= now]:
            if arriving.idle:
                self._drop(arriving)  # a kept-alive connection that asked for nothing more
            else:
                self._refuse(arriving, 408, "Request Timeout")
        while self.nr_conns >= self.worker_connections and self.arriving:
            self._evict_oldest()  # accepting stops when full: slow arrivals make way for new connections

    def _evict_oldest(self) -> None:
        oldest = next(iter(self.arriving.values()), None)
        if oldest is not None:
            self._drop(oldest)

    def _refuse(self, arriving: _Arriving, code: int, reason: str) -> None:
        if not arriving.handshaking:
            body = f"{code} {reason}\n".encode()
            head = f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            self._send_quietly(arriving.conn.sock, head.encode() + b"Connection: close\r\n\r\n" + body)
        self._drop(arriving)

    @staticmethod
    def _send_quietly(sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):  # best effort: the client is being let go, or not reading
            sock.send(data)

    def _drop(self, arriving: _Arriving) -> None:
        if self.arriving.pop(id(arriving), None) is None:
            return
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(arriving.conn.sock)
        self.nr_conns -= 1
        arriving.conn.close()
