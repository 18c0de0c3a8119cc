"""Which devices ResourceClaims hold and for whom, as Karpenter's deviceallocation controller tracks them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from provisioner.dra.claims import DeviceKey
from provisioner.quantity import parse_quantity


@dataclass(frozen=True)
class Contribution:
    """One claim's consumed capacity on a shared device, with the pods reserving that claim (ContributionMetadata)."""

    pod_uids: tuple[str, ...]
    consumed_capacity: Mapping[str, int]


@dataclass(frozen=True)
class DeviceMetadata:
    """Karpenter's deviceallocation.DeviceMetadata (controller.go:78-100). `releasable`: every claim holding the
    device is reserved, and only by pods; `pod_uids`: those pods, over all its claims (non-pod consumers left out);
    `shared`: some claim consumes capacity on it (multi-allocatable), then `consumed_capacity` is their sum and
    `contributions` each claim's share. The zero value is what a claim reserved for nobody gives."""

    releasable: bool = False
    pod_uids: tuple[str, ...] = ()
    shared: bool = False
    consumed_capacity: Mapping[str, int] | None = None
    contributions: tuple[Contribution, ...] = field(default=())


@dataclass(frozen=True)
class _Claim:
    releasable: bool
    pod_uids: tuple[str, ...]
    contributions: Mapping[DeviceKey, Mapping[str, int] | None]


def _claim(claim: Mapping[str, Any]) -> _Claim | None:
    """claimMetadata (controller.go:272): None for a claim with no allocation results (it holds nothing). A claim is
    releasable only when reserved, and only by pods: an empty reservedFor is kept allocated to be safe."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    if not results:
        return None
    contributions: dict[DeviceKey, Mapping[str, int] | None] = {}
    for result in results:
        consumed = result.get("consumedCapacity")
        contributions[(result["driver"], result["pool"], result["device"])] = (
            None if consumed is None else {name: parse_quantity(str(q)) for name, q in consumed.items()}
        )
    reserved = status.get("reservedFor") or []
    pods = [r for r in reserved if r.get("resource") == "pods" and not r.get("apiGroup")]
    return _Claim(
        releasable=bool(reserved) and len(pods) == len(reserved),
        pod_uids=tuple(str(r.get("uid", "")) for r in pods),
        contributions=contributions,
    )


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceKey, DeviceMetadata]:
    """Every device some claim's allocation names, with its metadata aggregated over those claims
    (computeDeviceMetadata, controller.go:287). The controller keeps this incrementally as claims change; it is a
    function of the claims that exist, so karpui computes it from them."""
    holders: dict[DeviceKey, list[_Claim]] = {}
    for obj in claims:
        claim = _claim(obj)
        if claim is not None:
            for device in claim.contributions:
                holders.setdefault(device, []).append(claim)
    devices: dict[DeviceKey, DeviceMetadata] = {}
    for device, held_by in holders.items():
        consumed: dict[str, int] | None = None
        contributions = []
        for claim in held_by:
            capacity = claim.contributions[device]
            if capacity is not None:
                consumed = consumed if consumed is not None else {}
                for name, amount in capacity.items():
                    consumed[name] = consumed.get(name, 0) + amount
                contributions.append(Contribution(claim.pod_uids, capacity))
        devices[device] = DeviceMetadata(
            releasable=all(c.releasable for c in held_by),
            pod_uids=tuple(uid for c in held_by for uid in c.pod_uids),
            shared=consumed is not None,
            consumed_capacity=consumed,
            contributions=tuple(contributions),
        )
    return devices


def held_devices(devices: Mapping[DeviceKey, DeviceMetadata], deleting_pod_uids: Set[str]) -> set[DeviceKey]:
    """The devices a provisioning simulation may not allocate again (gatherAllocatedDevices, provisioning/dra.go:94):
    all allocated ones but those releasable with no pod left and those only pods of deleting nodes hold, which are
    moving off them. A shared device stays held while live pods consume any of it: karpui does not allocate a
    multi-allocatable device twice."""
    held = set()
    for device, meta in devices.items():
        if meta.releasable and not meta.pod_uids:
            continue
        if meta.pod_uids and all(uid in deleting_pod_uids for uid in meta.pod_uids):
            continue
        if meta.shared and not _live_consumption(meta, deleting_pod_uids):
            continue
        held.add(device)
    return held


def _live_consumption(meta: DeviceMetadata, deleting_pod_uids: Set[str]) -> dict[str, int]:
    """effectiveConsumedCapacity (provisioning/dra.go:137): the aggregate less every contribution whose pods are
    all deleting, a dimension dropped once nothing of it is left."""
    effective = dict(meta.consumed_capacity or {})
    for contribution in meta.contributions:
        if not contribution.pod_uids or not all(uid in deleting_pod_uids for uid in contribution.pod_uids):
            continue
        for name, amount in contribution.consumed_capacity.items():
            if name in effective:
                effective[name] -= amount
                if effective[name] <= 0:
                    del effective[name]
    return effective
