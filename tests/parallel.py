"""Loaded before Django (`-p tests.parallel` in pyproject's addopts): when pytest-xdist runs the suite in several
worker processes, each takes a Redis database of its own (REDIS_URL's number plus the worker's), so their leases,
login counters and Celery queues never meet, as their PostgreSQL test databases (pytest-django's `_gw<n>`) do not."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker.startswith("gw") and os.environ.get("REDIS_URL"):
    url = urlsplit(os.environ["REDIS_URL"])
    base = int(url.path.strip("/") or 0)
    os.environ["REDIS_URL"] = urlunsplit(url._replace(path=f"/{base + 1 + int(worker[2:])}"))
