"""Karpenter v1.15.0's NodeClaim disruption-conditions suite (pkg/controllers/nodeclaim/disruption: suite_test.go,
drift_test.go, consolidation_test.go) ported onto karpui's drift and consolidatable controllers, each test naming the
It it follows.

As the Go suite does, a test makes a NodeClaim (and its NodePool) by hand and runs the controller once; the lab's other
controllers do not run. The suite's instance type `it` (100 CPU, spot and on-demand offerings in test-zone-1a) is the
catalog. karpui's cloud providers never report drift of their own (kwok's IsDrifted never does), so where an It sets
cp.Drifted to have some drift, a requirement drift stands for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.cluster.conditions import condition, set_claim_condition
from provisioner.cluster.objects import timestamp
from provisioner.controllers import lifecycle
from provisioner.controllers.consolidatable import ConsolidatableController
from provisioner.controllers.drift import DriftController
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash
from provisioner.lab import Lab
from tests.builders import instance_type
from tests.lab_builders import KWOK_REF, lab, nodepool_doc, reconfigure

IT = "it"
HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION_KEY = "karpenter.sh/nodepool-hash-version"
UNMANAGED_REF = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"}
HOUR = 3600.0
ON_DEMAND = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
LINUX = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}


def the_it(zones: tuple[tuple[str, str], ...] = (("test-zone-1a", "spot"), ("test-zone-1a", "on-demand"))):
    """suite_test.go's BeforeEach instance type: 100 CPU, 100Gi, its offerings in test-zone-1a."""
    return instance_type(IT, "100", "100Gi", zones=zones)


def _lab(*requirements: dict[str, Any], types: list[InstanceType] | None = None, **spec: Any) -> Lab:
    template_spec = {"requirements": list(requirements), **spec.pop("template_spec", {})}
    return lab(nodepool_doc(template_spec=template_spec, **spec), types=[the_it()] if types is None else types)


def _repool(made: Lab, *requirements: dict[str, Any], **spec: Any) -> None:
    """ExpectApplied(nodePool) with new requirements (or other spec fields)."""
    template_spec = {"requirements": list(requirements), **spec.pop("template_spec", {})}
    reconfigure(made, nodepool_doc(template_spec=template_spec, **spec))


def _claim(
    made: Lab,
    name: str = "nodeclaim",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    launched: bool = True,
    initialized: bool = False,
    node_class_ref: dict[str, str] | None = None,
    last_pod_event: float | None = None,
    conditions: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """test.NodeClaimAndNode's NodeClaim of NodePool `default` on `it`, created in the lab's store (now)."""
    claim: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": IT, **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": [lifecycle.TERMINATION_FINALIZER],
        },
        "spec": {"nodeClassRef": dict(node_class_ref or KWOK_REF), "requirements": []},
        "status": {},
    }
    if launched:
        set_claim_condition(claim, "Launched", "True", made.now, "Launched")
    if initialized:
        set_claim_condition(claim, "Initialized", "True", made.now, "Initialized")
    for kind, status in conditions:
        set_claim_condition(claim, kind, status, made.now, kind)
    if last_pod_event is not None:
        claim["status"]["lastPodEventTime"] = timestamp(last_pod_event)
    return made.store.create(claim)


def _drift_claim(made: Lab, name: str = "nodeclaim", **options: Any) -> dict[str, Any]:
    """drift_test.go's BeforeEach NodeClaim: in test-zone-1a on spot, with the NodePool's hash, Launched."""
    labels = {"topology.kubernetes.io/zone": "test-zone-1a", "karpenter.sh/capacity-type": "spot"}
    labels.update(options.pop("labels", {}))
    pool = made.ctx.nodepools[0]
    annotations = {HASH: nodepool_hash(pool), **options.pop("annotations", {})}
    return _claim(made, name, labels=labels, annotations=annotations, **options)


def _update(made: Lab, claim: dict[str, Any]) -> dict[str, Any]:
    stored = made.store.must_get("NodeClaim", claim["metadata"]["name"])
    stored["metadata"] = claim["metadata"]
    stored["status"] = claim["status"]
    return made.store.update(stored)


def _drift(made: Lab, controller: DriftController | None = None, name: str = "nodeclaim") -> dict[str, Any] | None:
    """ExpectObjectReconciled(nodeClaimDisruptionController) for drift, then the NodeClaim's Drifted condition."""
    (controller or DriftController()).reconcile(made.ctx)
    return condition(made.store.must_get("NodeClaim", name), "Drifted")


def _consolidatable(made: Lab, name: str = "nodeclaim", controller: ConsolidatableController | None = None):
    (controller or ConsolidatableController()).reconcile(made.ctx)
    return condition(made.store.must_get("NodeClaim", name), "Consolidatable")


def _step(made: Lab, seconds: float) -> None:
    made.now += seconds
    made.ctx.now = made.now


def _status(found: dict[str, Any] | None) -> str | None:
    return None if found is None else found["status"]


# suite_test.go -------------------------------------------------------------------------------------------------------


def _suite_claim(made: Lab) -> dict[str, Any]:
    """suite_test.go's BeforeEach: lastPodEventTime 5 minutes ago, Initialized."""
    return _claim(made, last_pod_event=made.now - 300, initialized=True)


def test_should_set_multiple_disruption_conditions_simultaneously():
    """Disruption: "should set multiple disruption conditions simultaneously" (a requirement drift for cp.Drifted)."""
    made = _lab(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    claim = _suite_claim(made)
    claim["metadata"]["labels"]["kubernetes.io/os"] = "windows"
    _update(made, claim)
    _repool(made, LINUX, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    _step(made, 60)
    drifted, consolidatable = _drift(made), _consolidatable(made)
    assert (_status(drifted), drifted and drifted["reason"], _status(consolidatable)) == (
        "True",
        "RequirementsDrifted",
        "True",
    )


def test_should_not_set_consolidatable_condition_for_static_nodepool():
    """Disruption: "should not set consolidatable condition for Static Nodepool"."""
    made = _lab(replicas=1, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    claim = _suite_claim(made)
    claim["metadata"]["labels"]["kubernetes.io/os"] = "windows"
    _update(made, claim)
    _repool(made, LINUX, replicas=1, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    assert made.ctx.nodepools[0].static
    _step(made, 60)
    assert (_status(_drift(made)), _consolidatable(made)) == ("True", None)


def test_should_remove_multiple_disruption_conditions_simultaneously():
    """Disruption: "should remove multiple disruption conditions simultaneously"."""
    made = _lab(disruption={"consolidateAfter": "Never"})
    _claim(
        made,
        labels={"topology.kubernetes.io/zone": "test-zone-1a", "karpenter.sh/capacity-type": "spot"},
        last_pod_event=made.now - 300,
        initialized=True,
        conditions=(("Drifted", "True"), ("Consolidatable", "True")),
    )
    assert (_drift(made), _consolidatable(made)) == (None, None)


# drift_test.go -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "managed",
    [
        pytest.param(True, id="should detect drift"),
        pytest.param(False, id="should ignore unmanaged NodeClaims"),
    ],
)
def test_drift_table(managed):
    """Drift DescribeTable "Drift": "should detect drift" and "should ignore drift for NodeClaims not managed by this
    instance of Karpenter" (a requirement drift for cp.Drifted)."""
    made = _lab()
    _drift_claim(made, labels={"kubernetes.io/os": "windows"}, node_class_ref=None if managed else UNMANAGED_REF)
    _repool(made, LINUX)
    assert _status(_drift(made)) == ("True" if managed else None)


def test_should_detect_stale_instance_type_drift_if_the_instance_type_label_doesnt_exist():
    """Drift: "should detect stale instance type drift if the instance type label doesn't exist"."""
    made = _lab()
    claim = _drift_claim(made)
    del claim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    _update(made, claim)
    _step(made, 2 * HOUR)
    found = _drift(made)
    assert (_status(found), found and found["reason"]) == ("True", "InstanceTypeNotFound")


def test_should_detect_stale_instance_type_drift_if_the_instance_type_doesnt_exist():
    """Drift: "should detect stale instance type drift if the instance type doesn't exist"."""
    made = _lab(types=[])
    _drift_claim(made)
    _step(made, 2 * HOUR)
    found = _drift(made)
    assert (_status(found), found and found["reason"]) == ("True", "InstanceTypeNotFound")


def test_should_detect_stale_instance_type_drift_if_the_instance_type_offerings_dont_exist():
    """Drift: "should detect stale instance type drift if the instance type offerings doesn't exist"."""
    made = _lab(types=[the_it(zones=())])
    _drift_claim(made)
    _step(made, 2 * HOUR)
    assert _status(_drift(made)) == "True"


def test_should_detect_stale_instance_type_drift_if_the_offerings_arent_compatible_with_the_nodeclaim():
    """Drift: "should detect stale instance type drift if the instance type offerings aren't compatible with the
    nodeclaim" (each offering's zone some other one)."""
    made = _lab(types=[the_it(zones=(("zone-x7k2p", "spot"), ("zone-q9w4t", "on-demand")))])
    _drift_claim(made)
    _step(made, 2 * HOUR)
    assert _status(_drift(made)) == "True"


def test_instance_type_drift_is_not_looked_for_in_the_first_hour_after_creation():
    """drift.go isDrifted: GetInstanceTypes is asked only once the NodeClaim is an hour old (every Go It that
    expects InstanceTypeNotFound steps the clock 2h first)."""
    made = _lab(types=[])
    _drift_claim(made)
    controller = DriftController()
    _step(made, HOUR)
    assert _drift(made, controller) is None
    _step(made, 1)
    assert _status(_drift(made, controller)) == "True"


def test_a_nodeclaim_without_zone_or_capacity_type_labels_matches_any_offering():
    """drift.go instanceTypeNotFound: the offerings are matched against the NodeClaim's labels with well-known labels
    allowed undefined, so a NodeClaim without zone and capacity-type labels (as the Disruption Describe's) is not
    InstanceTypeNotFound."""
    made = _lab()
    _claim(made)
    _step(made, 2 * HOUR)
    assert _drift(made) is None


def test_should_detect_static_drift_before_cloud_provider_drift():
    """Drift: "should detect static drift before cloud provider drift" (and before requirement drift)."""
    made = _lab()
    _drift_claim(
        made,
        labels={"kubernetes.io/os": "windows"},
        annotations={HASH: "test-123", HASH_VERSION_KEY: HASH_VERSION},
    )
    _repool(made, LINUX)
    found = _drift(made)
    assert (_status(found), found and found["reason"]) == ("True", "NodePoolDrifted")


def test_should_detect_node_requirement_drift_before_cloud_provider_drift():
    """Drift: "should detect node requirement drift before cloud provider drift"."""
    made = _lab({"key": "node.kubernetes.io/instance-type", "operator": "DoesNotExist"})
    _drift_claim(made)
    found = _drift(made)
    assert (_status(found), found and found["reason"]) == ("True", "RequirementsDrifted")


@pytest.mark.parametrize("launched", ["Unknown", "False"])
def test_should_remove_the_status_condition_when_the_launch_condition_is_not_true(launched):
    """Drift: "should remove the status condition from the nodeClaim when the nodeClaim launch condition is unknown"
    and "... is false"."""
    made = _lab(LINUX)
    claim = _drift_claim(made, labels={"kubernetes.io/os": "windows"}, conditions=(("Drifted", "True"),))
    set_claim_condition(claim, "Launched", launched, made.now, "LaunchFailed")
    _update(made, claim)
    assert _drift(made) is None


def test_should_not_detect_drift_if_the_nodepool_does_not_exist():
    """Drift: "should not detect drift if the nodePool does not exist"."""
    made = _lab(LINUX)
    _drift_claim(made, labels={"kubernetes.io/os": "windows", "karpenter.sh/nodepool": "gone"})
    assert _drift(made) is None


def test_should_remove_the_status_condition_if_the_nodeclaim_is_no_longer_drifted():
    """Drift: "should remove the status condition from the nodeClaim if the nodeClaim is no longer drifted"."""
    made = _lab()
    _drift_claim(made, conditions=(("Drifted", "True"),))
    assert _drift(made) is None


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


CT, ARCH, OS = "karpenter.sh/capacity-type", "kubernetes.io/arch", "kubernetes.io/os"
REQUIREMENT_DRIFT = [
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(ARCH, "In", "amd64"), _req(OS, "In", "linux")],
        [_req(CT, "In", "spot")],
        {CT: "on-demand", ARCH: "amd64", OS: "linux"},
        True,
        id="should return drifted if the nodePool node requirement is updated",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux"), _req(ARCH, "In", "amd64")],
        {CT: "on-demand", OS: "linux"},
        True,
        id="should return drifted if a new node requirement is added",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux", "windows")],
        [_req(CT, "In", "on-demand"), _req(OS, "In", "windows")],
        {CT: "on-demand", OS: "linux"},
        True,
        id="should return drifted if a node requirement is reduced",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux", "windows")],
        {CT: "on-demand", OS: "linux"},
        False,
        id="should not return drifted if a node requirement is expanded",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
        [_req(CT, "In", "on-demand"), _req(OS, "Exists")],
        {CT: "on-demand", OS: "linux"},
        False,
        id="should not return drifted if a node requirement set to Exists",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req(OS, "In", "linux")],
        [_req(CT, "In", "on-demand"), _req(OS, "DoesNotExist")],
        {CT: "on-demand", OS: "linux"},
        True,
        id="should return drifted if a node requirement set to DoesNotExists",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req("test-label", "Gt", "2")],
        [_req(CT, "In", "on-demand"), _req("test-label", "Gt", "10")],
        {CT: "on-demand", "test-label": "5"},
        True,
        id="should not return drifted if a nodeClaim is greater then node requirement",
    ),
    pytest.param(
        [_req(CT, "In", "on-demand"), _req("test-label", "Lt", "5")],
        [_req(CT, "In", "on-demand"), _req("test-label", "Lt", "1")],
        {CT: "on-demand", "test-label": "2"},
        True,
        id="should not return drifted if a nodeClaim is less then node requirement",
    ),
]


@pytest.mark.parametrize(("old", "new", "labels", "drifted"), REQUIREMENT_DRIFT)
def test_node_requirement_drift(old, new, labels, drifted):
    """Drift, NodeRequirement Drift DescribeTable (the Go entries' names kept, though the last two do drift)."""
    made = _lab(*old)
    _drift_claim(made, labels=labels)
    controller = DriftController()
    assert _drift(made, controller) is None
    _repool(made, *new)
    assert _status(_drift(made, controller)) == ("True" if drifted else None)


def test_should_return_drifted_only_on_nodeclaims_that_are_drifted_from_an_updated_nodepool():
    """Drift, NodeRequirement Drift: "should return drifted only on NodeClaims that are drifted from an updated
    nodePool"."""
    made = _lab(_req(CT, "In", "on-demand"), _req(OS, "In", "linux", "windows"))
    _drift_claim(made, labels={CT: "on-demand", OS: "linux"})
    _drift_claim(made, "nodeclaim-two", labels={CT: "on-demand", OS: "windows"})
    controller = DriftController()
    assert (_drift(made, controller), _drift(made, controller, "nodeclaim-two")) == (None, None)
    _repool(made, _req(CT, "In", "on-demand"), _req(OS, "In", "linux"))
    assert (_drift(made, controller), _status(_drift(made, controller, "nodeclaim-two"))) == (None, "True")


STATIC_TEMPLATE = {
    "metadata": {
        "annotations": {"keyAnnotation": "valueAnnotation", "keyAnnotation2": "valueAnnotation2"},
        "labels": {"keyLabel": "valueLabel", "keyLabel2": "valueLabel2"},
    },
    "spec": {
        "nodeClassRef": KWOK_REF,
        "requirements": [],
        "taints": [{"key": "keyvalue1", "effect": "NoExecute"}],
        "startupTaints": [{"key": "startupkeyvalue1", "effect": "NoExecute"}],
        "expireAfter": "5m",
        "terminationGracePeriod": "5m",
    },
}


def _static_pool(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": template},
    }


def _merged(change: dict[str, Any]) -> dict[str, Any]:
    """mergo.Merge(nodePool, changes, WithOverride): maps merge key by key, other fields are replaced."""
    metadata = {
        key: {**STATIC_TEMPLATE["metadata"][key], **change.get("metadata", {}).get(key, {})}
        for key in STATIC_TEMPLATE["metadata"]
    }
    return {"metadata": metadata, "spec": {**STATIC_TEMPLATE["spec"], **change.get("spec", {})}}


STATIC_CHANGES = [
    pytest.param({"metadata": {"annotations": {"keyAnnotationTest": "valueAnnotationTest"}}}, id="Annoations"),
    pytest.param({"metadata": {"labels": {"keyLabelTest": "valueLabelTest"}}}, id="Labels"),
    pytest.param({"spec": {"taints": [{"key": "keytest2taint", "effect": "NoExecute"}]}}, id="Taints"),
    pytest.param({"spec": {"startupTaints": [{"key": "keytest2taint", "effect": "NoExecute"}]}}, id="StartupTaints"),
    pytest.param({"spec": {"nodeClassRef": {**KWOK_REF, "name": "testName"}}}, id="NodeClassRef Name"),
    pytest.param({"spec": {"expireAfter": "100m"}}, id="ExpireAfter"),
    pytest.param({"spec": {"terminationGracePeriod": "100m"}}, id="TerminationGracePeriod"),
]


@pytest.mark.parametrize("change", STATIC_CHANGES)
def test_should_detect_drift_on_changes_to_the_static_fields(change):
    """Drift, NodePool Static Drift DescribeTable "should detect drift on changes to the static fields"."""
    made = lab(_static_pool(STATIC_TEMPLATE), types=[the_it()])
    before = nodepool_hash(made.ctx.nodepools[0])
    _drift_claim(made, annotations={HASH: before, HASH_VERSION_KEY: HASH_VERSION})
    controller = DriftController()
    assert _drift(made, controller) is None
    reconfigure(made, _static_pool(_merged(change)))
    assert nodepool_hash(made.ctx.nodepools[0]) != before
    found = _drift(made, controller)
    assert (_status(found), found and found["reason"]) == ("True", "NodePoolDrifted")


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param(
            {}, id="should not return drifted if the nodepool-hash annotation is not present on the NodeClaim"
        ),
        pytest.param(
            {HASH: "test-hash-2", HASH_VERSION_KEY: "test-version-2"},
            id="should not return drifted if the NodeClaim's nodepool-hash-version does not match the NodePool's",
        ),
        pytest.param(
            {HASH: "test-hash-111111111"},
            id="should not return drifted if the nodepool-hash-version annotation is not present on the NodeClaim",
        ),
    ],
)
def test_no_static_drift_without_matching_hash_annotations(annotations):
    """Drift, NodePool Static Drift: the "should not return drifted if ..." Its over the NodeClaim's annotations."""
    made = lab(_static_pool(STATIC_TEMPLATE), types=[the_it()])
    claim = _drift_claim(made)
    claim["metadata"]["annotations"] = dict(annotations)
    _update(made, claim)
    assert _drift(made) is None


def _reserved_it(*capacity_types: str) -> InstanceType:
    """Reserved Capacity's BeforeEach: `it` with a reserved offering too, keeping those of `capacity_types`."""
    offerings = (
        Offering("test-zone-1a", "spot", 10.0),
        Offering("test-zone-1a", "on-demand", 10.0),
        Offering("test-zone-1a", "reserved", 1.0, reservation_id="r-x7k2p", reservation_capacity=1),
    )
    return replace(the_it(), offerings=tuple(o for o in offerings if o.capacity_type in capacity_types))


@pytest.mark.parametrize(
    ("drifted", "capacity_types"),
    [
        pytest.param(False, ("reserved", "on-demand"), id="shouldn't drift with reserved and on-demand offerings"),
        pytest.param(False, ("reserved",), id="shouldn't drift with reserved offerings"),
        pytest.param(False, ("on-demand",), id="shouldn't drift with on-demand offerings"),
        pytest.param(True, ("spot",), id="should drift when the only offering is spot"),
        pytest.param(True, (), id="should drift when there are no compatible offerings"),
    ],
)
def test_reserved_capacity_instance_type_not_found(drifted, capacity_types):
    """Drift, Reserved Capacity DescribeTable "InstanceTypeNotFound" (the NodeClaim on reserved capacity, with
    another reservation id than the offering's: that is left to the provider)."""
    made = _lab(types=[_reserved_it(*capacity_types)])
    _drift_claim(made, labels={CT: "reserved", "karpenter.kwok.sh/capacity-reservation-id": "r-other"})
    _step(made, 2 * HOUR)
    assert _status(_drift(made)) == ("True" if drifted else None)


# consolidation_test.go -----------------------------------------------------------------------------------------------


def _underutilized_lab(consolidate_after: str = "1m") -> Lab:
    return _lab(disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after})


def test_consolidatable_ignores_nodeclaims_not_managed_by_this_instance_of_karpenter():
    """Underutilized: "should ignore NodeClaims not managed by this instance of Karpenter"."""
    made = _underutilized_lab()
    _claim(made, initialized=True, last_pod_event=made.now, node_class_ref=UNMANAGED_REF)
    controller = ConsolidatableController()
    assert _consolidatable(made, controller=controller) is None
    _step(made, 60)
    assert _consolidatable(made, controller=controller) is None


def test_should_mark_nodeclaims_as_consolidatable():
    """Underutilized: "should mark NodeClaims as consolidatable"."""
    made = _underutilized_lab()
    _claim(made, initialized=True, last_pod_event=made.now)
    controller = ConsolidatableController()
    assert _consolidatable(made, controller=controller) is None
    _step(made, 60)
    assert _status(_consolidatable(made, controller=controller)) == "True"


def test_should_mark_nodeclaims_as_consolidatable_based_on_the_initialized_time():
    """Underutilized: "should mark NodeClaims as consolidatable based on the nodeclaim initialized time"."""
    made = _underutilized_lab()
    _claim(made, initialized=True)
    controller = ConsolidatableController()
    _step(made, 59)
    assert _consolidatable(made, controller=controller) is None
    _step(made, 1)
    assert _status(_consolidatable(made, controller=controller)) == "True"


def test_should_remove_the_condition_when_last_pod_event_is_too_recent():
    """Underutilized: "should remove the status condition from the nodeClaim when lastPodEvent is too recent"."""
    made = _underutilized_lab()
    _claim(made, initialized=True, last_pod_event=made.now, conditions=(("Consolidatable", "True"),))
    assert _consolidatable(made) is None


def test_should_remove_the_condition_when_consolidate_after_is_never():
    """Underutilized: "should remove the status condition from the nodeClaim when consolidateAfter is never"."""
    made = _underutilized_lab("Never")
    _claim(made, initialized=True, last_pod_event=made.now - 300, conditions=(("Consolidatable", "True"),))
    assert _consolidatable(made) is None


@pytest.mark.parametrize("initialized", ["Unknown", "False"])
def test_should_remove_the_condition_when_the_nodeclaim_is_not_initialized(initialized):
    """Underutilized: "should remove the status condition from the nodeClaim when the nodeClaim initialization
    condition is unknown" and "... when the nodeClaim is not initialized"."""
    made = _underutilized_lab()
    _claim(
        made,
        last_pod_event=made.now - 300,
        conditions=(("Consolidatable", "True"), ("Initialized", initialized)),
    )
    assert _consolidatable(made) is None
