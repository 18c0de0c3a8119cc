"""Issue 11, item 7: stopping `manage.py serve` while a tick is stuck leaves no process behind: not the web server,
not the Celery worker, not its embedded beat, not the pool child busy in the tick.

serve runs for real in a subprocess on its own SQLite database and filesystem broker, its ticks' leases in Redis. The
test holds SQLite's write lock, so the next tick blocks inside the worker's pool child (as a long tick does) and the
warm shutdown cannot finish in time; serve must then kill each child's whole process group.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from karpui.clusters import leases
from karpui.management.commands.serve import site_url
from tests.karp import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a live process, None once it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state, ppid, pgrp = text.rpartition(")")[2].split()[:3]
    return None if state in ("Z", "X") else (state, int(ppid), int(pgrp))


def _processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = stat
    return found


def descendants(root: int) -> set[int]:
    table = _processes()
    family, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (_, ppid, _) in table.items() if ppid in frontier} - family
        family |= frontier
    return family


def until(condition, what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("serve")


def serve_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    return {
        **env,
        "KARPUI_VAR_DIR": str(var_dir),
        "KARPUI_TICK_SECONDS": "1",
        "DJANGO_SETTINGS_MODULE": "karpui.settings",
    }


def stuck_tick_env(var_dir: Path) -> dict[str, str]:
    """serve's environment with the lease in Redis and the broker still the filesystem's: a tick then takes its
    lease without the database and blocks at its first write, behind the lock the test holds. (With the lease in
    the database, a tick that finds the database locked skips its beat, so nothing would be stuck.)"""
    return {**serve_env(var_dir), "REDIS_URL": os.environ["REDIS_URL"], "CELERY_BROKER_URL": "filesystem://"}


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="the tick's lease is taken in Redis (REDIS_URL)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_serve_during_a_stuck_tick_leaves_no_process_behind(var_dir, signum):
    port = _free_port()
    lease = leases.key_prefix({"NAME": str(var_dir / "karpui.sqlite3")}) + "cluster:"
    redis = leases._redis()
    # The lease the tick killed in the other case left behind (var_dir is the module's) would count as stuck here.
    for key in redis.keys(lease + "*"):
        redis.delete(key)
    log = (var_dir / f"serve-{signum}.log").open("wb")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--stop-timeout", "3"],
        cwd=ROOT,
        env=stuck_tick_env(var_dir),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    lock = None
    try:
        until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), "the web server")
        # runserver, the worker, its beat and its pool child
        until(lambda: len(descendants(serve.pid)) >= 4, "the worker's beat and pool")
        lock = sqlite3.connect(var_dir / "karpui.sqlite3", timeout=30, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # every later write waits: the next tick is stuck in the pool child
        # A tick holding its lease while the lock is held is stuck at its first write. Ticks queued alone do not
        # say so: on a loaded machine the worker may not have taken one yet, and then it stops at once.
        until(lambda: any(not k.endswith(b":epoch") for k in redis.keys(lease + "*")), "a tick stuck in its lease")
        queue = var_dir / "broker" / "queue"
        until(lambda: len(list(queue.iterdir())) >= 3, "ticks to queue up behind the stuck one")
        family = descendants(serve.pid)
        groups = {_processes()[pid][2] for pid in family}

        os.kill(serve.pid, signum)
        serve.wait(timeout=60)

        assert serve.returncode == 0
        assert "the worker did not stop within 3 s: killed it" in (var_dir / f"serve-{signum}.log").read_text()
        assert {pid for pid in family if _stat(pid) is not None} == set()
        assert {pid for pid, (_, _, pgrp) in _processes().items() if pgrp in groups} == set()
    finally:
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
        if serve.poll() is None:
            serve.kill()
        log.close()


def test_the_first_run_prints_the_login_url_with_the_port_it_serves(tmp_path):
    """Issue 15, bug 8: `./run.sh 127.0.0.1:8011` said "Log in at http://127.0.0.1:8000/"."""
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--no-worker"],
            cwd=ROOT,
            env=serve_env(tmp_path),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            until(lambda: "karpui is serving" in log_path.read_text(), "serve to start")
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
        finally:
            if serve.poll() is None:
                serve.kill()
    said = log_path.read_text()
    assert f"Created the first admin user. Log in at http://127.0.0.1:{port}/ as admin / " in said
    assert f"karpui is serving http://127.0.0.1:{port}/ (Ctrl-C stops web and worker)" in said


@pytest.mark.parametrize(
    ("addrport", "url"),
    [
        ("127.0.0.1:8011", "http://127.0.0.1:8011/"),
        ("8011", "http://127.0.0.1:8011/"),
        ("0.0.0.0:8011", "http://127.0.0.1:8011/"),
        ("[::1]:8011", "http://[::1]:8011/"),
        ("karpui.local:9000", "http://karpui.local:9000/"),
    ],
)
def test_the_url_said_is_the_one_a_browser_here_opens(addrport, url):
    assert site_url(addrport) == url


def test_with_a_certificate_serve_speaks_https_and_kubectl_reads_the_lab_with_a_token(tmp_path):
    """Issue 12: serve serves the Kubernetes API with TLS when a certificate is configured, so kubectl (which sends
    a token only over HTTPS) works against plain `manage.py serve`."""
    if not Path("/usr/bin/kubectl").exists():
        pytest.skip("kubectl 1.32 ships with these machines at /usr/bin/kubectl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
        + ["-days", "1", "-subj", "/CN=karpui", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    env = serve_env(tmp_path)
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--no-worker"]
            + ["--certfile", str(cert), "--keyfile", str(key)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            until(lambda: "karpui is serving" in log_path.read_text(), "serve to start")
            said = log_path.read_text()
            assert f"karpui is serving https://127.0.0.1:{port}/ (Ctrl-C stops web and worker)" in said
            assert f"kubectl: manage.py karp kubeconfig --server https://127.0.0.1:{port} " in said
            config = subprocess.run(
                [sys.executable, "manage.py", "karp", "kubeconfig", "--as", "admin"]
                + ["--server", f"https://127.0.0.1:{port}", "--certificate-authority", str(cert)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            (tmp_path / "kubeconfig").write_text(config)
            kubectl_env = {
                "PATH": os.environ["PATH"],
                "HOME": str(tmp_path),
                "KUBECONFIG": str(tmp_path / "kubeconfig"),
            }

            def namespaces() -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    ["/usr/bin/kubectl", "get", "namespaces", "-o", "name"],
                    env=kubectl_env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )

            until(lambda: namespaces().returncode == 0, "gunicorn to answer over HTTPS")
            assert namespaces().stdout == (
                "namespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n"
            )
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
        finally:
            if serve.poll() is None:
                serve.kill()
    assert serve.returncode == 0
