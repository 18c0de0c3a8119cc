"""A production install from requirements.txt alone ticks: CI's check that no runtime dependency hides behind the
test tools (kombu's Redis transport needs `packaging`, which only the test tools brought in, so a production worker
and beat crashed at start and no cluster ever ticked).

Makes a fresh venv and installs requirements.txt into it, nothing else; then, with karpui.settings_production
against PostgreSQL (DATABASE_URL, a throwaway database beside it) and Redis (REDIS_URL), migrates, collects the
static files and starts gunicorn, a Celery worker and Celery beat as three processes, as deploy/ runs them. It waits
until the lab has ticked and /readyz answers 200, then stops them. Exits 1, with the processes' logs, otherwise.

Run it locally: DATABASE_URL=postgres://... REDIS_URL=redis://... python3 .ci/production_processes.py
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_SECONDS = 300.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def readyz(port: int) -> tuple[int, dict[str, object]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/readyz", headers={"X-Forwarded-Proto": "https", "Host": "127.0.0.1"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return 0, {}
    finally:
        connection.close()


def main() -> int:
    database, redis = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not database.startswith("postgres") or not redis:
        print("production_processes: DATABASE_URL (PostgreSQL) and REDIS_URL must be set", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="karpui-production-"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(ROOT / "requirements.txt"),
        ],
        check=True,
    )
    # A database of its own beside the one the tests use; the Redis database after the tests' ones.
    url = urlsplit(database)
    name = f"karpui_processes_{secrets.token_hex(4)}"
    admin = urlunsplit(url._replace(path="/postgres"))
    sql = f'CREATE DATABASE "{name}"'
    subprocess.run(
        [python, "-c", f"import psycopg; psycopg.connect({admin!r}, autocommit=True).execute({sql!r})"], check=True
    )
    redis_url = urlsplit(redis)._replace(path=f"/{os.environ.get('PROCESSES_REDIS_DB', '15')}").geturl()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("KARPUI_", "CELERY_"))},
        "DJANGO_SETTINGS_MODULE": "karpui.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_PROXY_SSL_HEADER": "true",
        "DATABASE_URL": urlunsplit(url._replace(path=f"/{name}")),
        "REDIS_URL": redis_url,
        "KARPUI_VAR_DIR": str(work / "var"),
    }
    for command in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
        subprocess.run([python, "manage.py", *command], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    commands = {
        "gunicorn": [
            python,
            "-m",
            "gunicorn",
            "karpui.wsgi",
            "-c",
            "karpui/gunicorn_conf.py",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        "worker": [
            python,
            "-m",
            "celery",
            "-A",
            "karpui",
            "worker",
            "--concurrency",
            "1",
            "--without-mingle",
            "--without-gossip",
        ],
        "beat": [python, "-m", "celery", "-A", "karpui", "beat", "--schedule", str(work / "celerybeat-schedule")],
    }
    logs = {name: (work / f"{name}.log").open("wb") for name in commands}
    processes = {
        name: subprocess.Popen(command, cwd=ROOT, env=env, stdout=logs[name], stderr=subprocess.STDOUT)
        for name, command in commands.items()
    }
    ok, last = False, (0, {})
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline and all(p.poll() is None for p in processes.values()):
            last = readyz(port)
            ticks = last[1].get("ticks") or {}
            lab = ticks.get("lab") if isinstance(ticks, dict) else None
            if last[0] == 200 and isinstance(lab, dict) and isinstance(lab.get("age_seconds"), int | float):
                ok = True
                break
            time.sleep(2)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs.values():
            log.close()
        drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
        subprocess.run([python, "-c", f"import psycopg; psycopg.connect({admin!r}, autocommit=True).execute({drop!r})"])
    if ok:
        print(f"production processes: the lab ticked and /readyz is 200: {json.dumps(last[1])}")
        return 0
    print(
        f"production processes: no tick with /readyz 200 within {DEADLINE_SECONDS:g} s; last: {last}", file=sys.stderr
    )
    for name, process in processes.items():
        print(f"--- {name} (exit {process.returncode}) ---", file=sys.stderr)
        print((work / f"{name}.log").read_text(errors="replace")[-4000:], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
