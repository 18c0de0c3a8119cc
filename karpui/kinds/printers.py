"""kubectl's output formats: aligned tables (default and wide), name, yaml and json (a List for several)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """A table column, named as the API server names it (`Nominated Node`); kubectl and karp print it upper-case.

    `type` is the Table column type (string, integer, date); `karp=False` columns (a pod's IP, a node's OS image)
    are served to kubectl, which always prints them, but karp leaves them out: the lab never fills them.
    """

    header: str
    value: Callable[[Manifest, datetime], str]
    wide_only: bool = False
    type: str = "string"
    karp: bool = True


def human_duration(seconds: float) -> str:
    """kubectl's AGE: 45s, 3m20s, 5h, 2d3h, 400d."""
    seconds = int(max(seconds, 0))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    return f"{days}d"


def age(manifest: Manifest, now: datetime) -> str:
    created = manifest.get("metadata", {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    return human_duration((now - then).total_seconds())


def table(manifests: Sequence[Manifest], columns: Sequence[Column], now: datetime, *, wide: bool) -> str:
    shown = [c for c in columns if c.karp and (wide or not c.wide_only)]
    rows = [[c.header.upper() for c in shown]] + [[c.value(m, now) or "<none>" for c in shown] for m in manifests]
    widths = [max(len(row[i]) for row in rows) for i in range(len(shown))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def as_list(manifests: Sequence[Manifest]) -> Manifest:
    return {"apiVersion": "v1", "kind": "List", "items": list(manifests), "metadata": {"resourceVersion": ""}}


def as_yaml(body: Any) -> str:
    """YAML with keys sorted, as kubectl prints it: the order keys were stored in is not kept (PostgreSQL's jsonb
    orders them by length), so sorting is the only order every database gives alike."""
    return yaml.safe_dump(body, sort_keys=True, default_flow_style=False)


def without_managed_fields(manifest: Manifest) -> Manifest:
    """The object as kubectl prints it by default: without metadata.managedFields (`--show-managed-fields`)."""
    meta = manifest.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return manifest
    return {**manifest, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def render(manifests: Sequence[Manifest], output: str, *, single: bool, show_managed_fields: bool = False) -> str:
    """yaml/json: one object when a name was asked for, otherwise a List; keys sorted, as kubectl prints them, and
    without managedFields unless asked for."""
    if not show_managed_fields:
        manifests = [without_managed_fields(m) for m in manifests]
    body: Any = manifests[0] if single else as_list(manifests)
    if output == "json":
        return json.dumps(body, indent=4, sort_keys=True)
    if output == "yaml":
        return as_yaml(body).rstrip()
    raise ValueError(output)


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
