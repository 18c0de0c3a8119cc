"""The production web server (gunicorn with karpui/gunicorn_conf.py, over HTTPS) in a process of its own on a
throwaway SQLite database, and slow clients to point at it: connections that send their headers, their body or their
TLS handshake a little at a time and never finish. Used by tests/integration/test_slow_clients.py (which asserts
that real requests are still answered) and bench/slow_clients.py (which prints how fast)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CONTEXT = ssl._create_unverified_context()  # the server's own throwaway certificate  # noqa: S323


@dataclass
class ProductionServer:
    """gunicorn as deploy/ runs it, on `port`, with its own database and certificate under `folder`."""

    folder: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    tokens: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{self.folder / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "karpui.settings",
            "KARPUI_WEB_THREADS": "8",
            **self.env,
        }

    def manage(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.environment(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return done.stdout

    def start(self) -> ProductionServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        cert, key = self.folder / "cert.pem", self.folder / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=karpui-test"]
            + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )
        self.manage("migrate", "-v", "0")
        self.process = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "karpui.wsgi", "-c", "karpui/gunicorn_conf.py", "--workers", "1"]
            + ["--bind", f"127.0.0.1:{self.port}", "--certfile", str(cert), "--keyfile", str(key)],
            cwd=ROOT,
            env=self.environment(),
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "gunicorn.log", "wb"),  # noqa: SIM115 - the child's, closed with it
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if get(self.url + "/healthz", timeout=2)[0] == 200:
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer: {(self.folder / 'gunicorn.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def token(self) -> str:
        """An API token of a superuser made for the purpose (the same one each time)."""
        if not self.tokens:
            self.manage(
                "shell",
                "-c",
                "from django.contrib.auth.models import User; User.objects.create_superuser('root', '', 'root-pass-1')",
            )
            config = yaml.safe_load(self.manage("karp", "kubeconfig", "--as", "root", "--server", self.url))
            self.tokens.append(str(config["users"][0]["user"]["token"]))
        return self.tokens[0]


def get(url: str, *, timeout: float, token: str = "") -> tuple[int, float]:
    """GET on a connection of its own: the status and the seconds it took."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), context=CONTEXT, timeout=timeout
        ) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as error:
        status = error.code
    return status, time.perf_counter() - start


def _tls(port: int) -> ssl.SSLSocket:
    return CONTEXT.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")


def slow_header(port: int) -> socket.socket:
    """A request whose headers are never finished."""
    sock = _tls(port)
    sock.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def slow_body(port: int) -> socket.socket:
    """A POST that promises 100,000 bytes of body and sends a few."""
    sock = _tls(port)
    sock.send(b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nusername=")
    return sock


def half_handshake(port: int) -> socket.socket:
    """A TLS ClientHello cut off after its first bytes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    return sock


def slow_clients(port: int, count: int) -> list[socket.socket]:
    """`count` slow connections, a third of each kind."""
    kinds = (slow_header, slow_body, half_handshake)
    return [kinds[i % 3](port) for i in range(count)]


def trickle(sockets: list[socket.socket]) -> None:
    """One more byte on each (as a slowloris keeps its connections alive); closed ones are skipped."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.send(b"a")


def watch(url: str, token: str) -> socket.socket:
    """A watch of the lab's pods that stays open (its answer is never read past the headers)."""
    sock = _tls(int(url.rsplit(":", 1)[1]))
    sock.send(
        b"GET /k8s/clusters/lab/api/v1/pods?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    return sock


def status_line(sock: socket.socket, timeout: float = 10) -> str:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def closed(sock: socket.socket, timeout: float) -> str:
    """What the server sends before closing a slow connection (b'' when it closes without a word)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return data.decode(errors="replace")
            data += chunk
    except (ssl.SSLError, OSError):
        return data.decode(errors="replace")


def dumps(figures: dict[str, object]) -> str:
    return json.dumps(figures, indent=2)


def free_port(first: int = 18500, last: int = 18999) -> int:
    """A port of this project's range that nothing listens on now."""
    for port in range(first, last + 1):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{last}")
