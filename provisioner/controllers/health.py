"""Node auto-repair (Karpenter v1.1, gate NodeRepair, off by default): Karpenter's node health controller replaces
a node whose condition a cloud provider's repair policy matches once the policy's toleration has passed (kwok:
Ready False or Unknown for 10 minutes), unless more than 20% of its NodePool's nodes are unhealthy.

karpui puts each repair on the disruption queue as soon as the node turns unhealthy (reason Unhealthy): a person
may approve it sooner (a voluntary disruption, under the approval mode, four-eyes and a pause), or deny it; at the
end of the toleration it is forced, as Karpenter forces it, and the queue says why no approval could hold it.
"""

from __future__ import annotations

from typing import Any

from provisioner.cluster.objects import Obj, timestamp
from provisioner.controllers.command_specs import live_commands
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.records import fingerprint_of, node_entry, record_command
from provisioner.controllers.repair import METHOD, STANDALONE, UNHEALTHY, VETOED, Unhealthy, legacy, unhealthy, vetoed
from provisioner.labels import NODEPOOL
from provisioner.options import NODE_REPAIR

WATCHED = ("Node", "NodeClaim", "DisruptionCommand")


class NodeHealthController:
    """Proposes a repair for each unhealthy node that no live command holds; looks again whenever a Node, a
    NodeClaim or a command changes, and when a toleration ends."""

    def __init__(self) -> None:
        self._seen: tuple[Any, ...] | None = None
        self._dues: list[float] = []  # tolerations ending on nodes a denial or a dry run holds until then

    def next_due(self, ctx: ClusterContext) -> list[float]:
        return list(self._dues)

    def reconcile(self, ctx: ClusterContext) -> bool:
        if not ctx.gate(NODE_REPAIR) or not ctx.cloud.repair_policies():
            self._seen, self._dues = None, []
            return False
        inputs = tuple(ctx.api.kind_version(kind) for kind in WATCHED)
        if inputs == self._seen and not any(due <= ctx.now for due in self._dues):
            return False
        changed = self._propose(ctx)
        self._seen = tuple(ctx.api.kind_version(kind) for kind in WATCHED)
        return changed

    def _propose(self, ctx: ClusterContext) -> bool:
        policies = ctx.cloud.repair_policies()
        held = {c["nodeclaim"] for command in live_commands(ctx) for c in command["spec"]["candidates"]}
        decided = _decided(ctx)
        dues: list[float] = []
        changed = False
        for claim in ctx.api.list("NodeClaim"):
            name = (claim.get("status") or {}).get("nodeName")
            if not name or claim["metadata"].get("deletionTimestamp") or claim["metadata"]["name"] in held:
                continue
            node = ctx.api.get("Node", name)
            if node is None or node["metadata"].get("deletionTimestamp"):
                continue
            found = unhealthy(node, policies, legacy=legacy(ctx))
            if found is None:
                continue
            # The legacy controller repairs standalone NodeClaims too and knows no do-not-repair.
            if not legacy(ctx) and _held_back(ctx, claim, node, found, dues):
                continue
            fingerprint = fingerprint_of(UNHEALTHY, claim["metadata"]["name"], found.text, timestamp(found.since))
            earlier = decided.get(fingerprint)
            if earlier is not None and ctx.now < found.due:
                dues.append(found.due)  # a person said no (or dry-run recorded it): forced when the toleration ends
                continue
            with ctx.guard("node.health", node):
                _propose_repair(ctx, claim, node, found, fingerprint, earlier)
                changed = True
        self._dues = dues
        return changed


def _held_back(ctx: ClusterContext, claim: Obj, node: Obj, found: Unhealthy, dues: list[float]) -> bool:
    """v1.15's repair method leaves a standalone NodeClaim and a node with do-not-repair alone, and says so."""
    if not (claim["metadata"].get("labels") or {}).get(NODEPOOL):
        # No NodePool to replace it from or budget it against (types.go:157): a standalone NodeClaim is never repaired.
        for obj in (node, claim):
            ctx.publish(obj, "Normal", "DisruptionBlocked", STANDALONE)
        return True
    if vetoed(node):
        # The operator's escape hatch holds every repair of the node; said once a policy is eligible (repair.go:97),
        # and looked at again then.
        if ctx.now >= found.due:
            for obj in (node, claim):
                ctx.publish(obj, "Normal", "DisruptionBlocked", VETOED)
        else:
            dues.append(found.due)
        return True
    return False


def _decided(ctx: ClusterContext) -> dict[str, Obj]:
    """Finished repairs that did not happen, by fingerprint: a denial or a dry-run record holds until the force."""
    return {
        c["spec"]["fingerprint"]: c
        for phase in ("Denied", "DryRun")
        for c in ctx.api.list("DisruptionCommand", fields={"status.phase": phase})
        if c["spec"]["reason"] == UNHEALTHY
    }


def _propose_repair(
    ctx: ClusterContext, claim: Obj, node: Obj, found: Any, fingerprint: str, earlier: Obj | None
) -> None:
    spec: dict[str, Any] = {
        "condition": found.text,
        "unhealthySince": timestamp(found.since),
        "toleration": int(found.toleration),
        "forceAt": timestamp(found.due),
    }
    if earlier is not None:
        approval = earlier["spec"].get("approval") or {}
        spec["overruled"] = (
            f"a denial by {approval.get('by')}" if earlier["status"]["phase"] == "Denied" else "dry-run mode"
        )
    record_command(
        ctx,
        reason=UNHEALTHY,
        method=METHOD,
        entries=[node_entry(ctx, claim, node)],
        fingerprint=fingerprint,
        savings=0.0,  # a repair saves nothing: the pods it moves need a node as much as before
        status={"phase": "Proposed", "validateAt": timestamp(ctx.now)},
        **spec,
    )
