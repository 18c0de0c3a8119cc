"""Deployment -> ReplicaSet -> Pod and DaemonSet controllers, and pod garbage collection, as Kubernetes runs them."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import sys
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.names import NAME_CHARS, owner_reference, random_suffix
from provisioner.cluster.objects import (
    DEPENDENT_KINDS,
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    OWNER_KINDS,
    Obj,
)
from provisioner.manifests.pod import pod_from_spec
from provisioner.pods import Pod
from provisioner.requirements import Requirements
from provisioner.scheduling.poddata import PodState
from provisioner.selectors import LabelSelector
from provisioner.taints import Taint, Toleration, untolerated


def template_hash(template: Any) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join(NAME_CHARS[int(c, 16) % len(NAME_CHARS)] for c in digest[:10])


def owned_by(store: ObjectStore, kind: str, owner: Obj) -> list[Obj]:
    """The objects `owner` controls (uids are unique, so the store's owner index answers exactly)."""
    return store.owned_by(kind, owner["metadata"]["uid"])


Memo = dict[str, tuple[object, ...]]  # object uid -> the versions of what its last reconcile read


@dataclass
class Burst:
    """How many more pod writes a component may make in this step; `cut` once it stopped with work left over.

    A real cluster spreads a large scale-up over time (the ReplicaSet controller creates at most 500 pods a sync,
    its client and the scheduler are rate-limited); the lab bounds each step by a count instead, never a clock, so
    a step's work and a run's writes stay bounded at any size and the outcome stays deterministic."""

    left: int = sys.maxsize
    cut: bool = False

    def exhausted(self) -> bool:
        """Asked before a write that may be needed: True (and `cut`) once the step's writes are spent."""
        if self.left <= 0:
            self.cut = True
        return self.cut

    def spend(self) -> None:
        self.left -= 1


def _inputs(store: ObjectStore, owner: Obj, kind: str, *extra: object) -> tuple[object, ...]:
    """What reconciling `owner` depends on: itself and the objects of `kind` it controls (and `extra`)."""
    uid = owner["metadata"]["uid"]
    return (
        owner["metadata"].get("resourceVersion"),
        store.cache_epoch,
        store.bucket_version(kind, "owner", uid),
        *extra,
    )


def reconcile_deployments(store: ObjectStore, memo: Memo | None = None) -> bool:
    """Each Deployment keeps one ReplicaSet per pod template; the current one gets the replicas. A Deployment
    whose spec and ReplicaSets were not written since its last reconcile is skipped (`memo`)."""
    changed = False
    for deployment in store.list("Deployment"):
        if deployment["metadata"].get("deletionTimestamp"):
            continue
        uid = deployment["metadata"]["uid"]
        if memo is not None and memo.get(uid) == _inputs(store, deployment, "ReplicaSet"):
            continue
        changed |= _reconcile_deployment(store, deployment)
        if memo is not None:
            memo[uid] = _inputs(store, deployment, "ReplicaSet")
    return changed


def _reconcile_deployment(store: ObjectStore, deployment: Obj) -> bool:
    changed = False
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    template = spec.get("template") or {}
    pod_hash = template_hash(template)
    name = f"{deployment['metadata']['name']}-{pod_hash}"
    namespace = deployment["metadata"].get("namespace", "default")
    for replicaset in owned_by(store, "ReplicaSet", deployment):
        if replicaset["metadata"]["name"] != name and int(replicaset["spec"].get("replicas", 0)) != 0:
            replicaset["spec"]["replicas"] = 0  # a rollout: the old template's pods go
            store.update(replicaset, spec_changed=True)
            changed = True
    current = store.get("ReplicaSet", name, namespace)
    labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": pod_hash}
    if current is None:
        rs_template = copy.deepcopy(template)
        rs_template.setdefault("metadata", {})["labels"] = labels
        store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels,
                    "ownerReferences": [owner_reference(deployment)],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "template": rs_template,
                },
            }
        )
        changed = True
    elif int(current["spec"].get("replicas", 0)) != replicas:
        current["spec"]["replicas"] = replicas
        store.update(current, spec_changed=True)
        changed = True
    ready = sum(
        int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in owned_by(store, "ReplicaSet", deployment)
    )
    status = {
        "replicas": replicas,
        "readyReplicas": ready,
        "updatedReplicas": replicas,
        "observedGeneration": deployment["metadata"].get("generation", 1),
    }
    if deployment.get("status") != status:
        deployment["status"] = status
        store.update(deployment)
    return changed


def reconcile_replicasets(
    store: ObjectStore, rng: random.Random, memo: Memo | None = None, burst: Burst | None = None
) -> bool:
    """Each ReplicaSet keeps `replicas` active pods, creating at most `burst` of them in all; one whose spec and
    pods were not written since its last reconcile is skipped (`memo`)."""
    changed = False
    burst = burst or Burst()
    for replicaset in store.list("ReplicaSet"):
        if replicaset["metadata"].get("deletionTimestamp"):
            continue
        uid = replicaset["metadata"]["uid"]
        if memo is not None and memo.get(uid) == _inputs(store, replicaset, "Pod"):
            continue
        changed |= _reconcile_replicaset(store, replicaset, rng, burst)
        if memo is not None and not burst.cut:  # a cut ReplicaSet has pods still to make
            memo[uid] = _inputs(store, replicaset, "Pod")
    return changed


def _reconcile_replicaset(store: ObjectStore, replicaset: Obj, rng: random.Random, burst: Burst) -> bool:
    changed = False
    wanted = int(replicaset["spec"].get("replicas", 0))
    pods = [p for p in owned_by(store, "Pod", replicaset) if not p["metadata"].get("deletionTimestamp")]
    active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if len(active) < wanted:
        for _ in range(wanted - len(active)):
            if burst.exhausted():
                break
            _create_pod(store, replicaset, rng)
            burst.spend()
            changed = True
    elif len(active) > wanted:
        victims = _scale_down_order(store, active)[: len(active) - wanted]
        for victim in victims:
            store.delete("Pod", victim["metadata"]["name"], victim["metadata"]["namespace"])
        gone = {id(victim) for victim in victims}
        active = [p for p in active if id(p) not in gone]  # the status says what is left, not what was
        changed = True
    ready = sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running")
    status = {"replicas": len(active), "readyReplicas": ready}
    if replicaset.get("status") != status:
        replicaset["status"] = status
        store.update(replicaset)
    return changed


def _create_pod(store: ObjectStore, owner: Obj, rng: random.Random) -> Obj:
    template = owner["spec"].get("template") or {}  # read only: create stores a deep copy of what it is given
    meta = template.get("metadata") or {}
    while True:
        name = f"{owner['metadata']['name']}-{random_suffix(rng)}"
        if store.get("Pod", name, owner["metadata"].get("namespace", "default")) is None:
            break
    return store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": owner["metadata"].get("namespace", "default"),
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_reference(owner)],
            },
            "spec": template.get("spec") or {},
            "status": {"phase": "Pending"},
        }
    )


def _scale_down_order(store: ObjectStore, pods: list[Obj]) -> list[Obj]:
    """Kubernetes' victim order: unscheduled first, then pending, then pods on nodes running more replicas of
    the set, then the newest."""
    per_node = Counter(p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName"))

    def rank(pod: Obj) -> tuple[int, int, int, str, str]:
        node = pod["spec"].get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        return (
            1 if node else 0,
            1 if phase == "Running" else 0,
            -per_node[node] if node else 0,
            _negated(pod["metadata"].get("creationTimestamp", "")),
            pod["metadata"]["name"],
        )

    return sorted(pods, key=rank)


def _negated(text: str) -> str:
    """Sort newest first by inverting timestamp digits."""
    return "".join(chr(ord("9") - ord(c) + ord("0")) if c.isdigit() else c for c in text)


DAEMON_TOLERATIONS = (
    Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
    Toleration(key="karpenter.sh/disrupted", operator="Exists", effect="NoSchedule"),
)


def daemon_runs_on(daemonset: Obj, node: Obj) -> bool:
    return _runs_on(_daemon_pod(daemonset), node)


def _daemon_pod(daemonset: Obj) -> Pod:
    template = (daemonset.get("spec") or {}).get("template") or {}
    return pod_from_spec(template.get("spec") or {}, "spec.template.spec", namespace="", labels={})


def _runs_on(pod: Pod, node: Obj) -> bool:
    taints = [
        Taint.from_spec(t)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") != "PreferNoSchedule"
    ]
    if untolerated(taints, (*pod.tolerations, *DAEMON_TOLERATIONS)):
        return False
    state = PodState.of(pod)
    labels = Requirements.from_labels(node["metadata"].get("labels") or {})
    base = Requirements.from_labels(pod.node_selector)
    return any(
        labels.compatible(base.merged(term), allow_undefined=frozenset())
        for term in state.required_terms or [Requirements()]
    )


def reconcile_daemonsets(store: ObjectStore, rng: random.Random) -> bool:
    """One pod per matching node, bound directly; pods on nodes that are gone or no longer match go."""
    changed = False
    daemonsets = store.list("DaemonSet")
    if not daemonsets:
        return False
    nodes = {n["metadata"]["name"]: n for n in store.list("Node") if not n["metadata"].get("deletionTimestamp")}
    for daemonset in daemonsets:
        if daemonset["metadata"].get("deletionTimestamp"):
            continue  # as Kubernetes' controller: the garbage collector is deleting its pods, none are made again
        # The template is parsed once, not once per node (and not at all without nodes).
        template = _daemon_pod(daemonset) if nodes else None
        runs_on = {name: _runs_on(template, node) for name, node in nodes.items()} if template is not None else {}
        pods = owned_by(store, "Pod", daemonset)
        placed = {p["spec"].get("nodeName"): p for p in pods}
        for name in nodes:
            if runs_on[name] and name not in placed:
                pod = _create_pod(store, daemonset, rng)
                pod["spec"]["nodeName"] = name
                store.update(pod)
                changed = True
        for node_name, pod in placed.items():
            if node_name not in nodes or not runs_on[node_name]:
                store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                changed = True
        ready = sum(1 for p in owned_by(store, "Pod", daemonset) if (p.get("status") or {}).get("phase") == "Running")
        status = {"desiredNumberScheduled": sum(runs_on.values()), "numberReady": ready}
        if daemonset.get("status") != status:
            daemonset["status"] = status
            store.update(daemonset)
    return changed


def collect_garbage(store: ObjectStore, nodepool_uids: Collection[str]) -> bool:
    """kube-controller-manager's garbage collectors: finish Orphan and Foreground deletions, delete dependents whose
    controller is gone, NodeClaims whose owning NodePool is gone (deleting a NodePool drains and removes its nodes,
    as in Karpenter), and pods bound to nodes that no longer exist (pod GC). Each looks at owners and nodes, not at
    every dependent."""
    changed = _finish_propagation(store)
    for kind in DEPENDENT_KINDS:
        for uid in store.owner_uids(kind):
            if store.has_uid(uid):
                continue
            for obj in store.owned_by(kind, uid):
                if not obj["metadata"].get("deletionTimestamp"):  # finalizers hold it; deleting again is no change
                    store.delete(kind, obj["metadata"]["name"], obj["metadata"].get("namespace", ""))
                    changed = True
    for claim in store.list("NodeClaim"):
        owners = [o.get("uid") for o in claim["metadata"].get("ownerReferences") or [] if o.get("kind") == "NodePool"]
        if claim["metadata"].get("deletionTimestamp") or not owners or not all(owners):
            continue
        if not set(nodepool_uids).intersection(owners):
            store.delete("NodeClaim", claim["metadata"]["name"])
            changed = True
    for node in store.index_values("Pod", "spec.nodeName"):
        if node and store.get("Node", node) is None:
            for pod in store.list("Pod", fields={"spec.nodeName": node}):
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                changed = True
    return changed


def _finish_propagation(store: ObjectStore) -> bool:
    """Owners deleted with propagationPolicy Orphan lose their finalizer once no dependent refers to them any more;
    those deleted in the foreground first have their dependents deleted in the foreground too (a Deployment's
    ReplicaSets, then their pods), and go when none that blocks its deletion is left, as the garbage collector
    does. Repeated until nothing moves, so a whole chain goes in one pass."""
    changed = False
    while True:
        moved = False
        for kind in OWNER_KINDS:
            for owner in store.list(kind, fields={"collector": ORPHAN_FINALIZER}):
                _orphan_dependents(store, owner)
                store.remove_finalizer(owner, ORPHAN_FINALIZER)
                moved = True
            for owner in store.list(kind, fields={"collector": FOREGROUND_FINALIZER}):
                moved = _delete_dependents_first(store, owner) or moved
        if not moved:
            return changed
        changed = True


def _dependents(store: ObjectStore, owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [obj for kind in DEPENDENT_KINDS for obj in store.owned_by(kind, uid)]


def _orphan_dependents(store: ObjectStore, owner: Obj) -> None:
    uid = owner["metadata"]["uid"]
    for dependent in _dependents(store, owner):
        refs = [ref for ref in dependent["metadata"].get("ownerReferences") or [] if ref.get("uid") != uid]
        if refs:
            dependent["metadata"]["ownerReferences"] = refs
        else:
            dependent["metadata"].pop("ownerReferences", None)  # as the API server leaves an empty list out
        store.update(dependent)


def _delete_dependents_first(store: ObjectStore, owner: Obj) -> bool:
    """One step of `owner`'s foreground deletion: its dependents are deleted (those that own others in the foreground
    too), and it goes once none that blocks its deletion is left. Whether anything changed."""
    uid = owner["metadata"]["uid"]
    moved = False
    for dependent in _dependents(store, owner):
        meta = dependent["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        if dependent["kind"] in OWNER_KINDS:
            meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND_FINALIZER]
            store.update(dependent)
        store.delete(dependent["kind"], meta["name"], meta.get("namespace", ""))
        moved = True
    for dependent in _dependents(store, owner):
        refs = dependent["metadata"].get("ownerReferences") or []
        if any(ref.get("uid") == uid and ref.get("blockOwnerDeletion") for ref in refs):
            return moved
    store.remove_finalizer(owner, FOREGROUND_FINALIZER)
    return True


def selector_of(workload: Obj) -> LabelSelector | None:
    return LabelSelector.from_spec((workload.get("spec") or {}).get("selector"))
