"""DRA in the lab: claims made from templates, the simulated driver publishing ResourceSlices, and allocation.

The driver plays Karpenter's dra-kwok-driver: every 30 s, for each DRAConfig pool, it publishes one ResourceSlice
per `resourceSlices` entry on every kwok Node the pool's nodeSelectorTerms match, so a node exists for a while
before its devices do. kube-scheduler allocates a pod's claims from the slices on the node it binds to.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from provisioner.catalog import InstanceType
from provisioner.dra.cel import Device
from provisioner.dra.claims import (
    DeviceClass,
    DeviceKey,
    DeviceRequest,
    DriverPool,
    allocate,
    device_class_from_manifest,
    dra_config_pools,
    key,
    requests_from_claim_spec,
)
from provisioner.pods import Pod
from provisioner.sim.store import Obj, ObjectStore
from provisioner.sim.workloads import owner_reference, random_suffix

PUBLISH_SECONDS = 30.0


def device_classes(store: ObjectStore) -> dict[str, DeviceClass]:
    return {obj["metadata"]["name"]: device_class_from_manifest(obj) for obj in store.list("DeviceClass")}


def driver_pools(store: ObjectStore) -> list[DriverPool]:
    return [pool for obj in store.list("DRAConfig") for pool in dra_config_pools(obj)]


def declare(catalogs: Mapping[str, list[InstanceType]], pools: Sequence[DriverPool]) -> dict[str, list[InstanceType]]:
    """In the lab karpui is both provider and driver: a DRAConfig declares its devices on every instance type
    whose labels its pools' nodeSelectorTerms match."""
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
            declared.append(replace(it, devices=(*it.devices, *extra)) if extra else it)
        result[kind] = declared
    return result


def make_claims(store: ObjectStore, rng: random.Random) -> bool:
    """One ResourceClaim per pod per template, named `<pod>-<claim>-<5 chars>` and owned by the pod."""
    changed = False
    for pod in store.list("Pod"):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        statuses = {s["name"]: s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        for entry in pod["spec"].get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry["name"] in statuses:
                continue
            template = store.get("ResourceClaimTemplate", template_name, pod["metadata"]["namespace"])
            if template is None:
                continue  # kube-controller-manager waits for the template; the pod stays pending
            name = f"{pod['metadata']['name']}-{entry['name']}-{random_suffix(rng)}"[:253]
            store.create(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": name,
                        "namespace": pod["metadata"]["namespace"],
                        "ownerReferences": [owner_reference(pod)],
                        "annotations": {"resource.kubernetes.io/pod-claim-name": entry["name"]},
                    },
                    "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
                    "status": {},
                }
            )
            pod.setdefault("status", {}).setdefault("resourceClaimStatuses", []).append(
                {"name": entry["name"], "resourceClaimName": name}
            )
            store.update(pod)
            changed = True
    return changed


def pod_claims(store: ObjectStore, pod: Obj) -> list[Obj] | None:
    """The pod's ResourceClaims, or None while one is still missing (then the pod cannot be scheduled yet)."""
    namespace = pod["metadata"]["namespace"]
    statuses = {
        s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    claims = []
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or statuses.get(entry["name"])
        claim = store.get("ResourceClaim", name, namespace) if name else None
        if claim is None:
            return None
        claims.append(claim)
    return claims


def unallocated_requests(store: ObjectStore, pod: Obj) -> tuple[DeviceRequest, ...] | None:
    claims = pod_claims(store, pod)
    if claims is None:
        return None
    requests: list[DeviceRequest] = []
    for claim in claims:
        if not (claim.get("status") or {}).get("allocation"):
            requests.extend(requests_from_claim_spec(claim.get("spec") or {}, claim["metadata"]["name"], "spec"))
    return tuple(requests)


def with_devices(store: ObjectStore, obj: Obj, pod: Pod) -> Pod:
    """The scheduler's pod with the device requests of its claims not yet allocated."""
    if not obj["spec"].get("resourceClaims"):
        return pod
    requests = unallocated_requests(store, obj)
    return replace(pod, device_requests=requests or ())


def allocated(store: ObjectStore) -> set[DeviceKey]:
    taken = set()
    for claim in store.list("ResourceClaim"):
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            taken.add((result["driver"], result["pool"], result["device"]))
    return taken


def published(store: ObjectStore) -> dict[str, list[Device]]:
    """Devices in ResourceSlices, by the node they are published on."""
    by_node: dict[str, list[Device]] = {}
    for slice_obj in store.list("ResourceSlice"):
        spec = slice_obj.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            by_node.setdefault(node, []).append(Device.from_spec(device, spec.get("driver", ""), pool))
    return by_node


def allocate_on(store: ObjectStore, pod: Obj, node: str, classes: Mapping[str, DeviceClass]) -> str | None:
    """Allocate the pod's claims from the node's free published devices and reserve them for the pod."""
    claims = pod_claims(store, pod)
    if claims is None:
        return "waiting for the pod's ResourceClaims to be created"
    taken = allocated(store)
    devices = published(store).get(node, [])
    pending = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    requests = [
        r for c in pending for r in requests_from_claim_spec(c.get("spec") or {}, c["metadata"]["name"], "spec")
    ]
    outcome = allocate(requests, devices, classes, taken)
    if isinstance(outcome, str):
        return outcome
    for claim in pending:
        results = [
            {"request": request.name, "driver": device.driver, "pool": device.pool, "device": device.name}
            for request, device in outcome
            if request.claim == claim["metadata"]["name"]
        ]
        claim["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
        }
        store.update(claim)
    return None


def can_allocate(
    store: ObjectStore,
    pod: Obj,
    node: str,
    classes: Mapping[str, DeviceClass],
    taken: set[DeviceKey],
    devices: Mapping[str, list[Device]],
) -> str | None:
    requests = unallocated_requests(store, pod)
    if requests is None:
        return "waiting for the pod's ResourceClaims to be created"
    outcome = allocate(requests, devices.get(node, []), classes, taken)
    return outcome if isinstance(outcome, str) else None


def publish(store: ObjectStore, now: float, last: float | None) -> tuple[bool, float]:
    """The driver's reconcile: create missing slices on matching kwok nodes and delete orphans, every 30 s."""
    if last is not None and now < last + PUBLISH_SECONDS:
        return False, last
    changed = False
    wanted: set[str] = set()
    for pool in driver_pools(store):
        for node in store.list("Node"):
            if node["metadata"].get("deletionTimestamp"):
                continue
            annotations = node["metadata"].get("annotations") or {}
            if "kwok.x-k8s.io/node" not in annotations or not pool.covers(node["metadata"].get("labels") or {}):
                continue
            node_name = node["metadata"]["name"]
            for index, devices in enumerate(pool.slices):
                name = f"{pool.driver.replace('.', '-').replace('/', '-')}-{node_name}-{pool.name}" + (
                    f"-{index}" if len(pool.slices) > 1 else ""
                )
                wanted.add(name)
                if store.get("ResourceSlice", name) is None:
                    store.create(
                        {
                            "apiVersion": "resource.k8s.io/v1",
                            "kind": "ResourceSlice",
                            "metadata": {
                                "name": name,
                                "ownerReferences": [owner_reference(node) | {"controller": True}],
                            },
                            "spec": {
                                "driver": pool.driver,
                                "nodeName": node_name,
                                "pool": {
                                    "name": f"{pool.driver}/{node_name}",
                                    "generation": 0,
                                    "resourceSliceCount": len(pool.slices),
                                },
                                "devices": [dict(d) for d in devices],
                            },
                        }
                    )
                    changed = True
    for slice_obj in store.list("ResourceSlice"):
        if slice_obj["metadata"]["name"] not in wanted and any(
            o.get("kind") == "Node" for o in slice_obj["metadata"].get("ownerReferences") or []
        ):
            store.delete("ResourceSlice", slice_obj["metadata"]["name"])
            changed = True
    return changed, now


def drivers_published(store: ObjectStore, node: str, drivers: Sequence[str]) -> bool:
    present = {
        (s.get("spec") or {}).get("driver")
        for s in store.list("ResourceSlice")
        if (s.get("spec") or {}).get("nodeName") == node
    }
    return all(d in present for d in drivers)


def node_inventory(
    store: ObjectStore, nodes: Sequence[Any], catalogs: Mapping[str, list[InstanceType]]
) -> dict[str, list[Device]]:
    """Free devices per node for the provisioning simulation: published ones once initialized, the type's
    declared ones before (Karpenter's template devices), minus what claims already hold."""
    from provisioner.scheduling.typeindex import declared_devices

    taken = allocated(store)
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
