"""The cluster side of the lab: what kube-controller-manager, kube-scheduler, the kubelets and the DRA driver do in
a real cluster. It runs beside karpui's controllers on the same in-memory API server and clock, and never calls
them: the two meet only through the objects in the store."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from typing import Any

from provisioner.cluster import pdb
from provisioner.cluster.memory import ObjectStore
from provisioner.sim import daemonsets, deployments, dra, garbage, kubelet, kubescheduler, replicasets, workloads

# Components whose every decision follows from the stored objects alone (no clock, no schedule): one that wrote
# nothing and reported no change at some resourceVersion has nothing to do until something is written again, or
# until a moment it asked to be woken at (WOKEN).
STORE_DRIVEN = frozenset(
    {
        "deployments",
        "replicasets",
        "deployment-status",
        "daemonsets",
        "garbage-collector",
        "resourceclaims",
        "kubelet",
    }
)
# The controllers that ask to be woken at a later moment (a pod's minReadySeconds passing, a rollout's progress
# deadline), and the components that then run though nothing was written: the deployment controller's two passes.
WOKEN = {
    "deployments": ("deployments", "deployment-status"),
    "replicasets": ("replicasets",),
    "daemonsets": ("daemonsets",),
}
# The pods the ReplicaSet controller creates, the kube-scheduler binds (or marks unschedulable) and the kubelets
# start in one step, each: a scale-up larger than this goes on at the next step of the same moment (`backlog`), so
# no step, and no run that stops between steps, does unbounded work. Far above any test's scale-up, so it changes
# no small lab's outcome.
POD_WRITES_PER_STEP = 1000


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
        self.scheduler = kubescheduler.KubeScheduler(state.get("scheduler"))
        self.errors: list[str] = []  # components that raised, for the lab to log
        self._pdb_versions: tuple[int, int] | None = None
        self._deployments: workloads.Memo = {}
        self._replicasets: workloads.Memo = {}
        self._wakes: dict[str, workloads.Wakes] = {name: {} for name in WOKEN}
        self._claims_versions: tuple[int, int] | None = None
        self._quiet: dict[str, tuple[int, frozenset[str]]] = {}  # component -> writes when it last found nothing
        # Components the last step cut short at their burst: more work is due at this very moment.
        self.backlog: list[str] = []

    def step(self, now: float) -> list[str]:
        """Run each component once at `now`; the names of those that changed something."""
        store, rng = self.store, self.rng
        bursts = {name: workloads.Burst(POD_WRITES_PER_STEP) for name in ("replicasets", "kube-scheduler", "kubelet")}
        self._wake(now)
        wakes = self._wakes
        components: tuple[tuple[str, Callable[[], bool]], ...] = (
            (
                "deployments",
                lambda: deployments.reconcile_deployments(store, now, self._deployments, wakes["deployments"]),
            ),
            (
                "replicasets",
                lambda: replicasets.reconcile_replicasets(
                    store, rng, now, self._replicasets, bursts["replicasets"], wakes["replicasets"]
                ),
            ),
            # The deployment controller again, for the ReplicaSet statuses just written: a Deployment's status
            # follows them within the step, as its informer would have it notice them, not one settle later.
            (
                "deployment-status",
                lambda: deployments.reconcile_deployments(store, now, self._deployments, wakes["deployments"]),
            ),
            ("daemonsets", lambda: daemonsets.reconcile_daemonsets(store, rng, now, wakes["daemonsets"])),
            ("garbage-collector", lambda: garbage.collect_garbage(store, self.nodepool_uids)),
            ("resourceclaims", self._make_claims),
            ("dra-driver", lambda: self._publish(now)),
            ("kube-scheduler", lambda: self.scheduler.schedule(store, store.views, now, bursts["kube-scheduler"])),
            ("kubelet", lambda: kubelet.reconcile(store, now, bursts["kubelet"])),
        )
        changed = []
        for name, run in components:
            driven = name in STORE_DRIVEN
            at = (_writes(store), self.nodepool_uids)
            if driven and self._quiet.get(name) == at:
                continue
            try:
                if run():
                    changed.append(name)
                elif driven and _writes(store) == at[0]:
                    self._quiet[name] = at
            except Exception as error:
                # A real cluster's components fail alone too: log it, and let the others run.
                self.errors.append(f"{name}: {type(error).__name__}: {error}")
        self._update_pdb_status()
        self.backlog = [name for name, burst in bursts.items() if burst.cut]
        return changed

    def _wake(self, now: float) -> None:
        """The controllers' delayed requeues that are due: each object is reconciled again, whether or not anything
        it reads was written since."""
        memos = {"deployments": self._deployments, "replicasets": self._replicasets}
        for name, wakes in self._wakes.items():
            due = [uid for uid, at in wakes.items() if at <= now]
            for uid in due:
                del wakes[uid]
                memos.get(name, {}).pop(uid, None)
            if due:
                for component in WOKEN[name]:
                    self._quiet.pop(component, None)

    def _make_claims(self) -> bool:
        """kube-controller-manager's resource claim controller, run when pods or claim templates were written."""
        versions = (self.store.kind_version("Pod"), self.store.kind_version("ResourceClaimTemplate"))
        if versions == self._claims_versions:
            return False
        changed = dra.make_claims(self.store, self.rng)
        self._claims_versions = (self.store.kind_version("Pod"), self.store.kind_version("ResourceClaimTemplate"))
        return changed

    def _update_pdb_status(self) -> None:
        """kube-controller-manager's disruption controller keeps each PDB's status when pods or PDBs change;
        nothing in the lab reacts to the status, so it is no change to settle on."""
        versions = (self.store.kind_version("Pod"), self.store.kind_version("PodDisruptionBudget"))
        if versions != self._pdb_versions and self.store.list("PodDisruptionBudget"):
            pdb.update_status(self.store, self.store.views)
        self._pdb_versions = (self.store.kind_version("Pod"), self.store.kind_version("PodDisruptionBudget"))

    def _publish(self, now: float) -> bool:
        published, self.last_publish = dra.publish(self.store, now, self.last_publish)
        return published

    def after_step(self) -> None:
        self.store.expire_events()  # nothing reacts to an expired Event, so it is not a change to settle

    def next_due(self, now: float) -> float | None:
        """The next moment a component has work though nothing is written: the DRA driver's next publication, a
        pod turning available, a rollout's progress deadline."""
        dues = [at for wakes in self._wakes.values() for at in wakes.values()]
        if self.last_publish is not None and self.store.list("DRAConfig"):
            dues.append(self.last_publish + dra.PUBLISH_SECONDS)
        future = [due for due in dues if due > now]
        return min(future) if future else None

    def to_state(self) -> dict[str, Any]:
        return {"last_publish": self.last_publish, "scheduler": self.scheduler.to_state()}


def _writes(store: ObjectStore) -> int:
    """A count that moves with every write to the store, its own or one observed from elsewhere (a warm engine
    replaying the change log)."""
    return sum(store.kind_versions.values())
