"""`manage.py serve`: migrate, make sure an admin exists, then run web + Celery worker + beat together, and keep
them running: a child that dies is named, with the last error it wrote, and started again (after 1 s, doubling up
to a minute while it keeps dying within a minute of its start), while the others go on serving.

The web server is Django's runserver on plain HTTP (`webserver`: runserver sending streams chunked); with a certificate (`--certfile` and `--keyfile`, or
KARPUI_TLS_CERTFILE and KARPUI_TLS_KEYFILE) it is gunicorn serving HTTPS with threads (a watch holds one; see
karpui/gunicorn_conf.py), which kubectl needs: it sends a token only over TLS.

One Ctrl-C (or SIGTERM) stops them all, in order: the web server first, so nobody acts on a half-stopped karpui,
then the worker with its embedded beat. Each child runs in its own process group, so the terminal's Ctrl-C reaches
only serve, which stops each group in turn: SIGTERM to the group's leader (Celery then finishes the running tick
and stops beat and its pool itself), and after --stop-timeout seconds, or at a second Ctrl-C, SIGKILL to the whole
group. No process outlives serve: not beat, not a pool child busy in a long tick. Each child runs under a guard
(karpui/guard.py) that watches serve and ends its group when serve is gone, even killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

POLL_SECONDS = 0.1
DEFAULT_ADDRPORT = "127.0.0.1:8000"
GUNICORN_CONF = Path(__file__).resolve().parents[2] / "gunicorn_conf.py"
GUARD = Path(__file__).resolve().parents[2] / "guard.py"  # run as a file: it needs nothing of karpui's
# A child that died within this many seconds of its start waits twice as long as the last time before its next
# start (from RESTART_SECONDS up to RESTART_MAX_SECONDS); one that ran longer is started again after RESTART_SECONDS.
RESTART_SECONDS, RESTART_MAX_SECONDS, QUICK_DEATH_SECONDS = 1.0, 60.0, 60.0
KEPT_LINES = 200  # of a child's stderr, to find its last error in
# The last line of a Python traceback (`json.decoder.JSONDecodeError: Expecting value: ...`), or a logged error.
_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b|.*\b(?:ERROR|CRITICAL)\b)")


def _host_port(addrport: str) -> tuple[str, str]:
    host, _, port = addrport.rpartition(":")
    if not port.isdigit():
        host, port = addrport, DEFAULT_ADDRPORT.rpartition(":")[2]
    return host, port


def site_url(addrport: str, *, tls: bool = False) -> str:
    """The address a browser on this machine opens for runserver's ADDRPORT ("8011", "0.0.0.0:8011", "[::1]:8011",
    "host:8011"): a bare port or an all-interfaces host is reached as 127.0.0.1."""
    host, port = _host_port(addrport)
    if host in ("", "0", "0.0.0.0", "[::]"):  # noqa: S104 - only read, to print a reachable address
        host = "127.0.0.1"
    return f"{'https' if tls else 'http'}://{host}:{port}/"


def web_command(python: str, addrport: str, certfile: str, keyfile: str) -> list[str]:
    """runserver for plain HTTP (karpui's, which sends watches chunked); gunicorn with TLS when given a certificate and its key, configured by
    karpui/gunicorn_conf.py (gthread, KARPUI_WEB_THREADS threads)."""
    if not certfile:
        return [python, "manage.py", "webserver", "--noreload", addrport]
    host, port = _host_port(addrport)
    bind = f"{host or '127.0.0.1'}:{port}"
    return [
        python,
        "-m",
        "gunicorn",
        "karpui.wsgi:application",
        "--config",
        str(GUNICORN_CONF),
        "--bind",
        bind,
        "--certfile",
        certfile,
        "--keyfile",
        keyfile,
        "--access-logfile",
        "-",
    ]


def last_error(lines: list[str]) -> str:
    """What a child last said went wrong: its last error line, else its last line."""
    written = [line.strip() for line in lines if line.strip()]
    for line in reversed(written):
        if _ERROR_LINE.match(line):
            return f"its last error: {line}"
    return f"its last line: {written[-1]}" if written else "it wrote nothing to stderr"


class Child:
    """One of serve's children, run under karpui/guard.py as the leader of a process group of its own; its stderr
    is passed on to serve's, and its last KEPT_LINES kept to name what it died of."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        self.command = command
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.delay = RESTART_SECONDS
        self.restart_at: float | None = None
        self.restarts = 0
        self.reader: threading.Thread | None = None

    def start(self) -> None:
        self.lines.clear()
        self.process = subprocess.Popen(
            # -P: not with karpui/ first on sys.path, whose selectors.py would stand for the standard library's
            [sys.executable, "-P", str(GUARD), "--", *self.command],
            process_group=0,
            stderr=subprocess.PIPE,
        )
        self.started_at = time.monotonic()
        assert self.process.stderr is not None
        self.reader = threading.Thread(target=self._pass_on, args=(self.process.stderr,), daemon=True)
        self.reader.start()

    def _pass_on(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.buffer.write(raw)
                sys.stderr.flush()
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def died(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def schedule_restart(self) -> str:
        """After it died: when it starts again, and what to say about it."""
        assert self.process is not None
        ran = time.monotonic() - self.started_at
        self.delay = (
            min(self.delay * 2, RESTART_MAX_SECONDS) if ran < QUICK_DEATH_SECONDS and self.restarts else RESTART_SECONDS
        )
        self.restart_at = time.monotonic() + self.delay
        self.restarts += 1
        if self.reader is not None:
            self.reader.join(timeout=1.0)  # its last lines (the pipe stays open while others of its group live)
        code = self.process.returncode
        how = f"exited with status {code}"
        if code > 128 and code - 128 in signal.valid_signals():  # the guard reports a signal as a shell does
            how = f"was killed by {signal.Signals(code - 128).name}"
        return (
            f"serve: the {self.name} {how} after {ran:.0f} s; {last_error(list(self.lines))}; "
            f"starting it again in {self.delay:g} s (restart {self.restarts})"
        )


@dataclass
class Stop:
    """The signals serve has received: the first asks for an orderly stop, a second for an immediate one."""

    signals: list[int] = field(default_factory=list)

    def receive(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    @property
    def hurried(self) -> bool:
        return len(self.signals) > 1


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pgid, signum)


def _wait(done: Any, deadline: float, stop: Stop) -> bool:
    """Poll until `done()`, the deadline, or a second signal; True if done."""
    while not done():
        if time.monotonic() >= deadline or stop.hurried:
            return False
        time.sleep(POLL_SECONDS)
    return True


def stop_group(process: subprocess.Popen[bytes], timeout: float, stop: Stop) -> bool:
    """Stop a child and everything in its process group; SIGKILL whatever is left after `timeout` seconds.
    True if it stopped by itself, False if it had to be killed."""
    pgid = process.pid  # started with process_group=0: the child leads a group of its own
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    stopped = _wait(lambda: process.poll() is not None, deadline, stop)
    if not stopped:
        _kill_group(pgid, signal.SIGKILL)
        process.wait()
    # The leader's own children (beat, the pool) may outlive it for a moment, or for good if it was killed.
    if not _wait(lambda: not _group_alive(pgid), max(deadline, time.monotonic() + 1.0), stop):
        _kill_group(pgid, signal.SIGKILL)
        stopped = False
    return stopped


class Command(BaseCommand):
    help = "Run karpui: migrations, web server on ADDRPORT (default 127.0.0.1:8000), Celery worker and beat."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default=DEFAULT_ADDRPORT)
        parser.add_argument("--no-worker", action="store_true", help="serve the web app only")
        parser.add_argument(
            "--certfile",
            default=os.environ.get("KARPUI_TLS_CERTFILE", ""),
            help="serve HTTPS with this certificate (PEM), through gunicorn (env KARPUI_TLS_CERTFILE)",
        )
        parser.add_argument(
            "--keyfile",
            default=os.environ.get("KARPUI_TLS_KEYFILE", ""),
            help="the certificate's private key (PEM; env KARPUI_TLS_KEYFILE)",
        )
        parser.add_argument(
            "--stop-timeout",
            type=float,
            default=10.0,
            help="seconds each child gets to stop before it and its process group are killed (default 10)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        certfile, keyfile = options["certfile"], options["keyfile"]
        if bool(certfile) != bool(keyfile):
            raise CommandError("--certfile and --keyfile go together: TLS needs the certificate and its key")
        for path in (certfile, keyfile):
            if path and not os.path.isfile(path):
                raise CommandError(f"{path}: no such file")
        call_command("migrate", interactive=False, verbosity=0)
        url = site_url(options["addrport"], tls=bool(certfile))
        self._ensure_admin(url)
        stop = Stop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, stop.receive)
        python = sys.executable
        children = [Child("web server", web_command(python, options["addrport"], certfile, keyfile))]
        if not options["no_worker"]:
            children.append(Child("worker", self._worker_command(python)))
        for child in children:  # in stopping order: web first
            child.start()
        self.stdout.write(f"karpui is serving {url} (Ctrl-C stops web and worker)")
        if certfile:
            self.stdout.write(
                f"kubectl: manage.py karp kubeconfig --server {url.rstrip('/')} --certificate-authority {certfile}"
            )
        self.stdout.flush()
        while not stop.requested:
            for child in children:
                self._keep(child, options["stop_timeout"], stop)
            time.sleep(POLL_SECONDS * 5)
        for child in children:
            if child.process is not None and not stop_group(child.process, options["stop_timeout"], stop):
                self.stderr.write(f"the {child.name} did not stop within {options['stop_timeout']:g} s: killed it")

    def _keep(self, child: Child, timeout: float, stop: Stop) -> None:
        """A child that died is said so, its group emptied, and started again when its delay has passed."""
        if child.restart_at is not None:
            if time.monotonic() >= child.restart_at:
                child.restart_at = None
                child.start()
            return
        if not child.died:
            return
        self.stderr.write(child.schedule_restart())
        self.stderr.flush()
        assert child.process is not None
        stop_group(child.process, timeout, stop)  # what it left in its group (beat, a pool child) goes too

    def _worker_command(self, python: str) -> list[str]:
        return [
            python,
            "-m",
            "celery",
            "-A",
            "karpui",
            "worker",
            "--beat",
            "--schedule",
            str(settings.VAR_DIR / "celerybeat-schedule"),
            "--concurrency",
            "1",
            "--loglevel",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
        ]

    def _ensure_admin(self, url: str) -> None:
        """On first run, create user `admin` with a random password and say how to log in."""
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "", password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created the first admin user. Log in at {url} as admin / {password}\n"
                "(change it with: python manage.py changepassword admin)"
            )
        )
