"""What the lab's workload controllers share (pkg/controller's controller_utils): the objects an owner
controls, template hashes, the pods they create, when a pod counts as available, and the memo, wake-ups and write
bursts that bound each step.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.names import NAME_CHARS, owner_reference, random_suffix
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.selectors import LabelSelector


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


def inputs(store: ObjectStore, owner: Obj, kind: str, *extra: object) -> tuple[object, ...]:
    """What reconciling `owner` depends on: itself and the objects of `kind` it controls (and `extra`)."""
    uid = owner["metadata"]["uid"]
    return (
        owner["metadata"].get("resourceVersion"),
        store.cache_epoch,
        store.bucket_version(kind, "owner", uid),
        *extra,
    )


class Availability:
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
        at = seconds(since) + self.min_ready
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


def create_pod(store: ObjectStore, owner: Obj, rng: random.Random, labels: dict[str, str] | None = None) -> Obj:
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
                # As the ReplicaSet, DaemonSet and Job controllers ask kube-apiserver for a name: clients read it.
                "generateName": f"{owner['metadata']['name']}-",
                "namespace": owner["metadata"].get("namespace", "default"),
                "labels": {**(meta.get("labels") or {}), **(labels or {})},
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_reference(owner)],
            },
            "spec": template.get("spec") or {},
            "status": {"phase": "Pending"},
        }
    )


def selector_of(workload: Obj) -> LabelSelector | None:
    return LabelSelector.from_spec((workload.get("spec") or {}).get("selector"))


def seconds(text: Any) -> float:
    """A condition's time as seconds (the epoch when it has none)."""
    return parse_timestamp(str(text)) if text else 0.0
