"""Controllers retry what failed on a clock of their own, with exponential back-off and no jitter (the lab, driven
by its clock, stays deterministic): a provisioning run whose NodeClaim write failed, and each pod whose eviction a
PodDisruptionBudget refused."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cluster.api import evict_each
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import APIError, Conflict, Obj, TooManyRequests
from provisioner.controllers.context import Backoff, ClusterContext
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.controllers.termination import TerminationController


def context(store: Any, now: float) -> ClusterContext:
    return ClusterContext(
        api=store,
        cloud=KwokCloudProvider(store, {}, {}, random.Random(0)),
        now=now,
        rng=random.Random(0),
        nodepools=[],
        nodepool_uids={},
        nodeclasses={},
        catalogs={},
    )


def unschedulable_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def test_a_failed_provisioning_run_is_retried_after_1_2_4_then_every_5_seconds() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    store.create(unschedulable_pod("web-1"))
    controller = ProvisioningController({})
    runs: list[float] = []

    def provision(ctx: ClusterContext, pods: object, nodes: object = None) -> bool:
        runs.append(ctx.now)
        if len(runs) <= 6:
            raise APIError("the NodeClaim POST was answered 500")
        return True

    controller.provision = provision  # type: ignore[method-assign]
    now, failures = 0.0, 0
    while len(runs) < 7:
        ctx = context(store, now)
        with ctx.guard("provisioning"):
            controller.reconcile(ctx)
        failures += ctx.errors
        due = controller.next_due(now)
        assert due is not None
        now = due
    # The first run when the batch window closes (1 s idle); then back-off from each failure.
    assert runs == [1.0, 2.0, 4.0, 8.0, 13.0, 18.0, 23.0]
    assert failures == 6
    assert (controller.failures, controller.retry_at) == (0, None)  # a success starts the back-off afresh
    restored = ProvisioningController(controller.to_state())
    assert (restored.failures, restored.retry_at) == (0, None)


class RefusingEvictions:
    """The cluster, with a PodDisruptionBudget that refuses every eviction until `opens_at`; when each was tried."""

    def __init__(self, store: ObjectStore, opens_at: float) -> None:
        self.store, self.opens_at = store, opens_at
        self.tried: list[tuple[str, float]] = []
        self.now = 0.0

    def evict(self, pod: Obj) -> None:
        self.tried.append((pod["metadata"]["name"], self.now))
        if self.now < self.opens_at:
            raise TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.")
        self.store.evict(pod)

    def evict_all(self, pods: Sequence[Obj]) -> list[APIError | None]:
        return evict_each(self, pods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def draining_node(store: ObjectStore, *pods: str) -> None:
    """Node n-1 of a NodeClaim being deleted, running `pods`."""
    store.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "n-1", "finalizers": ["karpenter.sh/termination"]},
            "spec": {},
            "status": {"nodeName": "n-1"},
        }
    )
    store.delete("NodeClaim", "n-1")  # held by its finalizer: deleting
    store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1"}, "spec": {}, "status": {}})
    for name in pods:
        running_pod(store, name)


def running_pod(store: ObjectStore, name: str) -> None:
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "n-1", "containers": [{"name": "app"}]},
            "status": {"phase": "Running"},
        }
    )


def drain_until(controller: TerminationController, api: RefusingEvictions, done: Callable[[], bool]) -> None:
    """Reconcile at every moment the controller asks to be woken, from 0 until `done()`."""
    while not done():
        controller.reconcile(context(api, api.now))
        api.now = min(t for t in controller.next_due(context(api, api.now)) if t > api.now)


def test_a_refused_eviction_is_retried_per_pod_after_100_ms_doubling_up_to_10_s() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    draining_node(store, "web-1")
    api = RefusingEvictions(store, opens_at=30.0)
    controller = TerminationController({})
    drain_until(controller, api, lambda: store.get("Pod", "web-1", "default") is None)
    assert [round(t, 1) for _, t in api.tried] == [0.0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 12.7, 22.7, 32.7]
    assert controller.refused == {}  # evicted: nothing left to retry


def test_each_pod_backs_off_on_its_own() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    draining_node(store, "web-1")
    api = RefusingEvictions(store, opens_at=60.0)
    controller = TerminationController({})
    drain_until(controller, api, lambda: len(api.tried) == 5)  # refused at 0, 0.1, 0.3, 0.7 and 1.5
    running_pod(store, "web-2")
    api.now = 2.5
    controller.reconcile(context(api, 2.5))  # the node's next pass: web-2 is tried, web-1 waits until 3.1
    assert api.tried[-1] == ("web-2", 2.5) and len(api.tried) == 6
    refused = {store.get("Pod", name, "default")["metadata"]["uid"]: name for name in ("web-1", "web-2")}
    assert {refused[uid]: [refusals, round(at, 1)] for uid, (_, refusals, at) in controller.refused.items()} == {
        "web-1": [5, 3.1],
        "web-2": [1, 2.6],
    }


class FailingOne(RefusingEvictions):
    """Evictions that all go through at once, one of them failing with a server error."""

    def __init__(self, store: ObjectStore, failing: str) -> None:
        super().__init__(store, opens_at=0.0)
        self.failing = failing
        self.batches: list[list[str]] = []

    def evict(self, pod: Obj) -> None:
        if pod["metadata"]["name"] == self.failing:
            raise APIError("Internal error occurred: etcdserver: request timed out")
        super().evict(pod)

    def evict_all(self, pods: Sequence[Obj]) -> list[APIError | None]:
        self.batches.append([p["metadata"]["name"] for p in pods])
        return super().evict_all(pods)


def test_a_nodes_pods_are_evicted_in_one_batch_and_a_server_error_fails_the_reconcile_after_the_others_are_told() -> (
    None
):
    """The drain hands the whole tier to evict_all (sent at once to a real server); a 500 on one pod fails the
    NodeClaim's reconcile, as a single eviction's did, but only after every other outcome is kept: the pods evicted
    are told, and the failed one is no PDB refusal to back off from."""
    store = ObjectStore(clock=lambda: 0.0)
    draining_node(store, "web-1", "web-2", "web-3")
    api = FailingOne(store, failing="web-2")
    controller = TerminationController({})
    ctx = context(api, 0.0)
    controller.reconcile(ctx)
    assert api.batches == [["web-1", "web-2", "web-3"]]
    assert [p["metadata"]["name"] for p in store.list("Pod")] == ["web-2"]
    evicted = sorted(e["involvedObject"]["name"] for e in store.list("Event") if e["reason"] == "Evicted")
    assert evicted == ["web-1", "web-3"]
    assert controller.refused == {}
    assert [(t.record.message, t.record.fields["error"]) for t in ctx.logs if t.record.level == "ERROR"] == [
        ("Reconciler error", "APIError: Internal error occurred: etcdserver: request timed out")
    ]


def test_a_conflict_is_held_back_5_ms_doubling_and_never_logged() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    claim = store.create({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"}, "spec": {}})
    assert claim is not None
    version = claim["metadata"]["resourceVersion"]
    ctx = context(store, 100.0)
    for _ in range(3):
        with ctx.guard("nodeclaim.lifecycle", claim):
            raise Conflict('Operation cannot be fulfilled on nodes "n"')
    assert ctx.backoffs[("nodeclaim.lifecycle", "NodeClaim//c")] == Backoff(3, version, 100.02)
    assert (ctx.errors, list(ctx.logs), store.list("Event")) == (3, [], [])
