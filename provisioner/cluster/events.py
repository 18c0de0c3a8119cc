"""Kubernetes Events recorded through the cluster port, counting repeats as the API server's event recorder does."""

from __future__ import annotations

import hashlib
from contextlib import suppress

from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import AlreadyExists, Obj, parse_timestamp, timestamp


def record(
    api: ClusterAPI,
    involved: Obj,
    event_type: str,
    reason: str,
    message: str,
    now: float,
    *,
    dedupe_seconds: float = 0.0,
    component: str = "karpenter",
) -> None:
    """Record an Event about `involved`, counting repeats of the same reason and message; a repeat within
    `dedupe_seconds` of the last one is dropped, as Karpenter's deduplicating recorder does."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    # The kind is part of the name: a Node and its NodeClaim often share a name and get the same message.
    digest = hashlib.sha256(f"{involved['kind']}\n{reason}\n{message}".encode()).hexdigest()[:8]
    name = f"{meta['name']}.{digest}"
    existing = api.get("Event", name, namespace)
    if (
        existing is not None
        and dedupe_seconds
        and now - parse_timestamp(existing.get("lastTimestamp") or "1970-01-01T00:00:00Z") < dedupe_seconds
    ):
        return
    if existing is not None and existing.get("message") == message:
        existing["count"] = int(existing.get("count", 1)) + 1
        existing["lastTimestamp"] = timestamp(now)
        api.update(existing)
        return
    # Taken: recorded by a write whose answer was lost, or one the informer cache has not seen yet; one Event either way.
    with suppress(AlreadyExists):
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "kind": involved["kind"],
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                },
                "type": event_type,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": timestamp(now),
                "lastTimestamp": timestamp(now),
                "source": {"component": component},
            }
        )
