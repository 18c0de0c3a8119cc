"""Watches cannot starve the server: a process serves fewer watches at once than it has threads (each open watch
holds one), and answers one more with 429 TooManyRequests and Retry-After, as kube-apiserver's max-in-flight limit
does (client-go and kubectl retry it), while every other request is still served."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections

from karpui.kubeapi import watch
from tests.karp import ROOT
from tests.kubeapi.admin_api import AdminApi
from tests.kubeapi.conftest import Certificate

WATCH = "/api/v1/namespaces/default/pods"


@pytest.fixture
def two_watches_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KARPUI_MAX_WATCHES", "2")


def open_watch(api: AdminApi, **params: Any) -> Any:
    return api.client.get(f"/k8s/clusters/lab{WATCH}", {"watch": "true", **params}, headers=api.headers)


def hang_up(response: Any) -> None:
    """What the server does when a watching client goes away: close the response (keeping the test's database
    open, as the test client does when a response is read to its end)."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def test_a_watch_past_the_limit_is_429_with_retry_after_and_other_requests_are_served(
    lab: Any, two_watches_at_most: None
) -> None:
    api = AdminApi()
    held = [open_watch(api), open_watch(api)]
    assert [r.status_code for r in held] == [200, 200]
    refused = open_watch(api)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "1"
    assert json.loads(refused.content) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Too many requests, please try again later.",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 1},
        "code": 429,
    }
    assert api.get(WATCH)[0] == 200  # a list is not a watch
    hang_up(held.pop())
    again = open_watch(api)
    assert again.status_code == 200
    hang_up(again)
    hang_up(held.pop())
    assert watch.SLOTS.open == 0


def test_a_watch_gives_its_slot_back_when_it_ends_or_is_closed_unread(lab: Any, two_watches_at_most: None) -> None:
    api = AdminApi()
    for _ in range(3):  # each ends at its timeout, read to the end
        response = open_watch(api, timeoutSeconds="0.1")
        assert response.status_code == 200
        b"".join(response.streaming_content)
    for _ in range(3):  # the client gone before the first line
        response = open_watch(api)
        assert response.status_code == 200
        hang_up(response)
    assert watch.SLOTS.open == 0


@pytest.mark.parametrize(
    ("threads", "watches"), [("", None), ("32", 24), ("16", 12), ("4", 2), ("2", 1), ("1", 1), ("64", 48)]
)
def test_a_quarter_of_the_threads_is_kept_for_other_requests(
    monkeypatch: pytest.MonkeyPatch, threads: str, watches: int | None
) -> None:
    """No limit where the server does not say how many threads it has: runserver gives each connection its own."""
    monkeypatch.delenv("KARPUI_MAX_WATCHES", raising=False)
    monkeypatch.setenv("KARPUI_WEB_THREADS", threads)
    assert watch.max_watches() == watches
    monkeypatch.setenv("KARPUI_MAX_WATCHES", "5")
    assert watch.max_watches() == 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Https:
    def __init__(self, port: int, certificate: Certificate, token: str) -> None:
        self.port, self.token = port, token
        self.context = ssl.create_default_context(cafile=str(certificate.cert))

    def send(self, path: str) -> tuple[ssl.SSLSocket, bytes]:
        """A request on its own connection, left open; its status line and headers."""
        tls = self.context.wrap_socket(
            socket.create_connection(("127.0.0.1", self.port), timeout=10), server_hostname="127.0.0.1"
        )
        tls.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nAuthorization: Bearer {self.token}\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += tls.recv(4096)
        return tls, head


def test_gunicorn_serves_other_requests_while_its_watches_are_at_their_limit(
    tmp_path: Path, certificate: Certificate
) -> None:
    """`manage.py serve` with TLS, 4 threads: 2 watches at once, the third a 429, the API and the dashboard served."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KARPUI_MAX_WATCHES")},
        "KARPUI_VAR_DIR": str(tmp_path),
        "KARPUI_WEB_THREADS": "4",
        "DJANGO_SETTINGS_MODULE": "karpui.settings",
    }
    manage = [sys.executable, "manage.py"]
    server = f"https://127.0.0.1:{port}"
    with (tmp_path / "serve.log").open("wb") as log:
        serve = subprocess.Popen(
            [*manage, "serve", f"127.0.0.1:{port}", "--no-worker", "--certfile", str(certificate.cert)]
            + ["--keyfile", str(certificate.key)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    sockets: list[ssl.SSLSocket] = []
    try:
        deadline = time.monotonic() + 120
        while b"Listening at" not in (tmp_path / "serve.log").read_bytes():
            assert serve.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        kubeconfig = subprocess.run(
            [*manage, "karp", "kubeconfig", "--server", server, "--certificate-authority", str(certificate.cert)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        token = kubeconfig.split("token: ")[1].split()[0]
        https = Https(port, certificate, token)
        heads = []
        for _ in range(3):
            tls, head = https.send(f"/k8s/clusters/lab{WATCH}?watch=true&timeoutSeconds=60")
            sockets.append(tls)
            heads.append(head)
        assert [h.split(b"\r\n")[0] for h in heads] == [b"HTTP/1.1 200 OK"] * 2 + [b"HTTP/1.1 429 Too Many Requests"]
        assert b"\r\nRetry-After: 1\r\n" in heads[2]
        for path, status in [
            ("/k8s/clusters/lab/api/v1/nodes", b"200"),
            ("/", b"200"),  # with a token: kube-apiserver's list of paths
            ("/accounts/login/", b"200"),
            ("/healthz", b"200"),
        ]:
            tls, head = https.send(path)
            sockets.append(tls)
            assert head.split(b" ")[1] == status, path
    finally:
        for tls in sockets:
            tls.close()
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
