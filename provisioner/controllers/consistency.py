"""Karpenter's NodeClaim consistency controller: every 10 minutes, a launched NodeClaim's Node is checked against
what was launched (NodeShape: a resource the NodeClaim requested at under 90 % of the capacity it was launched
with), told as FailedConsistencyCheck and the ConsistentStateFound condition."""

from __future__ import annotations

from typing import Any

from provisioner.cluster.conditions import is_true, set_claim_condition
from provisioner.cluster.objects import Obj
from provisioner.controllers.context import RECORDER_DEDUPE_SECONDS, ClusterContext
from provisioner.controllers.lifecycle import node_of
from provisioner.quantity import canonical_quantity, parse_quantity
from provisioner.scheduling.logs import LogRecord

SCAN_PERIOD = 600.0  # consistency.scanPeriod
CONDITION = "ConsistentStateFound"
# NodeShape's bar: a node with less than this share of a requested resource's launched capacity is inconsistent.
MINIMUM_SHARE = 0.90
LOGGER = "controller.nodeclaim.consistency"


def node_shape_issues(claim: Obj, node: Obj) -> list[str]:
    """NodeShape.Check: for each resource the NodeClaim requests, the Node's capacity against the NodeClaim's
    (both non-zero), in the words of Karpenter's event. A deleting or uninitialized NodeClaim has none."""
    if claim["metadata"].get("deletionTimestamp") or not is_true(claim, "Initialized"):
        return []
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    expected_capacity = (claim.get("status") or {}).get("capacity") or {}
    node_capacity = (node.get("status") or {}).get("capacity") or {}
    issues = []
    for resource, requested in requests.items():
        expected = parse_quantity(expected_capacity.get(resource, "0"))
        if parse_quantity(requested) == 0 or expected == 0:
            continue
        found = node_capacity.get(resource, "0")
        share = parse_quantity(found) / expected
        if share < MINIMUM_SHARE:
            issues.append(
                f"expected {canonical_quantity(expected_capacity[resource])} of resource {resource}, but found "
                f"{canonical_quantity(found)} ({share * 100:.1f}% of expected)"
            )
    return issues


class ConsistencyController:
    """When each NodeClaim was last scanned (by UID), then every SCAN_PERIOD. Karpenter scans one when it first
    sees its providerID and finds its Node only if the instance has one by then: its kwok provider creates the Node
    before the launch is written, so ConsistentStateFound is True at once (an uninitialized NodeClaim has nothing
    for NodeShape to check), where a cloud instance, registering minutes later, waits for the next scan. karpui's
    providers make their Nodes a moment after the launch, so the first scan here is the first that finds the Node:
    Karpenter's kwok timing."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.scanned: dict[str, float] = dict((state or {}).get("scanned") or {})
        self._seen: tuple[int, int] | None = None  # the NodeClaim and Node versions of the last look at them all

    def to_state(self) -> dict[str, Any]:
        return {"scanned": dict(self.scanned)}

    def next_due(self, ctx: ClusterContext) -> list[float]:
        return [min(self.scanned.values()) + SCAN_PERIOD] if self.scanned else []

    def reconcile(self, ctx: ClusterContext) -> bool:
        # Between scans only a new NodeClaim or a Node appearing can call for one: an idle step costs nothing.
        versions = (ctx.api.kind_version("NodeClaim"), ctx.api.kind_version("Node"))
        due = self.next_due(ctx)
        if versions == self._seen and (not due or ctx.now < due[0]):
            return False
        self._seen = versions
        changed = False
        live = set()
        for claim in ctx.api.list("NodeClaim"):
            uid = claim["metadata"].get("uid") or claim["metadata"]["name"]
            live.add(uid)
            if not (claim.get("status") or {}).get("providerID"):
                continue
            last = self.scanned.get(uid)
            if last is not None and ctx.now < last + SCAN_PERIOD:
                continue
            node = node_of(ctx, claim)
            if node is None and last is None:
                continue  # see the class: the first scan is the one that finds the Node
            self.scanned[uid] = ctx.now
            if node is not None:
                changed |= _check(ctx, claim, node)
        for gone in set(self.scanned) - live:
            del self.scanned[gone]
        return changed


def _check(ctx: ClusterContext, claim: Obj, node: Obj) -> bool:
    """checkConsistency: each issue logged and told on the NodeClaim; the condition False with issues, else True."""
    issues = node_shape_issues(claim, node)
    for issue in issues:
        ctx.log(
            LogRecord(
                "failed consistency check",
                {
                    "NodeClaim": {"name": claim["metadata"]["name"]},
                    "Node": {"name": node["metadata"]["name"]},
                    "issue": issue,
                },
                logger=LOGGER,
            )
        )
        # Karpenter's dedupe values are the NodeClaim's UID and the message: each issue once per 2 minutes.
        ctx.event(claim, "Warning", "FailedConsistencyCheck", issue, dedupe_seconds=RECORDER_DEDUPE_SECONDS)
    if issues:
        changed = set_claim_condition(
            claim, CONDITION, "False", ctx.now, "ConsistencyCheckFailed", "Consistency Check Failed"
        )
    elif not is_true(claim, CONDITION):
        changed = set_claim_condition(claim, CONDITION, "True", ctx.now, CONDITION)
    else:
        changed = False
    if changed:
        ctx.api.update(claim)
    return changed or bool(issues)
