"""Karpenter's volume attachment limit tests ported to karpui's engine: a node's CSINode (or, until it is published,
its instance type) caps how many PVCs of each CSI driver its pods attach, a shared PVC counted once.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/provisioning/scheduling/suite_test.go (Describe
"VolumeUsage", lines 2891-3290, with Context "InstanceType VolumeAttachmentLimits"; Context "CSIMigration", lines
4140-4298), pkg/controllers/state/suite_test.go (Describe "Volume Usage/Limits", lines 224-340) and
pkg/scheduling/volumeusage_test.go. Each test names the upstream It it follows. A pod's volumes are read from PVC,
PV and StorageClass objects by provisioner.volumes, as the provisioning controller reads them; `Cluster.provision`
plays ExpectProvisioned and setting a node's `csi_drivers` plays applying its CSINode and reconciling its state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from provisioner.catalog import InstanceType
from provisioner.cluster.memory import ObjectStore
from provisioner.controllers.provisioning import cluster_nodes, with_volume_requirements
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.consolidation import ClusterView, simulate
from provisioner.disruption.types import Candidate
from provisioner.nodes import Node
from provisioner.pods import Pod
from provisioner.scheduling import results as r
from provisioner.scheduling.results import SchedulingResult
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve
from provisioner.volumes import (
    VolumeUsage,
    limit_exceeded,
    node_usage,
    pod_volumes,
    requirement_alternatives,
    union,
    validation_error,
)
from tests.builders import CAPACITY_TYPE, HOSTNAME, ZONE, instance_type, node, nodepool, pod
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_disruption import nc
from tests.unit.test_upstream_scheduling_b import unschedulable_pod
from tests.unit.test_upstream_topology import Cluster
from tests.unit.test_upstream_volumes import claim, persistent_volume, storage_class, zones

CSI = "fake.csi.provider"  # csiProvider
LOCAL_CSI = "local.csi.provider"
EBS = "ebs.csi.aws.com"  # plugins.AWSEBSDriverName
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"


# Builders ------------------------------------------------------------------------------------------------------------


def fake_type(name: str = "instance-type", cpu: str = "1024") -> InstanceType:
    """fake.NewInstanceType with 1024 pods and `cpu` (its price follows)."""
    return instance_type(name, cpu, "1024Gi", pods=1024)


def limited(it: InstanceType, limits: dict[str, int]) -> InstanceType:
    """fake.WithVolumeAttachmentLimits."""
    return replace(it, volume_attachment_limits=limits)


def my_storage_class(name: str = "my-storage-class", provisioner: str = CSI, **options: Any) -> dict[str, Any]:
    """test.StorageClass with Zones test-zone-1 (WaitForFirstConsumer, as the suite's classes here are)."""
    return storage_class(name, {ZONE: ["test-zone-1"]}, provisioner=provisioner, **options)


def store_of(*objects: dict[str, Any]) -> ObjectStore:
    store = ObjectStore(clock=lambda: 0.0)
    for obj in objects:
        store.create(obj)
    return store


def using(store: ObjectStore, *claims: str, p: Pod | None = None, ephemeral: bool = False) -> Pod:
    """test.UnschedulablePod with PersistentVolumeClaims `claims` (or one ephemeral volume, tmp-ephemeral), read as the
    provisioning controller reads it: its volume alternatives and the PVCs it attaches by driver."""
    p = p or pod()
    volumes: list[dict[str, Any]] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    if ephemeral:
        volumes.append({"name": "tmp-ephemeral", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    manifest = {"metadata": {"name": p.name, "namespace": p.namespace}, "spec": {"volumes": volumes}}
    assert validation_error(store, manifest) is None
    return replace(
        p, volume_requirements=requirement_alternatives(store, manifest), csi_volumes=pod_volumes(store, manifest)
    )


def publish(cluster: Cluster, name: str, *drivers: tuple[str, int | None]) -> None:
    """ExpectApplied(csiNode) and the node state controller's reconcile: the node's CSINode drivers."""
    cluster.nodes = [replace(n, csi_drivers=drivers) if n.name == name else n for n in cluster.nodes]


def initial_node(cluster: Cluster) -> Node:
    """ExpectProvisioned(initialPod) and ExpectScheduled: the node the suite's first, volume-less pod launched."""
    first = pod()
    cluster.provision([first])
    placed = cluster.node_of(first)
    assert placed is not None
    return placed


def on_node(cluster: Cluster, name: str) -> int:
    return sum(len(n.pods) for n in cluster.nodes if n.name == name)


# volumeusage_test.go ---------------------------------------------------------------------------------------------


def test_should_only_use_fallback_limits_until_the_driver_is_published() -> None:
    """Describe("VolumeUsage") It("should only use fallback limits until the driver is published")"""
    volumes = {CSI: frozenset({"volume-a", "volume-b"})}
    usage = VolumeUsage().add_fallback_limit(CSI, 1)
    assert usage.exceeds_limits(volumes) == (
        "would exceed volume limit (provisioner=fake.csi.provider, volume-count=2, volume-limit=1)"
    )
    usage = usage.add_limit(CSI, 2).add_fallback_limit(CSI, 1)
    assert usage.exceeds_limits(volumes) is None
    usage = usage.add_unbounded(CSI).add_fallback_limit(CSI, 1)
    assert usage.exceeds_limits({CSI: frozenset({"volume-a", "volume-b", "volume-c"})}) is None


def test_volume_usage_counts_a_shared_pvc_once_and_forgets_only_the_deleted_pods() -> None:
    """VolumeUsage.Add / DeletePod (volumeusage.go:188-201): volumes are built again from the pods that stay, so a PVC
    two pods share stays counted while either does."""
    usage = VolumeUsage().add_limit(CSI, 1)
    usage = usage.add("default/a", {CSI: frozenset({"default/shared"})})
    usage = usage.add("default/b", {CSI: frozenset({"default/shared"})})
    assert usage.volumes == {CSI: frozenset({"default/shared"})}
    assert usage.exceeds_limits({CSI: frozenset({"default/shared"})}) is None
    usage = usage.delete_pod("default/a")
    assert usage.volumes == {CSI: frozenset({"default/shared"})}
    assert usage.exceeds_limits({CSI: frozenset({"default/other"})}) is not None
    assert usage.delete_pod("default/b").exceeds_limits({CSI: frozenset({"default/other"})}) is None


# scheduling/suite_test.go, Describe("VolumeUsage") ----------------------------------------------------------------


def test_should_launch_multiple_nodes_if_required_due_to_volume_limits() -> None:
    """Describe("VolumeUsage") It("should launch multiple nodes if required due to volume limits")"""
    cluster = Cluster(types=[fake_type()])
    first = initial_node(cluster)
    publish(cluster, first.name, (CSI, 10))
    claims = [claim(f"my-claim-{ab}-{i}", storage_class_name="my-storage-class") for i in range(6) for ab in "ab"]
    store = store_of(my_storage_class(), *claims)
    cluster.provision([using(store, f"my-claim-a-{i}", f"my-claim-b-{i}") for i in range(6)])
    # The in-flight node can only take 5 of the pods due to the CSINode volume limit.
    assert len(cluster.nodes) == 2
    assert on_node(cluster, first.name) == 1 + 5


def test_should_launch_a_single_node_if_all_pods_use_the_same_pvc() -> None:
    """Describe("VolumeUsage") It("should launch a single node if all pods use the same PVC")"""
    cluster = Cluster(types=[fake_type()])
    first = initial_node(cluster)
    publish(cluster, first.name, (CSI, 10))
    store = store_of(
        storage_class("my-storage-class", {ZONE: ["test-zone-1"]}, provisioner=CSI, binding="Immediate"),
        persistent_volume("my-volume", zones("test-zone-1")),
        claim("my-claim", storage_class_name="my-storage-class", volume_name="my-volume"),
    )
    cluster.provision([using(store, "my-claim") for _ in range(100)])
    assert len(cluster.nodes) == 1
    assert on_node(cluster, first.name) == 101


def test_should_not_fail_for_nfs_volumes() -> None:
    """Describe("VolumeUsage") It("should not fail for NFS volumes"): a PV of no CSI driver counts against none."""
    cluster = Cluster(types=[fake_type()])
    first = initial_node(cluster)
    nfs = persistent_volume("my-volume", zones("test-zone-1"))
    del nfs["spec"]["csi"]
    nfs["spec"].update(storageClassName="nfs", nfs={"server": "fake.server", "path": "/some/path"})
    store = store_of(nfs, claim("my-claim", storage_class_name="", volume_name="my-volume"))
    pods = [using(store, "my-claim", "my-claim") for _ in range(5)]
    assert [p.csi_volumes for p in pods] == [()] * 5
    cluster.provision(pods)
    assert len(cluster.nodes) == 1
    assert on_node(cluster, first.name) == 6


# Context("InstanceType VolumeAttachmentLimits") ----------------------------------------------------------------------

LIMITED = limited(fake_type("limited-instance-type"), {CSI: 10})


def pvcs(count: int, prefix: str = "my-claim", storage: str = "my-storage-class") -> list[dict[str, Any]]:
    return [claim(f"{prefix}-{i}", storage_class_name=storage) for i in range(count)]


def test_should_launch_enough_nodes_for_all_pods_in_a_single_scheduling_loop() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should launch enough nodes for all pods in a single
    scheduling loop")"""
    store = store_of(my_storage_class(), *pvcs(100))
    cluster = Cluster(types=[LIMITED])
    result = cluster.provision([using(store, f"my-claim-{i}") for i in range(100)])
    # Each node supports 10 attachments, so 100 pods with one PVC each need 10 nodes, all from one loop.
    assert [len(c.pods) for c in result.new_nodeclaims] == [10] * 10
    assert len(cluster.nodes) == 10


@pytest.mark.parametrize("registered", [False, True], ids=["before node registration", "after node registration"])
def test_should_use_instance_type_limits_until_the_csinode_driver_is_published(registered: bool) -> None:
    """DescribeTable("should use instance type limits until the CSINode driver is published"): an in-flight
    NodeClaim's node, with or without its Node but with no CSINode yet, holds 10 of the 11 pods."""
    labels = {
        NODEPOOL: "default",
        INSTANCE_TYPE: "limited-instance-type",
        ZONE: "test-zone-1",
        CAPACITY_TYPE: "on-demand",
        HOSTNAME: "nodeclaim-1",
    }
    inflight = Node(
        name="nodeclaim-1",
        labels=labels,
        allocatable=dict(LIMITED.allocatable),
        initialized=False,
        managed=True,
        nodepool="default",
        nodeclaim="" if registered else "nodeclaim-1",
    )
    store = store_of(my_storage_class(), *pvcs(11))
    cluster = Cluster(types=[LIMITED], nodes=[inflight])
    result = cluster.provision([using(store, f"my-claim-{i}") for i in range(11)])
    assert len(result.placements["nodeclaim-1"]) == 10
    assert [len(c.pods) for c in result.new_nodeclaims] == [1]


def test_should_account_for_pods_with_multiple_volumes() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should account for pods with multiple volumes")"""
    store = store_of(my_storage_class(), *pvcs(6, "my-claim-a"), *pvcs(6, "my-claim-b"))
    cluster = Cluster(types=[LIMITED])
    result = cluster.provision([using(store, f"my-claim-a-{i}", f"my-claim-b-{i}") for i in range(6)])
    # Each node can only hold 5 of the 6 pods due to the volume limit.
    assert sorted(len(c.pods) for c in result.new_nodeclaims) == [1, 5]


def test_should_count_each_pvc_once_when_shared_by_multiple_pods() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should count each PVC once when shared by multiple pods")"""
    store = store_of(my_storage_class(), claim("my-claim", storage_class_name="my-storage-class"))
    cluster = Cluster(types=[LIMITED])
    result = cluster.provision([using(store, "my-claim") for _ in range(100)])
    assert [len(c.pods) for c in result.new_nodeclaims] == [100]


def test_should_not_limit_volumes_for_drivers_without_a_declared_limit() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should not limit volumes for drivers without a declared
    limit")"""
    store = store_of(my_storage_class(), *pvcs(20))
    cluster = Cluster(types=[limited(fake_type(), {"other.csi.provider": 1})])
    result = cluster.provision([using(store, f"my-claim-{i}") for i in range(20)])
    assert [len(c.pods) for c in result.new_nodeclaims] == [20]


def test_should_not_schedule_pods_which_exceed_the_volume_limits_of_every_instance_type() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should not schedule pods which exceed the volume limits of
    every instance type")"""
    store = store_of(my_storage_class(), *pvcs(11))
    p = using(store, *(f"my-claim-{i}" for i in range(11)))
    cluster = Cluster(types=[LIMITED])
    result = cluster.provision([p])
    assert result.new_nodeclaims == []
    assert cluster.node_of(p) is None
    [reason] = result.failures[p.id].reasons
    assert (reason.nodepool, reason.kind) == ("default", r.VOLUME_LIMITS)
    assert reason.message == (
        "would exceed volume limit for all instance type options "
        "(provisioner=fake.csi.provider, volume-count=11, volume-limit=10)"
    )


def test_should_filter_out_instance_types_which_cannot_support_the_pods_volumes() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should filter out instance types which cannot support the
    pod's volumes")"""
    types = [limited(fake_type("small-limit", "16"), {CSI: 2}), limited(fake_type("large-limit"), {CSI: 20})]
    store = store_of(my_storage_class(), *pvcs(5))
    p = using(store, *(f"my-claim-{i}" for i in range(5)))
    cluster = Cluster(types=types)
    cluster.provision([p])
    placed = cluster.node_of(p)
    assert placed is not None
    assert placed.labels[INSTANCE_TYPE] == "large-limit"


def test_should_filter_out_instance_types_which_cannot_support_all_volumes_across_multiple_csi_drivers() -> None:
    """Context("InstanceType VolumeAttachmentLimits") It("should filter out instance types which cannot support all
    of the pod's volumes across multiple CSI drivers")"""
    types = [
        limited(fake_type("partial-support", "16"), {CSI: 10, LOCAL_CSI: 1}),
        limited(fake_type("full-support"), {CSI: 10, LOCAL_CSI: 10}),
    ]
    store = store_of(
        my_storage_class(),
        my_storage_class("local-storage-class", LOCAL_CSI),
        *pvcs(2),
        *pvcs(2, "my-local-claim", "local-storage-class"),
    )
    p = using(store, "my-claim-0", "my-local-claim-0", "my-claim-1", "my-local-claim-1")
    cluster = Cluster(types=types)
    cluster.provision([p])
    placed = cluster.node_of(p)
    assert placed is not None
    assert placed.labels[INSTANCE_TYPE] == "full-support"


# Context("CSIMigration") ---------------------------------------------------------------------------------------------

IN_TREE_CLASS = my_storage_class("in-tree-storage-class", "kubernetes.io/aws-ebs")


def test_should_launch_nodes_for_pods_with_non_dynamic_pvc_using_a_migrated_pvc_pv() -> None:
    """Context("CSIMigration") It("should launch nodes for pods with non-dynamic PVC using a migrated PVC/PV"): the
    in-tree aws-ebs class is counted as the EBS CSI driver, whose CSINode limit of 1 the first pod's PVC fills."""
    ebs = persistent_volume("my-volume", zones("test-zone-1"))
    del ebs["spec"]["csi"]
    ebs["spec"]["awsElasticBlockStore"] = {"volumeID": "vol-1"}
    store = store_of(IN_TREE_CLASS, claim("pvc-1", storage_class_name="in-tree-storage-class"), ebs)
    cluster = Cluster(types=[fake_type()])
    initial = using(store, "pvc-1")
    assert initial.csi_volumes == ((EBS, frozenset({"default/pvc-1"})),)
    cluster.provision([initial])
    first = cluster.node_of(initial)
    assert first is not None
    publish(cluster, first.name, (EBS, 1))
    store.create(claim("pvc-2", storage_class_name="in-tree-storage-class"))
    second = using(store, "pvc-2")
    cluster.provision([second])
    placed = cluster.node_of(second)
    assert placed is not None
    assert placed.name != first.name


def test_should_launch_nodes_for_pods_with_ephemeral_volume_using_a_migrated_pvc_pv() -> None:
    """Context("CSIMigration") It("should launch nodes for pods with ephemeral volume using a migrated PVC/PV"): each
    pod's ephemeral PVC (given the default in-tree class, as kube-apiserver's DefaultStorageClass admission does)."""
    first_pod, second_pod = pod(name="initial"), pod(name="second")
    store = store_of(
        IN_TREE_CLASS,
        claim("initial-tmp-ephemeral", storage_class_name="in-tree-storage-class"),
        claim("second-tmp-ephemeral", storage_class_name="in-tree-storage-class"),
    )
    cluster = Cluster(types=[fake_type()])
    initial = using(store, p=first_pod, ephemeral=True)
    cluster.provision([initial])
    first = cluster.node_of(initial)
    assert first is not None
    publish(cluster, first.name, (EBS, 1))
    second = using(store, p=second_pod, ephemeral=True)
    assert second.csi_volumes == ((EBS, frozenset({"default/second-tmp-ephemeral"})),)
    cluster.provision([second])
    placed = cluster.node_of(second)
    assert placed is not None
    assert placed.name != first.name


# state/suite_test.go, Describe("Volume Usage/Limits") -------------------------------------------------------------


def csi_node(name: str, allocatable: dict[str, Any] | None = None) -> dict[str, Any]:
    driver: dict[str, Any] = {"name": CSI, "nodeID": "fake-node-id"}
    if allocatable is not None:
        driver["allocatable"] = allocatable
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


def node_doc(name: str = "node-1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name}},
        "spec": {"providerID": f"fake:///{name}"},
        "status": {"allocatable": {"cpu": "1024", "pods": "1024"}, "capacity": {"cpu": "1024", "pods": "1024"}},
    }


def nodeclaim_doc(name: str = "nodeclaim-1", node_name: str = "node-1") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {NODEPOOL: "default"}, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}},
        "status": {"providerID": f"fake:///{node_name}", "nodeName": node_name},
    }


def bound_pods(count: int, node_name: str = "node-1") -> list[dict[str, Any]]:
    """test.Pod with a PVC of my-storage-class each (claim-<i>), bound to the node (ExpectManualBinding)."""
    docs: list[dict[str, Any]] = []
    for i in range(count):
        docs.append(claim(f"claim-{i}", storage_class_name="my-storage-class"))
        made = unschedulable_pod(
            f"pod-{i}", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": f"claim-{i}"}}]
        )
        made["spec"]["nodeName"] = node_name
        made["status"] = {"phase": "Running"}
        docs.append(made)
    return docs


def state_node(*documents: dict[str, Any]) -> Node:
    """The node as the cluster's state holds it: `cluster_nodes` over a lab store with the documents."""
    made = lab(nodepool_doc(), *documents)
    [found] = [n for n in cluster_nodes(made.ctx) if n.name == "node-1"]
    return found


def exceeds(n: Node, volumes: dict[str, frozenset[str]], fallback: dict[str, int] | None = None) -> str | None:
    """stateNode.VolumeUsage().ExceedsLimits: the node's pods' PVCs with `volumes` against its limits."""
    return limit_exceeded(union(n.csi_volumes, volumes), node_usage(n.csi_drivers, fallback).limits)


SC = storage_class("my-storage-class", {ZONE: ["test-zone-1"]}, provisioner=CSI, binding="Immediate")


def test_should_hydrate_the_volume_usage_on_a_node_update() -> None:
    """Describe("Volume Usage/Limits") It("should hydrate the volume usage on a Node update")"""
    n = state_node(SC, node_doc(), csi_node("node-1", {"count": 10}), *bound_pods(10))
    assert n.csi_drivers == ((CSI, 10),)
    assert exceeds(n, {CSI: frozenset({"test"})}) == (
        "would exceed volume limit (provisioner=fake.csi.provider, volume-count=11, volume-limit=10)"
    )


@pytest.mark.parametrize("allocatable", [None, {}], ids=["without allocatable data", "without an allocatable count"])
def test_should_treat_a_published_driver_without_an_attachment_limit_as_unbounded(
    allocatable: dict[str, Any] | None,
) -> None:
    """DescribeTable("should treat a published driver without an attachment limit as unbounded")"""
    n = state_node(node_doc(), csi_node("node-1", allocatable))
    assert n.csi_drivers == ((CSI, None),)
    assert exceeds(n, {CSI: frozenset({"volume-a", "volume-b"})}, fallback={CSI: 1}) is None


def test_should_maintain_the_volume_usage_state_when_receiving_nodeclaim_updates() -> None:
    """Describe("Volume Usage/Limits") It("should maintain the volume usage state when receiving NodeClaim updates"):
    the node read with its NodeClaim keeps its CSINode's limit and its pods' PVCs, read again too."""
    made = lab(nodepool_doc(), SC, nodeclaim_doc(), node_doc(), csi_node("node-1", {"count": 10}), *bound_pods(10))
    for _ in range(2):
        [n] = [n for n in cluster_nodes(made.ctx) if n.name == "node-1"]
        assert n.managed
        assert exceeds(n, {CSI: frozenset({"test"})}) is not None


def test_should_ignore_the_volume_usage_limits_breach_if_the_pod_update_is_for_an_already_tracked_pod() -> None:
    """Describe("Volume Usage/Limits") It("should ignore the volume usage limits breach if the pod update is for an
    already tracked pod")"""
    n = state_node(SC, nodeclaim_doc(), node_doc(), csi_node("node-1", {"count": 10}), *bound_pods(10))
    assert exceeds(n, {CSI: frozenset({"default/claim-5"})}) is None


# Focused: what the ported cases leave unpinned ---------------------------------------------------------------------


def test_a_node_already_past_its_limit_takes_no_pod_even_without_volumes() -> None:
    """ExistingNode.CanAdd checks the node's usage united with the pod's (existingnode.go:93), so a node whose
    CSINode publishes a limit below what its pods attach is refused to a pod without volumes too."""
    store = store_of(my_storage_class(), *pvcs(2))
    holder = using(store, "my-claim-0", "my-claim-1")
    full = node("full", labels={ZONE: "test-zone-1", CAPACITY_TYPE: "on-demand"})
    full = replace(full, pods=(replace(holder, node_name="full", unschedulable=False, phase="Running"),))
    over = replace(full, csi_drivers=((CSI, 1),))
    plain = pod("100m")
    assert "full" in Cluster(types=[fake_type()], nodes=[full]).provision([plain]).placements
    result = Cluster(types=[fake_type()], nodes=[over]).provision([plain])
    assert "full" not in result.placements
    assert [len(c.pods) for c in result.new_nodeclaims] == [1]


def test_a_consolidation_simulation_respects_the_destinations_volume_limits() -> None:
    """SimulateScheduling reuses the scheduler: a candidate's pod with a PVC does not move onto a node whose CSINode
    limit its pods already fill, and a node is planned instead."""
    store = store_of(my_storage_class(), *pvcs(2))
    moving = replace(using(store, "my-claim-0", p=pod("100m", name="web")), node_name="candidate", unschedulable=False)
    moving = replace(moving, phase="Running")
    candidate = Candidate(nc("candidate"), nodepool(), (moving,), 1.0)
    resident = replace(using(store, "my-claim-1"), node_name="other", unschedulable=False, phase="Running")
    other = node("other", labels={ZONE: "test-zone-1", CAPACITY_TYPE: "on-demand"})
    other = replace(other, pods=(resident,))
    view = ClusterView(claimed=[], nodes=[other], pending=[], pools=[PoolOffer(nodepool(), [fake_type()])], now=0.0)
    assert [p.name for p in simulate([candidate], view).placements["other"]] == ["web"]
    capped = replace(view, nodes=[replace(other, csi_drivers=((CSI, 1),))])
    result = simulate([candidate], capped)
    assert "other" not in result.placements
    assert [[p.name for p in c.pods] for c in result.new_nodeclaims] == [["web"]]


def test_a_lab_node_whose_csinode_is_full_gets_no_more_volumes() -> None:
    """End to end through the provisioning controller's reads: the node's CSINode (cluster_nodes) and the pending
    pod's PVC by driver (with_volume_requirements), so the pod whose PVC would exceed the CSINode's limit needs a
    NodeClaim of its own, while the node takes it without the CSINode. (The lab's kube-scheduler does not model
    NodeVolumeLimits, so the simulation is asked directly rather than by advancing the lab.)"""
    made = lab(
        nodepool_doc(),
        storage_class("my-storage-class", provisioner=CSI),
        claim("data-1", storage_class_name="my-storage-class"),
        unschedulable_pod("first", "100m", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data-1"}}]),
    )
    made.advance(30)
    [first_claim] = made.store.list("NodeClaim")
    node_name = first_claim["status"]["nodeName"]
    assert made.store.get("Pod", "first", "default")["spec"].get("nodeName") == node_name
    made.store.create(claim("data-2", storage_class_name="my-storage-class"))
    second = unschedulable_pod(
        "second", "100m", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data-2"}}]
    )
    made.store.create(second)
    ctx = made.ctx
    pools = [PoolOffer(np, ctx.instance_types_for(np) or []) for np in ctx.nodepools]

    def simulated() -> SchedulingResult:
        p = with_volume_requirements(ctx, ctx.views.pod(made.store.get("Pod", "second", "default")))
        assert p is not None
        assert p.csi_volumes == ((CSI, frozenset({"default/data-2"})),)
        return solve(SchedulingInput(pods=[p], pools=pools, nodes=cluster_nodes(ctx)))

    assert [p.name for p in simulated().placements[node_name]] == ["second"]
    made.store.create(csi_node(node_name, {"count": 1}))
    result = simulated()
    assert node_name not in result.placements
    assert [[p.name for p in c.pods] for c in result.new_nodeclaims] == [["second"]]


def test_a_lab_node_without_its_csinode_holds_what_its_instance_type_allows() -> None:
    """End to end: before its CSINode is published a lab node's limit is its instance type's, found by the node's
    NodePool and instance-type labels among the NodePool's types, and the CSINode's own limit replaces it."""
    made = lab(
        nodepool_doc(),
        storage_class("my-storage-class", provisioner=CSI),
        *pvcs(3, "data"),
        unschedulable_pod("first", "100m", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data-0"}}]),
        types=[limited(fake_type(), {CSI: 1})],
    )
    made.advance(30)
    [first_claim] = made.store.list("NodeClaim")
    node_name = first_claim["status"]["nodeName"]
    assert made.store.get("Pod", "first", "default")["spec"].get("nodeName") == node_name
    ctx = made.ctx
    pools = [PoolOffer(np, ctx.instance_types_for(np) or []) for np in ctx.nodepools]
    more = [
        unschedulable_pod(f"p{i}", "100m", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": f"data-{i}"}}])
        for i in (1, 2)
    ]
    pending = [with_volume_requirements(ctx, ctx.views.pod(made.store.create(doc))) for doc in more]
    assert [p.csi_volumes if p else None for p in pending] == [
        ((CSI, frozenset({"default/data-1"})),),
        ((CSI, frozenset({"default/data-2"})),),
    ]

    def simulated() -> SchedulingResult:
        return solve(SchedulingInput(pods=[p for p in pending if p], pools=pools, nodes=cluster_nodes(ctx)))

    result = simulated()
    assert node_name not in result.placements
    assert sorted(len(c.pods) for c in result.new_nodeclaims) == [1, 1]
    made.store.create(csi_node(node_name, {"count": 3}))
    assert sorted(p.name for p in simulated().placements[node_name]) == ["p1", "p2"]


def test_the_disruption_snapshot_reads_csinode_limits_and_the_pods_pvcs() -> None:
    """The lab end to end: disruption's view has the node's CSINode drivers and its pod's PVCs by driver."""
    made = lab(
        nodepool_doc(),
        storage_class("my-storage-class", provisioner=CSI),
        claim("data", storage_class_name="my-storage-class"),
        unschedulable_pod("web", "100m", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
    )
    made.advance(30)
    [nodeclaim] = made.store.list("NodeClaim")
    made.store.create(csi_node(nodeclaim["status"]["nodeName"], {"count": 7}))
    view, claimed = cluster_view(made.ctx)
    [n] = view.nodes
    assert n.csi_drivers == ((CSI, 7),)
    assert n.csi_volumes == {CSI: frozenset({"default/data"})}
    assert [c.node.csi_drivers for c in claimed] == [((CSI, 7),)]
