"""The lab cluster's clock and event loop: every component runs at each due moment of virtual time.

`advance(seconds)` is a discrete-event simulation: it settles the cluster now (running components until nothing
changes), then jumps to the next moment something is due (a batch window closing, a node registering, a pod's
provisioning requeue) until the requested time has passed. Forty simulated seconds take milliseconds.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.catalog import InstanceType
from provisioner.cluster import dra as cluster_dra
from provisioner.cluster.conditions import set_condition
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.views import is_ready
from provisioner.controllers import lifecycle
from provisioner.controllers.context import ClusterContext, TimedRecord
from provisioner.controllers.disruption import DisruptionController
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.objects import NodeClass, NodePool
from provisioner.quantity import add, format_resources, parse_resources
from provisioner.sim import dra, kubescheduler, workloads

MAX_SETTLE_ROUNDS = 50


@dataclass
class LabConfig:
    nodepools: list[NodePool]
    nodepool_uids: Mapping[str, str]
    nodeclasses: Mapping[tuple[str, str], NodeClass]
    catalogs: Mapping[str, list[InstanceType]]
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    paused_until: float = 0.0
    ignore_dra_requests: bool = False


class Lab:
    def __init__(self, objects: list[dict[str, Any]], config: LabConfig, state: dict[str, Any], now: float) -> None:
        self.state = state
        self.now = now
        # A seeded simulation RNG (names, zones among equal prices): reproducible, not for secrets.
        self.rng = random.Random(state.get("seed", 0))  # noqa: S311
        if "rng" in state:
            self.rng.setstate(_tuples(state["rng"]))
        self.store = ObjectStore(
            objects, resource_version=int(state.get("resource_version", 0)), clock=lambda: self.now
        )
        self.ctx = ClusterContext(
            store=self.store,
            now=now,
            rng=self.rng,
            nodepools=list(config.nodepools),
            nodepool_uids=config.nodepool_uids,
            nodeclasses=config.nodeclasses,
            catalogs=config.catalogs,
            feature_gates=config.feature_gates,
            paused_until=config.paused_until,
            ignore_dra_requests=config.ignore_dra_requests,
            nominations=dict(state.get("nominations") or {}),
            views=self.store.views,
        )
        self.ctx.catalogs = cluster_dra.declare(config.catalogs, cluster_dra.driver_pools(self.store))
        self.last_publish: float | None = state.get("last_publish")
        self.provisioning = ProvisioningController(state.get("provisioning") or {})
        self.disruption = DisruptionController(state.get("disruption") or {})
        # Called with the lab each time it has settled at a moment of virtual time (e.g. to sample costs as they
        # were then, not only when the run ends).
        self.observers: list[Callable[[Lab], None]] = []

    @property
    def logs(self) -> list[TimedRecord]:
        return self.ctx.logs

    def step(self) -> bool:
        """Run every component once at the current time; True if anything changed."""
        self.ctx.now = self.now
        changed = workloads.reconcile_deployments(self.store)
        changed |= workloads.reconcile_replicasets(self.store, self.rng, self.now)
        changed |= workloads.reconcile_daemonsets(self.store, self.rng)
        changed |= workloads.collect_garbage(self.store)
        changed |= dra.make_claims(self.store, self.rng)
        published, self.last_publish = dra.publish(self.store, self.now, self.last_publish)
        changed |= published
        changed |= kubescheduler.schedule_pending(self.store, self.ctx.views, self.now)
        changed |= self._kubelet()
        changed |= self.provisioning.reconcile(self.ctx)
        changed |= self.disruption.reconcile(self.ctx)
        changed |= lifecycle.reconcile(self.ctx)
        self.store.expire_events()  # nothing reacts to an expired Event, so it is not a change to settle
        return changed

    def settle(self) -> None:
        for _ in range(MAX_SETTLE_ROUNDS):
            if not self.step():
                break
        for observe in self.observers:
            observe(self)

    def next_due(self) -> float | None:
        publish = (
            self.last_publish + dra.PUBLISH_SECONDS
            if self.last_publish is not None and self.store.list("DRAConfig")
            else None
        )
        dues = (
            self.provisioning.next_due(self.now),
            lifecycle.next_due(self.ctx),
            self.disruption.next_due(self.ctx),
            publish,
        )
        times = [t for t in dues if t is not None and t > self.now]
        return min(times) if times else None

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        self.settle()
        while True:
            due = self.next_due()
            if due is None or due > end:
                break
            self.now = due
            self.settle()
        self.now = end
        self.settle()

    def _kubelet(self) -> bool:
        """Nodes carry their hostname label; pods bound to ready nodes run."""
        changed = False
        for node in self.store.list("Node"):
            labels = node["metadata"].setdefault("labels", {})
            if "kubernetes.io/hostname" not in labels:
                labels["kubernetes.io/hostname"] = node["metadata"]["name"]
                self.store.update(node)
                changed = True
        ready = {n["metadata"]["name"] for n in self.store.list("Node") if is_ready(n)}
        for pod in self.store.list("Pod"):
            status = pod.setdefault("status", {})
            if pod["spec"].get("nodeName") in ready and status.get("phase") == "Pending":
                status["phase"] = "Running"
                status["startTime"] = pod["metadata"].get("creationTimestamp")
                set_condition(pod, "Ready", "True", self.now)
                self.store.update(pod)
                changed = True
        return changed

    def nodepool_status(self) -> dict[str, dict[str, Any]]:
        """Per NodePool: resources of its launched NodeClaims (with `nodes`) and its readiness."""
        usage: dict[str, dict[str, int]] = {np.name: {} for np in self.ctx.nodepools}
        for claim in self.store.list("NodeClaim"):
            pool = (claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool")
            capacity = (claim.get("status") or {}).get("capacity")
            if pool in usage and capacity:
                usage[pool] = add(usage[pool], parse_resources(capacity), {"nodes": 1000})
        status = {}
        for nodepool in self.ctx.nodepools:
            ready = self.ctx.instance_types_for(nodepool) is not None
            status[nodepool.name] = {
                "resources": format_resources(usage[nodepool.name]) or {"nodes": "0"},
                "nodes": usage[nodepool.name].get("nodes", 0) // 1000,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "Ready" if ready else "NodeClassNotReady",
                        "message": ""
                        if ready
                        else f"{nodepool.node_class_ref.kind} {nodepool.node_class_ref.name} not found",
                    }
                ],
            }
        return status

    def to_state(self) -> dict[str, Any]:
        return {
            **self.state,
            "rng": self.rng.getstate(),
            "resource_version": self.store.resource_version,
            "provisioning": self.provisioning.to_state(),
            "disruption": self.disruption.to_state(),
            "last_publish": self.last_publish,
            "nominations": {node: until for node, until in self.ctx.nominations.items() if until > self.now},
        }


def _tuples(value: Any) -> Any:
    """JSON turned the RNG state's tuples into lists; random.setstate wants tuples back."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
