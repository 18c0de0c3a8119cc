"""The garbage collector: objects whose owners are gone are deleted, and a deletion's propagation finished
(dependents orphaned or deleted first) as Kubernetes does.
"""

from __future__ import annotations

from collections.abc import Collection

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import DEPENDENT_KINDS, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, OWNER_KINDS, Obj


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
