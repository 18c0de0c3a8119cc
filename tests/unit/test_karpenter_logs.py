"""Karpenter's log file followed in observe mode (karpui/clusters/karpenter_logs.py): whole JSON lines only, once
each, and from the start again after rotation."""

from __future__ import annotations

import os
from pathlib import Path

from karpui.clusters.karpenter_logs import KarpenterLog, parse_line
from provisioner.cluster.objects import parse_timestamp

DISRUPTING = (
    b'{"level":"INFO","time":"2026-12-05T04:31:02.500Z","logger":"controller","message":"disrupting node(s)",'
    b'"controller":"disruption","command":"Underutilized/replace, terminating 1 nodes (1 pods)"}\n'
)


def test_a_line_is_karpenters_level_time_logger_message_and_fields_marked_as_its_own() -> None:
    entry = parse_line(DISRUPTING.strip())
    assert entry is not None
    assert entry.time == parse_timestamp("2026-12-05T04:31:02.500Z")
    assert (entry.record.level, entry.record.logger, entry.record.message) == (
        "INFO",
        "controller",
        "disrupting node(s)",
    )
    assert dict(entry.record.fields) == {
        "controller": "disruption",
        "command": "Underutilized/replace, terminating 1 nodes (1 pods)",
        "source": "karpenter",
    }


def test_lines_that_are_not_karpenters_json_are_left_out() -> None:
    assert [parse_line(b) for b in (b"panic: runtime error", b"[1, 2]", b'{"message": "no time"}')] == [None] * 3


def test_the_file_is_read_once_whole_lines_only_and_again_from_its_start_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "karpenter.log"
    log = KarpenterLog(path)
    assert log.read() == []  # not there yet
    path.write_bytes(DISRUPTING + DISRUPTING[:40])
    assert [e.record.message for e in log.read()] == ["disrupting node(s)"]
    assert log.read() == []  # the half line waits
    with open(path, "ab") as out:
        out.write(DISRUPTING[40:])
    assert [e.record.message for e in log.read()] == ["disrupting node(s)"]
    again = KarpenterLog.at(str(path), log.state())  # a restarted engine goes on where the last one stopped
    assert again.read() == []
    os.rename(path, tmp_path / "karpenter.log.1")
    path.write_bytes(DISRUPTING)
    assert [e.record.message for e in again.read()] == ["disrupting node(s)"]
