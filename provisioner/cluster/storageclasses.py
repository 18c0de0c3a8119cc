"""The cluster's default StorageClass, as kube-apiserver's DefaultStorageClass admission plugin picks it for a new
PersistentVolumeClaim that names no class (k8s.io/kubernetes pkg/volume/util/storageclass.go)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

IS_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
BETA_IS_DEFAULT_CLASS = "storageclass.beta.kubernetes.io/is-default-class"
# The class annotation that came before spec.storageClassName: a claim carrying it has asked for a class.
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"


def is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return "true" in (annotations.get(IS_DEFAULT_CLASS), annotations.get(BETA_IS_DEFAULT_CLASS))


def default_class(classes: Iterable[Mapping[str, Any]]) -> str | None:
    """The default class's name: the newest of those marked default, the first by name among equals (several may be
    marked while a cluster changes its default); None when no class is."""
    marked = [c["metadata"] for c in classes if is_default(c)]
    if not marked:
        return None
    # RFC 3339 timestamps in UTC order as text; newest first, then by name.
    newest = max(str(meta.get("creationTimestamp") or "") for meta in marked)
    return min(str(meta["name"]) for meta in marked if str(meta.get("creationTimestamp") or "") == newest)


def has_class(claim: Mapping[str, Any]) -> bool:
    """Whether a claim asked for a class, even the empty one (`storageClassName: ""`: no class, bind a PV without)."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return BETA_STORAGE_CLASS in annotations or (claim.get("spec") or {}).get("storageClassName") is not None
