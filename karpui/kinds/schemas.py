"""The OpenAPI schemas of the custom resources karpui serves (Karpenter's CRDs, vendored with the Kubernetes API's
OpenAPI documents), for what reads them besides the API: the NodePool editor builds its form fields from them."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

CRDS = Path(__file__).resolve().parent.parent / "kubeapi" / "openapi" / "crds.json"


@functools.cache
def crd_schema(kind: str, version: str) -> dict[str, Any]:
    """The schema of `kind` at `version`, as its CRD publishes it. KeyError when karpui has no such CRD."""
    crd = json.loads(CRDS.read_text())[kind]
    schema: dict[str, Any] = next(v for v in crd["versions"] if v["name"] == version)["schema"]
    return schema
