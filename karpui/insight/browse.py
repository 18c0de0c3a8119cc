"""Read-only lists for browsing a cluster: every pod (filtered), every workload with its replica status, a search by
name across kinds, and one line per cluster. Each reads the summary columns and a few JSON paths in SQL, a page at
a time, so a page costs the same at 20,000 pods as at 200."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.fields.json import KT, KeyTransform

from karpui import models
from karpui.insight import paging
from karpui.insight.capacity import age
from karpui.insight.drilldown import object_url
from karpui.insight.owners import pod_owners
from karpui.kinds.resources import BY_KIND
from karpui.links import cluster_url

PODS_PAGE_SIZE = 100  # a row is ~0.35 KB
WORKLOADS_PAGE_SIZE = 100
SEARCH_SHOWN = 20  # matches shown per kind; the count says how many more
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job")
# What a search by name looks through, in the order people look for things.
SEARCH_KINDS = ("Node", "NodeClaim", "Pod", "Deployment", "ReplicaSet", "DaemonSet", "PodDisruptionBudget", "Event")


@dataclass(frozen=True)
class PodFilters:
    namespace: str = ""
    node: str = ""
    phase: str = ""
    owner: str = ""  # `Kind/namespace/name`, as Owner.key
    search: str = ""
    pending: bool = False  # waiting for a node (unschedulable)

    def query(self) -> dict[str, str]:
        return {
            "namespace": self.namespace,
            "node": self.node,
            "phase": self.phase,
            "owner": self.owner,
            "q": self.search,
            "pending": "1" if self.pending else "",
        }


def _pods(cluster: models.Cluster, filters: PodFilters) -> QuerySet[models.KubeObject]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="Pod")
    if filters.namespace:
        rows = rows.filter(namespace=filters.namespace)
    if filters.node:
        rows = rows.filter(node_name=filters.node)
    if filters.phase:
        rows = rows.filter(phase=filters.phase)
    if filters.pending:
        rows = rows.filter(unschedulable=True)
    if filters.search:
        rows = rows.filter(name__icontains=filters.search)
    if filters.owner:
        kind, _, rest = filters.owner.partition("/")
        namespace, _, name = rest.partition("/")
        rows = rows.filter(namespace=namespace)
        if kind == "Deployment":
            # Its pods are its ReplicaSets': owned by a ReplicaSet whose owner is the Deployment.
            rows = rows.filter(_owned_by("ReplicaSet", _owned_replicasets(cluster, namespace, name)))
        else:
            rows = rows.filter(_owned_by(kind, [name]))
    return rows


def _owned_replicasets(cluster: models.Cluster, namespace: str, deployment: str) -> list[str]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="ReplicaSet", namespace=namespace).values_list(
        "name", KeyTransform("ownerReferences", KeyTransform("metadata", "body"))
    )
    return [
        name
        for name, refs in rows
        if any(
            isinstance(r, dict) and r.get("kind") == "Deployment" and r.get("name") == deployment for r in refs or []
        )
    ]


def _owned_by(kind: str, names: list[str]) -> Q:
    """Pods whose controller is one of `names` of `kind`: the owner reference's first entry, as controllers write it."""
    if not names:
        return Q(pk__in=[])
    return Q(
        **{"body__metadata__ownerReferences__0__kind": kind},
        **{"body__metadata__ownerReferences__0__name__in": names},
    )


def pods_page(
    *, cluster: models.Cluster, filters: PodFilters, page: int = 1, everything: bool = False
) -> dict[str, Any]:
    """One page of pods (every one with `everything`, for a CSV) by namespace and name, each with its node, owner,
    requests and age; four queries."""
    rows = _pods(cluster, filters).order_by("namespace", "name")
    total = rows.count()
    page, pages = paging.page_within(total, page, PODS_PAGE_SIZE)
    shown = rows if everything else rows[(page - 1) * PODS_PAGE_SIZE : page * PODS_PAGE_SIZE]
    found = list(
        shown.values_list(
            "namespace",
            "name",
            "phase",
            "node_name",
            "unschedulable",
            "cpu_millis",
            "memory_bytes",
            KT("body__metadata__creationTimestamp"),
            KeyTransform("ownerReferences", KeyTransform("metadata", "body")),
        )
    )
    owners = pod_owners(cluster, ((ns, refs) for ns, *_, refs in found))
    pods = []
    for (ns, name, phase, node, waiting, cpu, memory, created, _), owner in zip(found, owners, strict=True):
        pods.append(
            {
                "namespace": ns,
                "name": name,
                "url": object_url(cluster, "Pod", ns, name),
                "phase": "Pending (no node)" if waiting else phase,
                "node": node,
                "node_url": cluster_url(cluster, "node-detail", node) if node else "",
                "owner": owner,
                "owner_url": object_url(cluster, owner.kind, owner.namespace, owner.name)
                if owner.kind in BY_KIND
                else "",
                "cpu": cpu,
                "memory": memory,
                "age": age(cluster, created or ""),
            }
        )
    namespaces = (
        models.KubeObject.objects.filter(cluster=cluster, kind="Namespace")
        .order_by("name")
        .values_list("name", flat=True)
    )
    return {"pods": pods, "total": total, "page": page, "pages": pages, "namespaces": list(namespaces)}


def status_counts(kind: str, status: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """What kubectl's READY / UP-TO-DATE / AVAILABLE columns read, per kind."""
    if kind == "DaemonSet":
        return {
            "desired": int(status.get("desiredNumberScheduled") or 0),
            "ready": int(status.get("numberReady") or 0),
            "updated": int(status.get("updatedNumberScheduled") or 0),
            "available": int(status.get("numberAvailable") or 0),
        }
    return {
        "desired": int(spec.get("replicas") if spec.get("replicas") is not None else 1),
        "ready": int(status.get("readyReplicas") or 0),
        "updated": int(status.get("updatedReplicas") or status.get("replicas") or 0)
        if kind == "Deployment"
        else int(status.get("replicas") or 0),
        "available": int(status.get("availableReplicas") or 0),
    }


def workloads_page(
    *,
    cluster: models.Cluster,
    kind: str = "",
    namespace: str = "",
    search: str = "",
    page: int = 1,
    everything: bool = False,
) -> dict[str, Any]:
    """Deployments, ReplicaSets, DaemonSets (and any StatefulSet or Job stored) with their replica status and how
    many of their pods wait for a node; ReplicaSets a Deployment owns are folded into it. Four queries a page."""
    rows = models.KubeObject.objects.filter(cluster=cluster, kind__in=(kind,) if kind else WORKLOAD_KINDS)
    if namespace:
        rows = rows.filter(namespace=namespace)
    if search:
        rows = rows.filter(name__icontains=search)
    if kind != "ReplicaSet":
        # A Deployment's ReplicaSets are its history: listed under it, not beside it.
        rows = rows.exclude(Q(kind="ReplicaSet") & Q(body__metadata__ownerReferences__0__kind="Deployment"))
    rows = rows.order_by("namespace", "name", "kind")
    total = rows.count()
    page, pages = paging.page_within(total, page, WORKLOADS_PAGE_SIZE)
    shown = rows if everything else rows[(page - 1) * WORKLOADS_PAGE_SIZE : page * WORKLOADS_PAGE_SIZE]
    found = list(
        shown.values_list(
            "kind",
            "namespace",
            "name",
            KeyTransform("spec", "body"),
            KeyTransform("status", "body"),
            KT("body__metadata__creationTimestamp"),
        )
    )
    waiting = _waiting_by_owner(cluster, {(ns, name) for _, ns, name, *_ in found})
    workloads = []
    for kind_, ns, name, spec, status, created in found:
        spec = spec or {}
        workloads.append(
            {
                "kind": kind_,
                "namespace": ns,
                "name": name,
                "url": object_url(cluster, kind_, ns, name),
                "pods_url": cluster_url(cluster, "pods", owner=f"{kind_}/{ns}/{name}"),
                "pending_url": cluster_url(cluster, "pending", group="none", owner=f"{kind_}/{ns}/{name}"),
                **status_counts(kind_, status or {}, spec),
                "pending": waiting.get((kind_, ns, name), 0),
                "images": ", ".join(
                    str(c.get("image", ""))
                    for c in (((spec.get("template") or {}).get("spec") or {}).get("containers") or [])
                ),
                "age": age(cluster, created or ""),
            }
        )
    return {"workloads": workloads, "total": total, "page": page, "pages": pages, "kinds": WORKLOAD_KINDS}


def _waiting_by_owner(cluster: models.Cluster, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str, str], int]:
    """How many pods of each owner (as Owner names it: a Deployment behind its ReplicaSet) wait for a node."""
    namespaces = {ns for ns, _ in keys}
    rows = models.KubeObject.objects.filter(
        cluster=cluster, kind="Pod", unschedulable=True, namespace__in=namespaces or {""}
    ).values_list("namespace", KeyTransform("ownerReferences", KeyTransform("metadata", "body")))
    rows = list(rows)
    counts: dict[tuple[str, str, str], int] = {}
    for owner in pod_owners(cluster, rows):
        key = (owner.kind, owner.namespace, owner.name)
        counts[key] = counts.get(key, 0) + 1
    return counts


def search(*, cluster: models.Cluster, text: str) -> list[dict[str, Any]]:
    """Objects whose name holds `text` (any case), by kind: at most SEARCH_SHOWN of each with a link, and how many
    there are; NodePools too. One query per kind."""
    if not text:
        return []
    results = []
    pools = models.NodePool.objects.filter(cluster=cluster, name__icontains=text)
    named = list(pools.values_list("name", flat=True)[:SEARCH_SHOWN])
    if named:
        results.append(
            {
                "kind": "NodePool",
                "count": pools.count(),
                "items": [{"label": n, "url": cluster_url(cluster, "nodepool-edit", n)} for n in named],
            }
        )
    matching = models.KubeObject.objects.filter(cluster=cluster, kind__in=SEARCH_KINDS, name__icontains=text)
    counts = dict(matching.values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    for kind in SEARCH_KINDS:
        if not counts.get(kind):
            continue
        rows = matching.filter(kind=kind).order_by("namespace", "name").values_list("namespace", "name")[:SEARCH_SHOWN]
        items = []
        for ns, name in rows:
            label = f"{ns}/{name}" if ns else name
            if kind == "Event":
                url = cluster_url(cluster, "events", q=name.split(".")[0])
            else:
                url = object_url(cluster, kind, ns, name)
            items.append({"label": label, "url": url})
        results.append({"kind": kind, "count": counts[kind], "items": items})
    return results


def clusters_overview() -> list[dict[str, Any]]:
    """One line per cluster: its mode, cost per hour, nodes, pods pending and commands awaiting approval, whether
    voluntary disruption is paused, and how long ago it was last ticked. Four queries whatever the clusters."""
    clusters = list(models.Cluster.objects.order_by("name"))
    objects = models.KubeObject.objects.filter(cluster__in=clusters)
    nodes = dict(objects.filter(kind="Node").values_list("cluster").annotate(n=Count("id")).values_list("cluster", "n"))
    pending = dict(
        objects.filter(kind="Pod", unschedulable=True)
        .values_list("cluster")
        .annotate(n=Count("id"))
        .values_list("cluster", "n")
    )
    awaiting = dict(
        objects.filter(kind="DisruptionCommand", phase="AwaitingApproval")
        .values_list("cluster")
        .annotate(n=Count("id"))
        .values_list("cluster", "n")
    )
    lines = []
    for cluster in clusters:
        last = ((cluster.cost_state or {}).get("last") or {}).values()
        lines.append(
            {
                "cluster": cluster,
                "url": cluster_url(cluster, "home"),
                "cost_per_hour": sum(entry["value"][0] for entry in last),
                "nodes": nodes.get(cluster.pk, 0),
                "pending": pending.get(cluster.pk, 0),
                "pending_url": cluster_url(cluster, "pending"),
                "awaiting": awaiting.get(cluster.pk, 0),
                "awaiting_url": cluster_url(cluster, "disruption"),
                "paused": cluster.is_paused(cluster.clock),
            }
        )
    return lines
