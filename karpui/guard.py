"""`python -m karpui.guard COMMAND...`: run COMMAND under a watcher that ends it with `serve`.

`serve` starts each of its children (the web server, the Celery worker with its beat and pool) through this, as the
leader of a process group of its own. The guard runs COMMAND in that group, passes on the signals `serve` sends to
stop it, exits with its status, and watches its own parent: once `serve` is gone, however it went (SIGKILL included,
which it cannot act on), the guard stops COMMAND (SIGTERM, then SIGKILL to the whole group after
ORPHAN_GRACE_SECONDS), so no web server, worker, beat or pool child outlives it and goes on serving and ticking.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType

POLL_SECONDS = 0.2
ORPHAN_GRACE_SECONDS = 3.0


def _end_group(child: subprocess.Popen[bytes]) -> None:
    """The parent is gone: ask COMMAND to stop, then kill the whole group (this guard with it)."""
    with contextlib.suppress(ProcessLookupError):
        child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + ORPHAN_GRACE_SECONDS
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def run(command: list[str]) -> int:
    parent = os.getppid()
    child = subprocess.Popen(command)  # serve's own command lines

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            code = child.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                _end_group(child)
            continue
        return code if code >= 0 else 128 - code  # killed by a signal: as a shell reports it


def main() -> None:
    command = sys.argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        sys.exit("usage: python -m karpui.guard [--] COMMAND [ARG...]")
    sys.exit(run(command))


if __name__ == "__main__":
    main()
