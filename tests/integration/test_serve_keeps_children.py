"""Issue 22, point 7, and issue 27, point 10: the default install does not die, and leaves nothing behind when it is
killed. `manage.py serve` runs for real in a subprocess on its own SQLite database and filesystem broker.

* A message file left empty in the broker's queue (what kombu's filesystem transport's race leaves a worker to read,
  celery/kombu#1551) is set aside, and the lab goes on ticking with the same worker.
* A child that dies is named with its last error and started again, while the web server goes on answering.
* serve killed with SIGKILL takes every child with it: the web server, the worker, its beat and its pool child.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.test_serve_shutdown import _answers, _free_port, _processes, descendants, serve_env, until
from tests.karp import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")


def _ticked_at(var_dir: Path) -> str | None:
    try:
        with sqlite3.connect(var_dir / "karpui.sqlite3", timeout=30) as db:
            row = db.execute("SELECT ticked_at FROM karpui_cluster WHERE name = 'lab'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _ticks_after(var_dir: Path, moment: str | None) -> bool:
    now = _ticked_at(var_dir)
    return now is not None and (moment is None or now > moment)


def _worker(serve: subprocess.Popen[bytes]) -> int | None:
    """The Celery worker's main process: the guard's child whose command runs celery."""
    for pid in descendants(serve.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"celery" in command and b"karpui/guard.py" not in b" ".join(command):
            parent = _processes().get(pid)
            if parent is not None and b"guard.py" in Path(f"/proc/{parent[1]}/cmdline").read_bytes():
                return pid
    return None


def _start(var_dir: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = _free_port()
    log_path = var_dir / "serve.log"
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", "--stop-timeout", "3"],
        cwd=ROOT,
        env=serve_env(var_dir),
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), "the web server")
    until(lambda: _ticks_after(var_dir, None), "the first tick")
    return serve, port, log_path


def test_an_empty_message_file_is_set_aside_and_a_dead_worker_is_named_and_started_again(tmp_path: Path) -> None:
    serve, port, log_path = _start(tmp_path)
    try:
        worker = _worker(serve)
        assert worker is not None
        # An empty message for the worker's queue, as the race leaves one, old enough not to be one being written.
        queue = tmp_path / "broker" / "queue"
        empty = queue / f"{int(time.monotonic() * 1000) - 60_000}_{uuid.uuid4()}.celery.msg"
        empty.touch()
        os.utime(empty, (time.time() - 60, time.time() - 60))
        until(lambda: (tmp_path / "broker" / "rejected" / empty.name).exists(), "the empty message to be set aside")
        moment = _ticked_at(tmp_path)
        until(lambda: _ticks_after(tmp_path, moment), "a tick after it")
        assert _worker(serve) == worker and serve.poll() is None
        said = log_path.read_text()
        assert f"filesystem broker: {empty.name} on queue celery is not a message (0 bytes: Expecting value" in said

        os.kill(worker, signal.SIGKILL)
        until(lambda: "serve: the worker " in log_path.read_text(), "serve to say the worker died")
        assert _answers(f"http://127.0.0.1:{port}/healthz")  # the web server was not taken down with it
        said = log_path.read_text()
        assert "serve: the worker was killed by SIGKILL after " in said
        assert "; starting it again in 1 s (restart 1)" in said
        until(lambda: _worker(serve) not in (None, worker), "the worker to start again")
        moment = _ticked_at(tmp_path)
        until(lambda: _ticks_after(tmp_path, moment), "the new worker's tick")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)


def test_serve_killed_with_sigkill_leaves_no_child_serving_or_ticking(tmp_path: Path) -> None:
    serve, port, _ = _start(tmp_path)
    # guards, the web server, the worker, its beat and its pool child
    until(lambda: len(descendants(serve.pid)) >= 6, "the worker's beat and pool")
    family = descendants(serve.pid)
    groups = {_processes()[pid][2] for pid in family if pid in _processes()}
    serve.kill()
    serve.wait(timeout=10)
    until(lambda: not {pid for pid, (_, _, group) in _processes().items() if group in groups}, "the children to go", 30)
    assert not _answers(f"http://127.0.0.1:{port}/healthz")
    moment = _ticked_at(tmp_path)
    time.sleep(3)  # three tick periods: nothing ticks any more
    assert _ticked_at(tmp_path) == moment
