"""Karpenter v1.15.0's consolidation suite with DRA (pkg/controllers/disruption/consolidation_dra_test.go, Describe
"Consolidation/DRA") ported onto karpui's consolidation simulation.

simulateConsolidation builds a candidate of each node and runs SimulateScheduling: here build_candidates and
simulate over a cluster view. fake.GPUInstanceType(name, n) is a type declaring n devices `<name>-gpu-<i>` of the GPU
driver in pool `<name>-pool`; a candidate's pod holding its node's published device asks for its claim again once it
moves (the snapshot's with_claimed_devices), and the device it held is the candidate's, gone with it.

Not ported: "does not free a device held by a live pod on a non-candidate node (A, negative)" and "reclaims only the
candidate's share of a shared device (B, partial)" use cluster-wide ResourceSlices (no nodeName), which karpui's
device inventory does not model: it knows devices per node only.
"""

from __future__ import annotations

from dataclasses import replace

from provisioner.catalog import InstanceType
from provisioner.disruption.candidates import build_candidates
from provisioner.disruption.consolidation import ClusterView, simulate
from provisioner.dra.cel import Device
from provisioner.dra.claims import DeviceClass, DeviceRequest
from provisioner.objects import NodePool
from provisioner.pods import OwnerReference
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling.results import SchedulingResult
from provisioner.scheduling.scheduler import PoolOffer
from tests.builders import instance_type, nodepool, pod
from tests.disruption_builders import NOW, claimed

GPU_DRIVER = "gpu.example.com"
GPU_CLASS = {"gpu": DeviceClass("gpu", (f'device.driver == "{GPU_DRIVER}"',))}


def gpu_instance_type(name: str, count: int) -> InstanceType:
    """fake.GPUInstanceType: `count` template devices of the GPU driver."""
    devices = [{"name": f"{name}-gpu-{i}"} for i in range(count)]
    declared = {"driver": GPU_DRIVER, "pool": f"{name}-pool", "devices": devices}
    return replace(instance_type(name, "4", "4Gi", pods=100), devices=(declared,))


def no_gpu_instance_type() -> InstanceType:
    return instance_type("no-gpu-it", "4", "4Gi", pods=100)


def gpu_node(name: str, it: InstanceType, claim: str):
    """gpuNodeClaimAndNode + gpuPodOnNode: a NodeClaim of `it` (allocatable cpu 16, pods 100) whose ReplicaSet pod
    holds a GPU claim; the pod asks for the claim's device again wherever it moves."""
    held = replace(
        pod(name=f"{name}-pod", owner=OwnerReference("ReplicaSet", "rs")),
        device_requests=(DeviceRequest(claim, "gpu", "gpu"),),
    )
    made = claimed(name, it.name, types=[it], pods=[held])
    allocatable = {"cpu": parse_quantity("16"), "pods": 100 * MILLI}
    return replace(made, node=replace(made.node, allocatable=allocatable, capacity=dict(allocatable)))


def consolidation_pool() -> NodePool:
    return nodepool()  # WhenEmptyOrUnderutilized, consolidateAfter 0s


def simulate_consolidation(nodes, types: list[InstanceType], node_devices=None) -> SchedulingResult:
    """simulateConsolidation(nodes...): every node a candidate, scheduled away together."""
    np = consolidation_pool()
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes],
        pending=[],
        pools=[PoolOffer(np, types)],
        now=NOW,
        device_classes=GPU_CLASS,
        node_devices=node_devices or {n.name: [] for n in nodes},  # each published device is held by its pod
    )
    candidates, blocked = build_candidates(view.claimed, {np.name: np}, (), NOW)
    assert blocked == {} and len(candidates) == len(nodes)
    return simulate(candidates, view)


def test_a_candidate_pods_device_is_reallocated_onto_a_replacement():
    """Consolidation/DRA / re-allocates a candidate pod's device onto a replacement (B, positive)"""
    gpu_it = gpu_instance_type("gpu-it", 1)
    node = gpu_node("candidate", gpu_it, "gpu-claim")
    result = simulate_consolidation([node], [gpu_it])
    assert result.failures == {}
    [replacement] = result.new_nodeclaims
    assert [p.name for p in replacement.pods] == ["candidate-pod"]
    assert replacement.instance_type_names == ["gpu-it"]


def test_a_candidate_nodes_published_device_is_no_target():
    """Consolidation/DRA / does not target a candidate node's published device (A, positive): even with its device
    free, the candidate is no place for its pod"""
    gpu_it = gpu_instance_type("gpu-it", 1)
    node = gpu_node("candidate", gpu_it, "gpu-claim")
    published = {"candidate": [Device("incluster-gpu-0", GPU_DRIVER, f"{GPU_DRIVER}/candidate")]}
    result = simulate_consolidation([node], [gpu_it], node_devices=published)
    assert result.failures == {}
    assert len(result.new_nodeclaims) == 1
    assert result.placements == {}


def test_no_consolidation_when_the_candidates_claim_cannot_be_met_elsewhere():
    """Consolidation/DRA / does not consolidate when the candidate's claim cannot be satisfied elsewhere (B,
    negative): the NodePool offers only a type without the device"""
    node = gpu_node("candidate", gpu_instance_type("gpu-it", 1), "gpu-claim")
    result = simulate_consolidation([node], [no_gpu_instance_type()])
    assert result.new_nodeclaims == []
    [failure] = result.failures.values()
    assert failure.pod.name == "candidate-pod"


def test_devices_of_several_candidates_are_reallocated_onto_one_replacement():
    """Consolidation/DRA / re-allocates devices from multiple candidate nodes onto one replacement (B,
    multi-candidate)"""
    gpu_it = gpu_instance_type("gpu-it", 2)
    nodes = [gpu_node("node-1", gpu_it, "gpu-claim-1"), gpu_node("node-2", gpu_it, "gpu-claim-2")]
    result = simulate_consolidation(nodes, [gpu_it])
    assert result.failures == {}
    assert result.placements == {}
    [replacement] = result.new_nodeclaims
    assert sorted(p.name for p in replacement.pods) == ["node-1-pod", "node-2-pod"]
