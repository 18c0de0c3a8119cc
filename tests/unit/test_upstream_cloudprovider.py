"""Karpenter v1.15.0's cloud provider contract suite ported onto karpui's InstanceType and Offering.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/cloudprovider: suite_test.go (Describe "Instance Type", Context
"AdjustedPrice"), launchable_test.go (Describe "Offering Launchability") and repair_action_test.go (Describe
"RepairAction"). Each test names the It (or DescribeTable Entry) it follows. Quantities are karpui's milli-units.
"""

from __future__ import annotations

import pytest

from provisioner import labels as wk
from provisioner.catalog.instance_type import InstanceType, Offering, Overhead, order_by_price
from provisioner.disruption.consolidation import worst_launch_price
from provisioner.overlays import adjusted_price
from provisioner.quantity import MILLI, parse_quantity
from provisioner.repairpolicies import REBOOT_NODE, REPLACE_NODE, more_disruptive
from provisioner.requirements import Requirements

Gi = 2**30 * MILLI


def q(text: str) -> int:
    return parse_quantity(text)


# Describe("Instance Type") -------------------------------------------------------------------------------------------


def hugepages_type(hugepages_2mi: str) -> InstanceType:
    return InstanceType(
        name="hugepages",
        capacity={
            "cpu": q("5"),
            "memory": q("20Gi"),
            "ephemeral-storage": q("100Gi"),
            "pods": q("57"),
            "hugepages-2Mi": q(hugepages_2mi),
            "hugepages-1Gi": q("10Gi"),
        },
        offerings=(),
        overhead=Overhead(kube_reserved={"cpu": q("125m"), "memory": q("1Gi")}),
    )


def test_should_reserve_additional_capacity_memory_for_when_hugepages_is_defined_resources() -> None:
    allocatable = hugepages_type("5Gi").allocatable
    assert allocatable["memory"] == 4 * Gi  # 20Gi - 1Gi kube-reserved - 5Gi - 10Gi of hugepages
    assert allocatable["cpu"] == 4875


def test_should_set_memory_to_zero_for_when_hugepages_use_all_the_memory_on_the_instance_type() -> None:
    allocatable = hugepages_type("50Gi").allocatable
    assert allocatable["memory"] == 0
    assert allocatable["cpu"] == 4875


def test_should_compute_a_single_allocatable_when_no_offerings_have_overrides() -> None:
    it = InstanceType(
        name="plain",
        capacity={"cpu": q("4"), "memory": q("16Gi"), "pods": q("110")},
        offerings=(Offering("test-zone-1", "on-demand", 1.0), Offering("test-zone-2", "on-demand", 1.0)),
        overhead=Overhead(kube_reserved={"cpu": q("100m"), "memory": q("1Gi")}),
    )
    assert it.allocatable == {"cpu": 3900, "memory": 15 * Gi, "pods": 110 * MILLI}


# Context("AdjustedPrice") --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "price", "expected"),
    [
        pytest.param("-10%", 10.0, 9.0, id="10% decrease"),
        pytest.param("+10%", 10.0, 11.0, id="10% increase"),
        pytest.param("-50%", 10.0, 5.0, id="50% decrease"),
        pytest.param("+100%", 10.0, 20.0, id="100% increase"),
        pytest.param("-100%", 10.0, 0.0, id="Zero price -100%"),
        pytest.param("-200%", 10.0, 0.0, id="Zero price -200%"),
        pytest.param("-25%", 1.5, 1.125, id="Fractional price -25%"),
        pytest.param("+0", 10.0, 10.0, id="No change"),
        pytest.param("+5", 10.0, 15.0, id="Add 5"),
        pytest.param("-2.5", 10.0, 7.5, id="Subtract 2.5"),
        pytest.param("-10", 10.0, 0.0, id="Subtract to zero"),
        pytest.param("-15", 10.0, 0.0, id="Negative Result"),
        pytest.param("+0.75", 1.25, 2.0, id="Fractional price +0.75"),
        pytest.param("+100", 0.001, 100.001, id="Large price adjustment"),
        pytest.param("+0.0001", 0.0001, 0.0002, id="Small price adjustment"),
    ],
)
def test_should_adjust_price_based_overlay_values(change: str, price: float, expected: float) -> None:
    """DescribeTable("should adjust price based overlay values"): Go compares with ==, so exactly."""
    assert adjusted_price(price, change) == expected


def test_should_override_price() -> None:
    assert adjusted_price(82781.0, "80.0") == 80.0


def test_should_provide_the_same_if_price_or_price_adjustment_is_not_provided() -> None:
    assert adjusted_price(82781.0, "") == 82781.0


# Describe("Offering Launchability") (launchable_test.go) -------------------------------------------------------------


def reserved_offering(available: bool, capacity: int) -> Offering:
    return Offering(
        "test-zone-1",
        wk.CAPACITY_TYPE_RESERVED,
        0.001,
        available=available,
        reservation_id="r-1",
        reservation_capacity=capacity,
    )


def on_demand_offering(price: float, available: bool = True) -> Offering:
    return Offering("test-zone-1", "on-demand", price, available=available)


def bare(name: str, *offerings: Offering) -> InstanceType:
    return InstanceType(name=name, capacity={}, offerings=offerings)


def test_launchable_requires_reservation_capacity_for_reserved_offerings() -> None:
    assert reserved_offering(True, 0).launchable is False  # a full reservation is available but not launchable
    assert reserved_offering(True, 3).launchable is True
    assert reserved_offering(False, 3).launchable is False


def test_launchable_equals_available_for_non_reserved_offerings() -> None:
    assert on_demand_offering(1.0).launchable is True
    assert on_demand_offering(1.0, available=False).launchable is False


def test_offerings_launchable_filters_out_full_reservations_but_keeps_on_demand() -> None:
    launchable = [o for o in (reserved_offering(True, 0), on_demand_offering(1.0)) if o.launchable]
    assert [o.capacity_type for o in launchable] == ["on-demand"]


def test_worst_launch_price_off_launchable_ignores_a_full_reservations_near_zero_price() -> None:
    """Karpenter prices RemoveInstanceTypeOptionsByPriceAndMinValues off Launchable().WorstLaunchPrice, which is
    karpui's worst_launch_price: the full reservation's 0.001 does not count, the on-demand 1.0 does."""
    it = bare("mixed", reserved_offering(True, 0), on_demand_offering(1.0))
    assert worst_launch_price(it, None, None) == 1.0
    # with capacity left the reservation is the tier it would launch into
    assert worst_launch_price(bare("mixed", reserved_offering(True, 3), on_demand_offering(1.0)), None, None) == 0.001


def test_order_by_price_does_not_rank_an_instance_type_cheap_on_a_full_reservation_it_cant_launch_into() -> None:
    phantom = bare("phantom-cheap", reserved_offering(True, 0), on_demand_offering(2.0))
    genuine = bare("genuine-cheap", on_demand_offering(1.0))
    ordered = order_by_price([phantom, genuine], Requirements())
    assert [it.name for it in ordered] == ["genuine-cheap", "phantom-cheap"]


# Describe("RepairAction") (repair_action_test.go) --------------------------------------------------------------------


def test_should_rank_replacement_as_more_disruptive_than_reboot() -> None:
    assert more_disruptive(REPLACE_NODE, REBOOT_NODE) is True
    assert more_disruptive(REBOOT_NODE, REPLACE_NODE) is False
    assert more_disruptive(REPLACE_NODE, REPLACE_NODE) is False


def test_should_panic_on_an_unsupported_action() -> None:
    with pytest.raises(ValueError, match='unsupported repair action "Unknown"'):
        more_disruptive("Unknown", REPLACE_NODE)
