#!/usr/bin/env bash
# Install karpui into .venv (first run only, or when requirements change) and start it in lab mode.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$want" > "$stamp"
fi
exec .venv/bin/python manage.py serve "$@"
