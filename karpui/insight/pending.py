"""Pods waiting for a node: grouped by owner or by what blocks them, with a count per group and the pods folded,
or flat a page at a time; searchable by name.

Each pod's verdicts are ordered as a person reads them: what blocks it first (for a pod pinned to one node, the
scheduler's own reason on that node), then the NodePools it could use, then the NodePools its own
`karpenter.sh/nodepool` selection leaves out, folded into one line (nothing to fix on those).

Grouping reads every waiting pod's name, uid, creation time, owner references and node pinning from JSON paths in
SQL (no manifest is decoded), and a page shows at most GROUPS_PAGE_SIZE groups of at most NAMES_SHOWN names each, so
a refresh stays small however many pods wait: 500 pods of one Deployment are one row.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Sum
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform

from karpui import models
from karpui.insight import paging
from karpui.insight.capacity import age
from karpui.insight.drilldown import object_url
from karpui.insight.owners import Owner, pod_owners
from karpui.insight.selectors import FIXES
from karpui.kinds import display
from karpui.kinds.resources import BY_KIND
from karpui.links import cluster_query, cluster_url
from provisioner import labels as wk
from provisioner.cluster.views import is_ready
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.pod import pod_from_manifest
from provisioner.quantity import parse_resources
from provisioner.scheduling import results as r
from provisioner.taints import NO_EXECUTE, NO_SCHEDULE, Taint, untolerated

PAGE_SIZE = 50  # flat rows: a row with its verdicts, advice and its pod, owner and events links is ~0.6 KB
GROUPS_PAGE_SIZE = 25  # a group row with its folded names is ~1.2 KB
NAMES_SHOWN = 10  # names folded into a group row; the rest are a link to the group's flat list
VERDICTS_SHOWN = 5
GROUPINGS = {"owner": "owner", "reason": "blocking reason", "none": "none (every pod)"}
NO_VERDICT = "waiting for the next provisioning batch"
# Observe mode: Karpenter's own Events about a waiting pod, the newest of which is shown beside karpui's verdicts.
KARPENTER = "Karpenter"
KARPENTER_SAYS = ("FailedScheduling", "Nominated")
SCHEDULER = "scheduler"  # a verdict of kube-scheduler's, about the one node a pinned pod may use
# kube-scheduler's words for the nodes a pinned pod may not use at all: not the pod's problem on its own node.
NOT_ITS_NODE = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True)
class Verdict:
    nodepool: str  # "" for the pod itself (validation, no NodePool) or a node's verdict
    kind: str
    message: str
    node: str = ""  # the node a scheduler verdict is about
    selection: str = ""  # of a NodePool the pod's own selection leaves out: that selection
    source: str = ""  # observe mode: KARPENTER for Karpenter's own word on the pod (its newest Event)

    @property
    def label(self) -> str:
        """Whose verdict it is, in a word: `node kind-worker`, a NodePool's name, `Karpenter`, or `all`."""
        return f"node {self.node}" if self.node else self.source or self.nodepool or "all"


@dataclass(frozen=True)
class Waiting:
    namespace: str
    name: str
    uid: str
    created: str
    owner: Owner
    verdicts: tuple[Verdict, ...]  # in the order read: the blocking one first, those the pod leaves out last
    pinned: str = ""  # the one node the pod may run on, if its selection names one

    @property
    def reason(self) -> str:
        """What blocks it, in one line: `node kind-worker: scheduler · capped: limits · others: not-selected`."""
        seen = dict.fromkeys(
            f"{'others' if v.kind == r.NOT_SELECTED else v.label.removeprefix('node ')}: {v.kind}"
            for v in self.verdicts
        )
        return " · ".join(seen) or NO_VERDICT


def _pinned_names(selector: Any, affinity: Any) -> set[str] | None:
    """The hostnames (or node names, from matchFields) the pod's selection allows when it names them one by one;
    None when it does not pin the pod (any node with matching labels would do)."""
    names: set[str] | None = None
    if isinstance(selector, Mapping) and wk.HOSTNAME in selector:
        names = {str(selector[wk.HOSTNAME])}
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or [] if isinstance(required, Mapping) else []
    allowed: set[str] = set()
    for term in terms:
        pins = [
            e
            for e in (*(term.get("matchExpressions") or ()), *(term.get("matchFields") or ()))
            if e.get("key") in (wk.HOSTNAME, wk.NODE_NAME_FIELD) and e.get("operator") == "In"
        ]
        if not pins:
            return names  # a term that names no node: the affinity pins nothing more than the selector does
        allowed.update(str(v) for v in pins[0].get("values") or ())
    if terms:
        names = allowed if names is None else names & allowed
    return names


def _node_names(cluster: models.Cluster, hostnames: set[str]) -> dict[str, str]:
    """Hostname label (or node name) -> node name, for the hostnames pods are pinned to; one query."""
    if not hostnames:
        return {}
    found: dict[str, str] = {}
    rows = models.KubeObject.objects.filter(cluster=cluster, kind="Node").values_list(
        "name", KeyTextTransform(wk.HOSTNAME, KeyTransform("labels", KeyTransform("metadata", "body")))
    )
    for name, hostname in rows:
        if hostname in hostnames:
            found[hostname] = name
        if name in hostnames:
            found.setdefault(name, name)
    return found


def waiting_pods(
    *, cluster: models.Cluster, namespace: str = "", nodepool: str = "", search: str = ""
) -> list[Waiting]:
    """Every pod waiting for a node, by namespace and name, with its owner and its verdicts (narrowed to
    `nodepool`'s when given); three queries, four with pods pinned to a node."""
    said = ((cluster.lab_state or {}).get("provisioning") or {}).get("verdicts") or {}
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
            KeyTransform("nodeSelector", KeyTransform("spec", "body")),
            KeyTransform("affinity", KeyTransform("spec", "body")),
        )
    )
    owners = pod_owners(cluster, ((ns, refs) for ns, _, _, _, refs, _, _ in found))
    pins = {uid: _pinned_names(selector, affinity) for _, _, uid, _, _, selector, affinity in found}
    nodes = _node_names(cluster, {name for names in pins.values() if names and len(names) == 1 for name in names})
    on_node = _scheduler_verdicts(cluster, {uid: nodes[next(iter(n))] for uid, n in pins.items() if _one(n, nodes)})
    karpenter = _karpenter_says(cluster, {uid for _, _, uid, _, _, _, _ in found})
    pods = []
    for (ns, name, uid, created, _, _, _), owner in zip(found, owners, strict=True):
        provisioner = [
            Verdict(
                str(v.get("nodepool", "")),
                str(v.get("kind", "")),
                str(v.get("message", "")),
                selection=str(v.get("selection", "")),
            )
            for v in said.get(uid, [])
            if not nodepool or v.get("nodepool") in (nodepool, "")
        ]
        if uid in karpenter:
            provisioner.append(karpenter[uid])
        scheduler = on_node.get(uid)
        pods.append(
            Waiting(
                ns,
                name,
                uid,
                created or "",
                owner,
                _ordered(provisioner, scheduler),
                scheduler.node if scheduler else "",
            )
        )
    return pods


def _karpenter_says(cluster: models.Cluster, uids: set[str]) -> dict[str, Verdict]:
    """Observing a real Karpenter: its newest word on each waiting pod (`FailedScheduling`: why it launched nothing
    for it; `Nominated`: the NodeClaim or node it expects the pod on), from the cluster's mirrored Events; one query.
    A lab's events are karpui's own, already said by its verdicts."""
    if cluster.mode != models.Cluster.Mode.OBSERVE or not uids:
        return {}
    rows = models.KubeObject.objects.filter(
        cluster=cluster,
        kind="Event",
        body__involvedObject__kind="Pod",
        body__source__component="karpenter",
        body__reason__in=KARPENTER_SAYS,
    ).values_list(KT("body__involvedObject__uid"), KT("body__lastTimestamp"), KT("body__reason"), KT("body__message"))
    newest: dict[str, tuple[str, Verdict]] = {}
    for uid, when, reason, message in rows:
        if uid in uids and (uid not in newest or (when or "") > newest[uid][0]):
            newest[uid] = (when or "", Verdict("", str(reason), str(message), source=KARPENTER))
    return {uid: verdict for uid, (_, verdict) in newest.items()}


def _one(names: set[str] | None, nodes: Mapping[str, str]) -> bool:
    return names is not None and len(names) == 1 and next(iter(names)) in nodes


def _ordered(provisioner: list[Verdict], scheduler: Verdict | None) -> tuple[Verdict, ...]:
    """The scheduler's verdict on the pod's own node first, the NodePools' next, and those the pod's own selection
    leaves out as one line last (Karpenter says each as "incompatible requirements")."""
    left_out = [v for v in provisioner if v.kind == r.NOT_SELECTED]
    kept = [v for v in provisioner if v.kind != r.NOT_SELECTED]
    if left_out:
        names = ", ".join(sorted(v.nodepool for v in left_out))
        selection = left_out[0].selection or f"{wk.NODEPOOL} selection"
        kept.append(Verdict("", r.NOT_SELECTED, f"{names}: not selected by the pod's {selection}"))
    return (scheduler, *kept) if scheduler else tuple(kept)


# "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match ... . preemption: ..." -> (count, reason)
_REASONS = re.compile(r"(\d+) (.+?)(?=, \d+ |$)")


def _scheduler_verdicts(cluster: models.Cluster, pinned: Mapping[str, str]) -> dict[str, Verdict]:
    """For pods pinned to one node, what stops kube-scheduler there, checked in its filters' order on the node
    itself (its PodScheduled message counts reasons over every node, and a node the pin rules out may be counted
    under a taint): not ready, cordoned, an untolerated taint, too little free of a resource (with the pod's
    request against the node's allocatable and requested), else the message's other reasons; three queries."""
    if not pinned:
        return {}
    pods = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", uid__in=list(pinned)).values_list(
        "uid", "body"
    )
    nodes = dict(
        models.KubeObject.objects.filter(cluster=cluster, kind="Node", name__in=set(pinned.values())).values_list(
            "name", "body"
        )
    )
    requested = _requested(cluster, set(nodes))
    verdicts = {}
    for uid, body in pods:
        node = pinned[uid]
        message = _on_node(body, node, nodes.get(node), requested.get(node, {}))
        if message:
            verdicts[uid] = Verdict("", SCHEDULER, message, node)
    return verdicts


def _on_node(pod: dict[str, Any], name: str, node: dict[str, Any] | None, requested: Mapping[str, int]) -> str:
    """Why the pod cannot bind to `node`, in kube-scheduler's words; "" when nothing of the node's own stops it."""
    if node is None:
        return f"node {name} does not exist"
    if not is_ready(node):
        return f"node(s) were not ready: {name}"
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return f"node(s) were unschedulable: {name} is cordoned"
    try:
        view = pod_from_manifest(pod)
    except ManifestError:
        return ""
    taints = [Taint.from_spec(t) for t in spec.get("taints") or [] if t.get("effect") in (NO_SCHEDULE, NO_EXECUTE)]
    blocking = untolerated(taints, view.tolerations)
    if blocking:
        return f"untolerated taint {blocking[0]} on {name}"
    allocatable = parse_resources((node.get("status") or {}).get("allocatable") or {}, numbers=True)
    wants = {**view.requests, "pods": 1000}
    short = [
        r for r, amount in sorted(wants.items()) if amount and requested.get(r, 0) + amount > allocatable.get(r, 0)
    ]
    if short:
        amounts = "; ".join(
            f"{r}: the pod requests {display.quantity(r, wants[r])}; the node has "
            f"{display.quantity(r, allocatable.get(r, 0))} allocatable, {display.quantity(r, requested.get(r, 0))} "
            "requested"
            for r in short
        )
        return f"Insufficient {', '.join(short)} on {name} ({amounts})"
    scheduled = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {}
    )
    text = str(scheduled.get("message") or "").split(". preemption:")[0].rstrip(".")
    reasons = [reason for _, reason in _REASONS.findall(text.partition(": ")[2]) if reason != NOT_ITS_NODE]
    return f"{', '.join(reasons)} on {name}" if reasons else ""


def _requested(cluster: models.Cluster, names: set[str]) -> dict[str, dict[str, int]]:
    """What the pods bound to each node request (milli-units, pods counted), as kube-scheduler sums them; one
    query over the summary columns."""
    totals = (
        models.KubeObject.objects.filter(cluster=cluster, kind="Pod", node_name__in=names)
        .exclude(phase__in=("Succeeded", "Failed"))
        .values("node_name")
        .annotate(cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"), pods=Count("id"))
    )
    return {
        row["node_name"]: {
            "cpu": int(row["cpu"] or 0),
            "memory": int(row["memory"] or 0) * 1000,
            "pods": int(row["pods"]) * 1000,
        }
        for row in totals
    }


def _fix(verdict: Verdict, pinned: str) -> str:
    """The nearest fix for a verdict, told apart for a pod pinned to one node."""
    if verdict.kind == SCHEDULER:
        if "does not exist" in verdict.message:
            return f"pin the pod to a node that exists, or create {verdict.node}"
        if verdict.message.startswith("Insufficient "):
            short = verdict.message.split(" on ")[0].replace("Insufficient ", "")
            return f"free {short} on {verdict.node}, or lower the pod's requests: it may run only there"
        if "unschedulable" in verdict.message:
            return f"uncordon {verdict.node}"
        if "not ready" in verdict.message:
            return f"wait for {verdict.node} to be Ready, or see why it is not (its conditions)"
        if verdict.message.startswith("untolerated taint"):
            return f"add a toleration for {verdict.node}'s taint to the pod"
        return f"make {verdict.node} able to take the pod: it may run only there"
    if verdict.kind == r.VALIDATION and pinned:
        return f"Karpenter launches no node for a pod pinned to one node ({wk.HOSTNAME}); make room on that node"
    return FIXES.get(verdict.kind, "")


def _shown(cluster: models.Cluster, verdict: Verdict, pinned: str, **extra: Any) -> dict[str, Any]:
    """A verdict as the page shows it: its quantities in Kubernetes form, its fix, and a link to its node."""
    return {
        "nodepool": verdict.nodepool,
        "kind": verdict.kind,
        "label": verdict.label if verdict.kind != r.NOT_SELECTED else _others(verdict),
        "message": display.readable(verdict.message),
        "fix": _fix(verdict, pinned),
        "node_url": object_url(cluster, "Node", "", verdict.node) if verdict.node else "",
        **extra,
    }


def shown_verdicts(cluster: models.Cluster, pod: Waiting) -> list[dict[str, Any]]:
    """A waiting pod's verdicts as the pending page shows them, blocking first (its object page shows them too)."""
    return [_shown(cluster, verdict, pod.pinned) for verdict in pod.verdicts]


def _others(verdict: Verdict) -> str:
    count = len(verdict.message.partition(":")[0].split(", "))
    return f"{count} other{'s' if count != 1 else ''}"


def _owner_url(cluster: models.Cluster, owner: Owner) -> str:
    return object_url(cluster, owner.kind, owner.namespace, owner.name) if owner.kind in BY_KIND else ""


def _events_url(cluster: models.Cluster, kind: str, name: str) -> str:
    return cluster_url(cluster, "events", kind=kind, q=name)


def _groups(cluster: models.Cluster, pods: list[Waiting], by: str, query: dict[str, str]) -> list[dict[str, Any]]:
    """One row per owner (or blocking reason): its count, its longest wait, its distinct verdicts with how many
    pods each holds, the first names (linked), and a link to all of them."""
    members: dict[Any, list[Waiting]] = {}
    for pod in pods:
        members.setdefault(pod.owner if by == "owner" else pod.reason, []).append(pod)
    groups = []
    for key, group in members.items():
        said = Counter((v, pod.pinned) for pod in group for v in pod.verdicts)
        # In each pod's order (blocking first), not by count: the order is what the page promises.
        order = {v: min(pod.verdicts.index(v) for pod in group if v in pod.verdicts) for v, _ in said}
        shown = sorted(said.items(), key=lambda item: (order[item[0][0]], -item[1]))[:VERDICTS_SHOWN]
        verdicts = [_shown(cluster, v, pinned, count=count) for (v, pinned), count in shown]
        narrowed = {**query, "group": "none", **({"owner": key.key} if by == "owner" else {"reason": key})}
        groups.append(
            {
                # Stable across refreshes, so a fold a person opened stays open (static/karpui/folds.js).
                "id": "fold-" + hashlib.sha1(str(key).encode(), usedforsecurity=False).hexdigest()[:12],
                "label": key.label if by == "owner" else key,
                "owner": key if by == "owner" else None,
                "owner_url": _owner_url(cluster, key) if by == "owner" else "",
                "events_url": _events_url(cluster, "", key.name) if by == "owner" and key.kind else "",
                "count": len(group),
                "waiting": max(age(cluster, pod.created) for pod in group),
                "verdicts": verdicts,
                "more_verdicts": len(said) - len(verdicts),
                "names": [
                    {"label": f"{pod.namespace}/{pod.name}", "url": object_url(cluster, "Pod", pod.namespace, pod.name)}
                    for pod in group[:NAMES_SHOWN]
                ],
                "more": max(len(group) - NAMES_SHOWN, 0),
                "list": cluster_query(cluster, narrowed),
            }
        )
    groups.sort(key=lambda g: (-g["count"], g["label"]))
    return groups


def _rows(cluster: models.Cluster, pods: Iterable[Waiting]) -> list[dict[str, Any]]:
    """The flat rows of one page; reads those pods' scheduler messages only."""
    pods = list(pods)
    conditions = dict(
        models.KubeObject.objects.filter(cluster=cluster, kind="Pod", uid__in=[p.uid for p in pods]).values_list(
            "uid", KeyTransform("conditions", KeyTransform("status", "body"))
        )
    )
    rows = []
    for pod in pods:
        scheduled = next((c for c in conditions.get(pod.uid) or [] if c.get("type") == "PodScheduled"), {})
        rows.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "url": object_url(cluster, "Pod", pod.namespace, pod.name),
                "events_url": _events_url(cluster, "Pod", pod.name),
                "owner": pod.owner,
                "owner_url": _owner_url(cluster, pod.owner),
                "waiting": age(cluster, pod.created),
                "scheduler": scheduled.get("message", ""),
                "verdicts": shown_verdicts(cluster, pod),
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
    everything: bool = False,
) -> dict[str, Any]:
    """The pending page (every row of it with `everything`, for a CSV): groups (by owner or reason) or pods (group "none"), a page at a time, narrowed by
    namespace, name, owner key and reason; `nodepool` narrows each pod's verdicts to that NodePool's. A grouping
    or page that does not exist is the caller's to refuse (views check them: a 400 names the parameter)."""
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
    page, pages = paging.page_within(len(items), page, size)
    shown = items if everything else items[(page - 1) * size : page * size]
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
