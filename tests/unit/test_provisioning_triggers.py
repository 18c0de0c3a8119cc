"""When a pending pod triggers the provisioning batcher: when first seen, 10 s after its last trigger while it stays
provisionable, and whenever it changes, as Karpenter's pod controller reconciles it on each of its events
(pkg/controllers/provisioning/controller.go: Trigger, then RequeueAfter 10 s)."""

from __future__ import annotations

from typing import Any

from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import ProvisioningController
from tests.unit.test_controller_backoff import context, unschedulable_pod


def runs_of(changes: dict[int, str], until: int = 22, restart_at: int | None = None) -> list[float]:
    """The provisioning runs, stepping each second, for a pod that stays pending; `changes` rewrite its Unschedulable
    message at those seconds (kube-scheduler's "0/N nodes are available" as nodes join); `restart_at` a second
    when the controller is made anew from its saved state."""
    store = ObjectStore(clock=lambda: 0.0)
    store.create(unschedulable_pod("web-1"))
    controller = ProvisioningController({})
    runs: list[float] = []

    def provision(ctx: ClusterContext, pods: Any) -> bool:
        runs.append(ctx.now)
        return False  # no room anywhere: the pod stays pending

    for second in range(until + 1):
        if second == restart_at:
            controller = ProvisioningController(controller.to_state())
        controller.provision = provision  # type: ignore[method-assign]
        if second in changes:
            pod = store.get("Pod", "web-1", "default")
            pod["status"]["conditions"][0]["message"] = changes[second]
            store.update(pod)
        controller.reconcile(context(store, float(second)))
    return runs


def test_a_pod_that_stays_pending_triggers_a_batch_every_10_seconds():
    # Seen at 0: the window closes 1 s later; each requeue opens another.
    assert runs_of({}) == [1.0, 11.0, 21.0]


def test_a_change_to_a_pending_pod_opens_a_window_before_its_requeue():
    # kube-scheduler rewrote its message at 4: a run at 5; the requeue already waiting keeps its time (10).
    assert runs_of({4: "0/1 nodes are available: 1 Insufficient cpu."}) == [1.0, 5.0, 11.0, 21.0]


def test_a_change_within_an_open_window_neither_extends_nor_reopens_it():
    # At 10 the requeue opens a window; the change at 10 is the same pod, seen in it already.
    assert runs_of({10: "0/2 nodes are available: 2 Insufficient cpu."}) == [1.0, 11.0, 21.0]


def test_a_restarted_controller_triggers_on_changes_from_its_first_look_and_on_its_saved_requeues():
    # Restarted at 3: the requeue saved goes on (11, 21); a change at 6, after its first look at 3, triggers (7).
    assert runs_of({}, restart_at=3) == [1.0, 11.0, 21.0]
    assert runs_of({6: "0/1 nodes are available: 1 Insufficient cpu."}, restart_at=3) == [1.0, 7.0, 11.0, 21.0]
