"""Loaded before Django (`-p tests.parallel` in pyproject's addopts): when pytest-xdist runs the suite in several
worker processes, each takes a Redis database of its own (REDIS_URL's number plus the worker's), so their leases,
login counters and Celery queues never meet, as their PostgreSQL test databases (pytest-django's `_gw<n>`) do not.

It also keeps the tests that mostly wait on wall time together: tests/kube's engines tick a lab API server at wall
time (its backoffs and consolidateAfter are real seconds, 5-47 s a test) and tests/browser waits on a live server's
polls; tests/seeds runs each seed experiment once per module (its kubectl lines, in a shell), which one worker must
do for all of the module's tests. Handed out one by one they ran on both workers at once, both waiting while the CPU idled; as one group each
(see pytest_xdist_make_scheduler), one worker waits through them while the other computes the rest."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker.startswith("gw") and os.environ.get("REDIS_URL"):
    url = urlsplit(os.environ["REDIS_URL"])
    base = int(url.path.strip("/") or 0)
    os.environ["REDIS_URL"] = urlunsplit(url._replace(path=f"/{base + 1 + int(worker[2:])}"))

# Labs are bare in tests (karpui.settings.KARPUI_LAB_INSTALL): each test builds the cluster it needs, and those about
# kind's control plane and Karpenter's install (tests/seeds, tests/kubeapi/test_karpenter_deployment.py) turn it on.
# Set here, before Django reads its settings, so the servers and engines tests start as processes inherit it.
os.environ.setdefault("KARPUI_LAB_INSTALL", "false")

# Test folders whose tests go to one worker together, as one unit of work.
WALL_TIME_GROUPS = ("tests/kube/", "tests/browser/", "tests/seeds/")


def _scope(nodeid: str) -> str:
    return next((folder for folder in WALL_TIME_GROUPS if nodeid.startswith(folder)), nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's `load` (what `-n N` means), but each wall-time folder is one unit. (Not xdist_group marks: their
    `--dist loadgroup` renames items through `item._nodeid`, which pytest 9 no longer reads, so it groups nothing.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WallTimeGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    # LoadScope hands out the units with the most tests first: tests/kube, then tests/browser, then one by one.
    return WallTimeGroups(config, log)
