"""Liveness for the processes without an HTTP port (`manage.py engine`, Celery beat): each touches a file as its
loop goes round, and a Kubernetes exec probe, `python -m karpui.heartbeat FILE MAX_AGE`, fails once it is older.

The probe sets up neither Django nor a database connection: a loop that hangs on either is what it must catch."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def beat(path: str) -> None:
    """Say the loop went round: the file's modification time is now."""
    Path(path).touch()


def age(path: str, now: float) -> float | None:
    """Seconds since the last beat, or None if there was none."""
    try:
        return max(now - Path(path).stat().st_mtime, 0.0)
    except FileNotFoundError:
        return None


def main(argv: list[str]) -> int:
    path, max_age = argv[0], float(argv[1])
    seconds = age(path, time.time())
    if seconds is None:
        print(f"no heartbeat at {path}")
        return 1
    if seconds > max_age:
        print(f"the last heartbeat was {seconds:.0f} s ago (at most {max_age:.0f} s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
