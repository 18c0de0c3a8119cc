"""The cluster side of the lab: what kube-controller-manager, kube-scheduler, the kubelets and the DRA driver do in
a real cluster. It runs beside karpui's controllers on the same in-memory API server and clock, and never calls
them: the two meet only through the objects in the store."""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

from provisioner.cluster import pdb
from provisioner.cluster.memory import ObjectStore
from provisioner.sim import dra, kubelet, kubescheduler, workloads


class SimulatedCluster:
    """One step runs each component once at the given time; the DRA driver publishes every PUBLISH_SECONDS."""

    def __init__(
        self, store: ObjectStore, rng: random.Random, nodepool_uids: Collection[str], state: dict[str, Any]
    ) -> None:
        self.store = store
        self.rng = rng
        # The NodePools that exist, by uid: the garbage collector deletes NodeClaims whose owning NodePool is gone.
        self.nodepool_uids = frozenset(nodepool_uids)
        self.last_publish: float | None = state.get("last_publish")

    def step(self, now: float) -> bool:
        store, rng = self.store, self.rng
        changed = workloads.reconcile_deployments(store)
        changed |= workloads.reconcile_replicasets(store, rng, now)
        changed |= workloads.reconcile_daemonsets(store, rng)
        changed |= workloads.collect_garbage(store, self.nodepool_uids)
        changed |= dra.make_claims(store, rng)
        published, self.last_publish = dra.publish(store, now, self.last_publish)
        changed |= published
        changed |= kubescheduler.schedule_pending(store, store.views, now)
        changed |= kubelet.reconcile(store, now)
        # kube-controller-manager's disruption controller keeps each PDB's status; nothing here reacts to it.
        pdb.update_status(store, store.views)
        return changed

    def after_step(self) -> None:
        self.store.expire_events()  # nothing reacts to an expired Event, so it is not a change to settle

    def next_due(self, now: float) -> float | None:
        if self.last_publish is None or not self.store.list("DRAConfig"):
            return None
        due = self.last_publish + dra.PUBLISH_SECONDS
        return due if due > now else None

    def to_state(self) -> dict[str, Any]:
        return {"last_publish": self.last_publish}
