"""Karpenter v1.15.0's provisioning suite (pkg/controllers/provisioning/suite_test.go), the Its test_upstream_provisioner
did not port: what the created NodeClaim carries from its NodePool, and minValues under a pod's volume topology.

Each test names the Describe/Context/It it follows. The lab tests play ExpectProvisioned: one provisioning batch
over a lab cluster, the NodeClaim read back from its store (cloudProvider.CreateCalls[0]) and its Node (the node
ExpectScheduled returns) as kwok registers it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

import pytest

from provisioner.catalog import InstanceType
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.lab import Lab
from provisioner.options import DEFAULT_FEATURE_GATES, STATIC_CAPACITY, KarpenterOptions
from provisioner.quantity import parse_resources
from provisioner.requirements import Requirement, Requirements
from tests.builders import ZONE, instance_type, nodepool, pod, req, schedule
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_upstream_scheduling_a import fake_catalog
from tests.unit.test_upstream_scheduling_b import unschedulable_pod

OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
FAKE_GPU_A = "fake.com/vendor-a"
FAKE_GPU_B = "fake.com/vendor-b"


def provisioned(pool: dict[str, Any], *documents: dict[str, Any], settle: float = 60) -> Lab:
    """A lab with `pool` and `documents`, after a provisioning batch and time for its node to register."""
    made = lab(pool, unschedulable_pod("p"), *documents)
    made.advance(settle)
    return made


def with_template_metadata(**metadata: dict[str, str]) -> dict[str, Any]:
    """The default NodePool with spec.template.metadata (labels, annotations)."""
    doc = nodepool_doc()
    doc["spec"]["template"]["metadata"] = metadata
    return doc


def only(made: Lab, kind: str) -> dict[str, Any]:
    [obj] = [o for o in made.store.list(kind) if kind != "Node" or not o["metadata"]["name"].startswith("lab")]
    return obj


# Describe("Provisioning") -----------------------------------------------------------------------------------------


def test_the_nodepools_termination_grace_period_is_the_nodeclaims():
    """It("should respect terminationGracePeriod value set on the nodePool over global terminationGracePeriod"): the
    NodePool's 223h reaches the NodeClaim's spec (karpui has no cloud provider's global default to override), written
    as Karpenter's *metav1.Duration marshals it: Go's time.Duration.String."""
    made = provisioned(nodepool_doc(template_spec={"terminationGracePeriod": "223h"}))
    assert only(made, "NodeClaim")["spec"]["terminationGracePeriod"] == "223h0m0s"


def test_without_a_termination_grace_period_the_nodeclaim_has_none():
    """It("should expect nodeclaim terminationGracePeriod to be the nil when the nodepool terminationGracePeriod and
    global terminationGracePeriod is not set")."""
    made = provisioned(nodepool_doc())
    assert "terminationGracePeriod" not in only(made, "NodeClaim")["spec"]


def test_pods_asking_each_vendors_accelerator_both_schedule():
    """It("should provision nodes for accelerators"): one pod limits fake.com/vendor-a, the other vendor-b; each
    gets the one type that has it."""
    pods = [pod(requests={FAKE_GPU_A: "1"}), pod(requests={FAKE_GPU_B: "1"})]
    result = schedule(pods, pools=[nodepool("default")], types=fake_catalog())
    assert result.failures == {}
    assert sorted(nc.cheapest.instance_type.name for nc in result.new_nodeclaims) == [
        "gpu-vendor-b-instance-type",
        "gpu-vendor-instance-type",
    ]


# Context("Annotations") / Context("Labels") -----------------------------------------------------------------------


def test_the_template_annotations_reach_the_node():
    """Context("Annotations") It("should annotate nodes"): karpenter.sh/do-not-disrupt from the NodePool's template
    is on the NodeClaim and on its Node."""
    made = provisioned(with_template_metadata(annotations={DO_NOT_DISRUPT: "true"}))
    assert only(made, "NodeClaim")["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"
    assert only(made, "Node")["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"


@pytest.mark.parametrize("domain", ["kubernetes.io", "k8s.io"])
def test_template_labels_in_a_subdomain_of_the_kubernetes_domains_reach_the_node(domain):
    """Context("Labels") It("should label nodes with labels in the subdomain from kubernetes domains"): a pod
    requiring subdomain.<domain>/test In [test-value] schedules, and its node carries the label."""
    key = f"subdomain.{domain}/test"
    pods = [pod(required=[[Requirement.in_values(key, "test-value")]])]
    result = schedule(pods, pools=[nodepool("default", labels={key: "test-value"})], types=fake_catalog())
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.labels[key] == "test-value"
    made = provisioned(with_template_metadata(labels={key: "test-value"}))
    assert only(made, "Node")["metadata"]["labels"][key] == "test-value"


# Context("NodeClaim Creation") ------------------------------------------------------------------------------------


def test_the_nodeclaims_requirements_name_its_nodepool_and_node_class():
    """Context("NodeClaim Creation") It("should create a nodeclaim request with expected requirements"), as the
    created NodeClaim holds them: NewNodeClaimTemplate makes every template label a requirement, the node class label
    among them (nodeclaimtemplate.go:79-84), and ToNodeClaim adds the instance types and their capacity types."""
    made = provisioned(nodepool_doc())
    requirements = {r["key"]: r for r in only(made, "NodeClaim")["spec"]["requirements"]}
    assert sorted(requirements) == [
        "karpenter.kwok.sh/kwoknodeclass",
        "karpenter.sh/capacity-type",
        "karpenter.sh/nodepool",
        INSTANCE_TYPE,
    ]
    assert requirements["karpenter.kwok.sh/kwoknodeclass"] == {
        "key": "karpenter.kwok.sh/kwoknodeclass",
        "operator": "In",
        "values": ["default"],
    }
    assert requirements["karpenter.sh/nodepool"]["values"] == ["default"]


def test_an_ios_nodepool_offers_only_the_arm_type():
    """Context("NodeClaim Creation") It("should create a nodeclaim request restricting instance types on operating
    system"): of the fake provider's types only arm-instance-type runs ios."""
    result = schedule([pod()], pools=[nodepool("default", req(OS, "In", "ios"))], types=fake_catalog())
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.requirements[OS].values == frozenset({"ios"})
    assert nodeclaim.requirements[INSTANCE_TYPE].values == frozenset({"arm-instance-type"})


def test_the_nodeclaim_is_owned_by_its_nodepool():
    """Context("NodeClaim Creation") It("should create a nodeclaim request with the correct owner reference")."""
    made = provisioned(nodepool_doc())
    assert only(made, "NodeClaim")["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "default",
            "uid": "uid-default",
            "blockOwnerDeletion": True,
        }
    ]


def test_the_nodeclaim_carries_its_nodepools_node_class_reference():
    """Context("NodeClaim Creation") It("should create a nodeclaim request propagating the nodeClass reference"):
    the NodePool's nodeClassRef, here a KWOKNodeClass named `test`, is the NodeClaim's."""
    ref = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "test"}
    test_class = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "test"}}
    made = provisioned(nodepool_doc(template_spec={"nodeClassRef": ref}), test_class)
    assert only(made, "NodeClaim")["spec"]["nodeClassRef"] == ref


# Context("MinValuesPolicy") Context("with zone requirements") ----------------------------------------------------


def three_zone_type() -> list[InstanceType]:
    """multiZoneInstanceType("instance-type-1", "test-zone-1", "test-zone-2", "test-zone-3"): spot in each."""
    zones = (("test-zone-1", "spot"), ("test-zone-2", "spot"), ("test-zone-3", "spot"))
    return [instance_type("instance-type-1", "4", "4Gi", arch="arm64", zones=zones, prices={"spot": 0.52})]


THREE_ZONES_MIN_3 = req(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3", min_values=3)


def zone_1_volume_pod():
    """A 0.9 CPU pod whose PVC's storage class (WaitForFirstConsumer) allows only test-zone-1."""
    return replace(
        pod("0.9", "0.9Gi"), volume_requirements=(Requirements([Requirement.in_values(ZONE, "test-zone-1")]),)
    )


def test_strict_zone_min_values_fail_when_the_volume_narrows_the_zones():
    """Context("with MinValuesPolicy set to Strict") It("should not schedule when pod volume topology narrows zones
    below minValues")."""
    result = schedule(
        [zone_1_volume_pod()],
        pools=[nodepool("default", THREE_ZONES_MIN_3)],
        types=three_zone_type(),
        min_values_policy="Strict",
    )
    assert result.new_nodeclaims == [] and len(result.failures) == 1


def test_best_effort_relaxes_zone_min_values_to_the_zone_the_volume_leaves():
    """Context("with MinValuesPolicy set to BestEffort") It("should relax minValues when pod volume topology narrows
    zones below minValues"): the NodeClaim asks test-zone-1 with minValues 1, and says it relaxed."""
    result = schedule(
        [zone_1_volume_pod()],
        pools=[nodepool("default", THREE_ZONES_MIN_3)],
        types=three_zone_type(),
        min_values_policy="BestEffort",
    )
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.min_values_relaxed is True
    zone = nodeclaim.requirements[ZONE]
    assert (zone.values, zone.min_values) == (frozenset({"test-zone-1"}), 1)
    assert [spec for spec in nodeclaim.requirements.to_specs() if spec["key"] == ZONE] == [
        {"key": ZONE, "operator": "In", "values": ["test-zone-1"], "minValues": 1}
    ]


# Context("Volume Topology Requirements"): which PVCs leave a pod out -----------------------------------------------
# Provisioner.Validate (provisioner.go) runs ValidatePersistentVolumeClaims (scheduling/volumetopology.go:227).


def volume_pod(name: str, claim_name: str) -> dict[str, Any]:
    made = unschedulable_pod(name)
    made["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return made


def pvc(name: str, *, storage_class: str | None = None, volume_name: str = "") -> dict[str, Any]:
    """test.PersistentVolumeClaim: no status phase; a volumeName brings the bind-completed annotation."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume_name:
        spec["volumeName"] = volume_name
        metadata["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec, "status": {}}


def pv(name: str, storage_class: str) -> dict[str, Any]:
    """test.PersistentVolume: a CSI volume of test.driver with no node affinity."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": storage_class,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "test.driver", "volumeHandle": "test-handle"},
        },
        "status": {"phase": "Bound"},
    }


def provision_once(made: Lab) -> ProvisioningController:
    """One provisioning controller, reconciled as its batch opens and once its one-second idle window closed."""
    controller = ProvisioningController({})
    controller.reconcile(made.ctx)
    controller.reconcile(dataclasses.replace(made.ctx, now=made.ctx.now + 1.5))
    return controller


def provisioned_pods(*documents: dict[str, Any]) -> set[str]:
    """The pods one provisioning batch made NodeClaims for (the bindings ExpectProvisioned makes; the lab's
    kube-scheduler, which does not read PVCs, is not run)."""
    controller = provision_once(lab(nodepool_doc(), *documents))
    result = controller.last_result
    return {p.name for plan in result.new_nodeclaims for p in plan.pods} if result is not None else set()


@pytest.mark.parametrize(
    ("documents", "placed"),
    [
        pytest.param((), set(), id="should not schedule if invalid pvc"),
        pytest.param(
            (pvc("claim", storage_class="", volume_name="test-volume"), pv("test-volume", "")),
            {"web"},
            id="should schedule with an empty storage class if the pvc is bound",
        ),
        pytest.param(
            (pvc("claim", storage_class=""),),
            set(),
            id="should not schedule with an empty storage class if the pvc is not bound",
        ),
        pytest.param(
            (
                pvc("claim", storage_class="missing-storage-class", volume_name="test-volume"),
                pv("test-volume", "missing-storage-class"),
            ),
            {"web"},
            id="should schedule with a missing storage class if the pvc is bound",
        ),
        pytest.param(
            (pvc("claim", storage_class="missing-storage-class"),),
            set(),
            id="should not schedule with a missing storage class if the pvc is not bound",
        ),
    ],
)
def test_a_pvc_is_usable_when_bound_whatever_its_storage_class(documents, placed):
    """Context("Volume Topology Requirements"): the pod `web` mounts PVC `claim` (absent in the first case)."""
    assert provisioned_pods(volume_pod("web", "claim"), *documents) == placed


@pytest.mark.parametrize(
    "documents",
    [
        pytest.param((), id="pvc"),
        pytest.param((pvc("claim", storage_class="invalid-storage-class"),), id="storage class"),
        pytest.param((pvc("claim", volume_name="invalid-volume-name"),), id="volume name"),
    ],
)
def test_a_pod_with_an_invalid_pvc_does_not_stop_the_others(documents):
    """Context("Volume Topology Requirements") It("should schedule valid pods when a pod with an invalid pvc is
    encountered (pvc)"), "(storage class)" and "(volume name)"."""
    assert provisioned_pods(volume_pod("invalid", "claim"), unschedulable_pod("valid"), *documents) == {"valid"}


# Context("StaticNodePool"): the provisioner alone (ExpectProvisioned runs no static controller) -------------------


STATIC_GATE = KarpenterOptions(feature_gates={**DEFAULT_FEATURE_GATES, STATIC_CAPACITY: True})


def test_the_provisioner_makes_no_nodeclaim_for_a_static_nodepool():
    """Context("StaticNodePool") It("should not create NodeClaims for StaticNodePool")."""
    made = lab(nodepool_doc("static", replicas=2), unschedulable_pod("p"), options=STATIC_GATE)
    controller = provision_once(made)
    assert made.store.list("NodeClaim") == []
    assert controller.last_result is not None and len(controller.last_result.failures) == 1


def test_the_provisioner_uses_the_dynamic_nodepool_beside_a_static_one():
    """Context("StaticNodePool") It("should still provision dynamic NodeClaims when there are both Static and Dynamic
    NodePools")."""
    made = lab(nodepool_doc("static", replicas=1), nodepool_doc("dynamic"), unschedulable_pod("p"), options=STATIC_GATE)
    provision_once(made)
    [nodeclaim] = made.store.list("NodeClaim")
    assert nodeclaim["metadata"]["labels"]["karpenter.sh/nodepool"] == "dynamic"


# Context("Daemonsets") --------------------------------------------------------------------------------------------


def test_a_daemonset_pods_hostname_pin_is_dropped_and_its_own_requests_kept():
    """Context("Daemonsets") It("should remove daemonset node hostname affinity when considering daemonset
    schedulability"): the DaemonSet asks 4 CPU/4Gi and requires foo=bar; its live pod asks 2 CPU/2Gi (a LimitRange
    changed it) and is pinned to node-name. The pod's requests count, with the DaemonSet's affinity instead of the
    pin, so the 1 CPU/1Gi pod selecting foo=bar needs 3 CPU/3Gi: default-instance-type, 4 CPU/4Gi."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]
            }
        }
    }
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": "default", "uid": "uid-ds"},
        "spec": {
            "selector": {"matchLabels": {"app": "ds"}},
            "template": {
                "metadata": {"labels": {"app": "ds"}},
                "spec": {
                    "affinity": affinity,
                    "containers": [
                        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "4", "memory": "4Gi"}}}
                    ],
                },
            },
        },
    }
    daemon_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "ds-pod",
            "namespace": "default",
            "uid": "uid-ds-pod",
            "labels": {"app": "ds"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": "ds",
                    "uid": "uid-ds",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "metadata.name", "operator": "In", "values": ["node-name"]}]}
                        ]
                    }
                }
            },
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }
    selecting = unschedulable_pod("p")
    selecting["spec"]["nodeSelector"] = {"foo": "bar"}
    selecting["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    pool = with_template_metadata(labels={"foo": "bar"})
    controller = provision_once(lab(pool, daemonset, daemon_pod, selecting, types=fake_catalog()))
    assert controller.last_result is not None
    [nodeclaim] = controller.last_result.new_nodeclaims
    chosen = nodeclaim.cheapest.instance_type
    assert (chosen.name, chosen.capacity) == (
        "default-instance-type",
        {**chosen.capacity, **parse_resources({"cpu": "4", "memory": "4Gi"})},
    )
