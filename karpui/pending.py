"""Pods waiting for a node: grouped by owner or by what blocks them, with a count per group and the pods folded,
or flat a page at a time; searchable by name.

Grouping reads every waiting pod's name, uid, creation time and owner references from JSON paths in SQL (no
manifest is decoded), and a page shows at most GROUPS_PAGE_SIZE groups of at most NAMES_SHOWN names each, so a
refresh stays small however many pods wait: 500 pods of one Deployment are one row.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db.models.fields.json import KT, KeyTransform

from karpui import models
from karpui.capacity import age
from karpui.links import cluster_query
from karpui.owners import Owner, pod_owners
from karpui.selectors import FIXES

PAGE_SIZE = 200  # flat rows: a row with its verdicts is ~0.2 KB
GROUPS_PAGE_SIZE = 25  # a group row with its folded names is ~1.2 KB
NAMES_SHOWN = 10  # names folded into a group row; the rest are a link to the group's flat list
VERDICTS_SHOWN = 5
GROUPINGS = {"owner": "owner", "reason": "blocking reason", "none": "none (every pod)"}
NO_VERDICT = "waiting for the next provisioning batch"


@dataclass(frozen=True)
class Waiting:
    namespace: str
    name: str
    uid: str
    created: str
    owner: Owner
    verdicts: tuple[tuple[str, str, str], ...]  # (nodepool, kind, message), as the provisioner said them

    @property
    def reason(self) -> str:
        """What blocks it, per NodePool, in one line: `capped: limits · gpu: taints`."""
        seen = dict.fromkeys(f"{pool or 'all'}: {kind}" for pool, kind, _ in self.verdicts)
        return " · ".join(seen) or NO_VERDICT


def _verdict(pool: str, kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"nodepool": pool, "kind": kind, "message": message, "fix": FIXES.get(kind, ""), **extra}


def waiting_pods(
    *, cluster: models.Cluster, namespace: str = "", nodepool: str = "", search: str = ""
) -> list[Waiting]:
    """Every pod waiting for a node, by namespace and name, with its owner and its verdicts (narrowed to
    `nodepool`'s when given); two queries."""
    verdicts = ((cluster.lab_state or {}).get("provisioning") or {}).get("verdicts") or {}
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", unschedulable=True)
    if namespace:
        rows = rows.filter(namespace=namespace)
    if search:
        rows = rows.filter(name__icontains=search)
    found = list(
        rows.order_by("namespace", "name").values_list(
            "namespace",
            "name",
            "uid",
            KT("body__metadata__creationTimestamp"),
            KeyTransform("ownerReferences", KeyTransform("metadata", "body")),
        )
    )
    owners = pod_owners(cluster, ((ns, refs) for ns, _, _, _, refs in found))
    pods = []
    for (ns, name, uid, created, _), owner in zip(found, owners, strict=True):
        said = tuple(
            (str(v.get("nodepool", "")), str(v.get("kind", "")), str(v.get("message", "")))
            for v in verdicts.get(uid, [])
            if not nodepool or v.get("nodepool") == nodepool
        )
        pods.append(Waiting(ns, name, uid, created or "", owner, said))
    return pods


def _groups(cluster: models.Cluster, pods: list[Waiting], by: str, query: dict[str, str]) -> list[dict[str, Any]]:
    """One row per owner (or blocking reason): its count, its longest wait, its distinct verdicts with how many
    pods each holds, the first names, and a link to all of them."""
    members: dict[Any, list[Waiting]] = {}
    for pod in pods:
        members.setdefault(pod.owner if by == "owner" else pod.reason, []).append(pod)
    groups = []
    for key, group in members.items():
        said = Counter(v for pod in group for v in pod.verdicts)
        verdicts = [_verdict(*v, count=count) for v, count in said.most_common(VERDICTS_SHOWN)]
        narrowed = {**query, "group": "none", **({"owner": key.key} if by == "owner" else {"reason": key})}
        groups.append(
            {
                # Stable across refreshes, so a fold a person opened stays open (static/karpui/folds.js).
                "id": "fold-" + hashlib.sha1(str(key).encode(), usedforsecurity=False).hexdigest()[:12],
                "label": key.label if by == "owner" else key,
                "owner": key if by == "owner" else None,
                "count": len(group),
                "waiting": max(age(cluster, pod.created) for pod in group),
                "verdicts": verdicts,
                "more_verdicts": len(said) - len(verdicts),
                "names": [f"{pod.namespace}/{pod.name}" for pod in group[:NAMES_SHOWN]],
                "more": max(len(group) - NAMES_SHOWN, 0),
                "list": cluster_query(cluster, narrowed),
            }
        )
    groups.sort(key=lambda g: (-g["count"], g["label"]))
    return groups


def _rows(cluster: models.Cluster, pods: list[Waiting]) -> list[dict[str, Any]]:
    """The flat rows of one page; reads those pods' bodies only, for the scheduler's own message."""
    bodies = dict(
        models.KubeObject.objects.filter(cluster=cluster, kind="Pod", uid__in=[p.uid for p in pods]).values_list(
            "uid", "body"
        )
    )
    rows = []
    for pod in pods:
        conditions = ((bodies.get(pod.uid) or {}).get("status") or {}).get("conditions") or []
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
        rows.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "owner": pod.owner,
                "waiting": age(cluster, pod.created),
                "scheduler": scheduled.get("message", ""),
                "verdicts": [_verdict(*v) for v in pod.verdicts],
            }
        )
    return rows


def pending_pods(
    *,
    cluster: models.Cluster,
    namespace: str = "",
    nodepool: str = "",
    search: str = "",
    owner: str = "",
    reason: str = "",
    group: str = "owner",
    page: int = 1,
) -> dict[str, Any]:
    """The pending page: groups (by owner or reason) or pods (group "none"), a page at a time, narrowed by
    namespace, name, owner key and reason; `nodepool` narrows each pod's verdicts to that NodePool's."""
    group = group if group in GROUPINGS else "owner"
    pods = waiting_pods(cluster=cluster, namespace=namespace, nodepool=nodepool, search=search)
    if owner:
        pods = [p for p in pods if p.owner.key == owner]
    if reason:
        pods = [p for p in pods if p.reason == reason]
    query = {k: v for k, v in {"namespace": namespace, "nodepool": nodepool, "q": search}.items() if v}
    if group == "none":
        items: list[Any] = pods
        size = PAGE_SIZE
    else:
        items = _groups(cluster, pods, group, query)
        size = GROUPS_PAGE_SIZE
    pages = max((len(items) + size - 1) // size, 1)
    page = min(max(page, 1), pages)
    shown = items[(page - 1) * size : page * size]
    narrowed = {
        **query,
        "group": group,
        **({"owner": owner} if owner else {}),
        **({"reason": reason} if reason else {}),
    }
    return {
        "group": group,
        "groupings": GROUPINGS,
        "groups": shown if group != "none" else [],
        "pods": _rows(cluster, shown) if group == "none" else [],
        "total": len(pods),
        "page": page,
        "pages": pages,
        "narrowed": cluster_query(cluster, narrowed),
        "nodepools": list(models.NodePool.objects.filter(cluster=cluster).values_list("name", flat=True)),
    }
