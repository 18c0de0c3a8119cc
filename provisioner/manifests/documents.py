"""Splitting YAML/JSON text into Kubernetes documents, safely and with positions for error messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from provisioner.manifests.errors import ManifestError

MAX_BYTES = 4 * 1024 * 1024
MAX_DOCUMENTS = 2000


@dataclass(frozen=True, slots=True)
class Document:
    """One object from a file: its 1-based position and its parsed body."""

    index: int
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion") or "")

    @property
    def name(self) -> str:
        meta = self.body.get("metadata")
        return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def load_documents(text: str) -> list[Document]:
    """Parse every document (empty ones skipped, `kind: List` expanded); each needs apiVersion and kind."""
    if len(text.encode()) > MAX_BYTES:
        raise ManifestError(f"the manifest is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        raw = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ManifestError(f"malformed YAML{where}: {problem}") from None
    bodies: list[Any] = []
    for doc in raw:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            bodies.extend(doc["items"])
        else:
            bodies.append(doc)
    if len(bodies) > MAX_DOCUMENTS:
        raise ManifestError(f"too many documents: {len(bodies)} (at most {MAX_DOCUMENTS})")
    documents = []
    for index, body in enumerate(bodies, start=1):
        if not isinstance(body, dict):
            raise ManifestError("expected an object with apiVersion and kind", document=index)
        for required in ("apiVersion", "kind"):
            if not isinstance(body.get(required), str) or not body[required]:
                raise ManifestError(f"{required} is required", field=required, document=index)
        documents.append(Document(index, body))
    return documents
