"""Run `manage.py karp` in-process as a user would, capturing exit code, stdout and stderr."""

from __future__ import annotations

import io
import json
import re
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


def logs(message: str) -> list[dict]:
    """The controllers' log lines with this message, in order, as `karp logs` prints them (one JSON object each)."""
    return [json.loads(line) for line in ok("logs").splitlines() if json.loads(line)["message"] == message]


def rows(*args: str) -> list[list[str]]:
    """A `get` table as rows of cells (header dropped)."""
    return [line.split() for line in ok(*args).splitlines()[1:]]


def table(*args: str) -> list[dict[str, str]]:
    """A `get` table as rows keyed by column header (`row["STATUS"]`), so a test names the column it reads."""
    return columns(ok(*args))


def columns(printed: str) -> list[dict[str, str]]:
    """kubectl's aligned columns (at least two spaces between them; a header may hold one, "NODE SELECTOR") as one
    dict per row; the last column takes the rest of its line (an event's message has spaces)."""
    lines = printed.splitlines()
    if not lines:
        return []
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s{2}))\S", lines[0])]
    headers = [lines[0][a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {h: line[a:b].strip() for h, a, b in zip(headers, starts, [*starts[1:], None], strict=True)}
        for line in lines[1:]
    ]


def workload_objects() -> int:
    """How many objects the lab holds besides the namespaces every cluster has, kind's control-plane node and
    Karpenter's install (its objects, and its Deployments' ReplicaSets and pods): 0 means nothing was written."""
    from django.db.models import Q

    from karpui.models import KubeObject
    from karpui.writes.checks import SYSTEM_NAMESPACES
    from provisioner.sim import karpenter

    install = Q(kind="Namespace", name__in=[*SYSTEM_NAMESPACES, *karpenter.NAMESPACES])
    install |= Q(kind="Node", name__endswith="-control-plane")
    install |= Q(kind__in=["ClusterRole", "ClusterRoleBinding"], name__startswith=karpenter.NAME)
    install |= Q(namespace__in=karpenter.NAMESPACES, name__startswith=karpenter.NAME)
    return KubeObject.objects.exclude(install).count()
