"""Capacity reservations during one simulation (Karpenter's ReservationManager): a planned NodeClaim that may launch
into a reserved offering holds one instance of that reservation, so no two NodeClaims count on the same instance."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from provisioner.catalog import InstanceType, Offering

# Karpenter's ReservedOfferingMode: provisioning is Strict (a pod that could go to reserved capacity but finds none
# left waits for the next simulation, rather than falling back to on-demand or spot); disruption's simulations fall
# back.
RESERVATION_STRICT, RESERVATION_FALLBACK = "Strict", "Fallback"
CANNOT_RESERVE = (
    "one or more instance types with compatible reserved offerings are available, but could not be reserved"
)
ALL_FULL = "all compatible reserved offerings are full and no on-demand or spot fallback is available"
FALLING_THROUGH = "the only compatible reserved offering is full; falling through to other NodePools"
WOULD_REMOVE = "satisfying updated nodeclaim constraints would remove all compatible reserved offering options"


class ReservationManager:
    def __init__(self, instance_types: Iterable[Sequence[InstanceType]]) -> None:
        # reservation id -> instances left; with several offerings of one reservation (NodePools sharing it), the
        # least capacity any of them reports.
        self.capacity: dict[str, int] = {}
        for types in instance_types:
            for it in types:
                for offering in it.offerings:
                    if offering.reserved:
                        current = self.capacity.get(offering.reservation_id)
                        if current is None or current > offering.reservation_capacity:
                            self.capacity[offering.reservation_id] = offering.reservation_capacity
        self.reservations: dict[str, set[str]] = {}  # hostname -> reservation ids it holds

    def can_reserve(self, hostname: str, offering: Offering) -> bool:
        if offering.reservation_id in self.reservations.get(hostname, ()):
            return True
        if offering.reservation_id not in self.capacity:
            # Karpenter panics (reservationmanager.go:65): the manager is seeded from every offering the simulation
            # can pick, so an unknown reservation is a bug in the caller, not an answer of "no".
            raise ValueError(
                f'attempted to reserve non-existent offering with reservation id "{offering.reservation_id}"'
            )
        return self.capacity[offering.reservation_id] > 0

    def reserve(self, hostname: str, offerings: Iterable[Offering]) -> None:
        held = self.reservations.setdefault(hostname, set())
        for offering in offerings:
            if offering.reservation_id in held:
                continue
            if self.capacity.get(offering.reservation_id, 0) <= 0:
                raise ValueError(f"reservation {offering.reservation_id!r} has no capacity left to reserve")
            self.capacity[offering.reservation_id] -= 1
            held.add(offering.reservation_id)

    def release(self, hostname: str, offerings: Iterable[Offering]) -> None:
        held = self.reservations.get(hostname, set())
        for offering in offerings:
            if offering.reservation_id in held:
                held.discard(offering.reservation_id)
                self.capacity[offering.reservation_id] += 1

    def remaining(self, reservation_id: str) -> int:
        return self.capacity.get(reservation_id, 0)
