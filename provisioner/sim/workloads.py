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

from provisioner.apimachinery.apply import LAST_APPLIED
from provisioner.apimachinery.defaults import defaulted_spec
from provisioner.cluster.memory import ObjectStore, copy_json
from provisioner.cluster.names import NAME_CHARS, owner_reference, random_suffix
from provisioner.cluster.objects import (
    DEPENDENT_KINDS,
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    OWNER_KINDS,
    Obj,
    parse_timestamp,
    timestamp,
)
from provisioner.manifests.pod import pod_from_spec
from provisioner.pods import Pod
from provisioner.quantity import QuantityError, canonical_quantity
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
# object uid -> when its controller must look at it again though nothing it reads was written (a pod turns
# available after minReadySeconds, a rollout's progress deadline passes): the controllers' delayed requeues.
Wakes = dict[str, float]

# The deployment controller's annotations (k8s.io/kubernetes pkg/controller/deployment/util).
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Never copied from a Deployment to its ReplicaSets (nor back by `kubectl rollout undo`).
NOT_COPIED = frozenset(
    {LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, "deprecated.deployment.rollback.to"}
)
MAX_REVISION_HISTORY_CHARS = 2000  # kube-controller-manager's limit on revision-history
POD_TEMPLATE_HASH = "pod-template-hash"
DAEMONSET_HASH = "controller-revision-hash"
DAEMONSET_GENERATION = "pod-template-generation"
MAX_INT32 = 2**31 - 1  # a progress deadline or history limit of MaxInt32 means none
# Deployment condition reasons.
NEW_REPLICASET, FOUND_NEW, REPLICASET_UPDATED = "NewReplicaSetCreated", "FoundNewReplicaSet", "ReplicaSetUpdated"
NEW_AVAILABLE, TIMED_OUT = "NewReplicaSetAvailable", "ProgressDeadlineExceeded"
PAUSED, RESUMED = "DeploymentPaused", "DeploymentResumed"
MIN_AVAILABLE, MIN_UNAVAILABLE = "MinimumReplicasAvailable", "MinimumReplicasUnavailable"


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


def reconcile_deployments(store: ObjectStore, now: float, memo: Memo | None = None, wakes: Wakes | None = None) -> bool:
    """kube-controller-manager's deployment controller: each Deployment keeps one ReplicaSet per pod template, the
    current one numbered the next revision and given the replicas, and its status (counts, Available and
    Progressing conditions) follows its ReplicaSets'. A Deployment whose spec and ReplicaSets were not written since
    its last reconcile is skipped (`memo`); one mid-rollout asks to be looked at again when its progress deadline
    passes (`wakes`)."""
    changed = False
    wakes = {} if wakes is None else wakes
    for deployment in store.list("Deployment"):
        if deployment["metadata"].get("deletionTimestamp"):
            continue
        uid = deployment["metadata"]["uid"]
        if memo is not None and memo.get(uid) == _inputs(store, deployment, "ReplicaSet"):
            continue
        changed |= _reconcile_deployment(store, deployment, now, wakes)
        if memo is not None:
            memo[uid] = _inputs(store, deployment, "ReplicaSet")
    return changed


def _reconcile_deployment(store: ObjectStore, deployment: Obj, now: float, wakes: Wakes) -> bool:
    """One sync, in syncDeployment's order: the paused condition, then a paused Deployment only scales what it has,
    any other rolls out its template. The lab rolls out at once (the new ReplicaSet gets every replica, the old ones
    none, in one sync) instead of surge by surge, which makes a scaling event a rollout to the same ReplicaSet; the
    status and conditions are written as the controller writes them along the way."""
    spec = defaulted_spec(deployment)
    uid = deployment["metadata"]["uid"]
    wakes.pop(uid, None)
    previous = deployment.get("status") or {}
    conditions = copy_json(previous.get("conditions") or [])
    paused = bool(spec.get("paused"))
    _pause_condition(conditions, spec, paused, now)
    replicasets = owned_by(store, "ReplicaSet", deployment)
    new = _new_replicaset(store, deployment, spec, replicasets)
    old = [rs for rs in replicasets if rs is not new]
    annotations = deployment["metadata"].get("annotations") or {}
    revision = annotations.get(REVISION)
    changed = False
    if new is not None:
        revision = _sync_revision(store, deployment, spec, new, old)
        if _progress_deadline(spec) is not None and _condition_of(conditions, "Progressing") is None:
            name = new["metadata"]["name"]
            _set_condition(
                conditions, _condition("Progressing", "True", FOUND_NEW, f'Found new replica set "{name}"', now)
            )
    if paused:
        changed |= _scale(store, spec, new, old)
        changed |= _clean_up(store, spec, old)
        status = _deployment_status(deployment, spec, old, new, conditions, now)
    else:
        if new is None:
            new = _create_replicaset(store, deployment, spec, old)
            revision = new["metadata"]["annotations"][REVISION]
            changed = True
            if _progress_deadline(spec) is not None:
                message = 'Created new replica set "{}"'.format(new["metadata"]["name"])
                _set_condition(conditions, _condition("Progressing", "True", NEW_REPLICASET, message, now))
        scaled = _scale_replicaset(store, spec, new, int(spec["replicas"]))
        for replicaset in old:
            if _replicas(replicaset) != 0:
                scaled |= _scale_replicaset(store, spec, replicaset, 0)  # a rollout: the old template's pods go
        changed |= scaled
        status = _deployment_status(deployment, spec, old, new, conditions, now)
        _rollout_conditions(deployment, spec, previous, status, new, now)
        # Once complete, the history beyond its limit goes: the controller does it at the sync its own status
        # write brings about, which the lab (remembering what it wrote) does not run.
        if not scaled and (_complete(deployment, spec, previous) or _complete(deployment, spec, status)):
            changed |= _clean_up(store, spec, old)
        wake = _progress_check_due(deployment, spec, status, now)
        if wake is not None:
            wakes[uid] = wake
    written = False
    if revision is not None and annotations.get(REVISION) != revision:
        deployment["metadata"]["annotations"] = {**annotations, REVISION: revision}
        written = True
    if previous != status:
        deployment["status"] = status
        written = True
    if written:
        store.update(deployment)  # metadata and status: the generation stays
    return changed


def _pause_condition(conditions: list[Obj], spec: Obj, paused: bool, now: float) -> None:
    """checkPausedConditions: pausing or resuming shows in Progressing, so that a deadline never counts the time a
    Deployment spent paused. A reported timeout is kept."""
    if _progress_deadline(spec) is None:
        return
    current = _condition_of(conditions, "Progressing")
    if current is not None and current.get("reason") == TIMED_OUT:
        return
    was_paused = current is not None and current.get("reason") == PAUSED
    if paused and not was_paused:
        _set_condition(conditions, _condition("Progressing", "Unknown", PAUSED, "Deployment is paused", now))
    elif not paused and was_paused:
        _set_condition(conditions, _condition("Progressing", "Unknown", RESUMED, "Deployment is resumed", now))


def _new_replicaset(store: ObjectStore, deployment: Obj, spec: Obj, replicasets: list[Obj]) -> Obj | None:
    """The ReplicaSet of the Deployment's pod template: the one named after its hash, else the oldest whose template
    is the same once decoded (a template patched back from a ReplicaSet by `kubectl rollout undo` comes with the
    empty fields Go writes, `creationTimestamp: null`, `resources: {}`)."""
    template = spec.get("template") or {}
    name = f"{deployment['metadata']['name']}-{template_hash(template)}"
    named = store.get("ReplicaSet", name, deployment["metadata"].get("namespace", "default"))
    if named is not None:
        return named
    wanted = _semantic(_without_hash(template))
    for replicaset in sorted(replicasets, key=_created):
        if _semantic(_without_hash(replicaset["spec"].get("template") or {})) == wanted:
            return replicaset
    return None


def _sync_revision(store: ObjectStore, deployment: Obj, spec: Obj, new: Obj, old: list[Obj]) -> str | None:
    """SetNewReplicaSetAnnotations on the current ReplicaSet: the Deployment's annotations copied, its revision
    raised above every old one's (a rollback to it keeps the revisions it had in revision-history), and the
    Deployment's minReadySeconds. The revision the Deployment carries: the current ReplicaSet's."""
    meta = new["metadata"]
    annotations = dict(meta.get("annotations") or {})
    _copy_annotations(deployment, annotations)
    wanted = _max_revision(old) + 1
    had = annotations.get(REVISION)
    try:
        revision = int(had) if had else 0
    except ValueError:
        revision = None  # not a number: left as it is, as the controller leaves it
    if revision is not None and revision < wanted:
        annotations[REVISION] = str(wanted)
        if had:
            history = annotations.get(REVISION_HISTORY)
            annotations[REVISION_HISTORY] = _appended(history, had) if history else had
    min_ready = int(spec.get("minReadySeconds") or 0)
    spec_changed = int(new["spec"].get("minReadySeconds") or 0) != min_ready
    if annotations != (meta.get("annotations") or {}) or spec_changed:
        meta["annotations"] = annotations
        _set_min_ready(new, min_ready)
        store.update(new, spec_changed=spec_changed)
    return annotations.get(REVISION)


def _appended(history: str, revision: str) -> str:
    """revision-history with one more revision, the oldest dropped while it is longer than the controller keeps."""
    revisions = history.split(",")
    total = len(history) + len(revision) + 1
    start = 0
    while total > MAX_REVISION_HISTORY_CHARS and start < len(revisions):
        total -= len(revisions[start]) + 1
        start += 1
    if total > MAX_REVISION_HISTORY_CHARS:
        return history
    return ",".join([*revisions[start:], revision])


def _create_replicaset(store: ObjectStore, deployment: Obj, spec: Obj, old: list[Obj]) -> Obj:
    """The new ReplicaSet of a rollout: named and labelled by the template's hash, selecting the Deployment's pods
    that carry it, numbered one past the newest old revision."""
    template = spec.get("template") or {}
    pod_hash = template_hash(template)
    labels = {**((template.get("metadata") or {}).get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
    rs_template = copy.deepcopy(template)
    rs_template.setdefault("metadata", {})["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {"matchLabels": dict(labels)})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: pod_hash}
    replicas = int(spec["replicas"])
    annotations: dict[str, str] = {}
    _copy_annotations(deployment, annotations)
    annotations[REVISION] = str(_max_revision(old) + 1)
    annotations[DESIRED_REPLICAS] = str(replicas)
    annotations[MAX_REPLICAS] = str(replicas + _max_surge(spec))
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{deployment['metadata']['name']}-{pod_hash}",
            "namespace": deployment["metadata"].get("namespace", "default"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
    }
    _set_min_ready(replicaset, int(spec.get("minReadySeconds") or 0))
    return store.create(replicaset)


def _scale(store: ObjectStore, spec: Obj, new: Obj | None, old: list[Obj]) -> bool:
    """dc.scale for a paused Deployment: the one active ReplicaSet (or, with none, the newest) takes the Deployment's
    replicas; a saturated new one has the old ones scaled down. Several active ReplicaSets (scaled proportionally
    by the controller) do not arise in the lab, which rolls out at once: they are left as they are."""
    replicas = int(spec["replicas"])
    target = _active_or_latest(new, old)
    if target is not None:
        return _replicas(target) != replicas and _scale_replicaset(store, spec, target, replicas)
    if new is not None and _saturated(spec, new):
        scaled = False
        for replicaset in old:
            if _replicas(replicaset) != 0:
                scaled |= _scale_replicaset(store, spec, replicaset, 0)
        return scaled
    return False


def _active_or_latest(new: Obj | None, old: list[Obj]) -> Obj | None:
    if new is None and not old:
        return None
    newest_first = sorted(old, key=_created, reverse=True)
    active = [rs for rs in [*newest_first, new] if rs is not None and _replicas(rs) > 0]
    if not active:
        return new if new is not None else newest_first[0]
    return active[0] if len(active) == 1 else None


def _saturated(spec: Obj, replicaset: Obj) -> bool:
    replicas = int(spec["replicas"])
    desired = (replicaset["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS)
    return (
        _replicas(replicaset) == replicas
        and desired == str(replicas)
        and int((replicaset.get("status") or {}).get("availableReplicas") or 0) == replicas
    )


def _scale_replicaset(store: ObjectStore, spec: Obj, replicaset: Obj, replicas: int) -> bool:
    """scaleReplicaSet: the size, and the Deployment's replica counts it was sized for; whether it was written."""
    desired = int(spec["replicas"])
    annotations = dict(replicaset["metadata"].get("annotations") or {})
    wanted = {DESIRED_REPLICAS: str(desired), MAX_REPLICAS: str(desired + _max_surge(spec))}
    resized = _replicas(replicaset) != replicas
    if not resized and all(annotations.get(key) == value for key, value in wanted.items()):
        return False
    replicaset["metadata"]["annotations"] = {**annotations, **wanted}
    replicaset["spec"]["replicas"] = replicas
    store.update(replicaset, spec_changed=resized)
    return True


def _clean_up(store: ObjectStore, spec: Obj, old: list[Obj]) -> bool:
    """cleanupDeployment: old ReplicaSets beyond revisionHistoryLimit go, the lowest revisions first, each only
    once it has no pods and its controller has seen its last spec."""
    limit = spec.get("revisionHistoryLimit")
    if not isinstance(limit, int) or limit == MAX_INT32:
        return False
    alive = sorted((rs for rs in old if not rs["metadata"].get("deletionTimestamp")), key=_by_revision)
    deleted = False
    for replicaset in alive[: max(0, len(alive) - limit)]:
        status = replicaset.get("status") or {}
        if (
            int(status.get("replicas") or 0) != 0
            or _replicas(replicaset) != 0
            or int(replicaset["metadata"].get("generation", 1)) > int(status.get("observedGeneration") or 0)
        ):
            continue
        meta = replicaset["metadata"]
        store.delete("ReplicaSet", meta["name"], meta.get("namespace", "default"))
        deleted = True
    return deleted


def _deployment_status(
    deployment: Obj, spec: Obj, old: list[Obj], new: Obj | None, conditions: list[Obj], now: float
) -> Obj:
    """calculateStatus: the counts over every ReplicaSet (updated: the current one's), and Available once at most
    maxUnavailable of the replicas are not available."""
    replicasets = [*old, *([new] if new is not None else [])]

    def total(field: str, among: list[Obj]) -> int:
        return sum(int((rs.get("status") or {}).get(field) or 0) for rs in among)

    replicas = int(spec["replicas"])
    available = total("availableReplicas", replicasets)
    status: Obj = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": total("replicas", replicasets),
        "updatedReplicas": total("replicas", [new] if new is not None else []),
        "readyReplicas": total("readyReplicas", replicasets),
        "availableReplicas": available,
        "unavailableReplicas": max(0, sum(_replicas(rs) for rs in replicasets) - available),
    }
    if available >= replicas - _max_unavailable(spec):
        _set_condition(
            conditions, _condition("Available", "True", MIN_AVAILABLE, "Deployment has minimum availability.", now)
        )
    else:
        message = "Deployment does not have minimum availability."
        _set_condition(conditions, _condition("Available", "False", MIN_UNAVAILABLE, message, now))
    status["conditions"] = conditions
    collisions = (deployment.get("status") or {}).get("collisionCount")
    if collisions is not None:
        status["collisionCount"] = collisions
    return status


def _rollout_conditions(deployment: Obj, spec: Obj, previous: Obj, status: Obj, new: Obj | None, now: float) -> None:
    """syncRolloutStatus's Progressing: NewReplicaSetAvailable once the rollout is complete, ReplicaSetUpdated (its
    update time moved) while it makes progress, ProgressDeadlineExceeded once it made none for
    progressDeadlineSeconds. A finished rollout that is only scaled is not estimated again."""
    conditions: list[Obj] = status["conditions"]
    deadline = _progress_deadline(spec)
    if deadline is None:
        conditions[:] = [c for c in conditions if c.get("type") != "Progressing"]
        return
    current = _condition_of(conditions, "Progressing")
    if (
        status["replicas"] == status["updatedReplicas"]
        and current is not None
        and current.get("reason") == NEW_AVAILABLE
    ):
        return
    subject = (
        f'ReplicaSet "{new["metadata"]["name"]}"'
        if new is not None
        else f'Deployment "{deployment["metadata"]["name"]}"'
    )
    if _complete(deployment, spec, status):
        condition = _condition("Progressing", "True", NEW_AVAILABLE, f"{subject} has successfully progressed.", now)
        _set_condition(conditions, condition)
    elif _progressing(previous, status):
        condition = _condition("Progressing", "True", REPLICASET_UPDATED, f"{subject} is progressing.", now)
        if current is not None:
            if current.get("status") == "True":
                condition["lastTransitionTime"] = current.get("lastTransitionTime")
            conditions[:] = [c for c in conditions if c.get("type") != "Progressing"]
        _set_condition(conditions, condition)
    elif _timed_out(deadline, current, now):
        condition = _condition("Progressing", "False", TIMED_OUT, f"{subject} has timed out progressing.", now)
        _set_condition(conditions, condition)


def _complete(deployment: Obj, spec: Obj, status: Obj) -> bool:
    """DeploymentComplete: every replica updated and available, none old left, the latest spec seen."""
    replicas = int(spec["replicas"])
    return (
        int(status.get("updatedReplicas") or 0) == replicas
        and int(status.get("replicas") or 0) == replicas
        and int(status.get("availableReplicas") or 0) == replicas
        and int(status.get("observedGeneration") or 0) >= int(deployment["metadata"].get("generation", 1))
    )


def _progressing(previous: Obj, status: Obj) -> bool:
    """DeploymentProgressing: since the last status, pods were updated, old ones went, or more became ready or
    available."""

    def count(among: Obj, field: str) -> int:
        return int(among.get(field) or 0)

    return (
        count(status, "updatedReplicas") > count(previous, "updatedReplicas")
        or count(status, "replicas") - count(status, "updatedReplicas")
        < count(previous, "replicas") - count(previous, "updatedReplicas")
        or count(status, "readyReplicas") > count(previous, "readyReplicas")
        or count(status, "availableReplicas") > count(previous, "availableReplicas")
    )


def _timed_out(deadline: int, current: Obj | None, now: float) -> bool:
    if current is None or current.get("reason") == NEW_AVAILABLE:
        return False
    if current.get("reason") == TIMED_OUT:
        return True
    return _seconds(current.get("lastUpdateTime")) + deadline < now


def _progress_check_due(deployment: Obj, spec: Obj, status: Obj, now: float) -> float | None:
    """requeueStuckDeployment: when a rollout that shows no progress is checked for its deadline again, a second
    past it as the controller requeues. None for one that cannot time out (complete, paused, timed out already,
    or only scaled after it completed)."""
    deadline = _progress_deadline(spec)
    current = _condition_of(status["conditions"], "Progressing")
    if deadline is None or current is None or current.get("reason") in (TIMED_OUT, PAUSED, NEW_AVAILABLE):
        return None
    if _complete(deployment, spec, status):
        return None
    due = _seconds(current.get("lastUpdateTime")) + deadline + 1
    return due if due > now else None


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
        if memo is not None and memo.get(uid) == _inputs(store, replicaset, "Pod"):
            continue
        changed |= _reconcile_replicaset(store, replicaset, rng, burst, now, wakes)
        if memo is not None and not burst.cut:  # a cut ReplicaSet has pods still to make
            memo[uid] = _inputs(store, replicaset, "Pod")
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
    # calculateStatus over the pods left (those just created are not in `active`: counted at the next reconcile,
    # which their writes bring about).
    spec = replicaset["spec"]
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    counts = _Availability(now, int(spec.get("minReadySeconds") or 0))
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


class _Availability:
    """Counts pods as ready (their Ready condition True) and available (ready for `min_ready` seconds by `now`),
    and the soonest moment one of those not yet available becomes so."""

    def __init__(self, now: float, min_ready: int) -> None:
        self.now, self.min_ready = now, min_ready
        self.ready = self.available = 0
        self.next_available: float | None = None

    def add(self, pod: Obj) -> bool:
        """Count `pod`; whether it is available."""
        since = _ready_since(pod)
        if since is None:
            return False
        self.ready += 1
        if self.min_ready <= 0:
            self.available += 1
            return True
        if not since:
            return False  # ready, but since when is not known: never available, as IsPodAvailable has it
        at = _seconds(since) + self.min_ready
        if at <= self.now:
            self.available += 1
            return True
        if self.next_available is None or at < self.next_available:
            self.next_available = at
        return False


def _ready_since(pod: Obj) -> str | None:
    """The time `pod`'s Ready condition turned True ("" if not said), or None when it is not ready."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return str(condition.get("lastTransitionTime") or "") if condition.get("status") == "True" else None
    return None


def _create_pod(store: ObjectStore, owner: Obj, rng: random.Random, labels: dict[str, str] | None = None) -> Obj:
    """A pod of `owner`'s template, with `labels` added (a DaemonSet's revision)."""
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
                "labels": {**(meta.get("labels") or {}), **(labels or {})},
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


def reconcile_daemonsets(store: ObjectStore, rng: random.Random, now: float, wakes: Wakes | None = None) -> bool:
    """One pod per matching node, bound directly and labelled with the template's revision; pods on nodes that are
    gone or no longer match go, and with the RollingUpdate strategy a pod of an older template is replaced (all at
    once: the lab does not hold back to maxUnavailable). The status counts as the DaemonSet controller's does; a
    DaemonSet whose ready pods are not yet available (minReadySeconds) asks to be looked at again (`wakes`)."""
    changed = False
    wakes = {} if wakes is None else wakes
    daemonsets = store.list("DaemonSet")
    if not daemonsets:
        return False
    nodes = {n["metadata"]["name"]: n for n in store.list("Node") if not n["metadata"].get("deletionTimestamp")}
    for daemonset in daemonsets:
        if daemonset["metadata"].get("deletionTimestamp"):
            continue  # as Kubernetes' controller: the garbage collector is deleting its pods, none are made again
        spec = defaulted_spec(daemonset)
        revision = template_hash(spec.get("template") or {})
        labels = {DAEMONSET_HASH: revision, DAEMONSET_GENERATION: str(daemonset["metadata"].get("generation", 1))}
        strategy = spec.get("updateStrategy")
        replaces = isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate"
        # The template is parsed once, not once per node (and not at all without nodes).
        template = _daemon_pod(daemonset) if nodes else None
        runs_on = {name: _runs_on(template, node) for name, node in nodes.items()} if template is not None else {}
        placed = {p["spec"].get("nodeName"): p for p in owned_by(store, "Pod", daemonset)}
        for name in nodes:
            if not runs_on[name]:
                continue
            current = placed.get(name)
            if current is not None and replaces and _outdated(current, revision):
                if current["metadata"].get("deletionTimestamp"):
                    continue  # its replacement comes once it is gone
                store.delete("Pod", current["metadata"]["name"], current["metadata"]["namespace"])
                current = None
            if current is None:
                pod = _create_pod(store, daemonset, rng, labels)
                pod["spec"]["nodeName"] = name
                store.update(pod)
                placed[name] = pod
                changed = True
        for node_name, pod in list(placed.items()):
            if node_name not in nodes or not runs_on[node_name]:
                store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
                del placed[node_name]
                changed = True
        status = _daemonset_status(daemonset, spec, runs_on, placed, revision, now, wakes)
        if daemonset.get("status") != status:
            daemonset["status"] = status
            store.update(daemonset)
    return changed


def _outdated(pod: Obj, revision: str) -> bool:
    """A pod made from an older template. One without the revision label was made before the lab labelled daemon
    pods: taken as current, not replaced."""
    made_from = (pod["metadata"].get("labels") or {}).get(DAEMONSET_HASH)
    return made_from is not None and made_from != revision


def _daemonset_status(
    daemonset: Obj, spec: Obj, runs_on: dict[str, bool], placed: dict[Any, Obj], revision: str, now: float, wakes: Wakes
) -> Obj:
    """updateDaemonSetStatus: over the nodes that should run the pod, how many do, ready, available and updated;
    and those that run it but should not."""
    counts = _Availability(now, int(spec.get("minReadySeconds") or 0))
    scheduled = updated = misscheduled = 0
    for node_name, pod in placed.items():
        if not runs_on.get(node_name):
            misscheduled += 1
            continue
        scheduled += 1
        counts.add(pod)
        updated += not _outdated(pod, revision)
    desired = sum(runs_on.values())
    uid = daemonset["metadata"]["uid"]
    wakes.pop(uid, None)
    if counts.next_available is not None:
        wakes[uid] = counts.next_available
    status: Obj = {
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "desiredNumberScheduled": desired,
        "numberReady": counts.ready,
        "observedGeneration": daemonset["metadata"].get("generation", 1),
        "updatedNumberScheduled": updated,
        "numberAvailable": counts.available,
        "numberUnavailable": desired - counts.available,
    }
    previous = daemonset.get("status") or {}
    for kept in ("collisionCount", "conditions"):
        if previous.get(kept) is not None:
            status[kept] = previous[kept]
    return status


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


def _replicas(replicaset: Obj) -> int:
    replicas = replicaset["spec"].get("replicas")
    return 1 if replicas is None else int(replicas)


def _created(obj: Obj) -> tuple[str, str]:
    """ReplicaSetsByCreationTimestamp's order: oldest first, then by name."""
    return (obj["metadata"].get("creationTimestamp", ""), obj["metadata"]["name"])


def _revision(obj: Obj) -> int | None:
    """An object's revision annotation (0 without one), None when it is not a number."""
    text = (obj["metadata"].get("annotations") or {}).get(REVISION)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return None


def _max_revision(replicasets: list[Obj]) -> int:
    return max((revision for rs in replicasets if (revision := _revision(rs)) is not None), default=0)


def _by_revision(replicaset: Obj) -> tuple[int, str, str]:
    return (_revision(replicaset) or 0, *_created(replicaset))


def _copy_annotations(deployment: Obj, annotations: dict[str, str]) -> None:
    for key, value in (deployment["metadata"].get("annotations") or {}).items():
        if key not in NOT_COPIED:
            annotations[key] = value


def _set_min_ready(replicaset: Obj, min_ready: int) -> None:
    if min_ready:
        replicaset["spec"]["minReadySeconds"] = min_ready
    else:
        replicaset["spec"].pop("minReadySeconds", None)  # 0 is left out, as the API serves it


def _progress_deadline(spec: Obj) -> int | None:
    deadline = spec.get("progressDeadlineSeconds")
    return None if not isinstance(deadline, int) or deadline == MAX_INT32 else deadline


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent; a value validation would refuse counts as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        return 0
    scaled = int(text[:-1]) * total
    return -(-scaled // 100) if round_up else scaled // 100


def _fenceposts(spec: Obj) -> tuple[int, int]:
    """ResolveFenceposts: maxSurge (rounded up) and maxUnavailable (rounded down) of a rolling update, never both 0."""
    strategy = spec.get("strategy")
    rolling = strategy.get("rollingUpdate") if isinstance(strategy, dict) else None
    rolling = rolling if isinstance(rolling, dict) else {}
    replicas = int(spec["replicas"])
    surge = _int_or_percent(rolling.get("maxSurge", 0), replicas, True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", 0), replicas, False)
    return surge, 1 if surge == 0 and unavailable == 0 else unavailable


def _rolling(spec: Obj) -> bool:
    strategy = spec.get("strategy")
    return isinstance(strategy, dict) and strategy.get("type") == "RollingUpdate"


def _max_surge(spec: Obj) -> int:
    return _fenceposts(spec)[0] if _rolling(spec) else 0


def _max_unavailable(spec: Obj) -> int:
    replicas = int(spec["replicas"])
    return 0 if not _rolling(spec) or replicas == 0 else min(_fenceposts(spec)[1], replicas)


def _condition(kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    at = timestamp(now)
    return {
        "type": kind,
        "status": status,
        "lastUpdateTime": at,
        "lastTransitionTime": at,
        "reason": reason,
        "message": message,
    }


def _condition_of(conditions: list[Obj], kind: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _set_condition(conditions: list[Obj], condition: Obj) -> None:
    """SetDeploymentCondition: nothing changes while status and reason stay; a changed one goes last, keeping its
    transition time when only the reason changed."""
    current = _condition_of(conditions, condition["type"])
    if current is not None and current.get("status") == condition["status"]:
        if current.get("reason") == condition["reason"]:
            return
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    conditions[:] = [*(c for c in conditions if c.get("type") != condition["type"]), condition]


def _seconds(text: Any) -> float:
    """A condition's time as seconds (the epoch when it has none)."""
    return parse_timestamp(str(text)) if text else 0.0


def _without_hash(template: Obj) -> Obj:
    """A pod template without the pod-template-hash label the ReplicaSet's copy carries."""
    meta = template.get("metadata") or {}
    labels = {key: value for key, value in (meta.get("labels") or {}).items() if key != POD_TEMPLATE_HASH}
    return {**template, "metadata": {**meta, "labels": labels}}


def _semantic(value: Any) -> Any:
    """A template as it compares once decoded (apimachinery's semantic equality): nulls, empty maps and empty lists
    are the same as absent fields, and resource quantities compare by amount ("1000m" is "1")."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            item = _quantities(item) if key in ("requests", "limits") and isinstance(item, dict) else _semantic(item)
            if item is not None and item != {} and item != []:
                kept[key] = item
        return kept
    if isinstance(value, list):
        return [_semantic(item) for item in value]
    return value


def _quantities(amounts: dict[str, Any]) -> dict[str, Any]:
    canonical = {}
    for name, amount in amounts.items():
        try:
            canonical[name] = canonical_quantity(amount)
        except (QuantityError, TypeError):
            canonical[name] = amount
    return canonical
