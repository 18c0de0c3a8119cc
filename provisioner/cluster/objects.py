"""Kubernetes-shaped objects as plain dicts: their identity, scope, timestamps, and the API's error types."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name

CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "NodeClaim",
        "Namespace",
        "DeviceClass",
        "ResourceSlice",
        "DRAConfig",
        "NodeOverlay",
        "NodePool",
        "KWOKNodeClass",
        "EC2NodeClass",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
    }
)

# The garbage collector's finalizers, which kube-apiserver adds to an object deleted with propagationPolicy Orphan or
# Foreground: it stays, marked for deletion, until the collector has orphaned or deleted its dependents.
ORPHAN_FINALIZER, FOREGROUND_FINALIZER = "orphan", "foregroundDeletion"
PROPAGATION_FINALIZERS = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}
# The kinds whose objects own others in a cluster: Deployment -> ReplicaSet -> Pod (and DaemonSet -> Pod),
# Pod -> ResourceClaim, Node -> ResourceSlice.
OWNER_KINDS = ("Deployment", "DaemonSet", "ReplicaSet", "Pod", "Node")
# What they own, each by its controller's uid.
DEPENDENT_KINDS = ("ReplicaSet", "Pod", "ResourceClaim", "ResourceSlice")


def desired(obj: Mapping[str, Any]) -> Any:
    """What a change of bumps metadata.generation: the spec, or a PodTemplate's template (its strategy's
    PrepareForUpdate)."""
    return obj.get("template") if obj.get("kind") == "PodTemplate" else obj.get("spec")


class APIError(Exception):
    """An error the API server answers with a status code (and a Kubernetes `Status` body)."""

    code = 500
    reason = "InternalError"


class NotFound(APIError, LookupError):
    code = 404
    reason = "NotFound"


class AlreadyExists(APIError):
    code = 409
    reason = "AlreadyExists"


class Conflict(APIError):
    """An update based on a stale resourceVersion."""

    code = 409
    reason = "Conflict"


class TooManyRequests(APIError):
    """The eviction API's refusal: a PodDisruptionBudget allows no more disruptions now."""

    code = 429
    reason = "TooManyRequests"


class NotLeading(Exception):
    """A write refused before it was sent: the engine may no longer hold its Lease (another may lead by now), so it
    writes nothing more until it leads again. Not an APIError: no controller may take it for one failed object and
    go on with the next; it ends the whole step."""


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def namespace_of(kind: str, namespace: str | None) -> str:
    """The namespace part of an object's key: empty for cluster-scoped kinds, `default` when not given."""
    return "" if kind in CLUSTER_SCOPED else namespace or "default"


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    kind = obj["kind"]
    return (kind, namespace_of(kind, meta.get("namespace")), meta["name"])


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with `controller: true`, if any."""
    return next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
