"""Karpenter v1.15.0's device allocation state suite ported onto karpui's allocated_devices.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/dynamicresources/deviceallocation/suite_test.go (Describe
"DeviceAllocation Controller"); each test names the Describe and It it follows. The controller keeps its state
incrementally, one reconcile per claim; karpui computes the same state from the claims that exist, so a Go
apply/delete/reconcile sequence is here the same changes to a set of claims (`Claims`), read after each step the Go
test reads. Then how provisioning uses the state (gatherAllocatedDevices, provisioning/dra.go:94), and the cases of
pkg/scheduling/dynamicresources/request_test.go (Describe "ValidateClaimRequest", "All mode", "FirstAvailable",
"DeviceMatchesSelectors") and types_test.go (Describe "ResourceSlice Interface") that karpui's claim reading,
unsupported_claim, allocate, selectors and device conversions model.
"""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.catalog.instance_type import InstanceType
from provisioner.cluster.dra import published, unsupported_claim
from provisioner.cluster.memory import ObjectStore
from provisioner.dra.allocations import Contribution, DeviceMetadata, allocated_devices, held_devices
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceRequest, _selected, allocate, requests_from_claim_spec
from provisioner.manifests.errors import ManifestError
from provisioner.quantity import parse_quantity
from provisioner.scheduling.typeindex import declared_devices

DRIVER, POOL = "driver.example.com", "pool-a"


def device_id(device: str) -> tuple[str, str, str]:
    return (DRIVER, POOL, device)


def device_result(device: str, capacity: dict[str, str] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "request", "driver": DRIVER, "pool": POOL, "device": device}
    if capacity is not None:
        result["consumedCapacity"] = capacity
    return result


def resource_claim(name: str, *results: dict[str, Any], reserved_for: tuple[dict[str, str], ...] = ()) -> dict:
    """suite_test.go's resourceClaim (and withReservedFor): a claim in "default" with one request named "request"."""
    status: dict[str, Any] = {}
    if results:
        status["allocation"] = {"devices": {"results": list(results)}}
    if reserved_for:
        status["reservedFor"] = list(reserved_for)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "request", "exactly": {"deviceClassName": "test-class"}}]}},
        "status": status,
    }


def pod_ref(name: str, uid: str) -> dict[str, str]:
    return {"resource": "pods", "name": name, "uid": uid}


def non_pod_ref() -> dict[str, str]:
    return {"apiGroup": "example.com", "resource": "services", "name": "svc-a", "uid": "uid-svc"}


def capacity(**quantities: str) -> dict[str, int]:
    return {name: parse_quantity(q) for name, q in quantities.items()}


class Claims:
    """The cluster's ResourceClaims, by name."""

    def __init__(self, *claims: dict) -> None:
        self.by_name: dict[str, dict] = {}
        self.apply(*claims)

    def apply(self, *claims: dict) -> None:
        for claim in claims:
            self.by_name[claim["metadata"]["name"]] = claim

    def delete(self, claim: dict) -> None:
        del self.by_name[claim["metadata"]["name"]]

    def devices(self) -> dict[tuple[str, str, str], DeviceMetadata]:
        return allocated_devices(self.by_name.values())


def only(*ids: str) -> dict[tuple[str, str, str], DeviceMetadata]:
    """suite_test.go's expectedDevices: zero-value metadata for each device."""
    return {device_id(i): DeviceMetadata() for i in ids}


# Describe("Hydration") -----------------------------------------------------------------------------------------------


def test_hydration_includes_devices_from_resource_claims_that_existed_before_the_first_reconcile() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0")), resource_claim("claim-b", device_result("device-1"))
    )
    assert claims.devices() == only("device-0", "device-1")


def test_hydration_returns_a_copy_that_is_not_affected_by_subsequent_reconciliations() -> None:
    claims = Claims(resource_claim("claim-a", device_result("device-0")))
    snapshot = claims.devices()
    claims.apply(resource_claim("claim-b", device_result("device-1")))
    assert claims.devices() == only("device-0", "device-1")
    assert snapshot == only("device-0")


# Describe("Basic allocation") ----------------------------------------------------------------------------------------


def test_basic_returns_an_empty_set_when_a_claim_has_no_allocation() -> None:
    assert Claims(resource_claim("no-alloc-claim")).devices() == {}


def test_basic_returns_a_single_device_from_a_resource_claim_with_one_allocation() -> None:
    assert Claims(resource_claim("single-claim", device_result("device-0"))).devices() == only("device-0")


def test_basic_returns_all_devices_from_a_resource_claim_with_multiple_allocations() -> None:
    claim = resource_claim("multi-device-claim", device_result("device-0"), device_result("device-1"))
    assert Claims(claim).devices() == only("device-0", "device-1")


def test_basic_returns_the_union_of_distinct_devices_across_multiple_resource_claims() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0")), resource_claim("claim-b", device_result("device-1"))
    )
    assert claims.devices() == only("device-0", "device-1")


def test_basic_returns_a_shared_device_only_once_when_multiple_resource_claims_allocate_it() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0")), resource_claim("claim-b", device_result("device-0"))
    )
    assert claims.devices() == only("device-0")


# Describe("Mutation") ------------------------------------------------------------------------------------------------


def test_mutation_removes_a_device_when_its_only_resource_claim_is_deleted() -> None:
    claim = resource_claim("single-claim", device_result("device-0"))
    claims = Claims(claim)
    claims.delete(claim)
    assert claims.devices() == {}


def test_mutation_removes_only_the_deleted_claims_devices_when_a_subset_of_claims_is_deleted() -> None:
    claim_a = resource_claim("claim-a", device_result("device-0"))
    claims = Claims(claim_a, resource_claim("claim-b", device_result("device-1")))
    claims.delete(claim_a)
    assert claims.devices() == only("device-1")


def test_mutation_does_not_remove_a_shared_device_when_one_of_multiple_claims_that_allocate_it_is_deleted() -> None:
    claim_a = resource_claim("claim-a", device_result("device-0"))
    claims = Claims(claim_a, resource_claim("claim-b", device_result("device-0")))
    claims.delete(claim_a)
    assert claims.devices() == only("device-0")


def test_mutation_removes_devices_when_a_claim_is_deleted_and_recreated_without_an_allocation() -> None:
    claims = Claims(resource_claim("claim-b", device_result("device-1")))
    claim = resource_claim("my-claim", device_result("device-0"), device_result("device-1"))
    claims.apply(claim)
    claims.delete(claim)
    claims.apply(resource_claim("my-claim"))
    assert claims.devices() == only("device-1")  # device-0 was my-claim's alone; claim-b still holds device-1


def test_mutation_replaces_devices_when_a_claim_is_deleted_and_recreated_with_a_different_allocation() -> None:
    claims = Claims(resource_claim("claim-b", device_result("device-1")))
    claim = resource_claim("my-claim", device_result("device-0"), device_result("device-1"))
    claims.apply(claim)
    claims.delete(claim)
    claims.apply(resource_claim("my-claim", device_result("device-1"), device_result("device-2")))
    assert claims.devices() == only("device-1", "device-2")


def test_mutation_removes_stale_devices_and_adds_new_ones_when_a_claim_is_recreated_with_different_devices() -> None:
    claim = resource_claim("claim-a", device_result("device-0"), device_result("device-1"))
    claims = Claims(claim)
    claims.delete(claim)
    claims.apply(resource_claim("claim-a", device_result("device-1"), device_result("device-2")))
    assert set(claims.devices()) == {device_id("device-1"), device_id("device-2")}


def test_mutation_retains_a_shared_device_when_one_claim_drops_it_but_another_claim_still_references_it() -> None:
    claim_a = resource_claim("claim-a", device_result("device-0"), device_result("device-1"))
    claims = Claims(claim_a, resource_claim("claim-b", device_result("device-0")))
    claims.delete(claim_a)
    claims.apply(resource_claim("claim-a", device_result("device-1")))
    assert set(claims.devices()) == {device_id("device-0"), device_id("device-1")}


def test_mutation_clears_the_allocation_entirely_when_a_claims_allocation_is_set_to_nil() -> None:
    claim = resource_claim("claim-a", device_result("device-0"))
    claims = Claims(claim)
    claim["status"]["allocation"] = None
    claims.apply(claim)
    assert claims.devices() == {}


# Describe("Metadata") / Describe("Releasable") -----------------------------------------------------------------------


def test_releasable_is_true_when_a_claim_is_reserved_for_a_single_pod() -> None:
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)))
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=True, pod_uids=("uid-a",))


def test_releasable_is_true_when_a_claim_is_reserved_for_multiple_pods() -> None:
    reserved = (pod_ref("pod-a", "uid-a"), pod_ref("pod-b", "uid-b"))
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=reserved))
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=True, pod_uids=("uid-a", "uid-b"))


def test_releasable_is_true_when_two_claims_sharing_a_device_are_both_reserved_only_for_pods() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)),
        resource_claim("claim-b", device_result("device-0"), reserved_for=(pod_ref("pod-b", "uid-b"),)),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.releasable is True
    assert sorted(meta.pod_uids) == ["uid-a", "uid-b"]


def test_releasable_is_false_when_a_claim_has_an_empty_reserved_for() -> None:
    """KCM removes the allocation with the last reservation; if it has not, the device stays allocated."""
    claims = Claims(resource_claim("claim-a", device_result("device-0")))
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=False)


def test_releasable_is_false_when_a_claim_is_reserved_for_a_non_pod_consumer() -> None:
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=(non_pod_ref(),)))
    meta = claims.devices()[device_id("device-0")]
    assert meta.releasable is False
    assert meta.pod_uids == ()


def test_releasable_is_false_when_a_claim_is_reserved_for_a_mix_of_pod_and_non_pod_consumers() -> None:
    reserved = (pod_ref("pod-a", "uid-a"), non_pod_ref())
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=reserved))
    meta = claims.devices()[device_id("device-0")]
    assert meta.releasable is False
    assert meta.pod_uids == ("uid-a",)


def test_releasable_is_false_when_two_claims_share_a_device_and_one_has_a_non_pod_consumer() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)),
        resource_claim("claim-b", device_result("device-0"), reserved_for=(non_pod_ref(),)),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.releasable is False
    assert meta.pod_uids == ("uid-a",)


# Describe("Metadata") / Describe("Mutation") -------------------------------------------------------------------------


def test_metadata_becomes_releasable_when_a_claim_is_updated_from_non_pod_to_pod_only_reservation() -> None:
    claim = resource_claim("claim-a", device_result("device-0"), reserved_for=(non_pod_ref(),))
    claims = Claims(claim)
    assert claims.devices()[device_id("device-0")].releasable is False
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "pod-a", "uid": "uid-a"}]
    claims.apply(claim)
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=True, pod_uids=("uid-a",))


def test_metadata_becomes_releasable_when_the_only_non_pod_claim_sharing_a_device_is_deleted() -> None:
    claim_b = resource_claim("claim-b", device_result("device-0"), reserved_for=(non_pod_ref(),))
    claims = Claims(
        resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)), claim_b
    )
    assert claims.devices()[device_id("device-0")].releasable is False
    claims.delete(claim_b)
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=True, pod_uids=("uid-a",))


def test_metadata_becomes_non_releasable_when_a_claims_reservations_are_cleared() -> None:
    claim = resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),))
    claims = Claims(claim)
    assert claims.devices()[device_id("device-0")].releasable is True
    claim["status"]["reservedFor"] = None
    claims.apply(claim)
    assert claims.devices()[device_id("device-0")] == DeviceMetadata(releasable=False)


# Describe("Consumable Capacity") -------------------------------------------------------------------------------------


def shared_claim(name: str, device: str, uid: str | None = None, **quantities: str) -> dict:
    reserved = (pod_ref(f"pod-{uid[-1]}", uid),) if uid else ()
    return resource_claim(name, device_result(device, dict(quantities)), reserved_for=reserved)


def test_consumable_hydration_computes_shared_and_consumed_capacity_for_pre_existing_claims() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi"),
        shared_claim("claim-b", "device-0", "uid-b", memory="128Mi"),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.releasable is True
    assert sorted(meta.pod_uids) == ["uid-a", "uid-b"]
    assert meta.consumed_capacity == capacity(memory="384Mi")


def test_consumable_marks_a_device_as_shared_with_aggregated_consumed_capacity_when_a_claim_has_it() -> None:
    """It("marks a device as shared with aggregated consumed capacity when a claim has ConsumedCapacity")"""
    claims = Claims(shared_claim("claim-a", "device-0", "uid-a", memory="512Mi", connections="2"))
    meta = claims.devices()[device_id("device-0")]
    assert meta.releasable is True
    assert meta.pod_uids == ("uid-a",)
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="512Mi", connections="2")


def test_consumable_aggregates_consumed_capacity_across_multiple_claims_referencing_the_same_device() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi", connections="1"),
        shared_claim("claim-b", "device-0", "uid-b", memory="128Mi", connections="3"),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.releasable is True
    assert sorted(meta.pod_uids) == ["uid-a", "uid-b"]
    assert meta.consumed_capacity == capacity(memory="384Mi", connections="4")


def test_consumable_surfaces_per_claim_contributions_paired_with_their_reserving_pods() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi", connections="1"),
        shared_claim("claim-b", "device-0", "uid-b", memory="128Mi", connections="3"),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert sorted(meta.contributions, key=lambda c: c.pod_uids) == [
        Contribution(("uid-a",), capacity(memory="256Mi", connections="1")),
        Contribution(("uid-b",), capacity(memory="128Mi", connections="3")),
    ]


def test_consumable_does_not_mark_a_device_as_shared_when_consumed_capacity_is_nil() -> None:
    """It("does not mark a device as shared when ConsumedCapacity is nil (exclusive allocation)")"""
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)))
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is False
    assert meta.consumed_capacity is None
    assert meta.contributions == ()


def test_consumable_handles_a_mix_of_shared_and_exclusive_devices_in_the_same_claim() -> None:
    claim = resource_claim(
        "claim-a",
        device_result("shared-dev", {"slots": "4"}),
        device_result("exclusive-dev"),
        reserved_for=(pod_ref("pod-a", "uid-a"),),
    )
    devices = Claims(claim).devices()
    assert devices[device_id("shared-dev")].shared is True
    assert devices[device_id("shared-dev")].consumed_capacity == capacity(slots="4")
    assert devices[device_id("exclusive-dev")].shared is False
    assert devices[device_id("exclusive-dev")].consumed_capacity is None


def test_consumable_aggregates_capacity_with_partially_overlapping_keys_from_different_claims() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi", slots="2"),
        shared_claim("claim-b", "device-0", "uid-b", memory="128Mi", connections="1"),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="384Mi", slots="2", connections="1")


def test_consumable_aggregates_capacity_with_distinct_keys_from_different_claims() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi"),
        shared_claim("claim-b", "device-0", "uid-b", connections="5"),
    )
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="256Mi", connections="5")


def test_consumable_is_non_releasable_when_a_shared_device_has_empty_reserved_for() -> None:
    meta = Claims(shared_claim("claim-a", "device-0", memory="128Mi")).devices()[device_id("device-0")]
    assert meta.releasable is False
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="128Mi")


def test_consumable_is_non_releasable_with_capacity_when_a_shared_device_has_a_non_pod_consumer() -> None:
    claim = resource_claim("claim-a", device_result("device-0", {"memory": "256Mi"}), reserved_for=(non_pod_ref(),))
    meta = Claims(claim).devices()[device_id("device-0")]
    assert meta.releasable is False
    assert meta.shared is True
    assert meta.pod_uids == ()
    assert meta.consumed_capacity == capacity(memory="256Mi")


# Describe("Consumable Capacity") / Describe("Allocation Changes") ----------------------------------------------------


def test_allocation_changes_reduces_aggregated_capacity_when_one_of_multiple_shared_claims_is_deleted() -> None:
    claim_b = shared_claim("claim-b", "device-0", "uid-b", memory="128Mi")
    claims = Claims(shared_claim("claim-a", "device-0", "uid-a", memory="256Mi"), claim_b)
    claims.delete(claim_b)
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.pod_uids == ("uid-a",)
    assert meta.consumed_capacity == capacity(memory="256Mi")


def test_allocation_changes_removes_shared_device_entirely_when_all_claims_with_capacity_are_deleted() -> None:
    claim_a = shared_claim("claim-a", "device-0", "uid-a", memory="256Mi")
    claims = Claims(claim_a)
    claims.delete(claim_a)
    assert claims.devices() == {}


def test_allocation_changes_updates_capacity_when_a_claim_is_recreated_with_more_capacity_on_the_same_device() -> None:
    claim = shared_claim("claim-a", "device-0", "uid-a", memory="128Mi")
    claims = Claims(claim)
    claims.delete(claim)
    claims.apply(shared_claim("claim-a", "device-0", "uid-a", memory="512Mi"))
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="512Mi")


def test_allocation_changes_removes_stale_devices_when_a_claims_allocation_replaces_one_shared_device() -> None:
    """It("removes stale devices when a claim's allocation replaces one shared device with another")"""
    claim = shared_claim("claim-a", "device-0", "uid-a", slots="2")
    claims = Claims(claim)
    claims.delete(claim)
    claims.apply(shared_claim("claim-a", "device-1", "uid-a", slots="3"))
    devices = claims.devices()
    assert device_id("device-0") not in devices
    meta = devices[device_id("device-1")]
    assert meta.releasable is True
    assert meta.pod_uids == ("uid-a",)
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(slots="3")


def test_allocation_changes_transitions_a_device_from_shared_to_exclusive_when_all_capacity_claims_are_deleted() -> (
    None
):
    claim_b = shared_claim("claim-b", "device-0", "uid-b", memory="128Mi")
    claims = Claims(
        resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)), claim_b
    )
    assert claims.devices()[device_id("device-0")].shared is True
    claims.delete(claim_b)
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is False
    assert meta.consumed_capacity is None
    assert meta.releasable is True
    assert meta.pod_uids == ("uid-a",)


def test_allocation_changes_transitions_a_device_from_exclusive_to_shared_when_a_second_claim_with_capacity() -> None:
    """It("transitions a device from exclusive to shared when a second claim with capacity references it")"""
    claims = Claims(resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)))
    assert claims.devices()[device_id("device-0")].shared is False
    claims.apply(shared_claim("claim-b", "device-0", "uid-b", memory="128Mi"))
    meta = claims.devices()[device_id("device-0")]
    assert meta.shared is True
    assert meta.consumed_capacity == capacity(memory="128Mi")
    assert sorted(meta.pod_uids) == ["uid-a", "uid-b"]


# How provisioning reads the state: gatherAllocatedDevices (provisioning/dra.go:94-126) ---------------------------------


def test_gather_keeps_a_device_a_live_pod_holds_and_frees_one_only_deleting_pods_hold() -> None:
    claims = Claims(
        resource_claim("claim-a", device_result("device-0"), reserved_for=(pod_ref("pod-a", "uid-a"),)),
        resource_claim("claim-b", device_result("device-1"), reserved_for=(pod_ref("pod-b", "uid-b"),)),
        resource_claim("claim-c", device_result("device-2")),  # reserved by nobody: kept allocated to be safe
    )
    assert held_devices(claims.devices(), {"uid-b"}) == {device_id("device-0"), device_id("device-2")}
    assert held_devices(claims.devices(), set()) == {device_id(d) for d in ("device-0", "device-1", "device-2")}


def test_gather_frees_a_shared_device_once_every_contribution_left_belongs_to_deleting_pods() -> None:
    claims = Claims(
        shared_claim("claim-a", "device-0", "uid-a", memory="256Mi"),
        shared_claim("claim-b", "device-0", "uid-b", memory="128Mi"),
    )
    assert held_devices(claims.devices(), {"uid-b"}) == {device_id("device-0")}  # uid-a's 256Mi stays consumed
    assert held_devices(claims.devices(), {"uid-a", "uid-b"}) == set()
    # A live pod's claim without consumed capacity does not keep it held once the consumption left is all freed.
    claims.apply(resource_claim("claim-c", device_result("device-0"), reserved_for=(pod_ref("pod-c", "uid-c"),)))
    assert held_devices(claims.devices(), {"uid-a", "uid-b"}) == set()
    assert held_devices(claims.devices(), {"uid-b"}) == {device_id("device-0")}


# pkg/scheduling/dynamicresources/request_test.go: Describe("Request Validation") -------------------------------------
# karpui splits ValidateClaimRequest: requests_from_claim_spec reads a claim's requests as the API server validates
# them (a malformed request is refused when the claim is applied), unsupported_claim is what Karpenter's allocator
# then refuses, and a DeviceClass is looked up when allocating.


def claim_spec(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"devices": devices}


def exactly(name: str, count: int = 1, device_class: str = "empty-class", **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count, **extra}}


def sub(name: str, count: int) -> dict[str, Any]:
    return {"name": name, "deviceClassName": "empty-class", "count": count}


def refusal(spec: dict[str, Any]) -> str | None:
    """unsupported_claim for a pod referencing "test-claim" with `spec`."""
    store = ObjectStore(clock=lambda: 0.0)
    store.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "test-claim", "namespace": "default"},
            "spec": spec,
        }
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"containers": [], "resourceClaims": [{"name": "c", "resourceClaimName": "test-claim"}]},
    }
    return unsupported_claim(store, pod)


def test_validate_claim_request_should_validate_a_simple_exact_count_request() -> None:
    assert requests_from_claim_spec(claim_spec(exactly("gpu-req", 2)), "test-claim", "spec") == [
        DeviceRequest("test-claim", "gpu-req", "empty-class", count=2)
    ]
    assert refusal(claim_spec(exactly("gpu-req", 2))) is None


def test_validate_claim_request_should_validate_multiple_requests_in_a_single_claim() -> None:
    requests = requests_from_claim_spec(
        claim_spec(exactly("req-a", 2), exactly("req-b", 1, device_class="gpu")), "test-claim", "spec"
    )
    assert [(r.name, r.device_class, r.count) for r in requests] == [("req-a", "empty-class", 2), ("req-b", "gpu", 1)]


def test_validate_claim_request_should_validate_an_empty_claim_with_no_requests() -> None:
    assert requests_from_claim_spec({"devices": {}}, "test-claim", "spec") == []
    assert refusal({"devices": {}}) is None


def test_validate_claim_request_should_fail_when_a_request_has_neither_exactly_nor_first_available() -> None:
    with pytest.raises(ManifestError, match="one of exactly or firstAvailable is required"):
        requests_from_claim_spec(claim_spec({"name": "req"}), "test-claim", "spec")


def test_validate_claim_request_should_fail_when_a_request_has_an_empty_first_available_list() -> None:
    with pytest.raises(ManifestError, match="one of exactly or firstAvailable is required"):
        requests_from_claim_spec(claim_spec({"name": "req", "firstAvailable": []}), "test-claim", "spec")


def test_validate_claim_request_should_fail_when_a_request_has_a_non_cel_selector() -> None:
    with pytest.raises(ManifestError, match="Required value") as refused:
        requests_from_claim_spec(claim_spec(exactly("req", selectors=[{}])), "test-claim", "spec")
    assert refused.value.field == "spec.devices.requests[0].exactly.selectors[0].cel"


def test_validate_claim_request_should_fail_when_a_cel_expression_in_a_request_does_not_compile() -> None:
    bad = [{"cel": {"expression": "this is not valid CEL"}}]
    with pytest.raises(ManifestError, match="invalid CEL expression"):
        requests_from_claim_spec(claim_spec(exactly("req", selectors=bad)), "test-claim", "spec")


def test_validate_claim_request_should_fail_on_distinct_attribute_constraints() -> None:
    """It("should fail on DistinctAttribute constraints (not yet supported)")"""
    spec = claim_spec(constraints=[{"distinctAttribute": "gpu.example.com/numa-node"}])
    assert refusal(spec) == (
        'validating claim "test-claim": claim "test-claim": DistinctAttribute constraints not done yet'
    )


def test_validate_claim_request_should_fail_on_unsupported_constraint_types() -> None:
    spec = claim_spec(constraints=[{}])
    assert refusal(spec) == 'validating claim "test-claim": claim "test-claim": unsupported constraint type'


def test_validate_claim_request_should_succeed_when_total_devices_across_requests_equal_the_maximum() -> None:
    """It("should succeed when total devices across multiple requests equal AllocationResultsMaxSize")"""
    assert refusal(claim_spec(exactly("req-a", 16), exactly("req-b", 16))) is None


def test_validate_claim_request_should_fail_when_total_devices_across_requests_exceed_the_maximum() -> None:
    """It("should fail when total devices across multiple requests exceed AllocationResultsMaxSize")"""
    assert refusal(claim_spec(exactly("req-a", 16), exactly("req-b", 17))) == (
        'validating claim "test-claim": claim "test-claim" requests 33 total devices, exceeding maximum of 32'
    )


def test_first_available_should_use_the_min_device_count_across_sub_requests_for_the_upfront_limit_check() -> None:
    spec = claim_spec({"name": "gpu-req", "firstAvailable": [sub("h100", 4), sub("a100", 2)]}, exactly("other", 31))
    assert refusal(spec) == (
        'validating claim "test-claim": claim "test-claim" requests 33 total devices, exceeding maximum of 32'
    )


def test_first_available_should_pass_upfront_when_only_the_smaller_sub_request_fits_within_the_limit() -> None:
    spec = claim_spec({"name": "gpu-req", "firstAvailable": [sub("h100", 4), sub("a100", 2)]}, exactly("other", 30))
    assert refusal(spec) is None


def test_first_available_should_validate_multiple_sub_requests_preserving_priority_order() -> None:
    spec = claim_spec({"name": "gpu-req", "firstAvailable": [sub("h100", 4), sub("a100", 2)]})
    (request,) = requests_from_claim_spec(spec, "test-claim", "spec")
    assert [(r.name, r.count) for r in (request, *request.alternatives)] == [("gpu-req/h100", 4), ("gpu-req/a100", 2)]


def test_validate_claim_request_should_build_match_attribute_constraints_from_the_claim() -> None:
    spec = claim_spec(exactly("req-a"), constraints=[{"matchAttribute": "topology.kubernetes.io/zone"}])
    (request,) = requests_from_claim_spec(spec, "test-claim", "spec")
    assert request.match == ((0, "topology.kubernetes.io/zone"),)
    assert refusal(spec) is None


def test_validate_claim_request_should_build_match_attribute_constraints_scoped_to_specific_requests() -> None:
    constraint = {"requests": ["req-a"], "matchAttribute": "topology.kubernetes.io/zone"}
    spec = claim_spec(exactly("req-a"), exactly("req-b"), constraints=[constraint])
    assert [(r.name, r.match) for r in requests_from_claim_spec(spec, "test-claim", "spec")] == [
        ("req-a", ((0, "topology.kubernetes.io/zone"),)),
        ("req-b", ()),
    ]


def test_validate_claim_request_should_build_multiple_match_attribute_constraints() -> None:
    constraints = [{"matchAttribute": "topology.kubernetes.io/zone"}, {"matchAttribute": "topology.kubernetes.io/rack"}]
    (request,) = requests_from_claim_spec(claim_spec(exactly("req-a"), constraints=constraints), "test-claim", "spec")
    assert request.match == ((0, "topology.kubernetes.io/zone"), (1, "topology.kubernetes.io/rack"))


def test_first_available_should_fail_when_a_sub_request_has_an_invalid_cel_selector() -> None:
    bad = {**sub("h100", 1), "selectors": [{"cel": {"expression": "this is not valid CEL"}}]}
    with pytest.raises(ManifestError, match="invalid CEL expression") as refused:
        requests_from_claim_spec(claim_spec({"name": "gpu-req", "firstAvailable": [bad]}), "test-claim", "spec")
    assert refused.value.field == "spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression"


def test_first_available_should_fail_when_a_sub_request_has_a_non_cel_selector() -> None:
    bad = {**sub("h100", 1), "selectors": [{}]}
    with pytest.raises(ManifestError, match="Required value") as refused:
        requests_from_claim_spec(claim_spec({"name": "gpu-req", "firstAvailable": [bad]}), "test-claim", "spec")
    assert refused.value.field == "spec.devices.requests[0].firstAvailable[0].selectors[0].cel"


def test_first_available_should_validate_a_claim_with_both_exactly_and_first_available_requests() -> None:
    spec = claim_spec(exactly("exact-req", 2), {"name": "fa-req", "firstAvailable": [sub("h100", 3), sub("a100", 1)]})
    exact_req, fa_req = requests_from_claim_spec(spec, "test-claim", "spec")
    assert (exact_req.name, exact_req.count, exact_req.alternatives) == ("exact-req", 2, ())
    assert [(r.name, r.count) for r in (fa_req, *fa_req.alternatives)] == [("fa-req/h100", 3), ("fa-req/a100", 1)]


# Describe("DeviceMatchesSelectors"): karpui's claims._selected, every selector a CEL expression.

H100 = 'device.attributes["gpu.example.com"].model == "H100"'
MEMORY_OVER_40 = 'device.attributes["gpu.example.com"].memory > 40'


def gpu(**spec: Any) -> Device:
    return Device.from_spec({"name": "gpu-0", **spec}, "gpu.example.com", "pool")


def selected(selectors: list[str], device: Device) -> tuple[bool, list[str]]:
    errors: list[str] = []
    return _selected(selectors, device, errors), errors


def test_device_matches_selectors_should_match_a_device_with_matching_attributes() -> None:
    device = gpu(attributes={"gpu.example.com/model": {"string": "H100"}})
    assert selected([H100], device) == (True, [])


def test_device_matches_selectors_should_not_match_a_device_with_non_matching_attributes() -> None:
    device = gpu(attributes={"gpu.example.com/model": {"string": "A100"}})
    assert selected([H100], device) == (False, [])


def test_device_matches_selectors_should_match_when_all_selectors_pass() -> None:
    """It("should match when all selectors pass (AND semantics)")"""
    device = gpu(
        attributes={"gpu.example.com/model": {"string": "H100"}, "gpu.example.com/memory": {"int": 80}},
        capacity={"gpu.example.com/vram": {"value": "80Gi"}},
        allowMultipleAllocations=True,
    )
    selectors = [
        H100,
        MEMORY_OVER_40,
        'device.capacity["gpu.example.com"].vram.isGreaterThan(quantity("40Gi"))',
        "device.allowMultipleAllocations == true",
    ]
    assert selected(selectors, device) == (True, [])


def test_device_matches_selectors_should_not_match_when_any_selector_fails() -> None:
    """It("should not match when any selector fails (AND semantics)")"""
    device = gpu(attributes={"gpu.example.com/model": {"string": "H100"}, "gpu.example.com/memory": {"int": 20}})
    assert selected([H100, MEMORY_OVER_40], device) == (False, [])


def test_device_matches_selectors_should_match_with_empty_selectors() -> None:
    assert selected([], gpu()) == (True, [])


def test_device_matches_selectors_should_return_error_when_cel_expression_fails_to_compile() -> None:
    matched, errors = selected(["this is not valid CEL"], gpu())
    assert matched is False
    assert len(errors) == 1 and errors[0].startswith('device "gpu-0": invalid CEL expression: ')


def test_device_matches_selectors_should_not_match_when_capacity_selector_fails() -> None:
    device = gpu(capacity={"gpu.example.com/memory": {"value": "20Gi"}})
    selector = 'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))'
    assert selected([selector], device) == (False, [])


def test_device_matches_selectors_should_not_match_when_allow_multiple_allocations_is_false() -> None:
    device = Device.from_spec({"name": "exclusive-gpu"}, "gpu.example.com", "pool")
    assert selected(["device.allowMultipleAllocations == true"], device) == (False, [])


# Context("All mode"): template devices past the limit. Karpenter prunes an instance type whose All-mode devices
# would take the claim past 32; karpui's allocate refuses those devices, so the type (or node) cannot take the pod.

EMPTY_CLASS = {"empty-class": DeviceClass("empty-class")}


def template_devices(count: int) -> list[Device]:
    return [Device(f"dev-{i}", "gpu.example.com", "pool-tmpl") for i in range(count)]


def all_mode(name: str = "req") -> DeviceRequest:
    return DeviceRequest("test-claim", name, "empty-class", all=True)


def test_all_mode_should_prune_instance_types_whose_template_devices_would_exceed_the_maximum() -> None:
    """It("should prune instance types whose template devices would exceed AllocationResultsMaxSize"): a type with
    32 devices keeps them all, one with 33 is refused."""
    assert len(allocate([all_mode()], template_devices(32), EMPTY_CLASS)) == 32
    assert allocate([all_mode()], template_devices(33), EMPTY_CLASS) == (
        'cannot allocate request "req" of claim "test-claim" (DeviceClass empty-class): claim "test-claim" would '
        "hold 33 devices, exceeding maximum of 32"
    )


def test_all_mode_should_account_for_exact_count_devices_in_base_total_when_pruning_template_devices() -> None:
    """ExactCount NICs and All-mode GPUs of one claim count together: 22 + 10 fit, 25 + 10 do not."""
    classes = {
        "gpu": DeviceClass("gpu", ('device.driver == "gpu.example.com"',)),
        "nic": DeviceClass("nic", ('device.driver == "nic.example.com"',)),
    }
    gpus = DeviceRequest("test-claim", "all-req", "gpu", all=True)
    nics = DeviceRequest("test-claim", "exact-req", "nic", count=10)
    nic_devices = [Device(f"nic-{i}", "nic.example.com", "pool-tmpl") for i in range(10)]
    assert len(allocate([gpus, nics], [*template_devices(22), *nic_devices], classes)) == 32
    assert allocate([gpus, nics], [*template_devices(25), *nic_devices], classes) == (
        'cannot allocate request "exact-req" of claim "test-claim" (DeviceClass nic): claim "test-claim" would hold '
        "35 devices, exceeding maximum of 32"
    )
    # another claim's devices do not count towards this one's
    other = DeviceRequest("other-claim", "exact-req", "nic", count=10)
    assert len(allocate([gpus, other], [*template_devices(25), *nic_devices], classes)) == 35


# pkg/scheduling/dynamicresources/types_test.go: Describe("ResourceSlice Interface"). An APIServerSlice is karpui's
# cluster.dra.published (devices of the slices a node's drivers published), a TemplateSlice its
# typeindex.declared_devices (what an instance type declares before a node of it exists).


def api_slice(devices: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "gpu.nvidia.com", "pool": {"name": "test-pool"}, "nodeName": "test-node"}
    if devices is not None:
        spec["devices"] = devices
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "test-slice"},
        "spec": spec,
    }


API_DEVICES = [
    {
        "name": "gpu-0",
        "attributes": {"gpu.nvidia.com/model": {"string": "H100"}, "gpu.nvidia.com/memory": {"int": 80}},
        "capacity": {"gpu.nvidia.com/vram": {"value": "80Gi"}},
        "allowMultipleAllocations": True,
    },
    {"name": "gpu-1", "attributes": {"gpu.nvidia.com/model": {"string": "H100"}, "gpu.nvidia.com/memory": {"int": 80}}},
]


def published_on_test_node(devices: list[dict[str, Any]] | None) -> list[Device]:
    store = ObjectStore(clock=lambda: 0.0)
    store.create(api_slice(devices))
    return published(store).get("test-node", [])


def test_api_server_slice_should_return_the_correct_driver_and_pool() -> None:
    """It("should return the correct driver") and It("should return the correct pool")"""
    devices = published_on_test_node(API_DEVICES)
    assert {(d.driver, d.pool) for d in devices} == {("gpu.nvidia.com", "test-pool")}


def test_api_server_slice_should_convert_devices_with_attributes_capacity_and_allow_multiple_allocations() -> None:
    """It("should convert devices with interned names, attributes, capacity, and AllowMultipleAllocations")"""
    assert published_on_test_node(API_DEVICES) == [
        Device(
            "gpu-0",
            "gpu.nvidia.com",
            "test-pool",
            {"gpu.nvidia.com": {"model": "H100", "memory": 80}},
            {"gpu.nvidia.com": {"vram": 80 * 2**30 * 1000}},
            allow_multiple_allocations=True,
        ),
        Device("gpu-1", "gpu.nvidia.com", "test-pool", {"gpu.nvidia.com": {"model": "H100", "memory": 80}}),
    ]


def test_api_server_slice_should_handle_empty_device_list() -> None:
    assert published_on_test_node(None) == []


def template_type() -> InstanceType:
    device = {
        "name": "gpu-0",
        "attributes": {"gpu.nvidia.com/model": {"string": "A100"}},
        "capacity": {"gpu.nvidia.com/memory": {"value": "80Gi"}},
        "allowMultipleAllocations": True,
    }
    return InstanceType(
        name="gpu-it",
        capacity={},
        offerings=(),
        devices=({"driver": "gpu.nvidia.com", "pool": "gpus", "devices": [device]},),
    )


def test_template_slice_should_return_the_correct_driver_and_pool() -> None:
    """It("should return the correct driver") and It("should return the correct pool")"""
    assert [(d.driver, d.pool) for d in declared_devices(template_type())] == [("gpu.nvidia.com", "gpus")]


def test_template_slice_should_return_devices_with_attributes_capacity_and_allow_multiple_allocations() -> None:
    assert declared_devices(template_type()) == [
        Device(
            "gpu-0",
            "gpu.nvidia.com",
            "gpus",
            {"gpu.nvidia.com": {"model": "A100"}},
            {"gpu.nvidia.com": {"memory": 80 * 2**30 * 1000}},
            allow_multiple_allocations=True,
        )
    ]
