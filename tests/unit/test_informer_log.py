"""What an informer logs while its list and watch keep failing: the first failure, every tenth, and any failure whose
reason differs from the one before (a cut watch followed by 429s names the 429s at once, not at the tenth)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from provisioner.adapters.informer import Informer
from provisioner.adapters.kinds import KINDS, Resource
from provisioner.cluster.objects import APIError, TooManyRequests


def informer() -> Informer:
    [node] = [kind for kind in KINDS if kind.kind == "Node"]
    made = Informer(Resource(node, "v1"), transport=None, sink=lambda _: None, clock=lambda: 100.0)  # type: ignore[arg-type]
    made.stopped.set()  # _failed waits out its back-off on this event: set, it returns at once
    return made


def test_a_failure_is_logged_first_at_every_tenth_and_when_its_reason_changes(caplog: Any) -> None:
    node = informer()
    refused = TooManyRequests("the server has received too many requests")
    errors = [APIError("watch ended at once")] + [refused] * 11 + [APIError("watch ended at once")]
    with caplog.at_level(logging.WARNING, logger="provisioner.adapters.informer"):
        for error in errors:
            node._failed(error)

    logged = [re.sub(r"; retrying in \d+\.\d s$", "", r.getMessage()) for r in caplog.records]
    assert logged == [
        "informer Node: list/watch failed (1 in a row, for 0 s): APIError: watch ended at once",
        "informer Node: list/watch failed (2 in a row, for 0 s): TooManyRequests: the server has received too many requests",
        "informer Node: list/watch failed (10 in a row, for 0 s): TooManyRequests: the server has received too many requests",
        "informer Node: list/watch failed (13 in a row, for 0 s): APIError: watch ended at once",
    ]
    assert (node.failures, node.errors, node.last_error) == (13, 13, "APIError: watch ended at once")


@pytest.mark.parametrize("failures", [1, 3])
def test_working_again_starts_a_new_run_of_failures(caplog: Any, failures: int) -> None:
    node = informer()
    with caplog.at_level(logging.INFO, logger="provisioner.adapters.informer"):
        for _ in range(failures):
            node._failed(APIError("watch ended at once"))
        node._working()
        node._failed(APIError("watch ended at once"))

    messages = [r.getMessage() for r in caplog.records]
    assert messages[-2] == f"informer Node: working again after {failures} failure(s)"
    assert messages[-1].startswith("informer Node: list/watch failed (1 in a row, for 0 s): APIError: watch ended")
    assert sum("list/watch failed" in m for m in messages) == 2
