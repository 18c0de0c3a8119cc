"""The ReplicaSet controller: pods created or deleted until a ReplicaSet has its replicas (deleting in
kube-controller-manager's order), and its status.
"""

from __future__ import annotations

import random
from collections import Counter

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Obj
from provisioner.sim.workloads import Availability, Burst, Memo, Wakes, create_pod, inputs, owned_by


def reconcile_replicasets(
    store: ObjectStore,
    rng: random.Random,
    now: float,
    memo: Memo | None = None,
    burst: Burst | None = None,
    wakes: Wakes | None = None,
) -> bool:
    """Each ReplicaSet keeps `replicas` active pods, creating at most `burst` of them in all, and counts how many
    are labelled, ready and available; one whose spec and pods were not written since its last reconcile is skipped
    (`memo`), and one whose ready pods are not yet available (minReadySeconds) asks to be looked at again when the
    first becomes so (`wakes`)."""
    changed = False
    burst = burst or Burst()
    wakes = {} if wakes is None else wakes
    for replicaset in store.list("ReplicaSet"):
        if replicaset["metadata"].get("deletionTimestamp"):
            continue
        uid = replicaset["metadata"]["uid"]
        if memo is not None and memo.get(uid) == inputs(store, replicaset, "Pod"):
            continue
        changed |= _reconcile_replicaset(store, replicaset, rng, burst, now, wakes)
        if memo is not None and not burst.cut:  # a cut ReplicaSet has pods still to make
            memo[uid] = inputs(store, replicaset, "Pod")
    return changed


def _reconcile_replicaset(
    store: ObjectStore, replicaset: Obj, rng: random.Random, burst: Burst, now: float, wakes: Wakes
) -> bool:
    changed = False
    wanted = int(replicaset["spec"].get("replicas", 0))
    pods = [p for p in owned_by(store, "Pod", replicaset) if not p["metadata"].get("deletionTimestamp")]
    active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if len(active) < wanted:
        for _ in range(wanted - len(active)):
            if burst.exhausted():
                break
            create_pod(store, replicaset, rng)
            burst.spend()
            changed = True
    elif len(active) > wanted:
        victims = _scale_down_order(store, active)[: len(active) - wanted]
        for victim in victims:
            store.delete("Pod", victim["metadata"]["name"], victim["metadata"]["namespace"])
        gone = {id(victim) for victim in victims}
        active = [p for p in active if id(p) not in gone]  # the status says what is left, not what was
        changed = True
    # calculateStatus over the pods left (those just created are not in `active`: counted at the next reconcile,
    # which their writes bring about).
    spec = replicaset["spec"]
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    counts = Availability(now, int(spec.get("minReadySeconds") or 0))
    labelled = 0
    for pod in active:
        labels = pod["metadata"].get("labels") or {}
        labelled += all(labels.get(key) == value for key, value in template_labels.items())
        counts.add(pod)
    previous = replicaset.get("status") or {}
    status: Obj = {
        "replicas": len(active),
        "fullyLabeledReplicas": labelled,
        "readyReplicas": counts.ready,
        "availableReplicas": counts.available,
        "observedGeneration": replicaset["metadata"].get("generation", 1),
    }
    if previous.get("conditions"):
        status["conditions"] = previous["conditions"]
    if previous != status:
        replicaset["status"] = status
        store.update(replicaset)
    uid = replicaset["metadata"]["uid"]
    wakes.pop(uid, None)
    if counts.next_available is not None:
        wakes[uid] = counts.next_available
    return changed


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
