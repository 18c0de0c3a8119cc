"""The manager: runs karpui's controllers against one cluster, in order, through the cluster and cloud provider
ports — the same for the lab, a kwok cluster and an observed one — and says when it next has work to do.

Order within a step: the NodeOverlays (what they change in instance types), the NodePools' status, provisioning
(batch and launch plans, static NodePools), the NodeClaim facts (hydration, pod events, drift, expiration), node health
(repairs onto the queue), termination (drain deleting NodeClaims), the disruption command queue and proposer, the
cloud provider's own work, the NodeClaim lifecycle (launch, register, initialize, finalize), its consistency
checks and garbage collection. Each controller owns its state, which the manager gathers into one JSON-able dict
so a restarted engine continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provisioner.controllers import commands, lifecycle
from provisioner.controllers.capacitybuffer import CapacityBufferController
from provisioner.controllers.consistency import ConsistencyController
from provisioner.controllers.consolidatable import ConsolidatableController
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.disruption import DisruptionController
from provisioner.controllers.drift import DriftController
from provisioner.controllers.expiration import ExpirationController
from provisioner.controllers.garbagecollection import GarbageCollectionController
from provisioner.controllers.health import NodeHealthController
from provisioner.controllers.hydration import HydrationController
from provisioner.controllers.nodeoverlay import NodeOverlayController
from provisioner.controllers.nodepools import NodePoolController
from provisioner.controllers.podevents import PodEventsController
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.controllers.static import StaticDeprovisioningController, StaticProvisioningController
from provisioner.controllers.termination import TerminationController


class Manager:
    def __init__(self, state: dict[str, Any]) -> None:
        disruption = state.get("disruption") or {}
        self.provisioning = ProvisioningController(state.get("provisioning") or {})
        self.static_provisioning = StaticProvisioningController()
        self.static_deprovisioning = StaticDeprovisioningController()
        # Before the controllers were split, pod sets and drain progress were kept under "disruption".
        self.podevents = PodEventsController(state.get("podevents") or disruption)
        self.termination = TerminationController(state.get("termination") or disruption)
        self.disruption = DisruptionController(disruption)
        self.drift = DriftController()
        self.expiration = ExpirationController()
        self.health = NodeHealthController()
        self.hydration = HydrationController()
        self.overlays = NodeOverlayController()
        self.buffers = CapacityBufferController()
        self.nodepools = NodePoolController(state.get("nodepools"))
        self.lifecycle = lifecycle.LifecycleController(self.nodepools)
        self.consolidatable = ConsolidatableController()
        self.consistency = ConsistencyController(state.get("consistency"))
        self.garbage = GarbageCollectionController(state.get("garbagecollection"))

    def step(self, ctx: ClusterContext) -> list[str]:
        """Run every controller once at `ctx.now`; the names of those that changed the cluster."""
        controllers: tuple[tuple[str, Callable[[ClusterContext], bool]], ...] = (
            ("nodeoverlay", self.overlays.reconcile),
            ("nodepool", self.nodepools.reconcile),
            ("capacitybuffer", self.buffers.reconcile),
            ("provisioning", self.provisioning.reconcile),
            ("static.provisioning", self.static_provisioning.reconcile),
            ("static.deprovisioning", self.static_deprovisioning.reconcile),
            ("hydration", self.hydration.reconcile),
            ("podevents", self.podevents.reconcile),
            ("consolidatable", self.consolidatable.reconcile),
            ("drift", self.drift.reconcile),
            ("expiration", self.expiration.reconcile),
            ("node.health", self.health.reconcile),
            ("termination", self.termination.reconcile),
            ("commands", commands.reconcile),
            ("disruption", self.disruption.reconcile),
            ("cloudprovider", lambda c: c.cloud.reconcile(c.now)),
            ("lifecycle", self.lifecycle.reconcile),
            ("nodeclaim.consistency", self.consistency.reconcile),
            ("nodeclaim.garbagecollection", self.garbage.reconcile),
        )
        changed = []
        for name, reconcile in controllers:
            if ctx.backing_off(name):
                continue
            with ctx.guard(name):
                if reconcile(ctx):
                    changed.append(name)
        for obj, error in ctx.views.unreported():  # skipped by every controller; said once, on the pod itself
            with ctx.guard("pods", obj):
                raise ValueError(f"pod left out until it can be read: {error}")
        return changed

    def next_due(self, ctx: ClusterContext) -> float | None:
        """The earliest future moment any controller (or the cloud provider) has something to do."""
        sources: tuple[tuple[str, Callable[[], list[float]]], ...] = (
            ("provisioning", lambda: _maybe(self.provisioning.next_due(ctx.now))),
            ("disruption", self.disruption.next_due),
            ("consolidatable", lambda: self.consolidatable.next_due(ctx)),
            ("drift", lambda: self.drift.next_due(ctx)),
            ("disruption.queue", lambda: commands.next_due(ctx)),
            ("node.termination", lambda: self.termination.next_due(ctx)),
            ("nodeclaim.expiration", lambda: self.expiration.next_due(ctx)),
            ("node.health", lambda: self.health.next_due(ctx)),
            ("nodeclaim.lifecycle", lambda: _maybe(self.lifecycle.next_due(ctx))),
            ("nodeclaim.consistency", lambda: self.consistency.next_due(ctx)),
            ("nodeclaim.garbagecollection", self.garbage.next_due),
            ("cloudprovider", lambda: _maybe(ctx.cloud.next_due(ctx.now))),
            ("retries", ctx.retry_times),
        )
        times: list[float] = []
        for name, due in sources:
            with ctx.guard(name):
                times.extend(due())
        future = [t for t in times if t > ctx.now]  # a past time is not a wake-up; it must not hide a later one
        return min(future) if future else None

    def to_state(self) -> dict[str, Any]:
        return {
            "provisioning": self.provisioning.to_state(),
            "podevents": self.podevents.to_state(),
            "termination": self.termination.to_state(),
            "disruption": self.disruption.to_state(),
            "nodepools": self.nodepools.to_state(),
            "consistency": self.consistency.to_state(),
            "garbagecollection": self.garbage.to_state(),
        }


def _maybe(time: float | None) -> list[float]:
    return [] if time is None else [time]
