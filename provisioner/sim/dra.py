"""DRA in the lab: claims made from templates, the simulated driver publishing ResourceSlices, and allocation.

The driver plays Karpenter's dra-kwok-driver: every 30 s, for each DRAConfig pool, it publishes one ResourceSlice
per `resourceSlices` entry on every kwok Node the pool's nodeSelectorTerms match, so a node exists for a while
before its devices do. kube-scheduler allocates a pod's claims from the slices on the node it binds to.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping

from provisioner.cluster.dra import allocated, driver_pools, pod_claims, published, unallocated_requests
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.names import owner_reference, random_suffix
from provisioner.cluster.objects import Obj
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceKey, allocate, requests_from_claim_spec

PUBLISH_SECONDS = 30.0


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


def publish(store: ObjectStore, now: float, last: float | None) -> tuple[bool, float | None]:
    """The driver's reconcile: create missing slices on matching kwok nodes and delete orphans, every 30 s from
    the first moment a DRAConfig exists (the driver is deployed with its configuration, as seed 000's third
    experiment starts it, so its 30 s grid is the driver's own and not the lab's)."""
    if last is not None and now < last + PUBLISH_SECONDS:
        return False, last
    if last is None and not store.list("DRAConfig"):
        return False, None
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
