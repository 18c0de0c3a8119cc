"""Karpenter's NodeClaim garbage collection: every 2 minutes, a registered NodeClaim whose instance the cloud
provider no longer lists, and whose Node is gone or not Ready, is deleted, so its pods are provisioned for again
instead of waiting on a NodeClaim that will never hold them."""

from __future__ import annotations

from typing import Any

from provisioner.cluster.conditions import is_true
from provisioner.cluster.views import is_ready
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.lifecycle import node_of
from provisioner.scheduling.logs import LogRecord

PERIOD = 120.0  # the controller's RequeueAfter
LOGGER = "controller.nodeclaim.garbagecollection"


class GarbageCollectionController:
    """When the next collection runs (kept across steps, so a lab reloaded between steps keeps its pace)."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.next_run: float | None = (state or {}).get("next_run")

    def to_state(self) -> dict[str, Any]:
        return {"next_run": self.next_run}

    def next_due(self) -> list[float]:
        return [self.next_run] if self.next_run is not None else []

    def reconcile(self, ctx: ClusterContext) -> bool:
        if ctx.observe:
            return False  # observing, Karpenter collects its own
        if self.next_run is not None and ctx.now < self.next_run:
            return False
        self.next_run = ctx.now + PERIOD
        # Registered NodeClaims only: an unregistered one is liveness's, whose registration timeout deletes it.
        listed = {launched.provider_id for launched in ctx.cloud.list()}
        changed = False
        for claim in ctx.api.list("NodeClaim"):
            provider_id = (claim.get("status") or {}).get("providerID") or ""
            if (
                not provider_id
                or provider_id in listed
                or not is_true(claim, "Registered")
                or claim["metadata"].get("deletionTimestamp")
            ):
                continue
            node = node_of(ctx, claim)
            if node is not None and is_ready(node):
                continue  # the kubelet still reports: the instance is there, whatever the provider says
            ctx.api.delete("NodeClaim", claim["metadata"]["name"])
            ctx.log(
                LogRecord(
                    "garbage collecting nodeclaim with no cloudprovider representation",
                    {
                        "NodeClaim": {"name": claim["metadata"]["name"]},
                        "Node": {"name": (claim.get("status") or {}).get("nodeName") or ""},
                        "provider-id": provider_id,
                    },
                    level="DEBUG",
                    logger=LOGGER,
                )
            )
            changed = True
        return changed
