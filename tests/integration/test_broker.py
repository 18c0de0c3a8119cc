"""The embedded broker (karpui.broker): messages are written whole, and what is not a message never stops a reader
(celery/kombu#1551); and serve's reading of a dead child's last error."""

from __future__ import annotations

import os
import time
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

from karpui.management.commands.serve import last_error


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, str]:
    names = ("queue", "processed", "control", "rejected")
    for name in names:
        (tmp_path / name).mkdir()
    return {
        "data_folder_in": str(tmp_path / "queue"),
        "data_folder_out": str(tmp_path / "queue"),
        "processed_folder": str(tmp_path / "processed"),
        "control_folder": str(tmp_path / "control"),
        "rejected_folder": str(tmp_path / "rejected"),
        "store_processed": False,
    }


def channel(folders: dict[str, str]):
    import karpui.celery  # noqa: F401 - maps filesystem:// to karpui.broker

    connection = Connection("filesystem://", transport_options=folders)
    return connection, connection.default_channel


def put_file(folder: str, name: str, data: bytes, age: float) -> Path:
    path = Path(folder) / name
    path.write_bytes(data)
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_a_message_is_written_whole_under_its_name_and_read_back(folders: dict[str, str]) -> None:
    connection, chan = channel(folders)
    with connection:
        assert type(chan).__module__ == "karpui.broker"
        chan._put("celery", {"body": "tick"})
        [name] = os.listdir(folders["data_folder_in"])
        assert name.endswith(".celery.msg") and not name.startswith(".")  # no part file is left
        assert chan._get("celery") == {"body": "tick"}
        with pytest.raises(Empty):
            chan._get("celery")


def test_an_old_empty_or_torn_message_is_set_aside_and_the_next_one_taken(
    folders: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    connection, chan = channel(folders)
    with connection:
        put_file(folders["data_folder_in"], "1000_a.celery.msg", b"", age=60)
        put_file(folders["data_folder_in"], "1001_b.celery.msg", b'{"body": "to', age=60)
        put_file(folders["data_folder_in"], "1002_c.celery.msg", b'{"body": "tick"}', age=60)
        assert chan._get("celery") == {"body": "tick"}
        assert sorted(os.listdir(folders["rejected_folder"])) == ["1000_a.celery.msg", "1001_b.celery.msg"]
        assert os.listdir(folders["data_folder_in"]) == []
    warnings = [r.getMessage() for r in caplog.records if r.name == "karpui.broker"]
    assert warnings[0].startswith(
        "filesystem broker: 1000_a.celery.msg on queue celery is not a message (0 bytes: Expecting value"
    )
    assert len(warnings) == 2


def test_an_empty_message_a_producer_may_still_be_writing_is_left_for_later(folders: dict[str, str]) -> None:
    connection, chan = channel(folders)
    with connection:
        young = put_file(folders["data_folder_in"], "1000_a.celery.msg", b"", age=0)
        with pytest.raises(Empty):
            chan._get("celery")
        assert young.exists() and os.listdir(folders["rejected_folder"]) == []
        young.write_bytes(b'{"body": "late"}')  # written in place at last, as kombu's own transport writes
        assert chan._get("celery") == {"body": "late"}


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (
            [
                "Traceback (most recent call last):",
                '  File "x.py", line 1',
                "json.decoder.JSONDecodeError: Expecting value",
            ],
            "its last error: json.decoder.JSONDecodeError: Expecting value",
        ),
        (
            [
                "[2026-01-01 10:00:00,000: ERROR/MainProcess] consumer: Cannot connect",
                "Trying again in 2.00 seconds...",
            ],
            "its last error: [2026-01-01 10:00:00,000: ERROR/MainProcess] consumer: Cannot connect",
        ),
        (["Starting development server", ""], "its last line: Starting development server"),
        ([], "it wrote nothing to stderr"),
    ],
)
def test_serve_names_a_dead_childs_last_error(lines: list[str], said: str) -> None:
    assert last_error(lines) == said
