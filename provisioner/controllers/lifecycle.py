"""The NodeClaim lifecycle: launch, register, initialize, liveness and finalization (Karpenter's lifecycle
controller), with the kwok provider behind launch and node creation."""

from __future__ import annotations

from provisioner.cloudprovider import kwok
from provisioner.cluster import dra
from provisioner.cluster.conditions import is_true, set_condition, transition_time
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.cluster.views import is_ready
from provisioner.controllers.context import ClusterContext
from provisioner.manifests.nodeclass import node_registration_delay_seconds
from provisioner.scheduling.logs import LogRecord
from provisioner.taints import UNREGISTERED

LIFECYCLE = "controller.nodeclaim.lifecycle"
REGISTRATION_TIMEOUT = 15 * 60.0
TERMINATION_FINALIZER = "karpenter.sh/termination"


def registration_due(ctx: ClusterContext, claim: Obj) -> float | None:
    """When kwok creates the Node of a launched NodeClaim (launch time + the class's registration delay)."""
    launched = transition_time(claim, "Launched")
    if launched is None or is_true(claim, "Registered") or not is_true(claim, "Launched"):
        return None
    ref = claim["spec"]["nodeClassRef"]
    nodeclass = ctx.nodeclasses.get((ref["kind"], ref["name"]))
    delay = node_registration_delay_seconds(nodeclass) if nodeclass is not None else 0
    return parse_timestamp(launched) + delay


def next_due(ctx: ClusterContext) -> float | None:
    times = []
    for claim in ctx.store.list("NodeClaim"):
        due = registration_due(ctx, claim)
        if due is not None:
            times.extend([due, due + REGISTRATION_TIMEOUT])
    future = [t for t in times if t > ctx.now]
    return min(future) if future else None


def reconcile(ctx: ClusterContext) -> bool:
    changed = False
    for claim in ctx.store.list("NodeClaim"):
        if claim["metadata"].get("deletionTimestamp"):
            changed |= _finalize(ctx, claim)
        elif not is_true(claim, "Launched"):
            changed |= _launch(ctx, claim)
        elif not is_true(claim, "Registered"):
            changed |= _register(ctx, claim)
        elif not is_true(claim, "Initialized"):
            changed |= _initialize(ctx, claim)
    changed |= _nodes_without_claims(ctx)
    changed |= _orphans_of_deleted_nodepools(ctx)
    return changed


def _orphans_of_deleted_nodepools(ctx: ClusterContext) -> bool:
    """Kubernetes' garbage collector: a NodeClaim whose owning NodePool (by uid) is gone is deleted, so deleting a
    NodePool drains and removes its nodes, as in Karpenter."""
    live = set(ctx.nodepool_uids.values())
    changed = False
    for claim in ctx.store.list("NodeClaim"):
        owners = [o.get("uid") for o in claim["metadata"].get("ownerReferences") or [] if o.get("kind") == "NodePool"]
        if claim["metadata"].get("deletionTimestamp") or not owners or not all(owners):
            continue
        if not live.intersection(owners):
            ctx.store.delete("NodeClaim", claim["metadata"]["name"])
            changed = True
    return changed


def _launch(ctx: ClusterContext, claim: Obj) -> bool:
    ref = claim["spec"]["nodeClassRef"]
    types = {it.name: it for it in ctx.catalogs.get(ref["kind"], [])}
    name = claim["metadata"]["name"]
    if (ref["kind"], ref["name"]) not in ctx.nodeclasses:
        ctx.event(
            claim, "Warning", "InsufficientCapacityError", f"NodeClaim {name} event: node class {ref['name']} not found"
        )
        ctx.store.delete("NodeClaim", name)
        return True
    try:
        launched = kwok.launch(claim, types, ctx.rng)
    except kwok.LaunchError as error:
        ctx.event(claim, "Warning", "InsufficientCapacityError", f"NodeClaim {name} event: {error}")
        ctx.log(
            LogRecord(
                "failed launching nodeclaim",
                {"NodeClaim": {"name": name}, "error": str(error)},
                level="ERROR",
                logger=LIFECYCLE,
            )
        )
        claim["metadata"]["finalizers"] = []
        ctx.store.delete("NodeClaim", name)
        return True
    claim["metadata"]["labels"] = launched["labels"]
    claim["metadata"].setdefault("annotations", {})["karpui.dev/price"] = repr(launched["price"])
    claim["status"].update(
        providerID=f"kwok://{name}", capacity=launched["capacity"], allocatable=launched["allocatable"], imageID="kwok"
    )
    set_condition(claim, "Launched", "True", ctx.now, "Launched")
    set_condition(claim, "Registered", "Unknown", ctx.now, "AwaitingReconciliation")
    set_condition(claim, "Initialized", "Unknown", ctx.now, "AwaitingReconciliation")
    set_condition(claim, "Ready", "Unknown", ctx.now, "AwaitingReconciliation")
    ctx.store.update(claim)
    ctx.log(
        LogRecord(
            "launched nodeclaim",
            {
                "NodeClaim": {"name": name},
                "provider-id": f"kwok://{name}",
                "instance-type": launched["instance_type"],
                "zone": launched["zone"],
                "capacity-type": launched["capacity_type"],
                "allocatable": launched["allocatable"],
            },
            logger=LIFECYCLE,
        )
    )
    ctx.event(
        claim, "Normal", "Launched", "Status condition transitioned, Type: Launched, Status: True, Reason: Launched"
    )
    return True


def _register(ctx: ClusterContext, claim: Obj) -> bool:
    name = claim["metadata"]["name"]
    due = registration_due(ctx, claim)
    if due is None or ctx.now < due:
        return False
    if ctx.now > due + REGISTRATION_TIMEOUT:
        ctx.log(
            LogRecord(
                "deleting nodeclaim, registration timeout exceeded",
                {"NodeClaim": {"name": name}, "ttl": "15m0s"},
                logger=LIFECYCLE,
            )
        )
        ctx.store.delete("NodeClaim", name)
        return True
    node = ctx.store.get("Node", name)
    if node is None:
        node = ctx.store.create(kwok.node_for(claim))
    # Karpenter's registration: sync labels and taints, drop the unregistered taint, mark the node registered.
    spec_taints = list(claim["spec"].get("taints") or []) + list(claim["spec"].get("startupTaints") or [])
    kept = [t for t in node["spec"].get("taints") or [] if t.get("key") != UNREGISTERED]
    node["spec"]["taints"] = kept + [t for t in spec_taints if t not in kept]
    node["metadata"]["labels"] = {
        **node["metadata"].get("labels", {}),
        **claim["metadata"].get("labels", {}),
        "karpenter.sh/registered": "true",
    }
    ctx.store.update(node)
    claim["status"]["nodeName"] = node["metadata"]["name"]
    set_condition(claim, "Registered", "True", ctx.now, "Registered")
    ctx.store.update(claim)
    ctx.log(
        LogRecord(
            "registered nodeclaim",
            {"NodeClaim": {"name": name}, "Node": {"name": node["metadata"]["name"]}},
            logger=LIFECYCLE,
        )
    )
    return True


def _initialize(ctx: ClusterContext, claim: Obj) -> bool:
    node = ctx.store.get("Node", claim["status"].get("nodeName", ""))
    if node is None or not is_ready(node):
        return False
    drivers = [
        d
        for d in (claim["metadata"].get("annotations") or {}).get("karpenter.sh/requested-dra-drivers", "").split(",")
        if d
    ]
    if drivers and not dra.drivers_published(ctx.store, node["metadata"]["name"], drivers):
        if set_condition(
            claim,
            "Initialized",
            "Unknown",
            ctx.now,
            "DRADriverPoolsNotPublished",
            f"waiting for ResourceSlices of {', '.join(drivers)}",
        ):
            ctx.store.update(claim)
            return True
        return False
    startup = claim["spec"].get("startupTaints") or []
    if startup:
        # The lab plays the agent (CNI, device plugin) that removes startup taints once the node is ready.
        node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t not in startup]
    node["metadata"]["labels"]["karpenter.sh/initialized"] = "true"
    ctx.store.update(node)
    set_condition(claim, "Initialized", "True", ctx.now, "Initialized")
    set_condition(claim, "Ready", "True", ctx.now, "Ready")
    ctx.store.update(claim)
    ctx.log(
        LogRecord(
            "initialized nodeclaim",
            {
                "NodeClaim": {"name": claim["metadata"]["name"]},
                "Node": {"name": node["metadata"]["name"]},
                "allocatable": node["status"].get("allocatable"),
            },
            logger=LIFECYCLE,
        )
    )
    return True


def _finalize(ctx: ClusterContext, claim: Obj) -> bool:
    """Once termination has drained the Node, delete it (with what is left on it), then release the NodeClaim."""
    name = claim["metadata"]["name"]
    node = ctx.store.get("Node", (claim.get("status") or {}).get("nodeName") or name)
    if node is not None:
        drained = (node["metadata"].get("annotations") or {}).get("karpui.dev/drained") == "true"
        if not drained and is_ready(node):
            return False  # the termination controller is still draining
        for pod in ctx.store.list("Pod"):
            if pod["spec"].get("nodeName") == node["metadata"]["name"]:
                ctx.store.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        node["metadata"]["finalizers"] = []
        ctx.store.delete("Node", node["metadata"]["name"])
    if TERMINATION_FINALIZER in (claim["metadata"].get("finalizers") or []):
        ctx.store.remove_finalizer(claim, TERMINATION_FINALIZER)
        ctx.log(
            LogRecord(
                "deleted nodeclaim",
                {"NodeClaim": {"name": name}, "Node": {"name": node["metadata"]["name"] if node else ""}},
                logger=LIFECYCLE,
            )
        )
        return True
    return node is not None


def _nodes_without_claims(ctx: ClusterContext) -> bool:
    """`karp delete node` on a Karpenter node deletes its NodeClaim too (the termination controller's rule)."""
    changed = False
    claims = {c["metadata"]["name"]: c for c in ctx.store.list("NodeClaim")}
    for node in ctx.store.list("Node"):
        if node["metadata"].get("deletionTimestamp") and node["metadata"]["name"] in claims:
            claim = claims[node["metadata"]["name"]]
            if not claim["metadata"].get("deletionTimestamp"):
                ctx.store.delete("NodeClaim", claim["metadata"]["name"])
                changed = True
    return changed
