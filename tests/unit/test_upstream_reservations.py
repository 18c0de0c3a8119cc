"""Karpenter v1.15.0's ReservationManager suite (pkg/controllers/provisioning/scheduling/reservationmanager_test.go)
ported onto karpui's ReservationManager, each test naming the It it follows.

Three reserved instance types as the Go suite's BeforeEach makes them: small (3 instances left), medium (2) and large
(1), each with one reserved offering whose reservation id is the type's name. Go's HasReservation is read from the
manager's `reservations`; its panics are karpui's ValueErrors. Already covered in test_reserved_capacity.py
(test_a_reservation_is_held_once_per_nodeclaim_and_given_back): "should return true when capacity is available",
"... when hostname already has the reservation", "... false when capacity is exhausted", "... true for existing
hostname even when capacity is exhausted", "should not double-reserve ...", "should panic when trying to
over-reserve", "should handle releasing non-existent reservations gracefully".
"""

from __future__ import annotations

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.scheduling.reservations import ReservationManager
from tests.builders import instance_type


def _reserved(name: str, cpu: str, memory: str, pods: int, zone: str, capacity: int) -> InstanceType:
    it = instance_type(name, cpu, memory, pods=pods)
    offering = Offering(zone, "reserved", 1.0, reservation_id=name, reservation_capacity=capacity)
    return InstanceType(it.name, it.capacity, (offering,), it.labels, it.overhead)


SMALL = _reserved("small-reserved", "2", "4Gi", 10, "test-zone-1", 3)
MEDIUM = _reserved("medium-reserved", "4", "8Gi", 20, "test-zone-2", 2)
LARGE = _reserved("large-reserved", "8", "16Gi", 40, "test-zone-3", 1)
THREE, TWO, ONE = SMALL.offerings[0], MEDIUM.offerings[0], LARGE.offerings[0]
MISSING = Offering("test-zone-1", "reserved", 1.0, reservation_id="i-dont-exist", reservation_capacity=1)


@pytest.fixture
def rm() -> ReservationManager:
    return ReservationManager([[SMALL, MEDIUM, LARGE]])


def has(rm: ReservationManager, hostname: str, offering: Offering) -> bool:
    return offering.reservation_id in rm.reservations.get(hostname, set())


def test_can_reserve_error_cases_should_panic_with_non_existent_reservation_id(rm):
    with pytest.raises(
        ValueError, match='attempted to reserve non-existent offering with reservation id "i-dont-exist"'
    ):
        rm.can_reserve("hostname-1", MISSING)


def test_reserve_should_successfully_reserve_capacity_and_decrement_available_capacity(rm):
    """ "should successfully reserve capacity" and "should decrement available capacity"."""
    rm.reserve("hostname-1", [THREE])
    assert has(rm, "hostname-1", THREE)
    assert rm.remaining("small-reserved") == 2


def test_reserve_multiple_reservations_should_handle_multiple_offerings_in_a_single_call(rm):
    rm.reserve("hostname-1", [THREE, TWO])
    assert has(rm, "hostname-1", THREE) and has(rm, "hostname-1", TWO)


def test_reserve_multiple_reservations_should_handle_mixed_new_and_existing_reservations(rm):
    rm.reserve("hostname-1", [TWO])
    rm.reserve("hostname-1", [TWO, ONE])
    assert has(rm, "hostname-1", TWO) and has(rm, "hostname-1", ONE)
    assert rm.can_reserve("hostname-2", TWO)


def test_reserve_error_cases_should_panic_with_non_existent_reservation_id(rm):
    with pytest.raises(ValueError):
        rm.reserve("hostname-1", [MISSING])


def test_release_should_release_a_single_reservation(rm):
    rm.reserve("hostname-1", [THREE])
    rm.release("hostname-1", [THREE])
    assert not has(rm, "hostname-1", THREE)


def test_release_should_handle_releasing_from_non_existent_hostname_gracefully(rm):
    rm.reserve("hostname-1", [THREE])
    rm.release("hostname-2", [THREE])
    assert rm.remaining("small-reserved") == 2


def test_release_multiple_releases_should_handle_multiple_offerings_in_a_single_call(rm):
    rm.reserve("hostname-1", [THREE, TWO])
    rm.release("hostname-1", [THREE, TWO])
    assert not has(rm, "hostname-1", THREE) and not has(rm, "hostname-1", TWO)


def test_release_multiple_releases_should_handle_partial_releases(rm):
    rm.reserve("hostname-1", [THREE, TWO])
    rm.release("hostname-1", [THREE])
    assert not has(rm, "hostname-1", THREE) and has(rm, "hostname-1", TWO)


def test_release_capacity_restoration_should_restore_capacity_when_releasing_reservations(rm):
    for host in ("hostname-1", "hostname-2", "hostname-3"):
        rm.reserve(host, [THREE])
    assert rm.remaining("small-reserved") == 0
    rm.release("hostname-1", [THREE])
    assert rm.remaining("small-reserved") == 1


def test_release_capacity_restoration_should_correctly_track_capacity_after_multiple_reserve_release_cycles(rm):
    rm.reserve("hostname-1", [THREE])
    rm.release("hostname-1", [THREE])
    rm.reserve("hostname-2", [THREE])
    assert rm.remaining("small-reserved") == 2


def test_integration_scenarios_should_handle_complex_reservation_patterns(rm):
    rm.reserve("host-1", [TWO, THREE])
    rm.reserve("host-2", [TWO, ONE])
    rm.reserve("host-3", [THREE])
    assert has(rm, "host-1", THREE) and has(rm, "host-1", TWO)
    assert has(rm, "host-2", TWO) and has(rm, "host-2", ONE)
    assert has(rm, "host-3", THREE)
    assert (rm.remaining("medium-reserved"), rm.remaining("small-reserved"), rm.remaining("large-reserved")) == (
        0,
        1,
        0,
    )


def test_integration_scenarios_should_maintain_consistency_during_mixed_operations(rm):
    rm.reserve("host-1", [TWO, THREE])
    rm.reserve("host-2", [THREE, ONE])
    rm.release("host-1", [TWO])
    rm.reserve("host-3", [TWO])
    rm.release("host-2", [ONE])
    assert not has(rm, "host-1", TWO) and has(rm, "host-1", THREE)
    assert has(rm, "host-2", THREE) and not has(rm, "host-2", ONE)
    assert has(rm, "host-3", TWO)
    assert (rm.remaining("medium-reserved"), rm.remaining("small-reserved"), rm.remaining("large-reserved")) == (
        1,
        1,
        1,
    )
