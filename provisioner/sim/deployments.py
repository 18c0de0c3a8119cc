"""The Deployment controller, as kube-controller-manager runs it: a ReplicaSet per pod template, revisions and
their history, rolling updates within maxSurge and maxUnavailable, old ReplicaSets cleaned up, and the rollout's
conditions and status.
"""

from __future__ import annotations

import copy
from typing import Any

from provisioner.apimachinery.apply import LAST_APPLIED
from provisioner.apimachinery.defaults import defaulted_spec
from provisioner.cluster.memory import ObjectStore, copy_json
from provisioner.cluster.names import owner_reference
from provisioner.cluster.objects import Obj, timestamp
from provisioner.quantity import QuantityError, canonical_quantity
from provisioner.sim.workloads import Memo, Wakes, inputs, owned_by, seconds, template_hash

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
MAX_INT32 = 2**31 - 1  # a progress deadline or history limit of MaxInt32 means none
# Deployment condition reasons.
NEW_REPLICASET, FOUND_NEW, REPLICASET_UPDATED = "NewReplicaSetCreated", "FoundNewReplicaSet", "ReplicaSetUpdated"
NEW_AVAILABLE, TIMED_OUT = "NewReplicaSetAvailable", "ProgressDeadlineExceeded"
PAUSED, RESUMED = "DeploymentPaused", "DeploymentResumed"
MIN_AVAILABLE, MIN_UNAVAILABLE = "MinimumReplicasAvailable", "MinimumReplicasUnavailable"


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
        if memo is not None and memo.get(uid) == inputs(store, deployment, "ReplicaSet"):
            continue
        changed |= _reconcile_deployment(store, deployment, now, wakes)
        if memo is not None:
            memo[uid] = inputs(store, deployment, "ReplicaSet")
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
    return seconds(current.get("lastUpdateTime")) + deadline < now


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
    due = seconds(current.get("lastUpdateTime")) + deadline + 1
    return due if due > now else None


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
