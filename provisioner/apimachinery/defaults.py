"""kube-apiserver's defaulting of the apps/v1 workloads and of volumes: what a Deployment, ReplicaSet, DaemonSet,
PersistentVolume(Claim) or StorageClass is stored with where its writer left a field out (k8s.io/kubernetes
pkg/apis/apps/v1, core/v1 and storage/v1 defaults.go), on every create and update.

The lab's controllers read their workloads through these defaults too, so an object stored before they were
applied (or written by a path that skips them) behaves as kube-controller-manager would see it on a real cluster,
where the API server defaults what it reads from etcd as well.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

REVISION_HISTORY_LIMIT = 10
PROGRESS_DEADLINE_SECONDS = 600
# A Deployment's rolling update: a quarter of its replicas over and under the desired count.
DEPLOYMENT_MAX_SURGE = DEPLOYMENT_MAX_UNAVAILABLE = "25%"
# A DaemonSet's: one node's pod at a time, none surged.
DAEMONSET_MAX_UNAVAILABLE, DAEMONSET_MAX_SURGE = 1, 0
# A volume holds a filesystem unless asked for a raw block device.
VOLUME_MODE = "Filesystem"
# A PV made by hand is kept once released (Retain); one a class provisions is deleted with its claim by default.
PV_RECLAIM_POLICY, CLASS_RECLAIM_POLICY = "Retain", "Delete"
# A class binds (and provisions) a claim as soon as it is created, unless it waits for the pod's node.
VOLUME_BINDING_MODE = "Immediate"


def set_defaults(obj: Obj) -> Obj:
    """Fill in, in place, what kube-apiserver defaults in `obj` (a workload or a volume kind; other kinds are left as
    they are). `obj` itself is returned. Only absent or null fields are set: a value the writer gave is kept, valid
    or not (validation answers for it)."""
    kind = obj.get("kind")
    if kind == "StorageClass":  # its fields are at the top level: it has no spec
        _unset(obj, "reclaimPolicy", CLASS_RECLAIM_POLICY)
        _unset(obj, "volumeBindingMode", VOLUME_BINDING_MODE)
        return obj
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    if kind in ("PersistentVolumeClaim", "PersistentVolume"):
        _unset(spec, "volumeMode", VOLUME_MODE)
    if kind == "PersistentVolume":
        _unset(spec, "persistentVolumeReclaimPolicy", PV_RECLAIM_POLICY, empty=True)
    elif kind == "Deployment":
        _deployment(spec)
    elif kind == "DaemonSet":
        _daemonset(spec)
    elif kind == "ReplicaSet" and spec.get("replicas") is None:
        spec["replicas"] = 1
    return obj


def defaulted_spec(obj: Obj) -> Obj:
    """`obj`'s spec as the API server would serve it, defaults filled in; `obj` itself is not changed (a copy of
    the parts defaulting touches, the rest shared)."""
    spec = dict(obj.get("spec") or {})
    for key in ("strategy", "updateStrategy"):
        if isinstance(spec.get(key), dict):
            spec[key] = dict(spec[key])
            if isinstance(spec[key].get("rollingUpdate"), dict):
                spec[key]["rollingUpdate"] = dict(spec[key]["rollingUpdate"])
    set_defaults({"kind": obj.get("kind"), "spec": spec})
    return spec


def _deployment(spec: Obj) -> None:
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    _rolling_update(spec, "strategy", DEPLOYMENT_MAX_UNAVAILABLE, DEPLOYMENT_MAX_SURGE)
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = REVISION_HISTORY_LIMIT
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = PROGRESS_DEADLINE_SECONDS


def _daemonset(spec: Obj) -> None:
    _rolling_update(spec, "updateStrategy", DAEMONSET_MAX_UNAVAILABLE, DAEMONSET_MAX_SURGE)
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = REVISION_HISTORY_LIMIT


def _rolling_update(spec: Obj, key: str, max_unavailable: int | str, max_surge: int | str) -> None:
    """A strategy without a type is a RollingUpdate; a RollingUpdate's bounds default to the kind's."""
    strategy = _mapping(spec, key)
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy.get("type") == "RollingUpdate":
        rolling = _mapping(strategy, "rollingUpdate")
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = max_unavailable
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = max_surge


def _unset(parent: Obj, key: str, value: str, *, empty: bool = False) -> None:
    """`parent[key]` made `value` when absent or null, and when `empty` also when "" (a Go string field, whose zero
    value is unset; a pointer field's "" is a value given, for validation to refuse)."""
    if parent.get(key) is None or (empty and parent.get(key) == ""):
        parent[key] = value


def _mapping(parent: Obj, key: str) -> Obj:
    """`parent[key]`, made an empty map when absent or null (a Go struct the decoder allocates)."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else {}  # not a map: left for validation to refuse
