"""Reaching a kwok or observe cluster's Kubernetes API: the client for a cluster row, and the writes the web makes
there (a NodePool or node class edited in the dashboard or the admin is the cluster's object, not a row's).

The engine mirrors those objects back into their tables from its informers; the write also updates the mirror at
once, so the page that made it shows it without waiting for the next tick.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from karpui import models
from provisioner.adapters.direct import DirectAPI
from provisioner.adapters.kinds import BY_KIND, Resource
from provisioner.adapters.transport import Transport
from provisioner.cluster.objects import Obj


def transport(cluster: models.Cluster) -> Transport:
    """The official client's connection to the cluster: its service account in a pod, else the kubeconfig's."""
    limits = {"qps": settings.KARPUI_KUBE_CLIENT_QPS, "burst": int(settings.KARPUI_KUBE_CLIENT_BURST)}
    if cluster.kubeconfig == models.Cluster.IN_CLUSTER:
        return Transport.in_cluster(**limits)
    return Transport.from_kubeconfig(cluster.kubeconfig or None, cluster.kube_context or None, **limits)


# What a person writes in a cluster through karpui: its NodePools and node classes.
WRITTEN = {kind: Resource(BY_KIND[kind], BY_KIND[kind].versions[0]) for kind in ("NodePool", "KWOKNodeClass")}


def api(cluster: models.Cluster) -> DirectAPI:
    """An uncached client of the cluster: for the few writes a person makes, read-your-write."""
    return DirectAPI(transport(cluster), WRITTEN)


def apply_object(cluster: models.Cluster, manifest: Obj) -> tuple[Obj, str]:
    """Create the object in the cluster, or replace its spec, labels and annotations (keeping what the server owns):
    the outcome kubectl would print (created, configured, unchanged)."""
    client = api(cluster)
    meta = manifest["metadata"]
    current = client.get(manifest["kind"], meta["name"], meta.get("namespace", ""))
    if current is None:
        return client.create(manifest), "created"
    wanted: dict[str, Any] = {
        **current,
        "metadata": {
            **current["metadata"],
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
        },
        "spec": manifest.get("spec") or {},
    }
    if wanted == current:
        return current, "unchanged"
    return client.update(wanted, spec_changed=True), "configured"


def delete_object(cluster: models.Cluster, kind: str, name: str, namespace: str = "") -> None:
    api(cluster).delete(kind, name, namespace)
