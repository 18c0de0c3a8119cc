"""Drill-down reads: a node's facts and its pods with their requests, and any object's manifest and events."""

from __future__ import annotations

from typing import Any

from django.db.models import CharField, QuerySet
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Cast

from karpui import models
from karpui.clusters import storage
from karpui.insight.capacity import CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, PRICE, ZONE, Usage, node_state
from karpui.insight.owners import pod_owners
from karpui.kinds import printers
from karpui.kinds.resources import BY_KIND, LAB, NAMESPACED, resolve
from karpui.links import cluster_url
from provisioner.apimachinery.apply import LAST_APPLIED
from provisioner.quantity import QuantityError, is_byte_resource, parse_quantity

# Allocatable and capacity rows in the order and unit people read them; other resources follow by name.
RESOURCE_ORDER = ("cpu", "memory", "pods", "ephemeral-storage")
GIB = 2**30


def object_url(cluster: models.Cluster, kind: str, namespace: str, name: str) -> str:
    """The object page, in `cluster`, of any kind the dashboard knows (the node page for a Node)."""
    if kind == "Node":
        return cluster_url(cluster, "node-detail", name)
    if kind == "DisruptionCommand":
        return cluster_url(cluster, "command-detail", name)
    if kind in NAMESPACED:
        return cluster_url(cluster, "object-detail-namespaced", kind, namespace or "default", name)
    return cluster_url(cluster, "object-detail", kind, name)


def _amount(resource: str, text: Any) -> str:
    """One unit per resource: cores to two places, bytes in GiB to one, counts whole."""
    try:
        milli = parse_quantity(str(text))
    except QuantityError:
        return str(text)
    if resource == "cpu":
        return f"{milli / 1000:.2f} cores"
    if is_byte_resource(resource):
        return f"{milli / 1000 / GIB:.1f} GiB"
    return f"{milli // 1000}"


def _resources(allocatable: dict[str, Any], capacity: dict[str, Any]) -> list[dict[str, str]]:
    names = sorted(
        allocatable.keys() | capacity.keys(),
        key=lambda r: (r not in RESOURCE_ORDER, RESOURCE_ORDER.index(r) if r in RESOURCE_ORDER else 0, r),
    )
    return [
        {
            "resource": name,
            "allocatable": _amount(name, allocatable[name]) if name in allocatable else "—",
            "capacity": _amount(name, capacity[name]) if name in capacity else "—",
        }
        for name in names
    ]


def node_facts(*, node: dict[str, Any], claim: dict[str, Any] | None) -> dict[str, Any]:
    """What a platform engineer checks first: where and what the node is, what it costs, what it offers, and
    its health (the Node's conditions, then its NodeClaim's lifecycle conditions)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    status = node.get("status") or {}
    annotations = metadata.get("annotations") or {}
    claim_annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    price = annotations.get(PRICE) or claim_annotations.get(PRICE)
    conditions = [{**c, "of": "Node"} for c in status.get("conditions") or []]
    conditions += [{**c, "of": "NodeClaim"} for c in ((claim or {}).get("status") or {}).get("conditions") or []]
    return {
        "instance_type": labels.get(INSTANCE_TYPE, ""),
        "zone": labels.get(ZONE, ""),
        "capacity_type": labels.get(CAPACITY_TYPE, ""),
        "nodepool": labels.get(NODEPOOL, ""),
        "nodeclaim": ((claim or {}).get("metadata") or {}).get("name", ""),
        "price": float(price) if price else None,
        "state": node_state(node, claim),
        "cordoned": bool((node.get("spec") or {}).get("unschedulable")),
        "labels": sorted(labels.items()),
        "annotations": sorted(annotations.items()),
        "taints": (node.get("spec") or {}).get("taints") or [],
        "resources": _resources(status.get("allocatable") or {}, status.get("capacity") or {}),
        "conditions": conditions,
        "created": metadata.get("creationTimestamp", ""),
    }


def node_claim(cluster: models.Cluster, node: str) -> dict[str, Any] | None:
    """The NodeClaim whose node this is (Karpenter names them apart; the lab the same), or None."""
    return (
        models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim", body__status__nodeName=node)
        .values_list("body", flat=True)
        .first()
    )


def named_in_logs(cluster: models.Cluster) -> QuerySet[models.LogEntry]:
    """Log records with the NodeClaim and Node they name as columns, to filter on."""
    # Compared as text: fields is json on PostgreSQL, which has no = (jsonb has).
    return models.LogEntry.objects.filter(cluster=cluster).annotate(
        named_claim=Cast(KT("fields__NodeClaim__name"), CharField()),
        named_node=Cast(KT("fields__Node__name"), CharField()),
    )


def node_of_claim(cluster: models.Cluster, claim: str) -> str | None:
    """The node a NodeClaim launched (kwok names it `kwok-<nodeclaim>-…`), from the NodeClaim while it exists and
    from the log records that named both after it is gone; None when it never registered one."""
    live = (
        models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim", name=claim)
        .values_list(KT("body__status__nodeName"), flat=True)
        .first()
    )
    if live:
        return str(live)
    recorded = named_in_logs(cluster).filter(named_claim=claim, named_node__isnull=False).order_by("id")
    return recorded.values_list("named_node", flat=True).first()


def claims_of_node(cluster: models.Cluster, node: str) -> list[str]:
    """The NodeClaims behind a node (one, unless a name came back), live or recorded in the logs."""
    live = models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim", body__status__nodeName=node)
    recorded = named_in_logs(cluster).filter(named_node=node, named_claim__isnull=False)
    names = set(live.values_list("name", flat=True)) | set(recorded.values_list("named_claim", flat=True).distinct())
    return sorted(names - {node})


def node_pods(*, cluster: models.Cluster, node: str) -> list[dict[str, Any]]:
    """The pods bound to the node with their owners and requests (from the summary columns), by namespace and
    name; two queries."""
    rows = list(
        models.KubeObject.objects.filter(cluster=cluster, kind="Pod", node_name=node)
        .order_by("namespace", "name")
        .values_list(
            "namespace",
            "name",
            "phase",
            "cpu_millis",
            "memory_bytes",
            KeyTransform("ownerReferences", KeyTransform("metadata", "body")),
            KeyTransform("annotations", KeyTransform("metadata", "body")),
        )
    )
    owners = pod_owners(cluster, ((ns, refs) for ns, _, _, _, _, refs, _ in rows))
    return [
        {
            "namespace": ns,
            "name": name,
            "phase": phase,
            "cpu": cpu,
            "memory": memory,
            "owner": owner,
            "owner_url": object_url(cluster, owner.kind, owner.namespace, owner.name) if owner.kind in BY_KIND else "",
            "url": object_url(cluster, "Pod", ns, name),
            "do_not_disrupt": ((annotations or {}) if isinstance(annotations, dict) else {}).get(
                "karpenter.sh/do-not-disrupt", ""
            ),
        }
        for (ns, name, phase, cpu, memory, _, annotations), owner in zip(rows, owners, strict=True)
    ]


def pods_requested(pods: list[dict[str, Any]], node: dict[str, Any]) -> dict[str, Any]:
    """The node's running pods' requests against its allocatable, as the nodes page shows them."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    active = [p for p in pods if p["phase"] not in ("Succeeded", "Failed")]
    usage = Usage(
        cpu_requested=sum(p["cpu"] for p in active),
        cpu_allocatable=_milli(allocatable.get("cpu")),
        memory_requested=sum(p["memory"] for p in active),
        memory_allocatable=_milli(allocatable.get("memory")) // 1000,
    )
    return {"usage": usage, "bars": usage.bars()}


def _milli(text: Any) -> int:
    try:
        return parse_quantity(str(text)) if text not in (None, "") else 0
    except QuantityError:
        return 0


def _node_url(cluster: models.Cluster, kind: str, name: str, manifest: dict[str, Any]) -> str:
    """The node page an object belongs to: a NodeClaim's node, or the node a pod is bound to."""
    if kind == "NodeClaim":
        node = (manifest.get("status") or {}).get("nodeName")
    elif kind == "Pod":
        node = (manifest.get("spec") or {}).get("nodeName")
    else:
        node = None
    return cluster_url(cluster, "node-detail", node) if node else ""


def shown_manifest(manifest: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The manifest as the page's YAML shows it: without managedFields and without kubectl's last-applied
    annotation (a copy of the whole file, often longer than the object), and that annotation's length."""
    meta = dict(manifest.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = dict(meta.get("annotations") or {})
    hidden = annotations.pop(LAST_APPLIED, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**manifest, "metadata": meta}, len(hidden or "")


def object_detail(*, cluster: models.Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """Any object's manifest as YAML and the events about it, newest first (Headlamp's detail view).
    Raises LookupError when the kind is unknown or the object does not exist."""
    resource = resolve(kind)
    kind = resource.kind
    namespace = namespace if resource.namespaced else ""
    manifest: dict[str, Any] | None
    if resource.store == LAB:
        manifest = (
            models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name=name)
            .values_list("body", flat=True)
            .first()
        )
    else:
        # Configuration kinds live in their own tables; there are few of each.
        manifest = next(
            (
                m
                for m in storage.list_manifests(cluster, resource)
                if m["metadata"]["name"] == name and (m["metadata"].get("namespace") or "") == namespace
            ),
            None,
        )
    if manifest is None:
        where = f' in namespace "{namespace}"' if namespace else ""
        raise LookupError(f'{resource.qualified} "{name}" not found{where}')
    events = models.KubeObject.objects.filter(
        cluster=cluster, kind="Event", body__involvedObject__kind=kind, body__involvedObject__name=name
    )
    if namespace:
        events = events.filter(body__involvedObject__namespace=namespace)
    owners = [
        {
            **ref,
            "url": object_url(cluster, ref.get("kind", ""), namespace, ref.get("name", ""))
            if ref.get("kind") in BY_KIND
            else "",
        }
        for ref in (manifest.get("metadata") or {}).get("ownerReferences") or []
        if isinstance(ref, dict)
    ]
    # As kubectl get -o yaml prints it, less kubectl's last-applied copy of the file (out of view, its size said).
    shown, last_applied = shown_manifest(manifest)
    return {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "manifest": manifest,
        "yaml": printers.as_yaml(shown),
        "last_applied": last_applied,
        "owners": owners,
        "events": sorted(
            (e.body for e in events), key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", reverse=True
        ),
        "node_url": _node_url(cluster, kind, name, manifest),
    }
