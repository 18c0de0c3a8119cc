"""Run `manage.py karp` in-process as a user would, capturing exit code, stdout and stderr."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def karp(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        call_command("karp", *args, stdout=out, stderr=err)
    except SystemExit as exit:
        code = int(exit.code or 0)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def ok(*args: str, stdin: str | None = None) -> str:
    code, out, err = karp(*args, stdin=stdin)
    assert code == 0, err
    return out


def rows(*args: str) -> list[list[str]]:
    """A `get` table as rows of cells (header dropped)."""
    return [line.split() for line in ok(*args).splitlines()[1:]]


def workload_objects() -> int:
    """How many objects the lab holds besides the namespaces every cluster has: 0 means nothing was written."""
    from karpui.models import KubeObject
    from karpui.objects import SYSTEM_NAMESPACES

    return KubeObject.objects.exclude(kind="Namespace", name__in=SYSTEM_NAMESPACES).count()
