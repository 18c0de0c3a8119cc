"""A watch answers 200 with its headers as soon as it starts, as kube-apiserver flushes them, not with its first
event: client-go counts a watch as started only then, so `kubectl wait` waited for the 10 s bookmark per object."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from typing import Any
from urllib.parse import urlsplit

from tests.kubeapi.conftest import Certificate, kubeconfig_token

# Below the 10 s bookmark and far below the watch's own timeout: headers that wait for either arrive too late.
PATIENCE_SECONDS = 9.0

READY_NODE = """apiVersion: v1
kind: Node
metadata:
  name: ready-worker
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status}
"""


def test_a_quiet_watch_sends_its_status_and_headers_at_once(
    kubectl: Any, tls_server: str, certificate: Certificate
) -> None:
    version = kubectl.ok("get", "--raw", "/k8s/clusters/lab/api/v1/nodes").split('"resourceVersion":"')[1]
    version = version.split('"')[0]
    url = urlsplit(tls_server)
    context = ssl.create_default_context(cafile=str(certificate.cert))
    with (
        socket.create_connection((url.hostname, url.port), timeout=PATIENCE_SECONDS) as raw,
        context.wrap_socket(raw, server_hostname=url.hostname) as tls,
    ):
        tls.sendall(
            f"GET /k8s/clusters/lab/api/v1/nodes?watch=true&resourceVersion={version}&timeoutSeconds=60 "
            f"HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {kubeconfig_token(kubectl.kubeconfig)}"
            "\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += tls.recv(4096)  # socket.timeout (a failure) if the headers wait for an event
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"Content-Type: application/json" in head


def test_kubectl_wait_for_a_ready_node_answers_before_its_timeout(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "-", stdin=READY_NODE)
    started = time.monotonic()
    try:
        done = kubectl.run(
            "wait", "--for=condition=Ready", "node/ready-worker", "--timeout=5s", timeout=PATIENCE_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"kubectl wait --timeout=5s still waited after {PATIENCE_SECONDS} s") from None
    assert (done.returncode, done.stdout) == (0, "node/ready-worker condition met\n"), done.stderr
    assert time.monotonic() - started < PATIENCE_SECONDS
