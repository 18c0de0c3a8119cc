"""Django's development server (runserver, what `./run.sh` serves plain HTTP with) with one thing added: a response of
unknown length to an HTTP/1.1 request is sent chunked, as gunicorn and kube-apiserver send it.

runserver sends such a response (a watch, a followed log) as raw bytes until it closes the connection. Clients that
read as bytes arrive (kubectl, httpx for kr8s and lightkube) see each event at once; the official Python client does
not: urllib3 reads a body without a length in 64 KiB blocks, so a watch's events reached it only when the server
closed the stream at `timeoutSeconds`. A chunked body is read chunk by chunk, and each event is one chunk.
"""

from __future__ import annotations

from typing import Any

from django.core.servers.basehttp import ServerHandler, WSGIRequestHandler, WSGIServer

# Statuses that have no body, so no chunked framing either.
_BODILESS = ("1", "204", "304")


class ChunkedServerHandler(ServerHandler):
    chunked = False

    def cleanup_headers(self) -> None:
        super().cleanup_headers()
        self.chunked = (
            "Content-Length" not in self.headers
            and "Transfer-Encoding" not in self.headers
            and self.environ.get("REQUEST_METHOD") != "HEAD"
            and self.environ.get("SERVER_PROTOCOL") == "HTTP/1.1"
            and not str(self.status).startswith(_BODILESS)
        )
        if self.chunked:
            self.headers["Transfer-Encoding"] = "chunked"

    def write(self, data: bytes) -> None:
        if not self.headers_sent:
            super().write(b"")  # the status line and headers, now deciding the framing; no body yet
        if not self.chunked:
            super().write(data)
        elif data:  # an empty chunk would end the body
            super().write(b"%x\r\n%s\r\n" % (len(data), data))

    def finish_content(self) -> None:
        super().finish_content()
        if self.chunked:
            self._write(b"0\r\n\r\n")
            self._flush()


class ChunkedRequestHandler(WSGIRequestHandler):
    def handle_one_request(self) -> None:
        """Django's own, with the chunking ServerHandler."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = ChunkedServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ())
        handler.request_handler = self  # Django's backpointer for logging and closing the connection
        handler.run(self.server.get_app())


class ChunkedWSGIServer(WSGIServer):
    def __init__(self, address: Any, handler: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(address, ChunkedRequestHandler, *args, **kwargs)
