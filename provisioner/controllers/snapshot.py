"""The disruption controllers' snapshot of a cluster: managed nodes with their NodeClaim facts, pending pods,
NodePool offers, PDBs, DaemonSets and devices, as `provisioner.disruption` computes commands over them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from provisioner import labels as wk
from provisioner import volumes
from provisioner.catalog import InstanceType
from provisioner.cluster import dra, pdb
from provisioner.cluster.conditions import is_true
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.cluster.views import is_ready
from provisioner.controllers import capacitybuffer
from provisioner.controllers.consolidatable import CONSOLIDATABLE
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.provisioning import cluster_nodes, daemonsets
from provisioner.disruption.budgets import budget_active
from provisioner.disruption.candidates import pod_blocks
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.scoring import resolve_offering_price
from provisioner.disruption.types import ClaimedNode
from provisioner.labels import DO_NOT_DISRUPT
from provisioner.nodes import Node
from provisioner.objects import NodePool
from provisioner.options import RESERVED_CAPACITY, SPOT_TO_SPOT_CONSOLIDATION
from provisioner.pods import Pod, TopologySpreadConstraint
from provisioner.requirements import Requirements
from provisioner.scheduling.defaultspread import DefaultSpreadInjector
from provisioner.scheduling.scheduler import PoolOffer

_Prices = dict[str, dict[str, list[InstanceType]]]  # NodePool -> instance type name -> its types, in catalog order


# The kinds a snapshot reads: a write to any of them may change it.
SNAPSHOT_KINDS = (
    "Node",
    "Pod",
    "NodeClaim",
    "PodDisruptionBudget",
    "DaemonSet",
    "ResourceClaim",
    "ResourceSlice",
    "DeviceClass",
    "CapacityBuffer",  # their virtual pods are pending (their status says how many, written when that changes)
    "PodTemplate",
    "PersistentVolumeClaim",  # with PVs and StorageClasses: where a pod with volumes may move
    "PersistentVolume",
    "StorageClass",
    "CSINode",  # its drivers' volume attachment limits
)


# What default spread selectors are deduced from: read only when SCHEDULER_CONFIG gives default constraints.
SPREAD_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")


def snapshot_inputs(ctx: ClusterContext) -> tuple[Any, ...]:
    """Everything `cluster_view` reads that can change, but the clock and the nominations: the objects (by kind
    version), the NodePools and their instance types (the lists themselves: a new catalog is a new list)."""
    spread_kinds = SPREAD_KINDS if ctx.options.default_spread else ()
    return (
        tuple(ctx.api.kind_version(kind) for kind in (*SNAPSHOT_KINDS, *spread_kinds)),
        repr(ctx.nodepools),
        tuple(ctx.instance_types_for(np) for np in ctx.nodepools),
        tuple(ctx.catalogs.values()),
        ctx.options,
    )


def clock_inputs(ctx: ClusterContext) -> tuple[Any, ...]:
    """What the clock alone changes in what a disruption pass or a validation decides over a snapshot: which nodes
    are nominated now, which scheduled budgets are open now, and which pods a timed do-not-disrupt still
    protects."""
    return (
        tuple(sorted(node for node, until in ctx.nominations.items() if until > ctx.now)),
        tuple(sorted(ctx.buffer_nodes)),
        tuple(budget_active(b, ctx.now) for pool in ctx.disruptable_nodepools() for b in pool.budgets if b.schedule),
        tuple(sorted(pod.uid for pod in timed_do_not_disrupt_pods(ctx) if pod_blocks(pod, ctx.now))),
    )


def timed_do_not_disrupt_pods(ctx: ClusterContext) -> list[Pod]:
    """The pods whose `karpenter.sh/do-not-disrupt` is a duration (or invalid): what they protect changes with the
    clock alone. Looked for again only when pods were written."""
    annotated = ctx.memo(
        "snapshot/timed-do-not-disrupt",
        ctx.api.kind_version("Pod"),
        lambda: [
            obj
            for obj in ctx.api.scan("Pod")  # read only; the uids clock_inputs keeps are sorted
            if (obj["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT, "true") != "true"
        ],
    )
    return [pod for _, pod in ctx.views.readable(annotated)]


def cluster_view(ctx: ClusterContext) -> tuple[ClusterView, list[ClaimedNode]]:
    """What a disruption pass and a command's validation see now, and the managed nodes among it. Built once per
    change: a pass and the validations of the same moment, or of a later one with nothing written, share it; only
    the nominations (which the provisioner moves every batch) are laid on each time."""
    view, claimed = ctx.memo("snapshot", snapshot_inputs(ctx), lambda: _cluster_view(ctx))
    nominated = [_nominated(ctx, c) for c in claimed]
    if any(now is not before for now, before in zip(nominated, claimed, strict=True)):
        claimed = nominated
        view = replace(view, claimed=claimed)
    hosting = frozenset(ctx.buffer_nodes)
    if hosting != view.buffer_nodes:
        view = replace(view, buffer_nodes=hosting)  # moved by every provisioning pass, as the nominations are
    return (view if view.now == ctx.now else replace(view, now=ctx.now)), claimed


def _nominated(ctx: ClusterContext, claimed: ClaimedNode) -> ClaimedNode:
    until = float(ctx.nominations.get(claimed.name, 0.0))
    return claimed if until == claimed.nominated_until else replace(claimed, nominated_until=until)


def _cluster_view(ctx: ClusterContext) -> tuple[ClusterView, list[ClaimedNode]]:
    offers = [
        PoolOffer(np, types)
        for np in ctx.nodepools
        if not np.static and (types := ctx.instance_types_for(np)) is not None
    ]
    devices = bool(ctx.api.list("ResourceClaim"))  # without claims no pod has devices to ask for again
    # Each claimed node's Node object (a NodeClaim whose Node is gone is not a claimed node).
    registered = [
        (claim, node_obj)
        for claim in ctx.api.list("NodeClaim")
        if (node_name := (claim.get("status") or {}).get("nodeName"))
        and (node_obj := ctx.api.get("Node", node_name)) is not None
    ]
    # Nodes are built knowing which are under consolidateAfter: marking copies afterwards cost 1,819 copies of a
    # Node at 20,000 pods.
    after: dict[str, int | None] = {}  # consolidateAfter by NodePool name, parsed once (ctx.nodepool: the first)
    for pool in ctx.nodepools:
        after.setdefault(pool.name, pool.consolidate_after_seconds)
    fresh = {node_obj["metadata"]["name"] for claim, node_obj in registered if _under_consolidate_after(claim, after)}
    nodes = [dra.with_claimed_devices(ctx.api, n) if devices else n for n in cluster_nodes(ctx, fresh)]
    by_name = {n.name: n for n in nodes}
    prices = _offering_prices(ctx)
    claimed = [
        _claimed(ctx, claim, node_obj, by_name[node_obj["metadata"]["name"]], prices) for claim, node_obj in registered
    ]
    # As Karpenter's GetPendingPods: a pod whose PVC kube-scheduler would refuse is no pod to leave room for.
    pending = [
        _with_attached(ctx, obj, pod)
        for obj, pod in ctx.views.readable(ctx.api.list("Pod", fields={"spec.nodeName": ""}))
        if pod.is_provisionable() and volumes.validation_error(ctx.api, obj) is None
    ]
    # CapacityBuffers' virtual pods are pending too: a consolidation must leave room for them (SimulateScheduling
    # reads GetPendingPods, which injects them).
    pending += capacitybuffer.virtual_pods(ctx)
    view = ClusterView(
        claimed=claimed,
        nodes=nodes,
        pending=pending,
        pools=offers,
        now=ctx.now,
        pdbs=pdb.policies(ctx.api, ctx.views),
        daemonsets=daemonsets(ctx),
        spot_to_spot=ctx.gate(SPOT_TO_SPOT_CONSOLIDATION),
        preference_policy=ctx.options.preference_policy,
        min_values_policy=ctx.options.min_values_policy,
        reserved_capacity=ctx.gate(RESERVED_CAPACITY),
        device_classes=dra.device_classes(ctx.api),
        node_devices=dra.node_inventory(ctx.api, nodes, ctx.catalogs),
        volume_requirements=_volume_requirements(ctx),
        default_spread=_default_spread(ctx, [*(p for n in nodes for p in n.pods), *pending]),
    )
    return view, claimed


def _with_attached(ctx: ClusterContext, obj: Obj, pod: Pod) -> Pod:
    """A pending pod with the PVCs it would attach by driver: the room a simulation keeps for it counts them."""
    if not (obj.get("spec") or {}).get("volumes"):
        return pod
    attached = volumes.pod_volumes(ctx.api, obj)
    return replace(pod, csi_volumes=attached) if attached else pod


def _default_spread(ctx: ClusterContext, pods: list[Pod]) -> dict[str, tuple[TopologySpreadConstraint, ...]]:
    """Pod uid -> the default spread constraints a simulation schedules it with, for the pods that get them."""
    if not ctx.options.default_spread:
        return {}
    injected = DefaultSpreadInjector(ctx.api).inject(pods, ctx.options.default_spread)
    return {after.uid: after.spread for before, after in zip(pods, injected, strict=True) if after is not before}


def _volume_requirements(ctx: ClusterContext) -> dict[str, tuple[Requirements, ...]]:
    """Pod uid -> its volumes' alternatives, for the pods whose volumes constrain their node. A pod whose PVC, PV or
    StorageClass cannot be read gets none (Karpenter's simulation leaves such a pod out instead)."""
    result = {}
    for obj in ctx.api.scan("Pod"):
        if all(volumes.claim_name(obj, v) is None for v in obj["spec"].get("volumes") or ()):
            continue
        try:
            alternatives = volumes.requirement_alternatives(ctx.api, obj)
        except volumes.VolumeError:
            continue
        if alternatives:
            result[obj["metadata"].get("uid", "")] = alternatives
    return result


def _under_consolidate_after(claim: Obj, after: dict[str, int | None]) -> bool:
    """Karpenter's IsUnderConsolidateAfter: an initialized node whose pods changed less than its NodePool's
    consolidateAfter ago (never when consolidateAfter is Never or 0, or without its NodePool)."""
    pool = (claim["metadata"].get("labels") or {}).get(wk.NODEPOOL, "")
    return bool(after.get(pool)) and is_true(claim, "Initialized") and not is_true(claim, CONSOLIDATABLE)


def _claimed(ctx: ClusterContext, claim: Obj, node_obj: Obj, node: Node, prices: _Prices) -> ClaimedNode:
    labels = claim["metadata"].get("labels") or {}
    pool = ctx.nodepool(labels.get(wk.NODEPOOL, ""))
    drift = next(
        (
            c
            for c in (claim.get("status") or {}).get("conditions") or []
            if c.get("type") == "Drifted" and c.get("status") == "True"
        ),
        None,
    )
    return ClaimedNode(
        node=node,
        nodeclaim=claim["metadata"]["name"],
        nodepool=labels.get(wk.NODEPOOL, ""),
        instance_type=labels.get(wk.INSTANCE_TYPE, ""),
        capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
        zone=labels.get(wk.ZONE, ""),
        price=_price(prices, pool, labels),
        type_known=pool is not None and labels.get(wk.INSTANCE_TYPE, "") in prices.get(pool.name, {}),
        created=parse_timestamp(claim["metadata"]["creationTimestamp"]),
        initialized=node.initialized,  # the Node's initialized label, as StateNode.Initialized reads it
        registered=(node_obj["metadata"].get("labels") or {}).get(wk.REGISTERED) == "true",
        # As lifecycle read it to initialize the node: a Node manifest without conditions is taken as Ready.
        ready=is_ready(node_obj),
        deleting=bool(claim["metadata"].get("deletionTimestamp") or node_obj["metadata"].get("deletionTimestamp")),
        consolidatable=is_true(claim, CONSOLIDATABLE),
        drifted=drift.get("reason") if drift else None,
        grace_period=bool((claim.get("spec") or {}).get("terminationGracePeriod")),
        drifted_at=parse_timestamp(drift["lastTransitionTime"]) if drift else 0.0,
        last_pod_event=str((claim.get("status") or {}).get("lastPodEventTime") or ""),
        annotations=dict(node_obj["metadata"].get("annotations") or {}),
        # As `cluster_view` lays them on: built with them, a snapshot needs no copies until the nominations move.
        nominated_until=float(ctx.nominations.get(node.name, 0.0)),
    )


def _offering_prices(ctx: ClusterContext) -> _Prices:
    prices: _Prices = {}
    for pool in ctx.nodepools:
        if pool.name in prices:
            continue  # ctx.nodepool(name) is the first of that name
        by_name = prices[pool.name] = {}
        for it in ctx.instance_types_for(pool) or []:
            by_name.setdefault(it.name, []).append(it)
    return prices


def _price(prices: _Prices, pool: NodePool | None, labels: dict[str, str]) -> float:
    """Karpenter's candidate price (ResolveOfferingPrice): the NodePool's catalog offering matching the node's type,
    zone and capacity type; 0 when the catalog has none (types.go:223), as Karpenter prices such a node."""
    types = prices.get(pool.name, {}).get(labels.get(wk.INSTANCE_TYPE, ""), []) if pool is not None else []
    zone, capacity_type = labels.get(wk.ZONE, ""), labels.get(wk.CAPACITY_TYPE, "")
    for it in types:  # a name the catalog lists more than once: the first that offers the node's place
        if any(o.zone == zone and o.capacity_type == capacity_type for o in it.offerings):
            return resolve_offering_price(it, zone, capacity_type)
    return 0.0


def without(view: ClusterView, busy: set[str]) -> ClusterView:
    """Nodes already in a live command are spoken for: not candidates again, and they use up budget."""
    return replace(view, claimed=[replace(c, deleting=True) if c.name in busy else c for c in view.claimed])
