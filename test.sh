#!/usr/bin/env bash
# Install the test tools into .venv (when requirements change) and run the whole test suite.
# Uses SQLite unless DATABASE_URL is set (CI sets it to PostgreSQL); REDIS_URL enables the Redis tests.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
stamp=.venv/.requirements-dev.sha
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
# Two worker processes (pytest-xdist): the suite waits on real clocks and servers as much as it computes, so two
# take about half the time on two cores; KARPUI_TEST_WORKERS=0 runs it in this one process.
exec .venv/bin/python -m pytest -n "${KARPUI_TEST_WORKERS:-2}" "$@"
