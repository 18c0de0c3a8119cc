"""A real karpui for browser tests: `manage.py serve` (web + Celery worker + beat) on its own database.

The server uses PostgreSQL and Redis when DATABASE_URL / REDIS_URL name them (CI), else SQLite and the filesystem
broker, in a fresh database either way so the tests' own database is untouched.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "browser-test-pass-1"
# Chromium's background services dial out; this machine's network is closed, so keep them off.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class LiveKarpui:
    url: str
    env: dict[str, str]
    server: subprocess.Popen[bytes]
    log: Path

    def assert_serving(self) -> None:
        """Fail with the server's own output when web, worker or beat has stopped (serve stops all together)."""
        if self.server.poll() is not None:
            pytest.fail(f"karpui serve exited with {self.server.returncode}:\n{self.log.read_text()[-4000:]}")

    def karp(self, *args: str) -> str:
        """Run `manage.py karp ARGS` against the live server's database, as a user at a terminal would."""
        done = subprocess.run(
            [sys.executable, "manage.py", "karp", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fresh_database(tmp: Path) -> str:
    configured = os.environ.get("DATABASE_URL", "")
    if not configured.startswith("postgres"):
        return f"sqlite:///{tmp / 'browser.sqlite3'}"
    import psycopg

    # Through the maintenance database: the configured one need not exist yet (pytest-django makes its own).
    maintenance = urlunsplit(urlsplit(configured)._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as connection:
        name = f"karpui_browser{os.environ.get('PYTEST_XDIST_WORKER', '')}"  # one per parallel test worker
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(configured)._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def live_karpui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveKarpui]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM}")
    tmp = tmp_path_factory.mktemp("live")
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _fresh_database(tmp),
        "KARPUI_VAR_DIR": str(tmp),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    make_admin = (
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_superuser('admin', '', '{PASSWORD}')"
    )
    subprocess.run([sys.executable, "manage.py", "shell", "-c", make_admin], cwd=ROOT, env=env, check=True)
    log = (tmp / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    break
                time.sleep(0.25)
        else:
            pytest.fail("karpui did not start serving within 30 s")
        assert server.poll() is None, (tmp / "serve.log").read_text()
        yield LiveKarpui(url=url, env=env, server=server, log=tmp / "serve.log")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()  # serve.log stays in pytest's temporary directory (the last three runs are kept)


@pytest.fixture(scope="module")
def chromium(live_karpui: LiveKarpui) -> Iterator[object]:
    """One chromium per module; each test gets a context of its own (cookies, storage, cache), as a fresh browser
    profile would be, without paying for a browser start each time. Not per session: while Playwright's sync API
    runs, its event loop makes Django refuse ORM calls in this thread, which the next modules' tests make."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(live_karpui: LiveKarpui, chromium: Any) -> Iterator[object]:
    live_karpui.assert_serving()
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{live_karpui.url}/accounts/login/?next=/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_karpui.url}/")
    yield page
    context.close()
    live_karpui.assert_serving()
