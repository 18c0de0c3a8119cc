"""Static NodePools (spec.replicas, Karpenter v1.8+, gate StaticCapacity): the static provisioning controller keeps
`replicas` NodeClaims, within `limits.nodes`, whatever the pods need; the static deprovisioning controller removes
the ones over `replicas`, choosing as Karpenter does (not yet launched first, then empty nodes, then the cheapest to
disrupt). karpui's one difference: a scale-down of running nodes goes through the human gate as a DisruptionCommand
(reason Overprovisioned) under the NodePool's approval mode; in `auto` it runs at once, as Karpenter's does.
"""

from __future__ import annotations

import math
from dataclasses import replace

from provisioner import labels as wk
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.controllers.command_specs import live_commands
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.disruption import denied_fingerprints
from provisioner.controllers.expiration import expire_seconds
from provisioner.controllers.nodecounts import node_counts
from provisioner.controllers.provisioning import create_nodeclaim
from provisioner.controllers.records import fingerprint_of, node_entry, record_command
from provisioner.disruption.candidates import pod_blocks
from provisioner.disruption.types import eviction_cost
from provisioner.objects import NodePool
from provisioner.options import STATIC_CAPACITY
from provisioner.quantity import MILLI
from provisioner.scheduling.logs import LogRecord
from provisioner.scheduling.static import static_plan

OVERPROVISIONED = "Overprovisioned"
PROVISIONING_LOGGER = "controller.static.provisioning"
DEPROVISIONING_LOGGER = "controller.static.deprovisioning"


def node_limit(nodepool: NodePool) -> int:
    nodes = nodepool.limits.get("nodes")
    return math.inf if nodes is None else nodes // MILLI  # type: ignore[return-value]


class StaticProvisioningController:
    """Creates the NodeClaims a static NodePool lacks (Karpenter's static.provisioning)."""

    def reconcile(self, ctx: ClusterContext) -> bool:
        if not ctx.gate(STATIC_CAPACITY):
            return False
        changed = False
        for nodepool in ctx.nodepools:
            if not nodepool.static or ctx.cloud.instance_types(nodepool) is None:
                continue  # only a Ready NodePool (its node class exists) is provisioned
            with ctx.guard("static.provisioning"):
                changed |= self._provision(ctx, nodepool)
        return changed

    def _provision(self, ctx: ClusterContext, nodepool: NodePool) -> bool:
        counts = node_counts(ctx, nodepool.name)
        desired = nodepool.replicas or 0
        if counts.active + counts.pending_disruption >= desired:
            return False
        # ReserveNodeCount: running, deleting and held NodeClaims all count against limits.nodes.
        room = node_limit(nodepool) - (counts.active + counts.deleting + counts.pending_disruption)
        count = int(min(desired - counts.active, room))
        if count <= 0:
            ctx.log(
                LogRecord(
                    "nodepool node limit reached", {"NodePool": {"name": nodepool.name}}, logger=PROVISIONING_LOGGER
                )
            )
            return False
        ctx.log(
            LogRecord(
                "provisioning nodeclaims to satisfy replica count",
                {
                    "NodePool": {"name": nodepool.name},
                    "current": counts.active,
                    "desired": desired,
                    "provision-count": count,
                },
                logger=PROVISIONING_LOGGER,
            )
        )
        plan = static_plan(nodepool)
        for _ in range(count):
            claim = create_nodeclaim(ctx, plan)
            ctx.log(
                LogRecord(
                    "created nodeclaim",
                    {"NodePool": {"name": nodepool.name}, "NodeClaim": {"name": claim["metadata"]["name"]}},
                )
            )
        return True


class StaticDeprovisioningController:
    """Removes the NodeClaims over a static NodePool's replicas (Karpenter's static.deprovisioning): NodeClaims not
    launched yet are deleted at once; running nodes through a DisruptionCommand, the human gate deciding."""

    def reconcile(self, ctx: ClusterContext) -> bool:
        if not ctx.gate(STATIC_CAPACITY):
            return False
        changed = False
        for nodepool in ctx.nodepools:
            if nodepool.static:
                with ctx.guard("static.deprovisioning"):
                    changed |= self._deprovision(ctx, nodepool)
        return changed

    def _deprovision(self, ctx: ClusterContext, nodepool: NodePool) -> bool:
        counts = node_counts(ctx, nodepool.name)
        # Nodes already held by a live scale-down command are on their way out.
        excess = counts.active - (nodepool.replicas or 0)
        if excess <= 0:
            return False
        ctx.log(
            LogRecord(
                "deprovisioning nodeclaims to satisfy replica count",
                {
                    "NodePool": {"name": nodepool.name},
                    "current": counts.active,
                    "desired": nodepool.replicas,
                    "deprovision-count": excess,
                },
                logger=DEPROVISIONING_LOGGER,
            )
        )
        unresolved, resolved = candidates(ctx, nodepool, excess)
        for claim in unresolved:
            ctx.api.delete("NodeClaim", claim["metadata"]["name"])
            ctx.log(
                LogRecord(
                    "deleting nodeclaim",
                    {"NodeClaim": {"name": claim["metadata"]["name"]}},
                    level="DEBUG",
                    logger=DEPROVISIONING_LOGGER,
                )
            )
        if resolved:
            propose_scale_down(ctx, nodepool, resolved)
        return bool(unresolved or resolved)


def candidates(ctx: ClusterContext, nodepool: NodePool, count: int) -> tuple[list[Obj], list[tuple[Obj, Obj | None]]]:
    """getDeprovisioningCandidates: NodeClaims with no instance yet first; then (NodeClaim, Node) pairs of empty
    nodes (launched with no Node yet, or only DaemonSet pods, finished or not, and no do-not-disrupt); then the others, those with a do-not-disrupt pod
    last, the rest by rescheduling cost times lifetime remaining, cheapest first."""
    held = {c["nodeclaim"] for command in live_commands(ctx) for c in command["spec"]["candidates"]}
    claims = [
        c
        for c in ctx.api.list("NodeClaim")
        if (c["metadata"].get("labels") or {}).get(wk.NODEPOOL) == nodepool.name
        and not c["metadata"].get("deletionTimestamp")
        and c["metadata"]["name"] not in held
    ]
    unresolved = [c for c in claims if not (c.get("status") or {}).get("providerID")][:count]
    left = count - len(unresolved)
    if left <= 0:
        return unresolved, []
    empty: list[tuple[Obj, Obj | None]] = []
    nodes = []
    for claim in claims:
        if not (claim.get("status") or {}).get("providerID"):
            continue
        node_name = (claim.get("status") or {}).get("nodeName")
        node = ctx.api.get("Node", node_name) if node_name else None
        if node is None:
            # Launched, its Node not registered yet: a state node with no pods, so an empty one (StateNode.Pods).
            empty.append((claim, None))
        else:
            # A Node being deleted under a NodeClaim that is not stays a candidate: StateNode.Deleted() reads only
            # the NodeClaim's deletion when there is one (statenode.go:544-547).
            nodes.append((claim, node))
    busy = []
    for claim, node in nodes:
        # Every pod bound to the node, finished ones too (nodeutils.GetPods filters none), and do-not-disrupt on
        # any of them, as IsDoNotDisruptActive reads no phase (static/deprovisioning/controller.go:216-250).
        pods = [ctx.views.pod(p) for p in ctx.api.list("Pod", fields={"spec.nodeName": node["metadata"]["name"]})]
        protected = any(pod_blocks(replace(p, phase="Running", deleting=False), ctx.now) for p in pods)
        if all(p.is_daemonset_pod() for p in pods) and not protected:
            empty.append((claim, node))
        else:
            cost = sum(eviction_cost(p) for p in pods) * _lifetime_remaining(ctx, claim)
            busy.append((protected, cost, claim["metadata"]["name"], claim, node))
    chosen = empty[:left]
    busy.sort(key=lambda entry: entry[:3])
    chosen += [(claim, node) for *_, claim, node in busy[: left - len(chosen)]]
    return unresolved, chosen


def _lifetime_remaining(ctx: ClusterContext, claim: Obj) -> float:
    """LifetimeRemaining: from the NodeClaim's own expireAfter (its NodePool's may have changed since), 1 for
    Never (utils/disruption/disruption.go:71-80)."""
    expire = expire_seconds(claim)
    if not expire:
        return 1.0
    age = ctx.now - parse_timestamp(claim["metadata"]["creationTimestamp"])
    return max(0.0, min(1.0, (expire - age) / expire))


def propose_scale_down(ctx: ClusterContext, nodepool: NodePool, chosen: list[tuple[Obj, Obj | None]]) -> None:
    """One DisruptionCommand deleting the chosen nodes, gated like any voluntary disruption (no budgets apply, as
    none hold Karpenter's static deprovisioning), validated at once so `auto` acts as Karpenter would."""
    fingerprint = fingerprint_of(OVERPROVISIONED, *sorted(claim["metadata"]["name"] for claim, _ in chosen))
    if fingerprint in denied_fingerprints(ctx):
        return  # a person said no to exactly this
    entries = [node_entry(ctx, claim, node) for claim, node in chosen]
    record_command(
        ctx,
        reason=OVERPROVISIONED,
        method="static",
        entries=entries,
        fingerprint=fingerprint,
        savings=sum(e["price"] for e in entries),
        status={"phase": "Proposed", "validateAt": timestamp(ctx.now)},
    )
