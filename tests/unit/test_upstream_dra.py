"""Karpenter's DRA provisioning suite, ported to karpui's lab (its controllers, kube-scheduler and kwok DRA driver).

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/provisioning/dra_test.go (Describe "Dynamic Resource
Allocation"). Each test names the Context and It (with the suite's own letter codes) it follows. Karpenter's fake
instance types carry ResourceSlice templates; here a DRAConfig declares the same devices on kwok instance types by
name ("gpu-it" is c-2x-amd64-linux), and the lab's driver publishes them once a node of that type exists. Karpenter's
ExpectResourceClaimAllocated reads the allocation kube-scheduler writes at binding; the lab's kube-scheduler writes it
the same way, once the driver has published the node's slices (every 30 s).

The cases at the end follow pkg/scheduling/dynamicresources/allocator_test.go (Describe "Constraint satisfaction",
"Constraint scoped to request subset", "CEL selector filtering", "Combined class and request selectors", "All-mode
allocation", "FirstAvailable DFS") and constraint_test.go (Describe "MatchAttributeConstraint"), through karpui's
allocate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceRequest, allocate, requests_from_claim_spec
from provisioner.lab import Lab
from provisioner.options import KarpenterOptions
from tests.builders import instance_type, node, pod, schedule
from tests.lab_builders import KWOK_CLASS, START, config_of, nodepool_doc

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
GPU_IT = "c-2x-amd64-linux"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DRIVERS = "karpenter.sh/requested-dra-drivers"
PUBLISHED = 60  # seconds until a new node is up, its slices are published and its pods bound


# Builders ------------------------------------------------------------------------------------------------------------


def draconfig(
    devices: int | list[dict[str, Any]], types: tuple[str, ...] = (GPU_IT,), driver: str = GPU_DRIVER
) -> dict[str, Any]:
    """The lab driver's configuration: `devices` (a count of plain `<kind>-<i>` devices, or device specs) in one
    pool on every node of `types` (fake.GPUInstanceType's ResourceSlice template)."""
    kind = driver.split(".")[0]
    specs = [{"name": f"{kind}-{i}"} for i in range(devices)] if isinstance(devices, int) else devices
    return {
        "apiVersion": "test.karpenter.sh/v1alpha1",
        "kind": "DRAConfig",
        "metadata": {"name": kind},
        "spec": {
            "driver": driver,
            "pools": [
                {
                    "name": kind,
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": INSTANCE_TYPE, "operator": "In", "values": list(types)}]}
                    ],
                    "resourceSlices": [{"devices": specs}],
                }
            ],
        },
    }


def device_class(name: str = "gpu", driver: str = GPU_DRIVER) -> dict[str, Any]:
    """test.DeviceClassWithSelector: a DeviceClass selecting the driver's devices."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def exact(name: str = "req", device_class_name: str = "gpu", count: int | None = 1) -> dict[str, Any]:
    """test.ExactDeviceRequest (count None: test.AllDeviceRequest)."""
    spec: dict[str, Any] = {"deviceClassName": device_class_name}
    spec.update({"allocationMode": "All"} if count is None else {"allocationMode": "ExactCount", "count": count})
    return {"name": name, "exactly": spec}


def first_available(name: str, *subrequests: tuple[str, int]) -> dict[str, Any]:
    """test.FirstAvailableDeviceRequest of test.DeviceSubRequest(name, "gpu", count)s."""
    return {
        "name": name,
        "firstAvailable": [
            {"name": sub, "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}
            for sub, count in subrequests
        ],
    }


def claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }


def claim_template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def unschedulable_pod(name: str, **spec: Any) -> dict[str, Any]:
    """test.UnschedulablePod: 10m of CPU, found no node by kube-scheduler."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}], **spec},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def dra_pod(name: str, *claims: tuple[str, str], template: bool = False, **spec: Any) -> dict[str, Any]:
    """draPodForClaims: a pod referencing each (reference, claim or template name) from its container."""
    doc = unschedulable_pod(name, **spec)
    source = "resourceClaimTemplateName" if template else "resourceClaimName"
    doc["spec"]["resourceClaims"] = [{"name": ref, source: target} for ref, target in claims]
    doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": ref} for ref, _ in claims]
    return doc


def dra_lab(*documents: dict[str, Any], options: KarpenterOptions | None = None) -> Lab:
    """A lab over the kwok catalog whose DRAConfigs declare devices from the start (as fake instance types carry
    their slice templates), with IgnoreDRARequests=false as the Go suite's BeforeEach sets it."""
    docs = [*documents, KWOK_CLASS]
    objects = [d for d in docs if d["kind"] not in ("NodePool", "KWOKNodeClass")]
    return Lab(objects, config_of(docs, options), {}, now=START)


def nodeclaims(made: Lab) -> list[dict[str, Any]]:
    return made.store.list("NodeClaim")


def node_of(made: Lab, name: str) -> str:
    """ExpectScheduled: the node the pod is bound to (fails when it is not bound)."""
    bound = made.store.get("Pod", name, "default")["spec"].get("nodeName")
    assert bound, f"pod {name} is not scheduled"
    return str(bound)


def not_scheduled(made: Lab, name: str) -> bool:
    return not made.store.get("Pod", name, "default")["spec"].get("nodeName")


def allocated(made: Lab, name: str, driver: str = GPU_DRIVER) -> list[str]:
    """ExpectResourceClaimAllocated: the claim's "pool/device"s, every one of them the driver's."""
    obj = made.store.get("ResourceClaim", name, "default")
    allocation = (obj.get("status") or {}).get("allocation")
    assert allocation, f"ResourceClaim default/{name} has no allocation"
    results = allocation["devices"]["results"]
    assert results and all(r["driver"] == driver for r in results)
    return [f"{r['pool']}/{r['device']}" for r in results]


def request_refs(made: Lab, name: str) -> list[str]:
    """The Request of every allocation result of the claim, in order."""
    obj = made.store.get("ResourceClaim", name, "default")
    return [r["request"] for r in obj["status"]["allocation"]["devices"]["results"]]


def could_not_schedule(made: Lab) -> dict[str, str]:
    return {
        rec.record.fields["Pod"]["name"]: rec.record.fields["error"]
        for rec in made.logs
        if rec.record.message == "could not schedule pod"
    }


# Context("Single unallocated claim (A)") -----------------------------------------------------------------------------


def test_a1_provisions_a_nodeclaim_allocates_the_claim_and_annotates_the_drivers() -> None:
    """ "should provision a new NodeClaim, allocate the claim, and annotate the drivers (A1)"."""
    made = dra_lab(
        nodepool_doc(), draconfig(2), device_class(), claim("gpu-claim", exact()), dra_pod("p", ("gpu", "gpu-claim"))
    )
    made.advance(PUBLISHED)
    node = made.store.get("Node", node_of(made, "p"))
    assert node["metadata"]["labels"][INSTANCE_TYPE] == GPU_IT
    [nodeclaim] = nodeclaims(made)
    assert nodeclaim["metadata"]["annotations"][DRIVERS] == GPU_DRIVER
    assert allocated(made, "gpu-claim") == [f"{GPU_DRIVER}/{node['metadata']['name']}/gpu-0"]


def test_a2_restricts_instance_types_to_those_providing_the_device() -> None:
    """ "should restrict instance types to those providing the requested device (A2)": of the 144 kwok types only
    gpu-it declares the GPU, so the NodeClaim may launch nothing else (the cheaper c-1x is left out)."""
    made = dra_lab(
        nodepool_doc(), draconfig(1), device_class(), claim("gpu-claim", exact()), dra_pod("p", ("gpu", "gpu-claim"))
    )
    made.advance(PUBLISHED)
    node_of(made, "p")
    [nodeclaim] = nodeclaims(made)
    assert nodeclaim["status"]["nodeName"]
    assert nodeclaim["metadata"]["labels"][INSTANCE_TYPE] == GPU_IT
    [offered] = [r for r in nodeclaim["spec"]["requirements"] if r["key"] == INSTANCE_TYPE]
    assert offered["values"] == [GPU_IT]


def test_a3_a_non_dra_pod_gets_no_drivers_annotation() -> None:
    """ "should not annotate or allocate for a non-DRA pod (A3)"."""
    made = dra_lab(nodepool_doc(), draconfig(1), device_class(), unschedulable_pod("p"))
    made.advance(PUBLISHED)
    node_of(made, "p")
    [nodeclaim] = nodeclaims(made)
    assert DRIVERS not in nodeclaim["metadata"]["annotations"]


def test_a4_a_claim_generated_from_a_template_is_allocated() -> None:
    """ "should resolve and allocate a claim generated from a ResourceClaimTemplate (A4)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        device_class(),
        claim_template("gpu-template", exact()),
        dra_pod("p", ("gpu", "gpu-template"), template=True),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "p")
    [nodeclaim] = nodeclaims(made)
    assert nodeclaim["metadata"]["annotations"][DRIVERS] == GPU_DRIVER
    [status] = made.store.get("Pod", "p", "default")["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("p-gpu-")
    assert allocated(made, status["resourceClaimName"]) == [f"{GPU_DRIVER}/{node}/gpu-0"]


# Context("Template (in-flight) device allocation (B)") ---------------------------------------------------------------


def test_b1_packs_two_pods_onto_one_nodeclaim_with_distinct_devices() -> None:
    """ "should pack multiple pods onto one NodeClaim using distinct devices (B1)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("claim-a", exact()),
        claim("claim-b", exact()),
        dra_pod("a", ("gpu", "claim-a")),
        dra_pod("b", ("gpu", "claim-b")),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "a")
    assert node_of(made, "b") == node
    assert len(nodeclaims(made)) == 1
    assert sorted(allocated(made, "claim-a") + allocated(made, "claim-b")) == [
        f"{GPU_DRIVER}/{node}/gpu-0",
        f"{GPU_DRIVER}/{node}/gpu-1",
    ]


def test_b2_a_second_nodeclaim_when_per_node_devices_run_out() -> None:
    """ "should create a second NodeClaim when per-node device capacity is exhausted (B2)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        device_class(),
        claim("claim-a", exact()),
        claim("claim-b", exact()),
        dra_pod("a", ("gpu", "claim-a")),
        dra_pod("b", ("gpu", "claim-b")),
    )
    made.advance(PUBLISHED)
    assert node_of(made, "a") != node_of(made, "b")
    assert len(nodeclaims(made)) == 2


# Context("Allocation modes & constraints (F)") -----------------------------------------------------------------------


def test_f1_all_mode_allocates_every_matching_device() -> None:
    """ "should allocate every matching device in All mode (F1)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(3),
        device_class(),
        claim("gpu-claim", exact(count=None)),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "p")
    assert allocated(made, "gpu-claim") == [f"{GPU_DRIVER}/{node}/gpu-{i}" for i in range(3)]


def test_f2_a_match_attribute_constraint_across_two_requests() -> None:
    """ "should satisfy a MatchAttribute constraint across two requests (F2)": both devices share pcieRoot."""
    pcie_root = f"{GPU_DRIVER}/pcieRoot"
    devices = [{"name": f"gpu-{i}", "attributes": {pcie_root: {"string": "root-a"}}} for i in range(2)]
    made = dra_lab(
        nodepool_doc(),
        draconfig(devices),
        device_class(),
        claim("gpu-claim", exact("req-a"), exact("req-b"), constraints=[{"matchAttribute": pcie_root}]),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(PUBLISHED)
    node_of(made, "p")
    assert len(allocated(made, "gpu-claim")) == 2


def test_f2_a_match_attribute_constraint_no_pair_of_devices_meets() -> None:
    """F2 from the other side: the type's two GPUs sit on different PCIe roots, so no NodeClaim can serve the claim
    (karpui ignored constraints and launched one)."""
    pcie_root = f"{GPU_DRIVER}/pcieRoot"
    devices = [{"name": f"gpu-{i}", "attributes": {pcie_root: {"string": f"root-{i}"}}} for i in range(2)]
    made = dra_lab(
        nodepool_doc(),
        draconfig(devices),
        device_class(),
        claim("gpu-claim", exact("req-a"), exact("req-b"), constraints=[{"matchAttribute": pcie_root}]),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []


# Context("Prioritized alternatives / FirstAvailable (H)") ------------------------------------------------------------


def test_h1_falls_back_to_the_next_subrequest_and_binds_its_qualified_name() -> None:
    """ "should bind the selected sub-request with a qualified reference when falling back (H1)": only 2 GPUs, so
    prefer-4 cannot be met and the claim is given fallback-2's, each result naming "req/fallback-2"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("gpu-claim", first_available("req", ("prefer-4", 4), ("fallback-2", 2))),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(PUBLISHED)
    node_of(made, "p")
    assert len(allocated(made, "gpu-claim")) == 2
    assert request_refs(made, "gpu-claim") == ["req/fallback-2", "req/fallback-2"]


def test_h2_binds_the_preferred_subrequest_when_it_fits() -> None:
    """ "should bind the preferred sub-request with a qualified reference when it fits (H2)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(4),
        device_class(),
        claim("gpu-claim", first_available("req", ("prefer-4", 4), ("fallback-2", 2))),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(PUBLISHED)
    node_of(made, "p")
    assert len(allocated(made, "gpu-claim")) == 4
    assert request_refs(made, "gpu-claim") == ["req/prefer-4"] * 4


# Context("requested-dra-drivers annotation (G)") ---------------------------------------------------------------------


def test_g1_lists_every_driver_whose_devices_were_allocated() -> None:
    """ "should list every driver whose devices were allocated (G1)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        draconfig(1, driver=NIC_DRIVER),
        device_class(),
        device_class("nic", NIC_DRIVER),
        claim("gpu-claim", exact()),
        claim("nic-claim", exact(device_class_name="nic")),
        dra_pod("p", ("gpu", "gpu-claim"), ("nic", "nic-claim")),
    )
    made.advance(PUBLISHED)
    node_of(made, "p")
    [nodeclaim] = nodeclaims(made)
    assert nodeclaim["metadata"]["annotations"][DRIVERS] == f"{GPU_DRIVER},{NIC_DRIVER}"


def test_g1_lists_only_the_drivers_whose_devices_were_allocated() -> None:
    """G1's rule from the other side: the type also publishes a NIC, but the pod claims only a GPU, so only the GPU
    driver is annotated (nodeclaim.go FinalizeScheduling records the drivers of the allocated devices)."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        draconfig(1, driver=NIC_DRIVER),
        device_class(),
        device_class("nic", NIC_DRIVER),
        claim("gpu-claim", exact()),
        dra_pod("p", ("gpu", "gpu-claim")),
    )
    made.advance(2)
    [nodeclaim] = nodeclaims(made)
    assert nodeclaim["metadata"]["annotations"][DRIVERS] == GPU_DRIVER


# Context("Multiple provisioner runs (H)") ----------------------------------------------------------------------------


def test_runs_h1_a_device_is_not_allocated_twice_across_runs() -> None:
    """ "should not double-allocate a device across runs (H1)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        device_class(),
        claim("claim-a", exact()),
        claim("claim-b", exact()),
        dra_pod("a", ("gpu", "claim-a")),
    )
    made.advance(PUBLISHED)
    node_a = node_of(made, "a")
    devices_a = allocated(made, "claim-a")
    made.store.create(dra_pod("b", ("gpu", "claim-b")))
    made.advance(PUBLISHED)
    assert node_of(made, "b") != node_a
    assert allocated(made, "claim-b") != devices_a
    assert len(nodeclaims(made)) == 2


def test_runs_h2_a_claim_allocated_in_an_earlier_run_stays_as_it_is() -> None:
    """ "should treat a claim allocated in a prior run as already-allocated (H2)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("shared-claim", exact()),
        dra_pod("a", ("gpu", "shared-claim")),
    )
    made.advance(PUBLISHED)
    node_of(made, "a")
    run1 = allocated(made, "shared-claim")
    made.store.create(dra_pod("b", ("gpu", "shared-claim")))
    made.advance(PUBLISHED)
    node_of(made, "b")
    assert allocated(made, "shared-claim") == run1


def test_runs_h3_a_pod_schedules_once_its_missing_claim_is_created() -> None:
    """ "should schedule on a later run once a missing claim is created (H3)"."""
    made = dra_lab(nodepool_doc(), draconfig(1), device_class(), dra_pod("p", ("gpu", "late-claim")))
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []
    made.store.create(claim("late-claim", exact()))
    made.advance(PUBLISHED)
    node_of(made, "p")
    assert len(nodeclaims(made)) == 1


# Context("Unsatisfiable / deferred (U)") -----------------------------------------------------------------------------


def test_u1_a_pod_whose_claim_does_not_exist_is_deferred() -> None:
    """ "should defer a pod whose ResourceClaim does not exist yet (U1)"."""
    made = dra_lab(nodepool_doc(), draconfig(1), device_class(), dra_pod("p", ("gpu", "missing-claim")))
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []
    assert could_not_schedule(made) == {"p": 'resourceclaim "default/missing-claim" not found'}


def test_a_claim_with_a_distinct_attribute_constraint_is_refused() -> None:
    """ValidateClaimRequest (request.go:153): "DistinctAttribute constraints not done yet", so the pod gets no node."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("pair", exact(count=2), constraints=[{"requests": ["req"], "distinctAttribute": "example.com/index"}]),
        dra_pod("p", ("gpu", "pair")),
    )
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []
    assert could_not_schedule(made) == {
        "p": 'validating claim "pair": claim "pair": DistinctAttribute constraints not done yet'
    }


def test_u2_no_instance_type_provides_the_device() -> None:
    """ "should fail to schedule when no instance type provides the requested device (U2)"."""
    made = dra_lab(nodepool_doc(), device_class(), claim("gpu-claim", exact()), dra_pod("p", ("gpu", "gpu-claim")))
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []
    assert could_not_schedule(made) == {
        "p": 'incompatible with nodepool "default", no instance type declares devices for request "req" of claim '
        '"gpu-claim" (DeviceClass gpu)'
    }


def test_u3_the_device_class_is_missing() -> None:
    """ "should fail to schedule when the DeviceClass is missing (U3)"."""
    made = dra_lab(nodepool_doc(), draconfig(1), claim("gpu-claim", exact()), dra_pod("p", ("gpu", "gpu-claim")))
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []


def test_u4_a_template_reference_with_no_generated_claim_is_skipped() -> None:
    """ "should skip a claim-template reference whose generated name is nil (U4)": a resourceClaimStatuses entry
    with no claim name means no claim is needed (dra.go resourceClaimName), so the pod schedules as a plain pod."""
    pod = dra_pod("p", ("gpu", "gpu-template"), template=True)
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": None}]
    made = dra_lab(nodepool_doc(), draconfig(1), device_class(), pod)
    made.advance(PUBLISHED)
    node_of(made, "p")
    [nodeclaim] = nodeclaims(made)
    assert DRIVERS not in nodeclaim["metadata"]["annotations"]


# Context("Conflicts & contention (X)") -------------------------------------------------------------------------------


def test_x3_dra_prunes_every_type_that_otherwise_fits() -> None:
    """ "should fail when DRA prunes all instance types that otherwise fit (X3)": only an arm64 type has the GPU and
    the pod requires amd64."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                ]
            }
        }
    }
    made = dra_lab(
        nodepool_doc(),
        draconfig(1, types=("c-2x-arm64-linux",)),
        device_class(),
        claim("gpu-claim", exact()),
        dra_pod("p", ("gpu", "gpu-claim"), affinity=affinity),
    )
    made.advance(PUBLISHED)
    assert not_scheduled(made, "p")
    assert nodeclaims(made) == []


# Context("Cross-cutting / regression (R)") ---------------------------------------------------------------------------


def test_r1_a_mixed_batch_of_dra_and_plain_pods() -> None:
    """ "should handle a mixed batch of DRA and non-DRA pods (R1)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        device_class(),
        claim("gpu-claim", exact()),
        dra_pod("dra", ("gpu", "gpu-claim")),
        unschedulable_pod("plain"),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "dra")
    node_of(made, "plain")
    assert allocated(made, "gpu-claim") == [f"{GPU_DRIVER}/{node}/gpu-0"]


# Context("In-cluster device allocation against existing nodes (C)") --------------------------------------------------


def test_c1_binds_to_an_initialized_node_whose_published_device_fits() -> None:
    """ "should bind to an existing initialized node whose published device satisfies the claim (C1)": the node is
    the one a first pod brought up (initialized, its gpu-1 published and free)."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("first", exact()),
        claim("gpu-claim", exact()),
        dra_pod("first", ("gpu", "first")),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "first")
    made.store.create(dra_pod("p", ("gpu", "gpu-claim")))
    made.advance(PUBLISHED)
    assert node_of(made, "p") == node
    assert len(nodeclaims(made)) == 1
    assert allocated(made, "gpu-claim") == [f"{GPU_DRIVER}/{node}/gpu-1"]


def test_c2_prefers_an_existing_nodes_device_to_launching() -> None:
    """ "should prefer an existing node's published device over launching a new node (C2)": a new gpu-it NodeClaim
    could serve the claim too, but the existing node's free published device wins and nothing is launched."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("first", exact()),
        claim("gpu-claim", exact()),
        dra_pod("first", ("gpu", "first")),
    )
    made.advance(PUBLISHED)
    node = node_of(made, "first")
    made.store.create(dra_pod("p", ("gpu", "gpu-claim")))
    made.advance(2)
    assert node_of(made, "p") == node
    assert len(nodeclaims(made)) == 1


# Context("Cross-loop in-memory claim reuse (E)") ---------------------------------------------------------------------


def test_e2_a_second_pod_of_a_template_allocated_shared_claim_lands_on_the_same_nodeclaim() -> None:
    """ "should land a second pod on the same NodeClaim for a template-allocated shared claim (E2)"."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(2),
        device_class(),
        claim("shared-claim", exact()),
        dra_pod("a", ("gpu", "shared-claim")),
        dra_pod("b", ("gpu", "shared-claim")),
    )
    made.advance(PUBLISHED)
    assert node_of(made, "a") == node_of(made, "b")
    assert len(nodeclaims(made)) == 1


def test_e2_the_shared_claim_needs_one_device_not_one_per_pod() -> None:
    """E2 on a one-GPU type: the claim is allocated once (its one device), so both pods fit one NodeClaim."""
    made = dra_lab(
        nodepool_doc(),
        draconfig(1),
        device_class(),
        claim("shared-claim", exact()),
        dra_pod("a", ("gpu", "shared-claim")),
        dra_pod("b", ("gpu", "shared-claim")),
    )
    made.advance(2)
    assert len(nodeclaims(made)) == 1


def test_e_a_claim_two_pods_share_is_allocated_once_on_an_existing_node() -> None:
    """ "Cross-loop in-memory claim reuse (E)" on an existing node: the node has one free published GPU; the first
    pod's claim takes it this round and the second pod of the same claim is served by that allocation, so both
    stay on the node and nothing is launched (allocator.go ClassifyClaims: an in-memory allocated claim)."""
    shared = DeviceRequest("shared-claim", "req", "gpu")
    pods = [replace(pod(cpu="10m", name=name), device_requests=(shared,)) for name in ("a", "b")]
    gpu_it = replace(
        instance_type("gpu-it", "4", "16Gi"), devices=({"driver": GPU_DRIVER, "devices": [{"name": "gpu-0"}]},)
    )
    free = Device.from_spec({"name": "gpu-1"}, GPU_DRIVER, f"{GPU_DRIVER}/gpu-node")
    result = schedule(
        pods,
        types=[gpu_it],
        nodes=[node("gpu-node", cpu="8", memory="16Gi")],
        node_devices={"gpu-node": [free]},
        device_classes=CLASSES,
    )
    assert [p.name for p in result.placements["gpu-node"]] == ["a", "b"]
    assert result.new_nodeclaims == []


def test_e_a_pod_sharing_a_claim_allocated_on_a_new_nodeclaim_goes_there_or_nowhere() -> None:
    """allocator.go:439-445 (ClassifyClaims): a claim allocated this round on a planned NodeClaim's template devices
    is bound to that NodeClaim. The second pod of the claim does not fit there (3 + 3 CPUs on a 4-CPU type), and a
    new NodeClaim is refused ("claim is bound to a different in-flight NodeClaim"): its device would not be there."""
    shared = DeviceRequest("shared-claim", "req", "gpu")
    pods = [replace(pod(cpu="3", name=name), device_requests=(shared,)) for name in ("a", "b")]
    gpu_it = replace(
        instance_type("gpu-it", "4", "16Gi"), devices=({"driver": GPU_DRIVER, "devices": [{"name": "gpu-0"}]},)
    )
    result = schedule(pods, types=[gpu_it], device_classes=CLASSES)
    assert [[p.name for p in nc.pods] for nc in result.new_nodeclaims] == [["a"]]
    [(uid, failure)] = result.failures.items()
    assert uid == pods[1].uid
    assert {(reason.kind, reason.message) for reason in failure.reasons} == {
        ("devices", "claim is bound to a different in-flight NodeClaim (ResourceClaim=default/shared-claim)")
    }


# allocator_test.go Describe("Constraint satisfaction") and Describe("Constraint scoped to request subset") ---------

CLASSES = {"gpu": DeviceClass("gpu", ('device.driver == "gpu.example.com"',))}
NUMA = f"{GPU_DRIVER}/numa"


def numa_devices(*nodes: str) -> list[Device]:
    return [
        Device.from_spec({"name": f"gpu-{i}", "attributes": {NUMA: {"string": node}}}, GPU_DRIVER, "pool-a")
        for i, node in enumerate(nodes)
    ]


def claim_requests(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]]) -> list[Any]:
    spec = {"devices": {"requests": list(requests), "constraints": constraints}}
    return requests_from_claim_spec(spec, name, "spec")


def allocation(outcome: Any) -> list[tuple[str, str]] | str:
    """(request, device) of each allocated device, or allocate's reason."""
    return outcome if isinstance(outcome, str) else [(request.name, device.name) for request, device in outcome]


NO_CHOICE = 'cannot allocate the devices of claim "c1": no choice of devices satisfies its matchAttribute constraints'


def test_allocator_satisfies_match_attribute_constraints() -> None:
    """ "Constraint satisfaction" / "should satisfy MatchAttribute constraints"."""
    requests = claim_requests("c1", exact("req-1", count=2), constraints=[{"matchAttribute": NUMA}])
    outcome = allocate(requests, numa_devices("node-0", "node-0", "node-1", "node-1"), CLASSES)
    assert allocation(outcome) == [("req-1", "gpu-0"), ("req-1", "gpu-1")]


def test_allocator_backtracks_and_fails_when_no_numa_node_has_three() -> None:
    """ "Constraint satisfaction" / "should backtrack to satisfy constraints": 3 devices on one NUMA node, of 2+2."""
    requests = claim_requests("c1", exact("req-1", count=3), constraints=[{"matchAttribute": NUMA}])
    assert allocate(requests, numa_devices("node-0", "node-0", "node-1", "node-1"), CLASSES) == NO_CHOICE


def test_allocator_backtracks_past_a_first_device_that_pins_the_wrong_value() -> None:
    """The DFS of "should backtrack to satisfy constraints" where it matters: the first device's NUMA node has no
    second device, so the pair is the next two."""
    requests = claim_requests("c1", exact("req-1", count=2), constraints=[{"matchAttribute": NUMA}])
    outcome = allocate(requests, numa_devices("node-0", "node-1", "node-1"), CLASSES)
    assert allocation(outcome) == [("req-1", "gpu-1"), ("req-1", "gpu-2")]


def test_allocator_satisfies_constraints_with_backtracking_across_requests() -> None:
    """ "Constraint satisfaction" / "should satisfy constraints with backtracking across requests"."""
    requests = claim_requests(
        "c1",
        exact("req-1", count=2),
        exact("req-2", count=2),
        constraints=[
            {"matchAttribute": NUMA, "requests": ["req-1"]},
            {"matchAttribute": NUMA, "requests": ["req-2"]},
        ],
    )
    outcome = allocate(requests, numa_devices("node-0", "node-1", "node-0", "node-1"), CLASSES)
    assert allocation(outcome) == [("req-1", "gpu-0"), ("req-1", "gpu-2"), ("req-2", "gpu-1"), ("req-2", "gpu-3")]


def test_allocator_lets_unscoped_requests_cross_constraint_boundaries() -> None:
    """ "Constraint scoped to request subset" / "should allow non-scoped requests to cross constraint boundaries"."""
    requests = claim_requests(
        "c1",
        exact("req-a"),
        exact("req-b"),
        exact("req-c"),
        constraints=[{"matchAttribute": NUMA, "requests": ["req-a", "req-b"]}],
    )
    outcome = allocate(requests, numa_devices("node-0", "node-0", "node-1"), CLASSES)
    assert allocation(outcome) == [("req-a", "gpu-0"), ("req-b", "gpu-1"), ("req-c", "gpu-2")]


# constraint_test.go Describe("MatchAttributeConstraint") / Describe("direct comparison (concrete attribute values)")

ZONE_ATTRIBUTE = "topology.kubernetes.io/zone"


def zoned(*zones: str | None) -> list[Device]:
    return [
        Device.from_spec(
            {"name": f"dev-{'abc'[i]}", "attributes": {ZONE_ATTRIBUTE: {"string": zone}} if zone else {}},
            GPU_DRIVER,
            "pool-a",
        )
        for i, zone in enumerate(zones)
    ]


@pytest.mark.parametrize(
    ("zones", "expected"),
    [
        (("us-west-2a", "us-west-2a"), [("req-a", "dev-a"), ("req-b", "dev-b")]),
        (("us-west-2a", "us-east-1a"), NO_CHOICE),
    ],
    ids=[
        "should accept a second device with the same attribute value",
        "should reject a device with a different attribute value",
    ],
)
def test_constraint_compares_the_attribute_across_requests(zones: tuple[str, ...], expected: Any) -> None:
    """ "direct comparison": with no requestNames the constraint applies to all requests."""
    requests = claim_requests("c1", exact("req-a"), exact("req-b"), constraints=[{"matchAttribute": ZONE_ATTRIBUTE}])
    assert allocation(allocate(requests, zoned(*zones), CLASSES)) == expected


def test_constraint_rejects_a_device_missing_the_attribute() -> None:
    """ "should reject a device missing the attribute"."""
    requests = claim_requests("c1", exact("req-a"), constraints=[{"matchAttribute": ZONE_ATTRIBUTE}])
    assert allocate(requests, zoned(None), CLASSES) == NO_CHOICE


def test_constraint_applies_only_to_the_requests_it_names() -> None:
    """ "should only apply to named requests when requestNames is set"."""
    requests = claim_requests(
        "c1", exact("req-a"), exact("req-b"), constraints=[{"matchAttribute": ZONE_ATTRIBUTE, "requests": ["req-a"]}]
    )
    assert allocation(allocate(requests, zoned("us-west-2a", "us-east-1a"), CLASSES)) == [
        ("req-a", "dev-a"),
        ("req-b", "dev-b"),
    ]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["gpu"], NO_CHOICE),
        (["gpu/a100"], NO_CHOICE),
        (["gpu/h100"], [("gpu/a100", "dev-a"), ("gpu/a100", "dev-b")]),
    ],
    ids=[
        "should apply to sub-requests when requestNames contains the parent",
        "should apply to sub-requests when requestNames contains the qualified name",
        "should skip sub-requests when requestNames contains a different qualified name",
    ],
)
def test_constraint_on_subrequests(names: list[str], expected: Any) -> None:
    """A firstAvailable subrequest is under a constraint naming its parent or its own qualified name."""
    requests = claim_requests(
        "c1",
        first_available("gpu", ("a100", 2)),
        constraints=[{"matchAttribute": ZONE_ATTRIBUTE, "requests": names}],
    )
    assert allocation(allocate(requests, zoned("us-west-2a", "us-east-1a"), CLASSES)) == expected


# allocator_test.go Describe("CEL selector filtering"), ("Combined class and request selectors"),
# ("All-mode allocation") and ("FirstAvailable DFS") ---------------------------------------------------------------


def devices_with(driver: str, **attributes: dict[str, Any]) -> list[Device]:
    """Devices of one pool by name, each with its (driver-domain) attributes."""
    return [
        Device.from_spec({"name": name, "attributes": attrs}, driver, "pool-a") for name, attrs in attributes.items()
    ]


def selector_class(name: str, expression: str) -> DeviceClass:
    return DeviceClass(name, (expression,))


def request(name: str, device_class_name: str, count: int | None = 1, selector: str | None = None) -> dict[str, Any]:
    """An exactly request (count None: All mode), with a request-level CEL selector if given."""
    spec = exact(name, device_class_name, count)
    if selector:
        spec["exactly"]["selectors"] = [{"cel": {"expression": selector}}]
    return spec


def subrequest(name: str, device_class_name: str, count: int | None = 1, selector: str | None = None) -> dict[str, Any]:
    return {"name": name, **request(name, device_class_name, count, selector)["exactly"]}


def plain_claim(name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> list[Any]:
    return claim_requests(name, *requests, constraints=constraints or [])


MODELS = devices_with(
    GPU_DRIVER,
    **{
        "gpu-0": {"model": {"string": "H100"}},
        "gpu-1": {"model": {"string": "A100"}},
        "gpu-2": {"model": {"string": "H100"}},
    },
)
H100 = selector_class("h100", f'device.attributes["{GPU_DRIVER}"].model == "H100"')


def test_cel_selector_filtering_allocates_only_matching_devices() -> None:
    """ "CEL selector filtering" / "should only allocate devices matching the selector"."""
    outcome = allocate(plain_claim("c1", request("req-1", "h100", 2)), MODELS, {"h100": H100})
    assert allocation(outcome) == [("req-1", "gpu-0"), ("req-1", "gpu-2")]


def test_cel_selector_filtering_fails_when_too_few_devices_match() -> None:
    """ "CEL selector filtering" / "should fail when not enough devices match the selector"."""
    outcome = allocate(plain_claim("c1", request("req-1", "h100", 3)), MODELS, {"h100": H100})
    assert (
        outcome
        == 'cannot allocate request "req-1" of claim "c1" (DeviceClass h100): 2 matching device(s) free, 3 needed'
    )


def test_cel_selector_filtering_with_request_level_selectors() -> None:
    """ "CEL selector filtering" / "should filter with request-level selectors"."""
    selector = f'device.attributes["{GPU_DRIVER}"].model == "A100"'
    outcome = allocate(plain_claim("c1", request("req-1", "gpu", 1, selector)), MODELS, CLASSES)
    assert allocation(outcome) == [("req-1", "gpu-1")]


def test_both_class_and_request_selectors_must_match() -> None:
    """ "Combined class and request selectors" / "should require both class and request selectors to match"."""
    devices = devices_with(
        GPU_DRIVER,
        **{
            "gpu-0": {"model": {"string": "H100"}, "memory": {"int": 80}},
            "gpu-1": {"model": {"string": "H100"}, "memory": {"int": 40}},
            "gpu-2": {"model": {"string": "A100"}, "memory": {"int": 80}},
        },
    )
    classes = {"h100-class": H100}
    memory = f'device.attributes["{GPU_DRIVER}"].memory > 60'
    outcome = allocate(plain_claim("c1", request("req-1", "h100-class", 1, memory)), devices, classes)
    assert allocation(outcome) == [("req-1", "gpu-0")]
    outcome = allocate(plain_claim("c2", request("req-1", "h100-class", 2, memory)), devices, classes)
    assert outcome == (
        'cannot allocate request "req-1" of claim "c2" (DeviceClass h100-class): 1 matching device(s) free, 2 needed'
    )


def test_all_mode_fails_when_it_matches_no_device() -> None:
    """ "All-mode allocation" / "should fail when an All-mode request matches zero devices"."""
    nics = devices_with(NIC_DRIVER, **{"nic-0": {}})
    outcome = allocate(plain_claim("c1", request("req-1", "gpu", None)), nics, CLASSES)
    assert (
        outcome
        == 'cannot allocate request "req-1" of claim "c1" (DeviceClass gpu): 0 matching device(s) free, 0 needed'
    )


def test_all_mode_fails_when_a_matching_device_is_already_allocated() -> None:
    """ "All-mode allocation" / "should fail when an already-allocated device is in the all set": All mode needs
    every eligible device, and gpu-0 is taken."""
    gpus = devices_with(GPU_DRIVER, **{"gpu-0": {}, "gpu-1": {}})
    taken = {(GPU_DRIVER, "pool-a", "gpu-0")}
    outcome = allocate(plain_claim("c1", request("req-1", "gpu", None)), gpus, CLASSES, taken)
    assert outcome == (
        'cannot allocate request "req-1" of claim "c1" (DeviceClass gpu): allocationMode All needs every matching '
        "device, and 1 of 2 are allocated already"
    )


def test_all_mode_and_exact_count_mixed_in_one_claim() -> None:
    """ "All-mode allocation" / "should work with All-mode and ExactCount mixed in the same claim"."""
    devices = devices_with(
        GPU_DRIVER,
        **{
            "gpu-0": {"type": {"string": "compute"}},
            "gpu-1": {"type": {"string": "compute"}},
            "nic-0": {"type": {"string": "network"}},
        },
    )
    classes = {
        kind: selector_class(kind, f'device.attributes["{GPU_DRIVER}"].type == "{kind}"')
        for kind in ("compute", "network")
    }
    outcome = allocate(
        plain_claim("c1", request("all-compute", "compute", None), request("one-nic", "network")), devices, classes
    )
    assert allocation(outcome) == [("all-compute", "gpu-0"), ("all-compute", "gpu-1"), ("one-nic", "nic-0")]


def test_all_mode_satisfies_match_attribute_constraints() -> None:
    """ "All-mode allocation" / "should satisfy MatchAttribute constraints in All mode"."""
    requests = claim_requests("c1", request("req-1", "gpu", None), constraints=[{"matchAttribute": NUMA}])
    outcome = allocate(requests, numa_devices("node-0", "node-0"), CLASSES)
    assert allocation(outcome) == [("req-1", "gpu-0"), ("req-1", "gpu-1")]


def test_first_available_falls_back_to_a_lower_priority_subrequest() -> None:
    """ "FirstAvailable DFS" / "should fall back to lower-priority sub-request when higher fails"."""
    gpus = devices_with(GPU_DRIVER, **{"gpu-0": {}, "gpu-1": {}})
    requests = plain_claim("c1", first_available("gpu-req", ("prefer-4", 4), ("fallback-2", 2)))
    assert allocation(allocate(requests, gpus, CLASSES)) == [
        ("gpu-req/fallback-2", "gpu-0"),
        ("gpu-req/fallback-2", "gpu-1"),
    ]


def test_first_available_fails_when_no_subrequest_is_satisfiable() -> None:
    """ "FirstAvailable DFS" / "should fail when no sub-request is satisfiable": the preferred one's reason."""
    gpus = devices_with(GPU_DRIVER, **{"gpu-0": {}})
    requests = plain_claim("c1", first_available("gpu-req", ("prefer-4", 4), ("fallback-2", 2)))
    assert allocate(requests, gpus, CLASSES) == (
        'cannot allocate request "gpu-req/prefer-4" of claim "c1" (DeviceClass gpu): 1 matching device(s) free, 4 needed'
    )


ZONE_PARENT = [{"requests": ["gpu-req"], "matchAttribute": f"{GPU_DRIVER}/zone"}]


def test_first_available_constraint_scoped_to_the_parent_applies_to_every_subrequest() -> None:
    """ "FirstAvailable DFS" / "should handle constraints scoped to parent name applying to all sub-requests":
    prefer-3 cannot have three same-zone GPUs, so fallback-2 wins with the two in zone-a."""
    devices = devices_with(
        GPU_DRIVER,
        **{
            "gpu-0": {"zone": {"string": "zone-a"}},
            "gpu-1": {"zone": {"string": "zone-a"}},
            "gpu-2": {"zone": {"string": "zone-b"}},
        },
    )
    requests = claim_requests(
        "c1", first_available("gpu-req", ("prefer-3", 3), ("fallback-2", 2)), constraints=ZONE_PARENT
    )
    assert allocation(allocate(requests, devices, CLASSES)) == [
        ("gpu-req/fallback-2", "gpu-0"),
        ("gpu-req/fallback-2", "gpu-1"),
    ]


def test_first_available_resets_a_failed_subrequests_pin() -> None:
    """ "FirstAvailable DFS" / "should reset a constraint pin from a failed sub-request before the winning
    sub-request needs a different value"."""
    devices = devices_with(
        GPU_DRIVER,
        **{
            "gpu-0": {"model": {"string": "A"}, "zone": {"string": "zone-a"}},
            "gpu-1": {"model": {"string": "B"}, "zone": {"string": "zone-b"}},
            "gpu-2": {"model": {"string": "B"}, "zone": {"string": "zone-b"}},
        },
    )
    model = 'device.attributes["gpu.example.com"].model == "{}"'
    requests = claim_requests(
        "c1",
        {
            "name": "gpu-req",
            "firstAvailable": [
                subrequest("prefer-2", "gpu", 2, model.format("A")),
                subrequest("fallback-2", "gpu", 2, model.format("B")),
            ],
        },
        constraints=ZONE_PARENT,
    )
    assert allocation(allocate(requests, devices, CLASSES)) == [
        ("gpu-req/fallback-2", "gpu-1"),
        ("gpu-req/fallback-2", "gpu-2"),
    ]


def test_first_available_falls_back_from_an_all_mode_subrequest_matching_nothing() -> None:
    """ "FirstAvailable DFS" / "should fall back from All-mode to ExactCount when All-mode matches zero devices"."""
    nics = devices_with(NIC_DRIVER, **{"nic-0": {}})
    classes = {**CLASSES, "nic": DeviceClass("nic", (f'device.driver == "{NIC_DRIVER}"',))}
    requests = plain_claim(
        "c1",
        {
            "name": "device-req",
            "firstAvailable": [subrequest("all-gpus", "gpu", None), subrequest("fallback-nic", "nic")],
        },
    )
    assert allocation(allocate(requests, nics, classes)) == [("device-req/fallback-nic", "nic-0")]
