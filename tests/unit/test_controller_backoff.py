"""Controllers retry what failed on a clock of their own, with exponential back-off and no jitter (the lab, driven
by its clock, stays deterministic): a provisioning run whose NodeClaim write failed."""

from __future__ import annotations

import random

from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import APIError
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import ProvisioningController


def context(store: ObjectStore, now: float) -> ClusterContext:
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

    def provision(ctx: ClusterContext, pods: object) -> bool:
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
