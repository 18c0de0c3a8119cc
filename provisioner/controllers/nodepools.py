"""NodePool status as Karpenter's NodePool controllers keep it (pkg/controllers/nodepool/{validation,readiness,
registrationhealth,counter} and pkg/state/nodepoolhealth): the ValidationSucceeded, NodeClassReady and
NodeRegistrationHealthy conditions with Ready over the first two, and the resources and node count of its NodeClaims.
A NodePool written at v1beta1 with a nodeClassRef that names no kind also says which node class that took and why
(NodeClassResolved, karpui's: provisioner.nodeclasses), with an Event each time that changes.

NodeRegistrationHealthy follows the last four launch outcomes of the NodePool's NodeClaims (a node registered: a
success; a launch or registration timeout: a failure): two failures among them make it False, a success with fewer
failures True. It starts Unknown, and goes back to Unknown when the NodePool's spec or its node class changes. It is
informational: an unhealthy NodePool still provisions (designs/noderegistrationhealthy-status-condition.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner import labels as wk
from provisioner.cluster.conditions import condition, is_true, set_with_root
from provisioner.cluster.objects import Obj
from provisioner.controllers.context import ClusterContext
from provisioner.nodeclasses import RESOLVED, explain
from provisioner.objects import NodePool
from provisioner.quantity import MILLI, add, canonical_quantity, format_resources, parse_resources

VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODE_CLASS_READY = "NodeClassReady"
NODE_REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
READY = "Ready"
DEPENDENTS = (VALIDATION_SUCCEEDED, NODE_CLASS_READY)  # Ready's: NodeRegistrationHealthy is not one of them
# pkg/state/nodepoolhealth: the outcomes of the last BUFFER_SIZE launches; this share of failures is unhealthy.
BUFFER_SIZE = 4
THRESHOLD_FALSE = 0.5
UNKNOWN, HEALTHY, UNHEALTHY = "Unknown", "Healthy", "Unhealthy"
# The counter controller's BaseResources (nodepool/counter/controller.go): always in status.resources, 0 unless used.
BASE_RESOURCES = {"cpu": 0, "memory": 0, "pods": 0, "ephemeral-storage": 0, "nodes": 0}


def health(buffer: list[bool]) -> str:
    if not buffer:
        return UNKNOWN
    failures = sum(1 for outcome in buffer if not outcome)
    return UNHEALTHY if failures / BUFFER_SIZE >= THRESHOLD_FALSE else HEALTHY


def _recorded(buffer: list[bool], outcome: bool) -> list[bool]:
    return [*buffer, outcome][-BUFFER_SIZE:]


class NodePoolStatus:
    """One NodePool's conditions as operatorpkg's ConditionSet keeps them: a condition's transition time moves only
    when its status does, each carries the generation it was set at, and Ready is recomputed from its dependents."""

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        state = state or {}
        self.conditions: list[dict[str, Any]] = [dict(c) for c in state.get("conditions") or []]
        self.buffer: list[bool] = [bool(v) for v in state.get("buffer") or []]
        self.node_class_generation: int | None = state.get("nodeClassObservedGeneration")

    def to_state(self) -> dict[str, Any]:
        return {
            "conditions": self.conditions,
            "buffer": self.buffer,
            "nodeClassObservedGeneration": self.node_class_generation,
        }

    def get(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c["type"] == kind), None)

    def set(self, kind: str, status: str, reason: str, message: str, now: float, generation: int) -> bool:
        """operatorpkg's ConditionSet.Set, with Ready over ValidationSucceeded and NodeClassReady."""
        return set_with_root(self.conditions, kind, status, reason, message, now, generation, DEPENDENTS, READY)


class NodePoolController:
    """Keeps every NodePool's status; the lifecycle reports each NodeClaim's launch outcome through `registered`
    and `timed_out`. On a real cluster (kwok mode) it writes the status to the NodePool, as Karpenter does."""

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        self.pools: dict[str, NodePoolStatus] = {
            uid: NodePoolStatus(pool) for uid, pool in (state or {}).items() if isinstance(pool, Mapping)
        }
        self.written: dict[str, dict[str, Any]] = {}  # NodePool name -> the status last written to the cluster

    def to_state(self) -> dict[str, Any]:
        return {uid: pool.to_state() for uid, pool in self.pools.items()}

    def _pool(self, ctx: ClusterContext, claim: Obj) -> tuple[NodePool, NodePoolStatus] | None:
        """The NodePool that owns the NodeClaim (by owner reference uid, as Karpenter checks), and its status."""
        name = (claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, "")
        nodepool = ctx.nodepool(name)
        uid = ctx.nodepool_uids.get(name, "")
        if nodepool is None or not uid:
            return None
        owners = claim["metadata"].get("ownerReferences") or []
        if not any(o.get("kind") == "NodePool" and o.get("uid") == uid for o in owners):
            return None
        return nodepool, self.pools.setdefault(uid, NodePoolStatus())

    def registered(self, ctx: ClusterContext, claim: Obj) -> None:
        """A NodeClaim's node registered (Registration.updateNodePoolRegistrationHealth)."""
        found = self._pool(ctx, claim)
        if found is None:
            return
        nodepool, pool = found
        if health(_recorded(pool.buffer, True)) == HEALTHY:
            pool.set(NODE_REGISTRATION_HEALTHY, "True", NODE_REGISTRATION_HEALTHY, "", ctx.now, nodepool.generation)
        pool.buffer = _recorded(pool.buffer, True)

    def timed_out(self, ctx: ClusterContext, claim: Obj) -> None:
        """A NodeClaim did not launch or register in time (Liveness.updateNodePoolRegistrationHealth)."""
        found = self._pool(ctx, claim)
        if found is None:
            return
        nodepool, pool = found
        current = pool.get(NODE_REGISTRATION_HEALTHY)
        if health(_recorded(pool.buffer, False)) == UNHEALTHY and (current is None or current["status"] != "False"):
            launched = condition(claim, "Launched")
            if is_true(claim, "Launched") or launched is None:
                reason, message = "RegistrationFailed", "Failed to register node"
            else:
                reason, message = launched.get("reason", ""), launched.get("message", "")
            pool.set(NODE_REGISTRATION_HEALTHY, "False", reason, message, ctx.now, nodepool.generation)
        pool.buffer = _recorded(pool.buffer, False)

    def reconcile(self, ctx: ClusterContext) -> bool:
        """The validation, readiness and registration-health controllers for every NodePool; on a real cluster,
        the status written where it changed. True if a cluster object was written."""
        live = self._validate(ctx)
        announced = self._resolved(ctx)
        for nodepool in ctx.nodepools:
            pool = self.pools[ctx.nodepool_uids.get(nodepool.name, "")]
            now, generation = ctx.now, nodepool.generation
            node_class = ctx.nodeclasses.get((nodepool.node_class_ref.kind, nodepool.node_class_ref.name))
            # The provider's types: NodeOverlays awaiting evaluation leave a NodePool's readiness alone.
            if node_class is None or ctx.cloud.instance_types(nodepool) is None:
                pool.set(
                    NODE_CLASS_READY, "False", "NodeClassNotFound", "NodeClass not found on cluster", now, generation
                )
                continue  # the registration-health controller needs the node class
            pool.set(NODE_CLASS_READY, "True", NODE_CLASS_READY, "", now, generation)
            current = pool.get(NODE_REGISTRATION_HEALTHY)
            if not pool.buffer and current is not None:
                # After a restart the outcomes are gone but the condition stands: start from what it says.
                pool.buffer = (
                    [True] if current["status"] == "True" else [False, False] if current["status"] == "False" else []
                )
            if (
                current is None
                or pool.node_class_generation != node_class.generation
                or current["observedGeneration"] != generation
            ):
                pool.set(
                    NODE_REGISTRATION_HEALTHY,
                    "Unknown",
                    "AwaitingReconciliation",
                    "object is awaiting reconciliation",
                    now,
                    generation,
                )
                pool.buffer = []
            pool.node_class_generation = node_class.generation
        for uid in [uid for uid in self.pools if uid not in live]:
            del self.pools[uid]  # the NodePool is gone
        return (self._write(ctx) if ctx.writes_nodepool_status else False) or announced

    def _resolved(self, ctx: ClusterContext) -> bool:
        """NodeClassResolved on each NodePool whose v1beta1 nodeClassRef names no kind, and a Normal Event on it
        when what it says changes; True if an Event was recorded."""
        inputs = (repr(ctx.nodepools), tuple(sorted(ctx.nodeclasses)), tuple(id(t) for t in ctx.catalogs.values()))
        explained = ctx.memo(
            "nodepools/resolved",
            inputs,
            lambda: {np.name: explain(np, ctx.nodeclasses.keys(), ctx.catalogs) for np in ctx.nodepools},
        )
        announced = False
        for nodepool in ctx.nodepools:
            resolution, uid = explained.get(nodepool.name), ctx.nodepool_uids.get(nodepool.name, "")
            if not uid:
                continue
            pool = self.pools.setdefault(uid, NodePoolStatus())
            if resolution is None:  # a reference that names its kind (again): nothing to say
                pool.conditions = [c for c in pool.conditions if c["type"] != RESOLVED]
                continue
            before = pool.get(RESOLVED)
            pool.set(RESOLVED, "True", resolution.reason, resolution.message, ctx.now, nodepool.generation)
            if before is None or before.get("message") != resolution.message:
                meta = {"name": nodepool.name, "uid": uid}
                ctx.event(
                    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta},
                    "Normal",
                    RESOLVED,
                    resolution.message,
                )
                announced = True
        return announced

    def _validate(self, ctx: ClusterContext) -> set[str]:
        """The validation controller: ValidationSucceeded False (NodePoolValidationFailed) for a NodePool whose
        manifest no longer parses or whose budgets disruption cannot evaluate, True otherwise; the uids seen."""
        live = set()
        for nodepool in ctx.nodepools:
            uid = ctx.nodepool_uids.get(nodepool.name, "")
            live.add(uid)
            problem = ctx.nodepool_problems.get(nodepool.name)
            self.pools.setdefault(uid, NodePoolStatus()).set(
                VALIDATION_SUCCEEDED,
                "False" if problem else "True",
                "NodePoolValidationFailed" if problem else VALIDATION_SUCCEEDED,
                problem or "",
                ctx.now,
                nodepool.generation,
            )
        for name, problem in ctx.unparsed_nodepools.items():
            uid = ctx.nodepool_uids.get(name, "")
            live.add(uid)
            self.pools.setdefault(uid, NodePoolStatus()).set(
                VALIDATION_SUCCEEDED, "False", "NodePoolValidationFailed", problem, ctx.now, 1
            )
        return live

    def statuses(self, ctx: ClusterContext, claims: list[Obj]) -> dict[str, dict[str, Any]]:
        """Each NodePool's status: the capacity of its NodeClaims that are not being deleted (with `nodes`) over
        Karpenter's zeroed base resources, the node count, conditions. Validation is looked at again first:
        disruption finds a NodePool it cannot evaluate after this controller ran."""
        self._validate(ctx)
        usage = pool_resources(ctx, claims)
        result = {}
        for nodepool in ctx.nodepools:
            pool = self.pools.get(ctx.nodepool_uids.get(nodepool.name, ""))
            counted = {**BASE_RESOURCES, **usage.get(nodepool.name, {})}
            status: dict[str, Any] = {
                # Go's Quantity.String(), as the status subresource stores it: 1000 pods is "1k".
                "resources": {name: canonical_quantity(text) for name, text in format_resources(counted).items()},
                "nodes": counted["nodes"] // MILLI,
                "conditions": [dict(c) for c in pool.conditions] if pool is not None else [],
            }
            if pool is not None and pool.node_class_generation is not None:
                status["nodeClassObservedGeneration"] = pool.node_class_generation
            result[nodepool.name] = status
        for name in ctx.unparsed_nodepools:
            unparsed = self.pools.get(ctx.nodepool_uids.get(name, ""))
            if name not in result and unparsed is not None:
                result[name] = {"conditions": [dict(c) for c in unparsed.conditions]}
        return result

    def _write(self, ctx: ClusterContext) -> bool:
        """kwok mode: the NodePools' status subresource, patched where it differs from what was last written."""
        changed = False
        for name, status in self.statuses(ctx, ctx.api.list("NodeClaim")).items():
            stored = ctx.api.get("NodePool", name)
            if stored is None:
                continue
            if self.written.get(name) == status and (stored.get("status") or {}) == status:
                continue
            # Compared with the stored status too, not only with what was last written: another writer (a person, a
            # tool, a Karpenter left running) may have put an older status back, and Karpenter's status patch
            # restores it at the next reconcile.
            if (stored.get("status") or {}) != status and not ctx.backing_off("nodepool.status", stored):
                with ctx.guard("nodepool.status", stored):
                    ctx.api.patch("NodePool", name, "", {"status": status})
                    changed = True
            self.written[name] = status
        return changed


def pool_resources(ctx: ClusterContext, claims: list[Obj]) -> dict[str, dict[str, int]]:
    """cluster.NodePoolResourcesFor for every NodePool: each launched NodeClaim not being deleted counts one node and
    its StateNode's Capacity(): its Node's capacity once that is initialized, before then the Node's with the
    NodeClaim's filling what the Node reports as zero (state/statenode.go Capacity, cluster.go
    updateNodePoolResources). A Node with a NodePool label but no NodeClaim counts its own capacity."""
    nodes = {n["metadata"]["name"]: n for n in ctx.api.scan("Node")}
    by_provider = {n["spec"].get("providerID"): n for n in nodes.values() if (n.get("spec") or {}).get("providerID")}
    usage: dict[str, dict[str, int]] = {}
    claimed = set()
    for claim in claims:
        status = claim.get("status") or {}
        provider_id = status.get("providerID")
        if not provider_id:
            continue  # not launched: cluster state has no StateNode for it yet
        node = by_provider.get(provider_id)
        if node is not None:
            claimed.add(node["metadata"]["name"])
        if claim["metadata"].get("deletionTimestamp") or is_true(claim, "InstanceTerminating"):
            continue  # MarkedForDeletion: its resources no longer count
        capacity = parse_resources(status.get("capacity") or {})
        if node is not None:
            from_node = parse_resources((node.get("status") or {}).get("capacity") or {})
            if (node["metadata"].get("labels") or {}).get(wk.INITIALIZED) == "true":
                capacity = from_node
            else:
                capacity = {**capacity, **{name: amount for name, amount in from_node.items() if amount}}
        pool = (claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, "")
        if pool:
            usage[pool] = add(usage.get(pool, {}), capacity, {"nodes": MILLI})
    for name, node in nodes.items():
        pool = (node["metadata"].get("labels") or {}).get(wk.NODEPOOL, "")
        if name in claimed or not pool or node["metadata"].get("deletionTimestamp"):
            continue
        capacity = parse_resources((node.get("status") or {}).get("capacity") or {})
        usage[pool] = add(usage.get(pool, {}), capacity, {"nodes": MILLI})
    return usage
