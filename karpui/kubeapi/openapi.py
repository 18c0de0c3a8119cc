"""OpenAPI v2 and v3 documents of the served kinds (placeholder until the vendored schemas land)."""

from __future__ import annotations

from typing import Any

from karpui.kubeapi.errors import no_route


def v2_document() -> bytes:
    raise no_route()


def v3_index(prefix: str) -> dict[str, Any]:
    raise no_route()


def v3_document(path: str) -> bytes | None:
    return None
