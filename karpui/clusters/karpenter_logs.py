"""Karpenter's own log (observe mode), read where the operator has it as a file, into the cluster's log rows beside
karpui's: each JSON line Karpenter wrote (zap's `level`, `time`, `logger`, `message` and its fields) becomes a
LogEntry marked `source: karpenter`, so the Logs page shows Karpenter's "disrupting node(s)" next to karpui's gate.

The file is followed as `tail -F` does: from where the last step stopped (kept in the cluster's engine state, so a
restarted engine does not read it twice), from the start again when it was replaced or truncated (log rotation), and
only whole lines (a line Karpenter is still writing waits for the next step)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.cluster.objects import parse_timestamp
from provisioner.controllers.context import TimedRecord
from provisioner.scheduling.logs import LogRecord

SOURCE = "karpenter"
READ_AT_MOST = 4 * 1024 * 1024  # a step reads at most this much; the rest waits for the next


@dataclass
class KarpenterLog:
    """Where Karpenter's log file is, and how far it has been read (its inode and byte offset)."""

    path: Path
    inode: int = 0
    offset: int = 0

    def state(self) -> dict[str, int]:
        return {"inode": self.inode, "offset": self.offset}

    @classmethod
    def at(cls, path: str, state: dict[str, Any] | None) -> KarpenterLog:
        state = state or {}
        return cls(Path(path), int(state.get("inode") or 0), int(state.get("offset") or 0))

    def read(self) -> list[TimedRecord]:
        """The whole lines written since the last read (none while the file is missing)."""
        try:
            with open(self.path, "rb") as log:
                facts = os.fstat(log.fileno())
                if facts.st_ino != self.inode or facts.st_size < self.offset:
                    self.inode, self.offset = facts.st_ino, 0  # a new file, or truncated: from its start
                log.seek(self.offset)
                chunk = log.read(READ_AT_MOST)
        except FileNotFoundError:
            return []
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        return [record for line in whole.splitlines() if (record := parse_line(line)) is not None]


def parse_line(line: bytes) -> TimedRecord | None:
    """One of Karpenter's JSON log lines as a record; None for a line that is not one (a panic's stack, say)."""
    try:
        data = json.loads(line)
        when = parse_timestamp(str(data.pop("time")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(data, dict):
        return None
    level = str(data.pop("level", "INFO")).upper()
    logger = str(data.pop("logger", ""))
    message = str(data.pop("message", ""))
    return TimedRecord(when, LogRecord(message, {**data, "source": SOURCE}, level=level, logger=logger))
