"""What an object's page says first, per kind, before its YAML: its status and conditions, what it requests against
what it is given, who owns it (up to the Deployment), its pods and the nodes they run on, why a pending pod waits,
recent events, and the disruption commands about it.

Every read is bounded: at most PODS_SHOWN pods with their nodes (their count, spread and states come from
aggregates over the summary columns), at most EVENTS_SHOWN events, so a Deployment of 20,000 pods costs what one
of 20 does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Q
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform

from karpui import models
from karpui.insight.browse import status_counts
from karpui.insight.drilldown import node_pods, object_url, pods_requested
from karpui.insight.pending import shown_verdicts, waiting_pods
from karpui.kinds import display
from karpui.kinds.resources import BY_KIND
from karpui.links import cluster_url
from provisioner import labels as wk
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.pod import pod_from_manifest

PODS_SHOWN = 50
EVENTS_SHOWN = 20
SUMMARISED = ("Pod", "Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job", "NodeClaim")


def owner_chain(cluster: models.Cluster, manifest: dict[str, Any]) -> list[dict[str, str]]:
    """The object's controllers, nearest first (a pod's ReplicaSet, then its Deployment), each linked; at most
    three steps, one query each."""
    chain: list[dict[str, str]] = []
    namespace = (manifest.get("metadata") or {}).get("namespace", "")
    current = manifest
    for _ in range(3):
        refs = (current.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), refs[0] if refs else None)
        if not isinstance(ref, dict):
            break
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        resource = BY_KIND.get(kind)
        space = namespace if resource is not None and resource.namespaced else ""
        chain.append(
            {"kind": kind, "name": name, "url": object_url(cluster, kind, space, name) if resource is not None else ""}
        )
        found = (
            models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=space, name=name)
            .values_list("body", flat=True)
            .first()
        )
        if found is None:
            break
        current = found
    return chain


def _conditions(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (manifest.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]


def recent_events(cluster: models.Cluster, refs: Iterable[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The newest events about any of (kind, namespace, name), at most EVENTS_SHOWN; one query."""
    match = Q(pk__in=[])
    for kind, namespace, name in refs:
        term = Q(body__involvedObject__kind=kind, body__involvedObject__name=name)
        if namespace:
            term &= Q(body__involvedObject__namespace=namespace)
        match |= term
    rows = (
        models.KubeObject.objects.filter(match, cluster=cluster, kind="Event")
        .order_by(KT("body__lastTimestamp").desc())
        .values_list("body", flat=True)[:EVENTS_SHOWN]
    )
    return [
        {
            "last": e.get("lastTimestamp") or e.get("eventTime") or "",
            "type": e.get("type", ""),
            "reason": e.get("reason", ""),
            "object": f"{(e.get('involvedObject') or {}).get('kind', '')}/{(e.get('involvedObject') or {}).get('name', '')}",
            "message": e.get("message", ""),
            "count": e.get("count") or 1,
        }
        for e in rows
    ]


def decisions(cluster: models.Cluster, *, nodes: Iterable[str] = (), pods: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The disruption commands about any of these nodes, or evicting any of these pods (`namespace/name`), newest
    first: what, their phase, who decided, their savings. Commands are few (finished ones are pruned)."""
    wanted_nodes, wanted_pods = set(nodes), set(pods)
    if not wanted_nodes and not wanted_pods:
        return []
    found = []
    for body in models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand").values_list(
        "body", flat=True
    ):
        spec, status = body.get("spec") or {}, body.get("status") or {}
        candidates = spec.get("candidates") or []
        if not any(c.get("node") in wanted_nodes or wanted_pods.intersection(c.get("pods") or []) for c in candidates):
            continue
        found.append(
            {
                "name": body["metadata"]["name"],
                "url": f"{cluster_url(cluster, 'disruption')}#command-{body['metadata']['name']}",
                "text": spec.get("text", ""),
                "phase": status.get("phase", ""),
                "by": (spec.get("approval") or {}).get("by", ""),
                "savings": spec.get("savings", 0.0),
                "when": status.get("finishedAt") or status.get("proposedAt") or "",
            }
        )
    return sorted(found, key=lambda d: d["when"], reverse=True)


def _pods_of(cluster: models.Cluster, namespace: str, kind: str, names: list[str]) -> Any:
    """The pods whose controller is one of `names` of `kind` (their owner reference's first entry)."""
    return models.KubeObject.objects.filter(
        cluster=cluster,
        kind="Pod",
        namespace=namespace,
        body__metadata__ownerReferences__0__kind=kind,
        body__metadata__ownerReferences__0__name__in=names or [""],
    )


def pods_with_nodes(cluster: models.Cluster, rows: Any) -> dict[str, Any]:
    """Pods (at most PODS_SHOWN, by name) with their nodes, their count by phase, and how they spread over nodes and
    zones; four queries whatever their number."""
    total = rows.count()
    phases = dict(rows.values_list("phase").annotate(n=Count("id")).values_list("phase", "n"))
    waiting = rows.filter(unschedulable=True).count()
    per_node = dict(
        rows.exclude(node_name="").values_list("node_name").annotate(n=Count("id")).values_list("node_name", "n")
    )
    zones = dict(
        models.KubeObject.objects.filter(cluster=cluster, kind="Node", name__in=list(per_node)).values_list(
            "name", KeyTextTransform(wk.ZONE, KeyTransform("labels", KeyTransform("metadata", "body")))
        )
    )
    by_zone: Counter[str] = Counter()
    for node, count in per_node.items():
        by_zone[zones.get(node) or "(no zone)"] += count
    shown = rows.order_by("name").values_list("namespace", "name", "phase", "node_name", "unschedulable")[:PODS_SHOWN]
    return {
        "pods": [
            {
                "label": f"{ns}/{name}",
                "url": object_url(cluster, "Pod", ns, name),
                "phase": "Pending (no node)" if waiting_ else phase,
                "node": node,
                "node_url": cluster_url(cluster, "node-detail", node) if node else "",
            }
            for ns, name, phase, node, waiting_ in shown
        ],
        "pod_count": total,
        "pod_phases": sorted(phases.items()),
        "pods_waiting": waiting,
        "spread_nodes": len(per_node),
        "spread_zones": sorted(by_zone.items()),
        "busiest_node": max(per_node.values(), default=0),
    }


def _quantities(mapping: Mapping[str, Any] | None) -> str:
    return display.resources(mapping) if mapping else "—"


def pod_summary(cluster: models.Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
    """A pod's phase, node, QoS class, each container's requests and limits, its conditions, and for a pod waiting
    for a node the pending page's verdicts (what blocks it first)."""
    meta, spec, status = manifest.get("metadata") or {}, manifest.get("spec") or {}, manifest.get("status") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    try:
        view = pod_from_manifest(manifest)
        requests = display.resources(view.requests) if view.requests else "none"
    except ManifestError as error:
        requests = f"unreadable: {error}"
    containers = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "requests": _quantities((c.get("resources") or {}).get("requests")),
            "limits": _quantities((c.get("resources") or {}).get("limits")),
            "state": _container_state(status, c.get("name", "")),
        }
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        if isinstance(c, dict)
    ]
    node = spec.get("nodeName") or ""
    waiting = [p for p in waiting_pods(cluster=cluster, namespace=namespace, search=name) if p.name == name]
    verdicts = shown_verdicts(cluster, waiting[0]) if waiting else []
    return {
        "status": "Pending (waiting for a node)" if waiting else status.get("phase") or "Pending",
        "node": node,
        "node_url": cluster_url(cluster, "node-detail", node) if node else "",
        "qos": status.get("qosClass") or _qos(spec),
        "requests": requests,
        "containers": containers,
        "verdicts": verdicts,
        "waiting": bool(waiting),
        "pending_url": cluster_url(cluster, "pending", group="none", namespace=namespace, q=name),
        "do_not_disrupt": (meta.get("annotations") or {}).get(wk.DO_NOT_DISRUPT, ""),
        "decisions": decisions(cluster, pods=[f"{namespace}/{name}"]),
    }


def _container_state(status: dict[str, Any], name: str) -> str:
    for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if isinstance(entry, dict) and entry.get("name") == name:
            state = next(iter(entry.get("state") or {}), "")
            restarts = int(entry.get("restartCount") or 0)
            ready = "ready" if entry.get("ready") else "not ready"
            return f"{state or 'unknown'}, {ready}" + (f", {restarts} restarts" if restarts else "")
    return "—"


def _qos(spec: dict[str, Any]) -> str:
    """Kubernetes' QoS class from the containers' requests and limits (when the status does not say it)."""
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        (r.get("limits") or {}).get(k) is not None
        and (r.get("requests") or {}).get(k, (r.get("limits") or {}).get(k)) == (r.get("limits") or {}).get(k)
        for r in resources
        for k in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def workload_summary(cluster: models.Cluster, kind: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """A Deployment's, ReplicaSet's, DaemonSet's replicas as kubectl reads them, its ReplicaSets (a Deployment's),
    and its pods with their nodes and spread."""
    meta, spec, status = manifest.get("metadata") or {}, manifest.get("spec") or {}, manifest.get("status") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    replicasets: list[dict[str, Any]] = []
    owners = [name]
    owner_kind = kind
    if kind == "Deployment":
        rows = models.KubeObject.objects.filter(
            cluster=cluster,
            kind="ReplicaSet",
            namespace=namespace,
            body__metadata__ownerReferences__0__kind="Deployment",
            body__metadata__ownerReferences__0__name=name,
        ).values_list("name", "body")
        for rs_name, body in rows:
            rs_spec, rs_status = body.get("spec") or {}, body.get("status") or {}
            containers = ((rs_spec.get("template") or {}).get("spec") or {}).get("containers") or []
            replicasets.append(
                {
                    "name": rs_name,
                    "url": object_url(cluster, "ReplicaSet", namespace, rs_name),
                    "revision": (body["metadata"].get("annotations") or {}).get(
                        "deployment.kubernetes.io/revision", ""
                    ),
                    "desired": rs_spec.get("replicas", 0),
                    "ready": rs_status.get("readyReplicas", 0),
                    "images": ", ".join(str(c.get("image", "")) for c in containers),
                }
            )
        replicasets.sort(key=lambda r: int(r["revision"] or 0), reverse=True)
        owners, owner_kind = [r["name"] for r in replicasets], "ReplicaSet"
    template = (spec.get("template") or {}).get("spec") or {}
    pods = pods_with_nodes(cluster, _pods_of(cluster, namespace, owner_kind, owners))
    return {
        **status_counts(kind, status, spec),
        "misscheduled": status.get("numberMisscheduled", 0) if kind == "DaemonSet" else None,
        "selector": display.label_selector(spec.get("selector")),
        "node_selector": ", ".join(f"{k}={v}" for k, v in sorted((template.get("nodeSelector") or {}).items())),
        "strategy": (spec.get("strategy") or spec.get("updateStrategy") or {}).get("type", ""),
        "replicasets": replicasets,
        **pods,
        "pods_url": cluster_url(cluster, "pods", owner=f"{kind}/{namespace}/{name}"),
        "pending_url": cluster_url(cluster, "pending", group="none", owner=f"{kind}/{namespace}/{name}"),
        "decisions": decisions(cluster, pods=[p["label"] for p in pods["pods"]]),
    }


def nodeclaim_summary(cluster: models.Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
    """A NodeClaim's place in its lifecycle, what it asked for against what its node offers, where it runs, its
    price, its NodePool and node, and the commands about it."""
    meta, spec, status = manifest.get("metadata") or {}, manifest.get("spec") or {}, manifest.get("status") or {}
    labels = meta.get("labels") or {}
    node = status.get("nodeName") or ""
    pool = labels.get(wk.NODEPOOL, "")
    requested = (spec.get("resources") or {}).get("requests") or {}
    allocatable = status.get("allocatable") or {}
    conditions = {c.get("type"): c.get("status") for c in _conditions(manifest)}
    stage = next(
        (s for s in ("Ready", "Initialized", "Registered", "Launched") if conditions.get(s) == "True"), "Pending"
    )
    node_body = (
        models.KubeObject.objects.filter(cluster=cluster, kind="Node", name=node).values_list("body", flat=True).first()
        if node
        else None
    )
    usage = pods_requested(node_pods(cluster=cluster, node=node), node_body)["bars"] if node_body else []
    return {
        "status": "Deleting" if meta.get("deletionTimestamp") else stage,
        "node": node,
        "node_url": cluster_url(cluster, "node-detail", node) if node else "",
        "nodepool": pool,
        "nodepool_url": cluster_url(cluster, "nodepool-edit", pool) if pool else "",
        "instance_type": labels.get(wk.INSTANCE_TYPE, ""),
        "zone": labels.get(wk.ZONE, ""),
        "capacity_type": labels.get(wk.CAPACITY_TYPE, ""),
        "price": (meta.get("annotations") or {}).get(wk.PRICE, ""),
        "resources": [
            {
                "resource": r,
                "requested": display.quantity(r, requested[r]) if r in requested else "—",
                "allocatable": display.quantity(r, allocatable[r]) if r in allocatable else "—",
                "capacity": display.quantity(r, (status.get("capacity") or {})[r])
                if r in (status.get("capacity") or {})
                else "—",
            }
            for r in sorted(requested.keys() | allocatable.keys(), key=_resource_order)
        ],
        "bars": usage,
        "decisions": decisions(cluster, nodes=[node] if node else []),
    }


def _resource_order(resource: str) -> tuple[int, str]:
    order = ("cpu", "memory", "pods", "ephemeral-storage")
    return (order.index(resource) if resource in order else len(order), resource)


def summary(cluster: models.Cluster, kind: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """The page's first section for `kind`: common parts (conditions, owners, events) and the kind's own."""
    meta = manifest.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    refs = [(kind, namespace, name)]
    own: dict[str, Any] = {}
    if kind == "Pod":
        own = pod_summary(cluster, manifest)
    elif kind in ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job"):
        own = workload_summary(cluster, kind, manifest)
        refs += [("ReplicaSet", namespace, r["name"]) for r in own["replicasets"]]
    elif kind == "NodeClaim":
        own = nodeclaim_summary(cluster, manifest)
        if own["node"]:
            refs.append(("Node", "", own["node"]))
    return {
        "kind": kind,
        "conditions": _conditions(manifest),
        "owner_chain": owner_chain(cluster, manifest),
        "events": recent_events(cluster, refs),
        **own,
    }


NODECLAIMS_SHOWN = 50


def nodepool_summary(cluster: models.Cluster, row: models.NodePool) -> dict[str, Any]:
    """A NodePool's page, first: its nodes and what they hold against its limits, its NodeClaims with their
    nodes, types and states (at most NODECLAIMS_SHOWN), recent events and the commands about its nodes."""
    from karpui.insight.capacity import limit_uses

    status = row.status or {}
    claims = models.KubeObject.objects.filter(
        cluster=cluster, kind="NodeClaim", **{f"body__metadata__labels__{wk.NODEPOOL}": row.name}
    )
    shown = claims.order_by("name").values_list(
        "name",
        KT("body__status__nodeName"),
        KeyTextTransform(wk.INSTANCE_TYPE, KeyTransform("labels", KeyTransform("metadata", "body"))),
        KeyTextTransform(wk.CAPACITY_TYPE, KeyTransform("labels", KeyTransform("metadata", "body"))),
        KeyTextTransform(wk.ZONE, KeyTransform("labels", KeyTransform("metadata", "body"))),
        KeyTransform("conditions", KeyTransform("status", "body")),
    )[:NODECLAIMS_SHOWN]
    nodeclaims = []
    for name, node, instance_type, capacity_type, zone, conditions in shown:
        ready = {c.get("type"): c.get("status") for c in conditions or [] if isinstance(c, dict)}
        stage = next(
            (s for s in ("Ready", "Initialized", "Registered", "Launched") if ready.get(s) == "True"), "Pending"
        )
        nodeclaims.append(
            {
                "name": name,
                "url": object_url(cluster, "NodeClaim", "", name),
                "node": node or "",
                "node_url": cluster_url(cluster, "node-detail", node) if node else "",
                "type": instance_type or "",
                "capacity_type": capacity_type or "",
                "zone": zone or "",
                "state": "Drifted" if ready.get("Drifted") == "True" else stage,
            }
        )
    nodes = [c["node"] for c in nodeclaims if c["node"]]
    return {
        "nodes": status.get("nodes", 0),
        "resources": display.resources(status.get("resources")) if status.get("resources") else "nothing yet",
        "limits": limit_uses(row.spec.get("limits") or {}, status.get("resources") or {}),
        "nodeclaims": nodeclaims,
        "nodeclaim_count": claims.count(),
        "nodes_url": cluster_url(cluster, "nodes", nodepool=row.name),
        "events": recent_events(cluster, [("NodePool", "", row.name)]),
        "decisions": decisions(cluster, nodes=nodes),
    }
