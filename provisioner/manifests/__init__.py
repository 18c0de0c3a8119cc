"""Kubernetes manifests (YAML/JSON) to and from domain types, with validation errors that name the field."""

from provisioner.manifests.documents import Document, load_documents
from provisioner.manifests.errors import ManifestError

__all__ = ["Document", "ManifestError", "load_documents"]
