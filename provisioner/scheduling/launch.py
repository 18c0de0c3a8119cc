"""Which type and offering a planned NodeClaim launches as: the cloud provider's cheapest-offering choice."""

from __future__ import annotations

import random
from dataclasses import dataclass

from provisioner.catalog import InstanceType, Offering
from provisioner.scheduling.results import NodeClaimPlan


@dataclass(frozen=True)
class Launch:
    instance_type: InstanceType
    offering: Offering

    @property
    def price(self) -> float:
        return self.offering.price


def cheapest_launch(plan: NodeClaimPlan, rng: random.Random) -> Launch:
    """Karpenter's kwok Create: types in name order, keep a type only if strictly cheaper than the best so far,
    and pick a random offering among the cheapest of that type (so spot wins when allowed, zones spread)."""
    best: Launch | None = None
    for option in sorted(plan.options, key=lambda o: o.instance_type.name):
        offerings = option.instance_type.compatible_offerings(plan.requirements)
        if not offerings:
            continue
        price = min(o.price for o in offerings)
        if best is None or price < best.price:
            cheapest = [o for o in offerings if o.price == price]
            best = Launch(option.instance_type, cheapest[rng.randrange(len(cheapest))])
    if best is None:
        raise ValueError("the NodeClaim has no instance type with an available offering")
    return best
