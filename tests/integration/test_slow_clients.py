"""Issue 27, point 4: the production web server survives slow clients. gunicorn (karpui/gunicorn_conf.py, HTTPS) in a
process of its own: 200 connections that never finish their headers, their body or their TLS handshake take no
thread, so /healthz and a page are still answered; each is cut off at its time limit (a 408 once it has sent
something to answer); and watches, bounded below the thread count, leave the rest of the API and the dashboard
their threads. How fast they answer is bench/slow_clients.py's figure, not asserted here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import slowclients as sc

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the server's certificate")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    running = sc.ProductionServer(
        tmp_path_factory.mktemp("slow"), sc.free_port(), env={"KARPUI_WEB_HEADER_TIMEOUT": "3"}
    ).start()
    yield running
    running.stop()


def test_two_hundred_slow_connections_leave_healthz_and_a_page_answering(server: sc.ProductionServer) -> None:
    held = sc.slow_clients(server.port, 200)
    try:
        sc.trickle(held)
        assert sc.get(server.url + "/healthz", timeout=10)[0] == 200
        assert sc.get(server.url + "/accounts/login/", timeout=10)[0] == 200
        sc.trickle(held)
        assert sc.get(server.url + "/healthz", timeout=10)[0] == 200
    finally:
        for sock in held:
            sock.close()


def test_a_slow_request_is_cut_off_at_its_time_limit_with_a_408(server: sc.ProductionServer) -> None:
    header, body, handshake = sc.slow_header(server.port), sc.slow_body(server.port), sc.half_handshake(server.port)
    # KARPUI_WEB_HEADER_TIMEOUT is 3 s here: the slow headers are answered 408 and closed, however they trickle.
    assert sc.closed(header, timeout=20).startswith("HTTP/1.1 408 Request Timeout\r\n")
    assert sc.closed(handshake, timeout=20) == ""  # no TLS yet, nothing to say: closed
    body.close()


def test_watches_up_to_their_limit_and_slow_sockets_leave_the_api_and_healthz_answering(
    server: sc.ProductionServer,
) -> None:
    token = server.token()
    # KARPUI_WEB_THREADS is 8 here: at most 6 watches at once (a quarter of the threads kept back).
    watches = [sc.watch(server.url, token) for _ in range(6)]
    slow = sc.slow_clients(server.port, 30)
    try:
        assert [sc.status_line(w) for w in watches] == ["HTTP/1.1 200 OK"] * 6
        extra = sc.watch(server.url, token)
        assert sc.status_line(extra) == "HTTP/1.1 429 Too Many Requests"
        extra.close()
        assert sc.get(server.url + "/healthz", timeout=10)[0] == 200
        assert sc.get(server.url + "/k8s/clusters/lab/api/v1/namespaces", timeout=10, token=token)[0] == 200
        assert sc.get(server.url + "/accounts/login/", timeout=10)[0] == 200
    finally:
        for sock in [*watches, *slow]:
            sock.close()


def test_a_request_body_sent_in_pieces_is_served_whole(server: sc.ProductionServer) -> None:
    """Read ahead by the event loop, a body that arrives in pieces still reaches the app whole."""
    token = server.token()
    sock = sc._tls(server.port)
    body = b'{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"pieces"}}'
    head = (
        "POST /k8s/clusters/lab/api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    for piece in (head[:20], head[20:], body[:10], body[10:]):
        sock.send(piece)
    assert sc.status_line(sock) == "HTTP/1.1 201 Created"
    sock.close()


def test_the_deploy_readme_documents_the_ingress_in_front() -> None:
    readme = (Path(__file__).resolve().parents[2] / "deploy" / "README.md").read_text()
    assert "client_header_timeout" in readme and "client_body_timeout" in readme
