"""Karpenter's scheduling suite, second half, ported to karpui's engine and lab: volume validation of pending pods,
pods of deleting nodes, reserved capacity, NodePools whose requirements leave no instance type, and DRA pods.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/controllers/provisioning/scheduling/suite_test.go, lines 3000-5987.
Each test names the Describe/It it follows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.lab import Lab
from provisioner.options import KarpenterOptions
from provisioner.scheduling.reservations import RESERVATION_STRICT
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve
from tests.builders import instance_type, node, nodepool, pod, r, req, schedule, term
from tests.lab_builders import deployment, lab, nodepool_doc

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
RESERVATION = "karpenter.k8s.aws/capacity-reservation-id"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


# Lab helpers --------------------------------------------------------------------------------------------------------


def unschedulable_pod(name: str, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    """A bare pod kube-scheduler found no node for (test.UnschedulablePod), with `spec` fields added."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def launched_types(made: Lab) -> list[str]:
    return sorted(c["metadata"]["labels"].get(INSTANCE_TYPE, "") for c in made.store.list("NodeClaim"))


def could_not_schedule(made: Lab) -> dict[str, str]:
    """Pod name -> the error of its last "could not schedule pod" log."""
    return {
        rec.record.fields["Pod"]["name"]: rec.record.fields["error"]
        for rec in made.logs
        if rec.record.message == "could not schedule pod"
    }


# Describe("Volume Topology Requirements"): validation of a pending pod's PVCs ---------------------------------------
# Karpenter's Provisioner.Validate (provisioner.go:580) runs VolumeTopology.ValidatePersistentVolumeClaims
# (volumetopology.go:227) and leaves a pod out of the simulation when one of its PVCs is one kube-scheduler would
# refuse; karpui's provisioning controller does the same (provisioner/volumes.py).


def storage_class(name: str = "default-storage-class", binding: str = "WaitForFirstConsumer") -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "other-provider",
        "volumeBindingMode": binding,
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-1"]}]},
        ],
    }


def claim(
    name: str = "tmp-ephemeral",
    *,
    storage_class_name: str | None = "default-storage-class",
    volume_name: str = "",
    bound: bool = False,
    phase: str = "Pending",
    deleting: bool = False,
) -> dict[str, Any]:
    """A PVC as test.PersistentVolumeClaim makes it: with a volumeName it is Bound and carries bind-completed."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if bound:
        metadata["annotations"] = {BIND_COMPLETED: "yes"}
    if deleting:
        metadata["deletionTimestamp"] = "2027-01-15T08:00:00Z"
        metadata["finalizers"] = ["kubernetes.io/pvc-protection"]
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    if volume_name:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": phase},
    }


def volume(name: str, *, deleting: bool = False) -> dict[str, Any]:
    """A CSI PersistentVolume of driver other-provider (test.PersistentVolume)."""
    metadata: dict[str, Any] = {"name": name}
    if deleting:
        metadata["deletionTimestamp"] = "2027-01-15T08:00:00Z"
        metadata["finalizers"] = ["kubernetes.io/pv-protection"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": metadata,
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "other-provider", "volumeHandle": name},
        },
        "status": {"phase": "Bound"},
    }


def claim_volume(claim_name: str = "tmp-ephemeral") -> list[dict[str, Any]]:
    return [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]


def ephemeral_volume(storage_class_name: str | None = None) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    return [{"name": "tmp-ephemeral", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}]


def provisioned(*documents: dict[str, Any]) -> Lab:
    """A lab with the default NodePool and `documents`, after one provisioning batch (and nothing deleting)."""
    made = lab(nodepool_doc(), *documents)
    made.advance(2)
    return made


def test_a_pod_whose_pvc_is_unbound_with_immediate_binding_gets_no_node() -> None:
    """ "should not launch nodes for pod with unbound volume for volumeBindingMode immediate"."""
    made = provisioned(storage_class(binding="Immediate"), claim(), unschedulable_pod("web", volumes=claim_volume()))
    assert launched_types(made) == []


def test_a_pod_whose_pvc_is_deleting_gets_no_node() -> None:
    """ "should not launch nodes for pod with deleting persistentVolumeClaim"."""
    made = provisioned(storage_class(), claim(deleting=True), unschedulable_pod("web", volumes=claim_volume()))
    assert launched_types(made) == []


def test_a_pod_whose_bound_pv_is_deleting_gets_no_node() -> None:
    """ "should not launch nodes for pod with bound persistentVolume that is marked for deletion": the pod's
    ephemeral volume's PVC (named <pod>-<volume>) is bound to a PV with a deletionTimestamp."""
    made = provisioned(
        volume("pv-1", deleting=True),
        claim("web-tmp-ephemeral", storage_class_name=None, volume_name="pv-1", bound=True, phase="Bound"),
        unschedulable_pod("web", volumes=ephemeral_volume()),
    )
    assert launched_types(made) == []


def test_a_pod_whose_pvc_is_lost_gets_no_node() -> None:
    """ "should not launch nodes for pod with Lost persistentVolumeClaim"."""
    made = provisioned(storage_class(), claim(phase="Lost"), unschedulable_pod("web", volumes=claim_volume()))
    assert launched_types(made) == []


@pytest.mark.parametrize(
    "bind_completed",
    [
        pytest.param(False, id="annotation missing"),
        pytest.param(True, id="annotation present"),
    ],
)
def test_a_pod_whose_pvc_names_a_volume_is_provisioned_for_only_once_binding_completed(bind_completed: bool) -> None:
    """ "should handle pods with PVCs with defined volumeName": kube-scheduler treats a PVC without the
    pv.kubernetes.io/bind-completed annotation as unbound, so Karpenter provisions only when it is present."""
    made = provisioned(
        storage_class(),
        volume("pv-1"),
        claim(volume_name="pv-1", bound=bind_completed, phase="Bound"),
        unschedulable_pod("web", volumes=claim_volume()),
    )
    assert launched_types(made) == (["c-2x-amd64-linux"] if bind_completed else [])


@pytest.mark.parametrize("storage_class_name", ["non-existent", ""], ids=["non-existent", "explicitly disabled"])
def test_a_pod_whose_ephemeral_pvc_is_bound_is_provisioned_for_without_its_storage_class(
    storage_class_name: str,
) -> None:
    """ "should launch nodes for pods with ephemeral volume without a storage class when the PVC is bound"."""
    made = provisioned(
        volume("test-pv"),
        claim("web-tmp-ephemeral", storage_class_name=storage_class_name, volume_name="test-pv", bound=True),
        unschedulable_pod("web", volumes=ephemeral_volume(storage_class_name)),
    )
    assert launched_types(made) == ["c-2x-amd64-linux"]


@pytest.mark.parametrize("storage_class_name", ["non-existent", ""], ids=["non-existent", "explicitly disabled"])
def test_a_pod_whose_ephemeral_pvc_is_not_made_yet_gets_no_node(storage_class_name: str) -> None:
    """ "should not launch nodes for pods with ephemeral volume without a storage class when the PVC is unbound": the
    ephemeral PVC does not exist yet (GetPersistentVolumeClaim fails), so the pod is not valid for provisioning."""
    made = provisioned(unschedulable_pod("web", volumes=ephemeral_volume(storage_class_name)))
    assert launched_types(made) == []


# Describe("Deleting Nodes") ------------------------------------------------------------------------------------------


def test_a_terminating_bare_pod_of_a_deleting_node_gets_no_node() -> None:
    """ "should not re-schedule pods from a deleting node when pods are not active": a pod with no controller,
    evicted (deletionTimestamp set) on a node marked for deletion, is not provisioned for."""
    made = lab(nodepool_doc(disruption={"consolidateAfter": "Never"}), unschedulable_pod("web", cpu="100m"))
    made.advance(60)
    [node_obj] = made.store.list("Node")
    pod_obj = made.store.get("Pod", "web", "default")
    assert pod_obj["spec"]["nodeName"] == node_obj["metadata"]["name"]
    pod_obj["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    pod_obj["metadata"]["finalizers"] = ["example.com/hold"]  # stays until the test is done, as ExpectExists
    made.store.update(pod_obj)
    node_obj["spec"].setdefault("taints", []).append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
    made.store.update(node_obj)

    controller = ProvisioningController({})
    controller.reconcile(made.ctx)
    controller.reconcile(dataclasses.replace(made.ctx, now=made.ctx.now + 1.5))
    assert made.store.get("Pod", "web", "default") is not None
    assert len(made.store.list("NodeClaim")) == 1
    assert controller.last_result is None or not controller.last_result.new_nodeclaims


# Describe("Reserved Instance Types") ----------------------------------------------------------------------------------


def reserved(it: InstanceType, capacity: int = 1, rid: str | None = None) -> InstanceType:
    """The type with one more offering, reserved in test-zone-1 at 1/100,000 of its price (the Go BeforeEach)."""
    price = min(o.price for o in it.offerings) / 100_000.0
    extra = Offering(
        "test-zone-1", "reserved", price, reservation_id=rid or f"r-{it.name}", reservation_capacity=capacity
    )
    return dataclasses.replace(it, offerings=(*it.offerings, extra))


def reserved_catalog() -> list[InstanceType]:
    """large (6/6Gi, no reservation), medium (3/3Gi) and small (2/2Gi) with one reserved instance each."""
    return [
        instance_type("large-instance-type", "6", "6Gi", pods=110),
        reserved(instance_type("medium-instance-type", "3", "3Gi", pods=110)),
        reserved(instance_type("small-instance-type", "2", "2Gi", pods=110)),
    ]


def spread_pod(*requirements: Any) -> Any:
    """An app=test pod with hostname anti-affinity to its kind and these required node requirements."""
    return pod(
        labels={"app": "test"},
        anti_affinity=[term(HOSTNAME, app="test")],
        required=[list(requirements)],
    )


def reservation_of(plan: Any) -> tuple[str, str, str]:
    """(capacity type, reservation id, cheapest type) of a planned NodeClaim, each '' when not single-valued."""
    capacity = plan.requirements[CAPACITY_TYPE].values
    rid = plan.requirements[RESERVATION].values if RESERVATION in plan.requirements else frozenset()
    return (
        next(iter(capacity)) if len(capacity) == 1 else "",
        next(iter(rid)) if len(rid) == 1 else "",
        plan.cheapest.instance_type.name,
    )


def test_distinct_reservations_of_two_nodepools_for_the_same_type_are_both_used() -> None:
    """ "should correctly track reservations for multiple nodepools with distinct reservations for the same instance
    pool": np-2's small-instance-type has its own reservation r-distinct, so both pods get a reserved NodeClaim."""
    distinct = reserved(instance_type("small-instance-type", "2", "2Gi", pods=110), rid="r-distinct")
    pods = [spread_pod(r(INSTANCE_TYPE, "In", "small-instance-type"), r(NODEPOOL, "In", f"np-{i}")) for i in (1, 2)]
    result = solve(
        SchedulingInput(
            pods=pods,
            pools=[PoolOffer(nodepool("np-1"), reserved_catalog()), PoolOffer(nodepool("np-2"), [distinct])],
            reservation_mode=RESERVATION_STRICT,
        )
    )
    assert not result.failures
    assert sorted((p.nodepool, *reservation_of(p)) for p in result.new_nodeclaims) == [
        ("np-1", "reserved", "r-small-instance-type", "small-instance-type"),
        ("np-2", "reserved", "r-distinct", "small-instance-type"),
    ]


def test_two_reservations_of_one_type_are_used_up_before_falling_back() -> None:
    """ "should correctly track multiple reservations for the same instance pool": small-instance-type has a second
    reservation of two instances. Four pods (one per node): two reserved NodeClaims in the first simulation (the
    most any compatible reservation can still give), one more in the next (pessimistically deferred the first time),
    and the last one on spot or on-demand once no reservation has capacity left."""
    small = reserved(
        reserved(instance_type("small-instance-type", "2", "2Gi", pods=110)),
        capacity=2,
        rid="r-small-instance-type-2",
    )
    types = [*reserved_catalog()[:2], small]
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "inflate"}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    made = lab(
        nodepool_doc(),
        deployment(replicas=4, cpu="10m", affinity=anti, nodeSelector={INSTANCE_TYPE: "small-instance-type"}),
        types=types,
    )

    def claims() -> list[tuple[str, str, str]]:
        labels = [c["metadata"]["labels"] for c in made.store.list("NodeClaim")]
        kinds = [(ls[CAPACITY_TYPE] if ls[CAPACITY_TYPE] == "reserved" else "not-reserved") for ls in labels]
        return sorted((k, ls.get(RESERVATION, ""), ls[INSTANCE_TYPE]) for k, ls in zip(kinds, labels, strict=True))

    made.advance(1)
    first = claims()
    assert [(k, t) for k, _, t in first] == [("reserved", "small-instance-type")] * 2
    assert all(rid for _, rid, _ in first)
    made.advance(10)
    second = claims()
    assert [(k, t) for k, _, t in second] == [("reserved", "small-instance-type")] * 3
    # Three instances, two reservations: r-small-instance-type (1) and r-small-instance-type-2 (2) are full.
    assert sorted(rid for _, rid, _ in second) == [
        "r-small-instance-type",
        "r-small-instance-type-2",
        "r-small-instance-type-2",
    ]
    made.advance(10)
    assert claims()[0] == ("not-reserved", "", "small-instance-type")
    assert len(claims()) == 4


def reserved_claims(made: Lab) -> list[tuple[str, str, str, str]]:
    """(NodePool, capacity type or 'not-reserved', reservation id, instance type) of each NodeClaim, sorted."""
    rows = []
    for c in made.store.list("NodeClaim"):
        ls = c["metadata"]["labels"]
        kind = "reserved" if ls[CAPACITY_TYPE] == "reserved" else "not-reserved"
        rows.append((ls[NODEPOOL], kind, ls.get(RESERVATION, ""), ls[INSTANCE_TYPE]))
    return sorted(rows)


def anti_affinity(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"spread": app}}, "topologyKey": HOSTNAME}
            ]
        }
    }


def spread_deployment(name: str, replicas: int, **pod_spec: Any) -> dict[str, Any]:
    """Pods of small-instance-type, one per node across every deployment made by this helper (label spread=test)."""
    made = deployment(
        name,
        replicas=replicas,
        cpu="10m",
        affinity=pod_spec.pop("affinity", anti_affinity("test")),
        nodeSelector={INSTANCE_TYPE: "small-instance-type", **pod_spec.pop("nodeSelector", {})},
        **pod_spec,
    )
    made["spec"]["template"]["metadata"]["labels"]["spread"] = "test"
    return made


def test_a_reservation_shared_by_two_nodepools_is_used_once_then_both_fall_back() -> None:
    """ "should correctly track reservations shared across nodepools", both simulations: np-1 and np-2 offer the
    same reservation of one small-instance-type; the first simulation makes one reserved NodeClaim and defers the
    other pod, the next one gives that pod spot or on-demand."""
    made = lab(
        nodepool_doc("np-1"),
        nodepool_doc("np-2"),
        spread_deployment("one", 1, nodeSelector={NODEPOOL: "np-1"}),
        spread_deployment("two", 1, nodeSelector={NODEPOOL: "np-2"}),
        types=reserved_catalog(),
    )
    made.advance(1)
    [first] = reserved_claims(made)
    assert first[1:] == ("reserved", "r-small-instance-type", "small-instance-type")
    made.advance(10)
    [second] = [c for c in reserved_claims(made) if c != first]
    other = "np-2" if first[0] == "np-1" else "np-1"
    assert second == (other, "not-reserved", "", "small-instance-type")


def test_a_pod_deferred_for_a_reservation_keeps_its_nodepool_preference_in_the_next_simulation() -> None:
    """ "shouldn't relax preferences when a pod fails to schedule due to a reserved offering error", both
    simulations: two pods prefer np-1; the first gets np-1's reserved small-instance-type, the second is deferred
    without relaxing and then goes to np-1 on spot or on-demand, not to np-2."""
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": NODEPOOL, "operator": "In", "values": ["np-1"]}]},
                }
            ]
        },
        **anti_affinity("test"),
    }
    made = lab(
        nodepool_doc("np-1"),
        nodepool_doc("np-2"),
        spread_deployment("web", 2, affinity=prefer),
        types=reserved_catalog(),
    )
    made.advance(1)
    assert reserved_claims(made) == [("np-1", "reserved", "r-small-instance-type", "small-instance-type")]
    made.advance(10)
    assert reserved_claims(made) == [
        ("np-1", "not-reserved", "", "small-instance-type"),
        ("np-1", "reserved", "r-small-instance-type", "small-instance-type"),
    ]


def test_pods_with_zonal_affinity_share_one_reserved_node() -> None:
    """ "should handle multiple pods on reserved nodes": two pods that require reserved small-instance-type in
    test-zone-1 and zonal affinity to each other land on one NodeClaim of reservation r-small-instance-type."""
    pods = [
        pod(
            labels={"app": "test"},
            required=[
                [
                    r(INSTANCE_TYPE, "In", "small-instance-type"),
                    r(NODEPOOL, "In", "np-1"),
                    r(CAPACITY_TYPE, "In", "reserved"),
                    r(ZONE, "In", "test-zone-1"),
                ]
            ],
            affinity=[term(ZONE, app="test")],
        )
        for _ in range(2)
    ]
    result = schedule(pods, pools=[nodepool("np-1")], types=reserved_catalog(), reservation_mode=RESERVATION_STRICT)
    assert not result.failures
    [plan] = result.new_nodeclaims
    assert len(plan.pods) == 2
    assert reservation_of(plan) == ("reserved", "r-small-instance-type", "small-instance-type")


# Describe("NodePool requirements instance filtering") -----------------------------------------------------------------
# Karpenter: with no NodeClaim template left, every pod that fits no existing node gets "nodepool requirements
# filtered out all available instance types" (scheduler.go:638). karpui keeps the template and gives the pod a
# no-instance-types reason naming the NodePool (its text says the same in other words).


def assert_filtered_out(result: Any, pods: list[Any]) -> None:
    assert not result.new_nodeclaims and not result.placements
    assert sorted(result.failures) == sorted(p.id for p in pods)
    for failure in result.failures.values():
        assert [(reason.nodepool, reason.kind) for reason in failure.reasons] == [("default", "no-instance-types")]
    assert result.skipped_nodepools == {"default": "no instance type satisfies the NodePool's requirements"}


def test_a_pod_too_big_for_the_existing_node_fails_when_the_nodepool_allows_no_instance_type() -> None:
    """ "should return appropriate pod error when no available instance types exist": the NodePool now requires an
    instance type that does not exist; a 32-CPU, 256Gi pod fits neither the node made before nor anything new."""
    existing = node(
        "existing", "2", "2Gi", managed=True, nodepool_name="default", scheduled=[pod(node_name="existing")]
    )
    big = pod("32", "256Gi", name="test-pod-filtered")
    result = schedule(
        [big], pools=[nodepool("default", req(INSTANCE_TYPE, "In", "non-existent-instance-type"))], nodes=[existing]
    )
    assert_filtered_out(result, [big])


def test_every_pod_fails_when_the_nodepools_arch_matches_no_instance_type() -> None:
    """ "should handle multiple pods when requirements filter out all instance types"."""
    pods = [pod(name=f"pod-{i}") for i in (1, 2, 3)]
    result = schedule(pods, pools=[nodepool("default", req(ARCH, "In", "non-existent-arch"))])
    assert_filtered_out(result, pods)


def test_conflicting_nodepool_requirements_leave_no_instance_type() -> None:
    """ "should handle conflicting requirements that eliminate all instance types": arch In [amd64] and arch In
    [arm64] together."""
    conflicting = pod(name="conflicting-requirements-pod")
    result = schedule([conflicting], pools=[nodepool("default", req(ARCH, "In", "amd64"), req(ARCH, "In", "arm64"))])
    assert_filtered_out(result, [conflicting])


def test_a_nodepool_in_zones_no_offering_has_leaves_no_instance_type() -> None:
    """ "should handle zone requirements that filter out all instance types"."""
    zonal = pod(name="zone-filtered-pod")
    result = schedule(
        [zonal], pools=[nodepool("default", req(ZONE, "In", "non-existent-zone-1", "non-existent-zone-2"))]
    )
    assert_filtered_out(result, [zonal])


# Describe("Dynamic Resource Allocation (DRA)") --------------------------------------------------------------------
# The Go suite runs with IgnoreDRARequests=true (test.Options' default, as Karpenter's); karpui's default is false,
# so these set it.

IGNORE_DRA = KarpenterOptions(ignore_dra_requests=True)
DRA_ERROR = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"


def claims_spec(container: bool, init: bool) -> dict[str, Any]:
    """A pod spec (1 CPU, 1Gi) whose container and/or init container use pod-level ResourceClaims."""
    claims = []
    container_resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    if container:
        claims.append({"name": "gpu-claim", "resourceClaimTemplateName": "gpu"})
        container_resources["claims"] = [{"name": "gpu-claim"}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nvidia/cuda", "resources": container_resources}]}
    if init:
        claims.append({"name": "gpu-init-claim", "resourceClaimTemplateName": "gpu"})
        spec["initContainers"] = [
            {
                "name": "init",
                "image": "nvidia/cuda",
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "claims": [{"name": "gpu-init-claim"}]},
            }
        ]
    if claims:
        spec["resourceClaims"] = claims
    return spec


@pytest.mark.parametrize(
    ("container", "init", "dra"),
    [(True, False, True), (False, True, True), (True, True, True), (False, False, False)],
    ids=[
        "container with resource claims",
        "init container with resource claims",
        "pod with both container and init container resource claims",
        "non-DRA pod without resource claims",
    ],
)
def test_dra_pods_are_left_out_while_dra_requests_are_ignored(container: bool, init: bool, dra: bool) -> None:
    """ "should handle DRA pods correctly": with IgnoreDRARequests, a pod with resource claims gets no NodeClaim and
    the DRA error; a pod without gets one NodeClaim and no error."""
    made = lab(nodepool_doc(), options=IGNORE_DRA)
    pod_doc = unschedulable_pod("dra-pod")
    pod_doc["spec"] = claims_spec(container, init)
    made.store.create(pod_doc)
    made.advance(2)
    if dra:
        assert launched_types(made) == []
        assert could_not_schedule(made) == {"dra-pod": DRA_ERROR}
    else:
        assert len(made.store.list("NodeClaim")) == 1
        assert could_not_schedule(made) == {}


def dra_daemonset() -> dict[str, Any]:
    """A DaemonSet whose pods ask 3 CPUs and a ResourceClaim."""
    spec = {
        "resourceClaims": [{"name": "gpu-claim", "resourceClaimTemplateName": "gpu"}],
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}, "claims": [{"name": "gpu-claim"}]}}
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "dra-daemon", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "dra-daemon"}},
            "template": {"metadata": {"labels": {"app": "dra-daemon"}}, "spec": spec},
        },
    }


def test_a_dra_daemonset_adds_overhead_only_while_dra_requests_are_counted() -> None:
    """ "should handle DaemonSet pods with DRA requirements based on IgnoreDRARequests flag value", the half karpui
    matches: IgnoreDRARequests=false counts the daemon's 3 CPUs with the app pod's 1 (c-8x, 7.9 allocatable CPUs;
    c-4x has 3.9)."""
    made = lab(nodepool_doc(), dra_daemonset(), deployment("app", cpu="1"))
    made.advance(2)
    assert launched_types(made) == ["c-8x-amd64-linux"]


def test_a_dra_daemonset_adds_no_overhead_while_dra_requests_are_ignored() -> None:
    """ "should handle DaemonSet pods with DRA requirements based on IgnoreDRARequests flag value": with
    IgnoreDRARequests=true the DRA daemon's pods are left out of the daemon overhead (buildDaemonOverheadGroups), so
    the 1-CPU app pod gets the node it would get alone."""
    made = lab(nodepool_doc(), dra_daemonset(), deployment("app", cpu="1"), options=IGNORE_DRA)
    made.advance(2)
    assert launched_types(made) == ["c-2x-amd64-linux"]
