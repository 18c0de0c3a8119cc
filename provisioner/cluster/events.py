"""Kubernetes Events recorded through the cluster port, counting repeats as the API server's event recorder does."""

from __future__ import annotations

import hashlib
from contextlib import suppress

from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import AlreadyExists, Obj, parse_timestamp, timestamp

# The API versions of the kinds Events are recorded about, for an object that does not say its own.
API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "NodeClaim": "karpenter.sh/v1",
    "NodePool": "karpenter.sh/v1",
    "NodeOverlay": "karpenter.sh/v1alpha1",
    "CapacityBuffer": "autoscaling.x-k8s.io/v1beta1",
    "KWOKNodeClass": "karpenter.kwok.sh/v1alpha1",
    "EC2NodeClass": "karpenter.k8s.aws/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "DisruptionCommand": "karpui.dev/v1alpha1",
}


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
        said = existing.setdefault("involvedObject", {})
        said.setdefault("apiVersion", reference(involved)["apiVersion"])  # an Event recorded before it was said
        api.update(existing)
        return
    # Taken: recorded by a write whose answer was lost, or one the informer cache has not seen yet; one Event either way.
    with suppress(AlreadyExists):
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": reference(involved),
                "type": event_type,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": timestamp(now),
                "lastTimestamp": timestamp(now),
                "source": {"component": component},
            }
        )


def reference(involved: Obj) -> Obj:
    """The object reference an Event names its object by, as client-go's recorder makes it (ref.GetReference):
    kind, namespace, name, uid, apiVersion and the resourceVersion it was seen at. `kubectl events --for KIND/NAME`
    selects on the kind, name and apiVersion, so without the apiVersion it finds nothing."""
    meta = involved["metadata"]
    reference = {
        "kind": involved["kind"],
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "apiVersion": involved.get("apiVersion") or API_VERSIONS.get(involved["kind"], "v1"),
    }
    if meta.get("resourceVersion"):
        reference["resourceVersion"] = meta["resourceVersion"]
    return reference
