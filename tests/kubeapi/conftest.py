"""A live karpui serving the Kubernetes API over HTTPS, and kubectl pointed at it with a kubeconfig from
`karp kubeconfig`.

HTTPS because kubectl sends credentials only over TLS (client-go drops a kubeconfig's token for an http:// server).
The server is pytest-django's live server thread with its socket wrapped in TLS, on a certificate made here with
openssl; tests using it need the transactional database (the server thread sees only committed rows).
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.karp import columns, ok

KUBECTL = "/usr/bin/kubectl"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test server's certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=karpui-test",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return Certificate(cert, key)


@pytest.fixture(scope="session")
def tls_server(certificate: Certificate) -> Iterator[str]:
    """pytest-django's live server thread, serving HTTPS; yields its base URL."""
    from django.test.testcases import ThreadedWSGIServer
    from pytest_django.live_server_helper import LiveServer

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate.cert, certificate.key)

    class TLSServer(ThreadedWSGIServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.socket = context.wrap_socket(self.socket, server_side=True)

    server = LiveServer("127.0.0.1", start=False)
    server.thread.server_class = TLSServer
    server.start()
    yield f"https://127.0.0.1:{server.thread.port}"
    server.stop()


@dataclass
class Kubectl:
    """kubectl with its own HOME (discovery cache) and the kubeconfig `karp kubeconfig` printed."""

    kubeconfig: Path
    home: Path
    cwd: Path = ROOT  # where relative paths (`apply -f nodepool.yaml`) are read

    def run(self, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)}
        return subprocess.run(
            [KUBECTL, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout, cwd=self.cwd
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def rows(self, *args: str) -> list[list[str]]:
        return [line.split() for line in self.ok(*args).splitlines()[1:]]

    def table(self, *args: str) -> list[dict[str, str]]:
        """kubectl's table as rows keyed by column header (`row["STATUS"]`)."""
        return columns(self.ok(*args))

    def popen(self, *args: str) -> subprocess.Popen[str]:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)}
        return subprocess.Popen(
            [KUBECTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=self.cwd
        )


def write_kubeconfig(path: Path, server: str, certificate: Certificate, user: str) -> Path:
    config = ok("kubeconfig", "--as", user, "--server", server, "--certificate-authority", str(certificate.cert))
    path.write_text(config)
    return path


@pytest.fixture
def admin(transactional_db: None) -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_superuser("admin", "", "admin-pass-1")


@pytest.fixture
def kubectl(tls_server: str, certificate: Certificate, admin: Any, tmp_path: Path) -> Kubectl:
    if not Path(KUBECTL).exists():
        pytest.skip(f"kubectl is not at {KUBECTL}")
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(write_kubeconfig(tmp_path / "kubeconfig", tls_server, certificate, "admin"), home)


@pytest.fixture
def kube_client(tls_server: str, certificate: Certificate, admin: Any, tmp_path: Path) -> Any:
    """The official Python client, configured from the kubeconfig `karp kubeconfig` printed."""
    from kubernetes import config

    path = write_kubeconfig(tmp_path / "kubeconfig", tls_server, certificate, "admin")
    return config.new_client_from_config(config_file=str(path))


def kubeconfig_token(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["users"][0]["user"]["token"])
