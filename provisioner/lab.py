"""The lab: the simulated cluster side and karpui's controllers on one in-memory API server and one virtual clock.

`advance(seconds)` is a discrete-event simulation: it settles the cluster now (running the cluster side and the
manager until nothing changes), then jumps to the next moment something is due (a batch window closing, a node
registering, a pod's provisioning requeue) until the requested time has passed. Forty simulated seconds take
milliseconds. The lab is the composition root: `provisioner.sim` and `provisioner.controllers` never import each
other; they meet here, through the objects in the store.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.catalog import InstanceType
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cluster import dra
from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.context import (
    ICE_POD_EVENTS_BURST,
    ICE_POD_EVENTS_QPS,
    NOMINATED_EVENTS_BURST,
    NOMINATED_EVENTS_QPS,
    ClusterContext,
    TimedRecord,
    TokenBucket,
)
from provisioner.controllers.manager import Manager
from provisioner.objects import NodeClass, NodePool
from provisioner.options import RESERVED_CAPACITY, KarpenterOptions, OptionsError, container_env
from provisioner.scheduling.logs import LogRecord
from provisioner.sim import karpenter
from provisioner.sim.cluster import SimulatedCluster

# A settle normally needs a handful of rounds (a Deployment's pods are made, bound and started in one); more means a
# component keeps reporting changes that change nothing, which is a bug to log, not a loop to run on.
MAX_SETTLE_ROUNDS = 12
COMPONENTS = ("all", "cluster", "none")


@dataclass
class LabConfig:
    nodepools: list[NodePool]
    nodepool_uids: Mapping[str, str]
    nodeclasses: Mapping[tuple[str, str], NodeClass]
    catalogs: Mapping[str, list[InstanceType]]
    options: KarpenterOptions = field(default_factory=KarpenterOptions)
    paused_until: float = 0.0
    # What runs on the store: "all" (the cluster side and karpui's controllers), "cluster" (the cluster side only:
    # a stand-in for a real cluster that an engine drives over the Kubernetes API), "none" (a bare API server).
    components: str = "all"


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
        catalogs = dra.declare(config.catalogs, dra.driver_pools(self.store))
        # The DRAConfig objects' version the catalogs' devices were declared from (a warm engine redeclares on change).
        self.declared_from = self.store.kind_version("DRAConfig")
        self.cloud = KwokCloudProvider(
            self.store, config.nodeclasses, catalogs, self.rng, names_made=int(state.get("kwok_names_made", 0))
        )
        self.cloud.reserved_capacity = config.options.gate(RESERVED_CAPACITY)
        self.ctx = ClusterContext(
            api=self.store,
            cloud=self.cloud,
            now=now,
            rng=self.rng,
            nodepools=list(config.nodepools),
            nodepool_uids=config.nodepool_uids,
            nodeclasses=config.nodeclasses,
            catalogs=catalogs,
            options=config.options,
            paused_until=config.paused_until,
            nominations=dict(state.get("nominations") or {}),
            buffer_nodes=dict(state.get("buffer_nodes") or {}),
            buffer_cache={k: (v["buffer"], v["template"]) for k, v in (state.get("buffer_cache") or {}).items()},
            buffers_failing=set(state.get("buffers_failing") or ()),
            nominated_events=TokenBucket.from_state(
                NOMINATED_EVENTS_QPS, NOMINATED_EVENTS_BURST, state.get("nominated_events")
            ),
            published=dict(state.get("published") or {}),
            nodeclaim_pods={name: list(pods) for name, pods in (state.get("nodeclaim_pods") or {}).items()},
            ice_pod_events=TokenBucket.from_state(
                ICE_POD_EVENTS_QPS, ICE_POD_EVENTS_BURST, state.get("ice_pod_events")
            ),
            views=self.store.views,
        )
        if config.components not in COMPONENTS:
            raise ValueError(f"components must be one of {', '.join(COMPONENTS)}, got {config.components!r}")
        self.components = config.components
        self.cluster = SimulatedCluster(self.store, self.rng, config.nodepool_uids.values(), state)
        # The options the configuration gives, and those last read from Karpenter's Deployment over them (with the
        # Deployments' version they were read at): a cluster's own environment for its controllers.
        self.default_options = config.options
        self._options_from: tuple[int, KarpenterOptions] | None = None
        self._use_options()
        self.manager = Manager(state)
        if state:
            # A lab going on from its saved state is the same Karpenter going on: its InstanceTypeStore holds the
            # last evaluation of the NodeOverlays (what is read before the next step sees their overlaid types).
            self.manager.overlays.reconcile(self.ctx, write=False)
        # Called with the lab each time it has settled at a moment of virtual time (e.g. to sample costs as they
        # were then, not only when the run ends).
        self.observers: list[Callable[[Lab], None]] = []
        self.settle_rounds = 0  # how many steps the last settle took
        # A settle stopped by `out_of_time` goes on at the next one, in this process or after a cold load.
        self._settling = bool(state.get("settling"))
        self._spinning = 0  # steps of this settle that changed something with no backlog

    def reconfigure(self, config: LabConfig) -> None:
        """Take new NodePools, node classes, catalogs or settings without rebuilding the store: a warm engine's
        answer to a configuration change. Derived views computed from the old configuration are dropped."""
        if config.components not in COMPONENTS:
            raise ValueError(f"components must be one of {', '.join(COMPONENTS)}, got {config.components!r}")
        catalogs = dra.declare(config.catalogs, dra.driver_pools(self.store))
        self.declared_from = self.store.kind_version("DRAConfig")
        self.cloud.reconfigure(config.nodeclasses, catalogs)
        self.ctx.nodepools = list(config.nodepools)
        self.ctx.nodepool_uids = config.nodepool_uids
        self.ctx.nodeclasses = config.nodeclasses
        self.ctx.catalogs = catalogs
        self.default_options = config.options
        self._options_from = None
        self._use_options()
        self.ctx.paused_until = config.paused_until
        self.ctx.memos.clear()
        self.components = config.components
        self.cluster.nodepool_uids = frozenset(config.nodepool_uids.values())

    def begin_run(self, now: float) -> None:
        """A warm engine's next run starts here: what the last one wrote is persisted, its logs are saved."""
        self.now = now
        self.store.forget_writes()
        self.ctx.logs.clear()
        self.observers.clear()

    @property
    def logs(self) -> list[TimedRecord]:
        return self.ctx.logs

    def step(self) -> bool:
        """Run the cluster side, then karpui's controllers, once at the current time; True if anything changed."""
        return bool(self._step())

    def _step(self) -> list[str]:
        """One step; the names of the parts that reported a change."""
        self.ctx.now = self.now
        if self.components == "none":
            return []
        self._use_options()
        changed = self.cluster.step(self.now)
        for error in self.cluster.errors:
            self.ctx.log(LogRecord("cluster component error", {"error": error}, level="ERROR", logger="lab"))
        self.cluster.errors.clear()
        if self.components == "all":
            changed += self.manager.step(self.ctx)
        self.cluster.after_step()
        return changed

    def _use_options(self) -> None:
        """The cluster's Karpenter options: the configuration's, with the environment of Karpenter's Deployment in
        the store (provisioner.sim.karpenter) read over them, as Karpenter reads its own; read again only when a
        Deployment was written. A value that cannot be read (stored past the API's check) is logged, and the
        configuration's options kept, where Karpenter would not start."""
        version = self.store.kind_version("Deployment")
        if self._options_from is None or self._options_from[0] != version:
            options = self.default_options
            for namespace in karpenter.NAMESPACES:  # the releases are kept alike; the later is read over the earlier
                deployment = self.store.get("Deployment", karpenter.NAME, namespace)
                if deployment is None:
                    continue
                try:
                    options = KarpenterOptions.from_env(container_env(deployment, karpenter.CONTAINER), options)
                except OptionsError as error:
                    self.ctx.log(
                        LogRecord(
                            "invalid options, using the defaults",
                            {"Deployment": {"name": karpenter.NAME, "namespace": namespace}, "error": str(error)},
                            level="ERROR",
                            logger="lab",
                        )
                    )
            self._options_from = (version, options)
        self.ctx.options = self._options_from[1]
        self.cloud.reserved_capacity = self.ctx.options.gate(RESERVED_CAPACITY)

    def settle(self, out_of_time: Callable[[], bool] | None = None) -> bool:
        """Step until nothing changes at this moment, then tell the observers; True once settled.

        A step in which a cluster component stopped at its burst (a large scale-up's pods are made, bound and
        started a thousand a step) is progress, not a component spinning, and does not count towards
        MAX_SETTLE_ROUNDS. `out_of_time`, asked after each step that changed something, stops the settle early
        (False): the lab stays at this moment and its next settle goes on from there, as if never stopped."""
        if not self._settling:
            self.settle_rounds = 0
            self._spinning = 0
        self._settling = True
        while True:
            self.settle_rounds += 1
            changed = self._step()
            if not changed:
                break
            if not self.cluster.backlog:
                self._spinning += 1
                if self._spinning >= MAX_SETTLE_ROUNDS:
                    self.ctx.log(
                        LogRecord(
                            "settle did not converge",
                            {"rounds": MAX_SETTLE_ROUNDS, "still-changing": sorted(set(changed))},
                            level="ERROR",
                            logger="lab",
                        )
                    )
                    break
            if out_of_time is not None and out_of_time():
                return False
        self._settling = False
        for observe in self.observers:
            observe(self)
        return True

    def next_due(self) -> float | None:
        if self.components == "none":
            return None
        dues = (
            self.manager.next_due(self.ctx) if self.components == "all" else None,
            self.cluster.next_due(self.now),
        )
        times = [t for t in dues if t is not None and t > self.now]
        return min(times) if times else None

    def advance(
        self, seconds: float, *, out_of_time: Callable[[], bool] | None = None, writes_at_end: bool = False
    ) -> float:
        """Move the clock `seconds` ahead, settling at every due moment on the way; the seconds actually advanced.

        `out_of_time` bounds the work: when it says so after a step, the clock stops at the moment being settled
        (a later run continues from there, so a slow lab catches up in bounded steps instead of overrunning its
        lease, and a large scale-up is spread over runs).

        `writes_at_end`: the writes the store holds that nothing has reacted to yet were made while the clock
        stood still and wall time ran on to the end of this span (a worker's tick), so the lab does not settle at
        its start, which would date the reaction before the write (a scale-up's pods made, and their batch window
        opened, up to a tick early: the whole scale-up, pods made, provisioned, bound and started, in one tick,
        with nothing to see in between). It reacts at the end, or at a due moment on the way. A settle an earlier
        run left unfinished goes on first, at its own moment.
        """
        start, end = self.now, self.now + seconds
        if (self._settling or not writes_at_end) and not self.settle(out_of_time):
            return self.now - start
        moved = False  # each run gets past at least one due moment, so a slow lab still makes progress
        while True:
            due = self.next_due()
            if due is None or due > end:
                break
            if moved and out_of_time is not None and out_of_time():
                return self.now - start
            self.now = due
            if not self.settle(out_of_time):
                return self.now - start
            moved = True
        self.now = end
        self.settle(out_of_time)
        return seconds

    def nodepool_status(self) -> dict[str, dict[str, Any]]:
        """Per NodePool: resources of its launched NodeClaims and their Nodes (with `nodes`), the node count and the conditions its
        controller keeps. Every save asks; summing 1,819 NodeClaims' capacities was a third of an idle tick at 20,000
        pods, so it is kept until a NodeClaim, a NodePool or a condition changes."""
        controller = self.manager.nodepools
        inputs = (
            self.store.kind_version("NodeClaim"),
            self.store.kind_version("Node"),  # an initialized Node's capacity is what its NodePool counts
            self.store.cache_epoch,
            repr(self.ctx.nodepools),
            repr(controller.to_state()),
            tuple(sorted(self.ctx.unparsed_nodepools.items())),
            tuple(sorted(self.ctx.nodepool_problems.items())),
        )
        return self.ctx.memo(
            "lab/nodepool-status", inputs, lambda: controller.statuses(self.ctx, self.store.list("NodeClaim"))
        )

    def to_state(self) -> dict[str, Any]:
        return {
            **self.state,
            "rng": self.rng.getstate(),
            "kwok_names_made": self.cloud.names_made,
            "resource_version": self.store.resource_version,
            **self.manager.to_state(),
            **self.cluster.to_state(),
            "nominations": {node: until for node, until in self.ctx.nominations.items() if until > self.now},
            "buffer_nodes": dict(self.ctx.buffer_nodes),
            "buffer_cache": {k: {"buffer": b, "template": t} for k, (b, t) in self.ctx.buffer_cache.items()},
            "buffers_failing": sorted(self.ctx.buffers_failing),
            "nominated_events": self.ctx.nominated_events.to_state(),
            "published": self.ctx.published_state(),
            "nodeclaim_pods": dict(self.ctx.nodeclaim_pods),
            "ice_pod_events": self.ctx.ice_pod_events.to_state(),
            "settling": self._settling,
        }


def _tuples(value: Any) -> Any:
    """JSON turned the RNG state's tuples into lists; random.setstate wants tuples back."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
