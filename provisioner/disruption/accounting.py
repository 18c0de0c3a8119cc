"""What a disruption command saves, honestly, as the ledger, the savings chart and every table count it: the
candidates' prices less what its replacements launched at, less the NodeClaims the provisioner launched for the
pods it evicted; only consolidation saves (drift, expiry and a person's request replace nodes for other reasons);
saved from the moment it completed. One function per question, so the ledger, the chart and the tables agree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.disruption.types import EMPTY, UNDERUTILIZED
from provisioner.labels import PRICE

CONSOLIDATION_REASONS = (EMPTY, UNDERUTILIZED)


def claim_price(claim: Mapping[str, Any]) -> float:
    """The offering price a NodeClaim launched at ($/h), 0 until it has launched."""
    return float((claim["metadata"].get("annotations") or {}).get(PRICE, 0) or 0)


@dataclass(frozen=True)
class NetSavings:
    """$/h: what the command's nodes cost, what it launched in their place (as launched, or its estimate until
    then), what the provisioner launched for the pods it evicted, and what is left."""

    candidates: float
    replacements: float
    caused: float
    estimated: float  # the command's own estimate when it was planned (Karpenter's EstimatedSavings)

    @property
    def net(self) -> float:
        return self.candidates - self.replacements - self.caused


def counts_as_savings(command: Mapping[str, Any]) -> bool:
    return command["spec"].get("reason") in CONSOLIDATION_REASONS


def net_savings(command: Mapping[str, Any]) -> NetSavings:
    spec, status = command["spec"], command.get("status") or {}
    estimated_launch = sum(float((r.get("prices") or [0])[0]) for r in spec.get("replacements") or [])
    launched = status.get("launchedPrices")
    return NetSavings(
        candidates=sum(float(c.get("price") or 0) for c in spec.get("candidates") or []),
        replacements=sum(float(p) for p in launched.values()) if launched else estimated_launch,
        caused=sum(float(p) for p in (status.get("causedLaunches") or {}).values()),
        estimated=float(spec.get("savings") or 0),
    )


def saving_by_nodepool(command: Mapping[str, Any]) -> dict[str, float]:
    """The $/h an executed consolidation command saves now, split over its candidates' NodePools in proportion to
    their price (Balanced's attribution of a move across pools); nothing for any other command."""
    status = command.get("status") or {}
    if status.get("phase") != "Succeeded" or not status.get("completedAt") or not counts_as_savings(command):
        return {}
    net = net_savings(command)
    prices: dict[str, float] = {}
    for candidate in command["spec"].get("candidates") or []:
        pool = candidate.get("nodepool") or ""
        prices[pool] = prices.get(pool, 0.0) + float(candidate.get("price") or 0)
    if not prices:
        pools = command["spec"].get("nodepools") or [""]
        return {pools[0]: net.net}
    total = sum(prices.values())
    return {
        pool: net.net * (price / total) if total > 0 else net.net / len(prices)
        for pool, price in sorted(prices.items())
    }
