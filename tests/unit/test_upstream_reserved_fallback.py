"""Karpenter v1.15.0's pkg/controllers/provisioning/scheduling/reserved_fallback_test.go ported onto karpui's
scheduler, each test naming the It it follows (Describe("Reserved Instance Types/Full-but-available (capacity-
availability decoupled)")).

A reserved offering that is Available but whose reservation is full (ReservationCapacity 0) is treated as
non-reservable: provisioning (Strict, DisableReservedCapacityFallback) falls back to on-demand or spot when the
NodePool allows them and defers (a ReservedOfferingError, karpui's "reserved-capacity" reason) when it does not;
disruption's simulations (Fallback) fail the NodePool with a plain error so the pod falls through to a lower-weight
NodePool. Go's prov.NewScheduler + Solve is `schedule`; ExpectProvisioned's node labels are the NodeClaim plan's
pinned requirements. Skipped: Context("CreditReservationCapacity (terminate-first feasibility pass)") ("schedules onto
a full reservation once a slot is credited back (strict)", "credits only the granted number of slots"): karpui's
disruption has no terminate-first pass, so its scheduler takes no reservation credit.
"""

from __future__ import annotations

from provisioner import labels as wk
from provisioner.catalog import InstanceType, Offering
from provisioner.scheduling.reservations import RESERVATION_FALLBACK, RESERVATION_STRICT
from provisioner.scheduling.results import RESERVED, SchedulingResult
from tests.builders import instance_type, nodepool, pod, req, schedule

CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
FULL_MESSAGE = "the only compatible reserved offering is full; falling through to other NodePools"
FULL_STRICT_MESSAGE = "all compatible reserved offerings are full and no on-demand or spot fallback is available"


def reserved_type(reservation: str, *, available: bool = True, capacity: int) -> list[InstanceType]:
    """newReservedType(reservedOffering(id, available, capacity)): fake.NewInstanceType's 4 CPU, 4Gi type with its
    default on-demand and spot offerings and one reserved offering in test-zone-1 at 0.001."""
    it = instance_type("reserved-type", "4", "4Gi")
    extra = Offering(
        "test-zone-1",
        "reserved",
        0.001,
        available=available,
        reservation_id=reservation,
        reservation_capacity=capacity,
    )
    return [InstanceType(it.name, it.capacity, (*it.offerings, extra), it.labels, it.overhead)]


def reserved_only_pool(name: str = "default", weight: int | None = None):
    """reservedOnlyNodePool("reserved-type")."""
    return nodepool(
        name,
        req(INSTANCE_TYPE, "In", "reserved-type"),
        req(CAPACITY_TYPE, "In", "reserved"),
        weight=weight,
    )


def mixed_pool():
    """A NodePool on reserved-type allowing every capacity type."""
    return nodepool("default", req(INSTANCE_TYPE, "In", "reserved-type"))


def on_demand_pool():
    """onDemandNodePool("reserved-type"): weight 1, on-demand only."""
    return nodepool(
        "on-demand",
        req(INSTANCE_TYPE, "In", "reserved-type"),
        req(CAPACITY_TYPE, "In", "on-demand"),
        weight=1,
    )


def small_pod():
    return pod("100m")


def solve(pods, pools, types, mode: str) -> SchedulingResult:
    return schedule(pods, pools=pools, types=types, reserved_capacity=True, reservation_mode=mode)


def test_fallback_a_full_reservation_with_no_fallback_yields_no_nodeclaim():
    """It("fallback: a full reservation with no fallback yields no NodeClaim (pod falls through / pends, not a phantom
    reserved NodeClaim)"): a plain error, not a ReservedOfferingError."""
    p = small_pod()
    result = solve([p], [reserved_only_pool()], reserved_type("r-full", capacity=0), RESERVATION_FALLBACK)
    assert result.new_nodeclaims == []
    [reason] = result.failures[p.id].reasons
    assert (reason.nodepool, reason.kind, reason.message) == ("default", "reservation-full", FULL_MESSAGE)
    assert reason.kind != RESERVED


def test_fallback_a_reservation_that_still_has_capacity_is_reserved_normally():
    """It("fallback: a reservation that still has capacity is reserved normally (regression guard)")."""
    result = solve([small_pod()], [reserved_only_pool()], reserved_type("r-has-cap", capacity=3), RESERVATION_FALLBACK)
    [claim] = result.new_nodeclaims
    assert "reserved" in claim.requirements[CAPACITY_TYPE].values
    assert claim.requirements[wk.RESERVATION_ID].values == frozenset({"r-has-cap"})


def test_a_reservation_marked_unavailable_is_skipped_even_when_it_reports_capacity():
    """It("a reservation marked unavailable is skipped even when it reports capacity (Available=false
    respected)")."""
    p = small_pod()
    types = reserved_type("r-unavail", available=False, capacity=5)
    result = solve([p], [reserved_only_pool()], types, RESERVATION_FALLBACK)
    assert result.new_nodeclaims == []
    assert p.id in result.failures


def test_strict_a_full_but_available_reservation_does_not_block_scheduling_and_holds_no_reservation():
    """It("strict (provisioning): a full-but-available reservation does not block scheduling and holds no
    reservation")."""
    p = small_pod()
    result = solve([p], [mixed_pool()], reserved_type("r-full", capacity=0), RESERVATION_STRICT)
    assert p.id not in result.failures
    [claim] = result.new_nodeclaims
    assert wk.RESERVATION_ID not in claim.requirements
    assert "on-demand" in claim.requirements[CAPACITY_TYPE].values


def test_strict_a_reserved_only_pool_with_a_full_reservation_defers_instead_of_launching_on_demand():
    """It("strict (provisioning): a reserved-only pool with a full reservation defers instead of launching
    on-demand")."""
    p = small_pod()
    result = solve([p], [reserved_only_pool()], reserved_type("r-full", capacity=0), RESERVATION_STRICT)
    assert result.new_nodeclaims == []
    [reason] = result.failures[p.id].reasons
    assert (reason.kind, reason.message) == (RESERVED, FULL_STRICT_MESSAGE)


def test_strict_a_reservation_with_capacity_is_preferred_over_on_demand():
    """It("strict (provisioning): a reservation with capacity is preferred over on-demand (regression guard)"): the
    NodeClaim is pinned to the reservation, so its node is reserved in r-has-cap."""
    result = solve([small_pod()], [mixed_pool()], reserved_type("r-has-cap", capacity=1), RESERVATION_STRICT)
    [claim] = result.new_nodeclaims
    assert claim.requirements[CAPACITY_TYPE].values == frozenset({"reserved"})
    assert claim.requirements[wk.RESERVATION_ID].values == frozenset({"r-has-cap"})
    assert claim.options[0].instance_type.name == "reserved-type"


def test_fallback_falls_through_to_a_lower_weight_on_demand_nodepool_when_the_reservation_is_full():
    """Context("fallback: full reservation falls through across NodePools") It("falls through to a lower-weight
    on-demand NodePool when the higher-weight reserved NodePool's reservation is full")."""
    p = small_pod()
    pools = [reserved_only_pool("reserved", weight=100), on_demand_pool()]
    result = solve([p], pools, reserved_type("r-full", capacity=0), RESERVATION_FALLBACK)
    assert p.id not in result.failures
    [claim] = result.new_nodeclaims
    assert claim.nodepool == "on-demand"
    assert claim.requirements[CAPACITY_TYPE].values == frozenset({"on-demand"})
