"""Which disruption command a NodeClaim the provisioner launches is for: a command evicts pods, their owners make
new ones, and if those cannot fit the provisioner launches a node. That node is a cost of the command (its savings
are net of it). A launch is the command's when the pods it is for belong to an owner the command evicted pods of,
while the command executes or within ATTRIBUTION_SECONDS after it completed."""

from __future__ import annotations

from collections.abc import Iterable

from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.pods import Pod

ATTRIBUTION_SECONDS = 120.0
CAUSED_BY = "karpui.dev/caused-by"


def evicting_command(ctx: ClusterContext, pods: Iterable[Pod]) -> Obj | None:
    """The command (executing, or completed in the last ATTRIBUTION_SECONDS) whose evicted owners include an owner
    of `pods`; the most recently started one if several."""
    owners = {(p.namespace, p.owner.kind, p.owner.name) for p in pods if p.owner is not None}
    if not owners:
        return None
    found: Obj | None = None
    for phase in ("Executing", "Succeeded"):
        for command in ctx.api.list("DisruptionCommand", fields={"status.phase": phase}):
            status = command.get("status") or {}
            if phase == "Succeeded" and (
                not status.get("completedAt") or ctx.now - parse_timestamp(status["completedAt"]) > ATTRIBUTION_SECONDS
            ):
                continue
            evicted = {
                (e.get("namespace", ""), e.get("kind", ""), e.get("name", ""))
                for e in (command["spec"].get("assessment") or {}).get("evictions") or []
            }
            if evicted & owners and (
                found is None or str(status.get("startedAt", "")) > str(found["status"].get("startedAt", ""))
            ):
                found = command
    return found


def attribute_launch(ctx: ClusterContext, pods: Iterable[Pod], nodeclaim: Obj, price: float) -> None:
    """Charge a NodeClaim the provisioner launched to the command whose evictions it is for, if any: the claim is
    annotated with the command, and the command's status counts its price against its savings."""
    command = evicting_command(ctx, pods)
    if command is None:
        return
    name = command["metadata"]["name"]
    nodeclaim["metadata"].setdefault("annotations", {})[CAUSED_BY] = name
    ctx.api.update(nodeclaim)
    caused = dict(command["status"].get("causedLaunches") or {})
    caused[nodeclaim["metadata"]["name"]] = round(price, 6)
    command["status"]["causedLaunches"] = caused
    ctx.api.update(command)
