"""DRA objects as the controllers read them: DeviceClasses, a pod's ResourceClaims, published devices.

Read helpers over the cluster's ResourceClaims, ResourceSlices, DeviceClasses and (in the lab) DRAConfigs, shared
by the controllers and the simulated cluster side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from provisioner.catalog import InstanceType
from provisioner.cluster.api import ClusterReader
from provisioner.cluster.objects import Obj
from provisioner.dra.allocations import allocated_devices, held_devices
from provisioner.dra.cel import Device
from provisioner.dra.claims import (
    MAX_DEVICES_PER_CLAIM,
    DeviceClass,
    DeviceKey,
    DeviceRequest,
    DriverPool,
    device_class_from_manifest,
    dra_config_pools,
    key,
    requests_from_claim_spec,
)
from provisioner.nodes import Node
from provisioner.pods import Pod


def device_classes(store: ClusterReader) -> dict[str, DeviceClass]:
    return {obj["metadata"]["name"]: device_class_from_manifest(obj) for obj in store.list("DeviceClass")}


def driver_pools(store: ClusterReader) -> list[DriverPool]:
    return [pool for obj in store.list("DRAConfig") for pool in dra_config_pools(obj)]


def declare(catalogs: Mapping[str, list[InstanceType]], pools: Sequence[DriverPool]) -> dict[str, list[InstanceType]]:
    """In the lab karpui is both provider and driver: a DRAConfig declares its devices on every instance type
    whose labels its pools' nodeSelectorTerms match. What its driver publishes there is the truth, so it replaces
    what a DeviceDeclaration (or the catalog file) says of the same driver on that type: applying examples/dra/ as a
    directory declares gpu-0 both ways, and counting it twice packed two GPU pods onto a node with one device."""
    if not pools:
        return dict(catalogs)
    result: dict[str, list[InstanceType]] = {}
    for kind, types in catalogs.items():
        declared = []
        for it in types:
            labels = {**it.labels, "node.kubernetes.io/instance-type": it.name}
            extra: tuple[dict[str, object], ...] = tuple(
                {
                    "driver": pool.driver,
                    "pool": f"{pool.driver}/{pool.name}",
                    "devices": [d for entries in pool.slices for d in entries],
                }
                for pool in pools
                if pool.covers(labels)
            )
            if extra:
                published = {group["driver"] for group in extra}
                kept = tuple(group for group in it.devices if group.get("driver") not in published)
                it = replace(it, devices=(*kept, *extra))
            declared.append(it)
        result[kind] = declared
    return result


def pod_claims(store: ClusterReader, pod: Obj, *, karpenter: bool = False) -> list[Obj] | None:
    """The pod's ResourceClaims, or None while one is still missing (then the pod cannot be scheduled yet).

    A reference whose status entry names no claim needs none (as kube-scheduler and Karpenter both read it).
    `karpenter`: Karpenter's reading (scheduling/dra.go resourceClaimName), where a template reference with no status
    entry yet needs no claim either, rather than kube-scheduler's, which waits for the claim to be made."""
    namespace = pod["metadata"]["namespace"]
    claims = []
    for name in _claim_names(pod, karpenter):
        claim = store.get("ResourceClaim", name, namespace) if name else None
        if claim is None:
            return None
        claims.append(claim)
    return claims


def _claim_names(pod: Obj, karpenter: bool) -> list[str | None]:
    """The claim behind each reference that needs one; None for a claim still to be made."""
    statuses = {
        s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: list[str | None] = []
    for entry in pod["spec"].get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            names.append(entry["resourceClaimName"])
        elif entry["name"] in statuses:
            if statuses[entry["name"]]:
                names.append(statuses[entry["name"]])
        elif not karpenter:
            names.append(None)
    return names


def missing_claim(store: ClusterReader, pod: Obj) -> str | None:
    """The first ResourceClaim the pod names that does not exist ("namespace/name"): Karpenter defers such a pod
    (scheduling/dra.go resolvePodClaims) until the claim is created."""
    namespace = pod["metadata"]["namespace"]
    for name in _claim_names(pod, karpenter=True):
        if name and store.get("ResourceClaim", name, namespace) is None:
            return f"{namespace}/{name}"
    return None


def unsupported_claim(store: ClusterReader, pod: Obj) -> str | None:
    """Why Karpenter's allocator cannot take one of the pod's unallocated claims, so every node it tries fails the
    pod ("validating claim", allocator.go:386): ValidateClaimRequest (dynamicresources/request.go:143-205) refuses a
    distinctAttribute constraint, a constraint of no known type, and a claim asking for more devices than an
    allocation result may hold (32), ExactCount counts summed and a firstAvailable request counted at its smallest
    subrequest. (All-mode requests add the in-cluster devices they match there; karpui counts them as none.)"""
    for claim in pod_claims(store, pod, karpenter=True) or []:
        if (claim.get("status") or {}).get("allocation"):
            continue
        name = claim["metadata"]["name"]
        devices = (claim.get("spec") or {}).get("devices") or {}
        for constraint in devices.get("constraints") or []:
            if isinstance(constraint, dict) and constraint.get("matchAttribute"):
                continue
            if isinstance(constraint, dict) and constraint.get("distinctAttribute"):
                return f'validating claim "{name}": claim "{name}": DistinctAttribute constraints not done yet'
            return f'validating claim "{name}": claim "{name}": unsupported constraint type'
        total = sum(_fewest_devices(request) for request in devices.get("requests") or [])
        if total > MAX_DEVICES_PER_CLAIM:
            return (
                f'validating claim "{name}": claim "{name}" requests {total} total devices, exceeding maximum of '
                f"{MAX_DEVICES_PER_CLAIM}"
            )
    return None


def _fewest_devices(request: Mapping[str, Any]) -> int:
    """The ExactCount devices a claim request needs at least: its count, or its cheapest subrequest's."""

    def count(exact: Mapping[str, Any]) -> int:
        return 0 if exact.get("allocationMode") == "All" else int(exact.get("count", 1))

    if request.get("exactly"):
        return count(request["exactly"])
    return min((count(sub) for sub in request.get("firstAvailable") or []), default=0)


def unallocated_requests(
    store: ClusterReader, pod: Obj, *, karpenter: bool = False
) -> tuple[DeviceRequest, ...] | None:
    claims = pod_claims(store, pod, karpenter=karpenter)
    if claims is None:
        return None
    requests: list[DeviceRequest] = []
    for claim in claims:
        if not (claim.get("status") or {}).get("allocation"):
            requests.extend(requests_from_claim_spec(claim.get("spec") or {}, claim["metadata"]["name"], "spec"))
    return tuple(requests)


def with_devices(store: ClusterReader, obj: Obj, pod: Pod) -> Pod:
    """The scheduler's pod with the device requests of its claims not yet allocated (one with a claim missing is
    left out of provisioning: see `missing_claim`)."""
    if not obj["spec"].get("resourceClaims"):
        return pod
    requests = unallocated_requests(store, obj, karpenter=True)
    return replace(pod, device_requests=requests or ())


def with_claimed_devices(store: ClusterReader, node: Node) -> Node:
    """The node with each pod asking for all its claims' devices: a pod that moves must get them again wherever it
    lands."""
    pods = []
    changed = False
    for pod in node.pods:
        obj = store.get("Pod", pod.name, pod.namespace) if pod.resource_claims else None
        claims = pod_claims(store, obj) if obj is not None and obj["spec"].get("resourceClaims") else None
        if not claims:
            pods.append(pod)
            continue
        requests = tuple(
            r for c in claims for r in requests_from_claim_spec(c.get("spec") or {}, c["metadata"]["name"], "spec")
        )
        pods.append(replace(pod, device_requests=requests))
        changed = True
    return replace(node, pods=tuple(pods)) if changed else node


def allocated(store: ClusterReader) -> set[DeviceKey]:
    taken = set()
    for claim in store.list("ResourceClaim"):
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            taken.add((result["driver"], result["pool"], result["device"]))
    return taken


def published(store: ClusterReader) -> dict[str, list[Device]]:
    """Devices in ResourceSlices, by the node they are published on."""
    by_node: dict[str, list[Device]] = {}
    for slice_obj in store.list("ResourceSlice"):
        spec = slice_obj.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            by_node.setdefault(node, []).append(Device.from_spec(device, spec.get("driver", ""), pool))
    return by_node


def node_inventory(
    store: ClusterReader, nodes: Sequence[Any], catalogs: Mapping[str, list[InstanceType]]
) -> dict[str, list[Device]]:
    """Free devices per node for the provisioning simulation: published ones once initialized, the type's
    declared ones before (Karpenter's template devices), minus what claims hold for pods that stay: a device only
    pods of deleting nodes hold is free, as those pods are moving (gatherAllocatedDevices, provisioning/dra.go:94)."""
    from provisioner.scheduling.typeindex import declared_devices

    deleting = {p.uid for n in nodes if n.marked_for_deletion for p in n.pods if p.uid}
    taken = held_devices(allocated_devices(store.list("ResourceClaim")), deleting)
    slices = published(store)
    by_type = {it.name: it for types in catalogs.values() for it in types}
    inventory: dict[str, list[Device]] = {}
    for node in nodes:
        if node.initialized or not node.managed:
            devices = slices.get(node.name, [])
        else:
            it = by_type.get(node.labels.get("node.kubernetes.io/instance-type", ""))
            devices = declared_devices(it) if it is not None else []
        inventory[node.name] = [d for d in devices if key(d) not in taken]
    return inventory
