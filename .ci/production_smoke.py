"""Production smoke test: karpui.settings_production behind gunicorn on loopback must serve every page.

Runs `collectstatic`, migrates a throwaway SQLite database, fills the lab with a small scenario, starts gunicorn
(the server the deploy manifests use) on 127.0.0.1, logs in as a superuser through the login form, then crawls
every same-origin link and asset from the dashboard and the admin. Exits 1 on any 5xx, on a static file that is
missing, or if login fails.

Requests carry `X-Forwarded-Proto: https` and the server runs with SECURE_PROXY_SSL_HEADER=true: that is the
deployment's own configuration behind a TLS-terminating proxy, so HTTPS redirects, HSTS and secure cookies stay on
exactly as in production (no test-only setting).

Run it locally: .venv/bin/python .ci/production_smoke.py
"""

from __future__ import annotations

import html
import http.client
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
USERNAME, PASSWORD = "smoke", secrets.token_urlsafe(16)
MAX_FETCHES = 400
PER_SHAPE = 3  # /admin/karpui/instancetype/1/change/ and its 250 siblings are one page shape
LINK = re.compile(r"""(?:href|src|hx-get)=["']([^"']+)["']""")
SKIP = ("/accounts/logout/", "/admin/logout/")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Browser:
    """Just enough of a browser: cookies (including Secure ones, as the proxy's HTTPS would carry them)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        origin = f"https://127.0.0.1:{self.port}"
        headers = {"X-Forwarded-Proto": "https", "Referer": f"{origin}{path}", "Origin": origin}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.split(";")[0]
        text = response.read().decode("utf-8", "replace")
        connection.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, text


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed under production settings:\n{done.stderr[-4000:]}")
    return done.stdout


def prepare(env: dict[str, str]) -> None:
    """Static files, a database, the smoke user, and a lab with nodes, pods and a command awaiting approval."""
    manage(env, "collectstatic", "--noinput")
    manage(env, "migrate", "--noinput")
    manage(env, "createsuperuser", "--noinput", "--username", USERNAME, "--email", "smoke@example.com")
    manage(env, "karp", "apply", "-f", "examples/provisioning")
    manage(env, "karp", "scale", "deploy/inflate", "--replicas", "3")
    manage(env, "karp", "advance", "30s")
    node = manage(env, "karp", "get", "nodes", "-o", "name").split()[0].partition("/")[2]
    manage(env, "karp", "disrupt", "node", node, "--as", USERNAME, "--reason", "production smoke test")
    manage(env, "karp", "advance", "20s")


def log_in(browser: Browser) -> None:
    status, _, page = browser.request("GET", "/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if status != 200 or token is None:
        raise SystemExit(f"the login page answered {status} without a CSRF token")
    form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1), "next": "/"}
    status, headers, _ = browser.request("POST", "/accounts/login/", form)
    if status != 302 or headers.get("location") != "/":
        raise SystemExit(f"logging in answered {status} {headers.get('location')}, not a redirect to /")


def shape(url: str) -> tuple[str, tuple[str, ...]]:
    parts = urlsplit(url)
    keys = tuple(sorted({pair.split("=")[0] for pair in parts.query.split("&") if pair}))
    return re.sub(r"\d+", "N", parts.path), keys


def crawl(browser: Browser) -> dict[str, int]:
    """Fetch every same-origin link and asset reachable from the dashboard and the admin."""
    queue = ["/", "/admin/", "/healthz", "/readyz", "/metrics"]
    seen, shapes, statuses = set(queue), Counter[tuple[str, tuple[str, ...]]](), {}
    while queue and len(statuses) < MAX_FETCHES:
        url = queue.pop(0)
        status, headers, body = browser.request("GET", url)
        statuses[url] = status
        if "text/html" not in headers.get("content-type", ""):
            continue
        for link in LINK.findall(body):
            link = html.unescape(link).split("#")[0]
            if not link.startswith("/") or link.startswith("//") or link.startswith(SKIP) or link in seen:
                continue
            seen.add(link)
            shapes[shape(link)] += 1
            if shapes[shape(link)] <= PER_SHAPE:
                queue.append(link)
    return statuses


def verdict(statuses: dict[str, int]) -> list[str]:
    problems = []
    for url, status in sorted(statuses.items()):
        if url == "/readyz" and status in (200, 503):
            continue  # no worker runs here, so the tick is stale: 503 is readyz's honest answer
        if status >= 500:
            problems.append(f"{status} {url}")
        elif status == 404 and url.startswith("/static/"):
            problems.append(f"{status} {url} (a page links a static file collectstatic did not produce)")
    return problems


def main() -> int:
    var = Path(tempfile.mkdtemp(prefix="karpui-smoke-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="karpui.settings_production",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_PROXY_SSL_HEADER="true",
        KARPUI_VAR_DIR=str(var),
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    env.pop("DEBUG", None)
    server = None
    try:
        prepare(env)
        log = (var / "gunicorn.log").open("wb")
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "karpui.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        browser = Browser(port)
        for _ in range(150):
            try:
                if browser.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise SystemExit("gunicorn did not answer /healthz within 30 s")
        log_in(browser)
        statuses = crawl(browser)
        problems = verdict(statuses)
        counts = Counter(f"{status // 100}xx" for url, status in statuses.items() if url != "/readyz")
        print(
            f"production smoke: {len(statuses) - 1} URLs through gunicorn: {dict(sorted(counts.items()))}; "
            f"/readyz {statuses['/readyz']} (no worker ticks here)"
        )
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        if problems:
            print((var / "gunicorn.log").read_text()[-6000:], file=sys.stderr)
        return 1 if problems else 0
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
