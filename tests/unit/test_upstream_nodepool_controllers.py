"""Karpenter v1.15.0's NodePool and NodeClaim controller suites ported onto karpui's controllers, each test naming
the It it follows: pkg/controllers/nodepool/readiness/suite_test.go, nodepool/validation/suite_test.go,
nodepool/counter/suite_test.go, nodeclaim/podevents/suite_test.go, nodeclaim/hydration/suite_test.go and
node/hydration/suite_test.go.

Karpenter's TestNodeClass is karpui's KWOKNodeClass here. NodePools are a lab's configuration (tests.lab_builders);
NodeClaims and Nodes are written to its store by hand, as the Go tests apply them, and each controller is run by
itself, as ExpectObjectReconciled runs one.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.hydration import HydrationController
from provisioner.controllers.podevents import PodEventsController
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.nodepool import parse_nodepool
from tests.lab_builders import KWOK_REF, START, condition, lab, nodepool_doc

NODECLASS_LABEL = "karpenter.kwok.sh/kwoknodeclass"
BASE = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "nodes": "0", "pods": "0"}  # counter.BaseResources


def nodeclaim(
    name: str,
    capacity: dict[str, str],
    *,
    nodepool: str = "default",
    provider_id: str | None = None,
    ref: dict[str, str] | None = None,
    **status: Any,
) -> dict[str, Any]:
    """test.NodeClaim: labelled with its NodePool and node class, launched (a providerID) with `capacity`."""
    ref = ref or KWOK_REF
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": nodepool, f"{ref['group']}/{ref['kind'].lower()}": ref["name"]},
        },
        "spec": {"nodeClassRef": ref, "requirements": []},
        "status": {
            "providerID": provider_id or f"kwok://{name}",
            "nodeName": f"node-{name}",
            "capacity": capacity,
            **status,
        },
    }


def linked_node(claim: dict[str, Any], *, initialized: bool = False, **capacity: str) -> dict[str, Any]:
    """test.NodeClaimLinkedNode: the NodeClaim's labels, providerID and capacity (or `capacity`)."""
    labels = dict(claim["metadata"]["labels"])
    if initialized:
        labels["karpenter.sh/initialized"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": claim["status"]["nodeName"], "labels": labels},
        "spec": {"providerID": claim["status"]["providerID"]},
        "status": {"capacity": capacity or dict(claim["status"]["capacity"]), "phase": "Running"},
    }


# nodepool/readiness/suite_test.go --------------------------------------------------------------------------------


def test_readiness_nodepool_not_ready_when_nodeclass_does_not_exist():
    """Readiness: should have status condition on nodePool as not ready when nodeClass does not exist"""
    ref = {**KWOK_REF, "name": "missing"}
    made = lab(nodepool_doc(template_spec={"nodeClassRef": ref}))
    made.manager.nodepools.reconcile(made.ctx)
    status = {"status": made.nodepool_status()["default"]}
    assert condition(status, "NodeClassReady") == ("False", "NodeClassNotFound", "NodeClass not found on cluster")
    assert condition(status, "Ready") == ("False", "UnhealthyDependents", "NodeClassReady=False")


def test_readiness_nodepool_ready_if_nodeclass_is_ready():
    """Readiness: should have status condition on nodePool as ready if nodeClass is ready"""
    made = lab(nodepool_doc())
    made.manager.nodepools.reconcile(made.ctx)
    status = {"status": made.nodepool_status()["default"]}
    assert condition(status, "NodeClassReady") == ("True", "NodeClassReady", "")
    assert condition(status, "Ready") == ("True", "Ready", "")


# nodepool/validation/suite_test.go -------------------------------------------------------------------------------


def _requirement(*values: str) -> dict[str, Any]:
    return {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(values)}]}


def _unparsed(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored NodePool that RuntimeValidate refuses: karpui leaves it out of the lab until fixed and its
    ValidationSucceeded condition says why (as karpui.clusters.warm.report records it)."""
    with pytest.raises(ManifestError) as refused:
        parse_nodepool(doc)
    made = lab()
    made.ctx.nodepool_uids = {"default": "uid-default"}
    made.ctx.unparsed_nodepools = {"default": f"left out until fixed: {refused.value}"}
    made.manager.nodepools.reconcile(made.ctx)
    return {"status": made.nodepool_status()["default"]}


def test_validation_fails_with_only_invalid_capacity_types():
    """Counter (validation): should fail validation with only invalid capacity types"""
    status = _unparsed(nodepool_doc(template_spec=_requirement("xspot")))
    assert condition(status, "ValidationSucceeded") == (
        "False",
        "NodePoolValidationFailed",
        "left out until fixed: error: spec.template.spec.requirements[0].values: no value is a known capacity type "
        "(on-demand, reserved, spot)",
    )
    assert condition(status, "Ready") == ("False", "UnhealthyDependents", "ValidationSucceeded=False")


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(("on-demand",), id="should pass validation with valid capacity types"),
        pytest.param(("on-demand", "xspot"), id="should fail open if invalid and valid capacity types are present"),
        pytest.param(None, id="should set the NodePoolValidationSucceeded status condition to true if healthy"),
    ],
)
def test_validation_succeeds(values):
    """Counter (validation): should pass validation with valid capacity types / should fail open if invalid and
    valid capacity types are present / should set the NodePoolValidationSucceeded status condition to true if
    nodePool healthy checks succeed"""
    made = lab(nodepool_doc(template_spec=_requirement(*values) if values else {}))
    made.manager.nodepools.reconcile(made.ctx)
    status = {"status": made.nodepool_status()["default"]}
    assert condition(status, "ValidationSucceeded") == ("True", "ValidationSucceeded", "")
    assert condition(status, "Ready") == ("True", "Ready", "")


def test_validation_fails_if_nodepool_validation_failed():
    """Counter (validation): should set the NodePoolValidationSucceeded status condition to false if nodePool
    validation failed (a taint key with a 250-character prefix)"""
    key = f"test.com.test.{'a' * 250}/test"
    status = _unparsed(nodepool_doc(template_spec={"taints": [{"key": key, "effect": "NoSchedule"}]}))
    assert condition(status, "ValidationSucceeded") == (
        "False",
        "NodePoolValidationFailed",
        f"left out until fixed: error: spec.template.spec.taints[0].key: invalid key '{key}': prefix must be a DNS "
        "subdomain",
    )
    assert condition(status, "Ready") == ("False", "UnhealthyDependents", "ValidationSucceeded=False")


# nodepool/counter/suite_test.go ----------------------------------------------------------------------------------

CAPACITY_1 = {"cpu": "100m", "pods": "256", "memory": "1Gi"}
CAPACITY_2 = {"cpu": "500m", "pods": "1000", "memory": "5Gi"}


def _resources(made) -> dict[str, str]:
    return made.nodepool_status()["default"]["resources"]


def test_counter_sets_well_known_resources_to_zero_with_no_nodes():
    """Counter: should set well-known resource to zero when no nodes exist in the cluster"""
    made = lab(nodepool_doc())
    assert _resources(made) == BASE


def test_counter_follows_the_nodeclaim_then_the_node_once_initialized():
    """Counter: should set the counter from the nodeClaim and then to the node when it initializes"""
    made = lab(nodepool_doc())
    claim = made.store.create(nodeclaim("a", CAPACITY_1))
    node = made.store.create(linked_node(claim))
    assert _resources(made) == {**BASE, "cpu": "100m", "pods": "256", "memory": "1Gi", "nodes": "1"}
    node["metadata"]["labels"]["karpenter.sh/initialized"] = "true"
    node["status"]["capacity"] = {"cpu": "1", "pods": "512", "memory": "2Gi"}
    made.store.update(node)
    assert _resources(made) == {**BASE, "cpu": "1", "pods": "512", "memory": "2Gi", "nodes": "1"}


def test_counter_fills_what_an_uninitialized_node_reports_as_zero_from_its_nodeclaim():
    """statenode.go Capacity (behind the counter): before initialization the Node's non-zero capacity, the
    NodeClaim's for the rest"""
    made = lab(nodepool_doc())
    claim = made.store.create(nodeclaim("a", CAPACITY_1))
    made.store.create(linked_node(claim, cpu="2", memory="0"))
    assert _resources(made) == {**BASE, "cpu": "2", "pods": "256", "memory": "1Gi", "nodes": "1"}


def test_counter_increases_when_new_nodes_are_created():
    """Counter: should increase the counter when new nodes are created"""
    made = lab(nodepool_doc())
    claim = made.store.create(nodeclaim("a", CAPACITY_1))
    made.store.create(linked_node(claim, initialized=True))
    assert _resources(made) == {**BASE, "cpu": "100m", "pods": "256", "memory": "1Gi", "nodes": "1"}


def test_counter_decreases_when_an_existing_node_is_deleted():
    """Counter: should decrease the counter when an existing node is deleted"""
    made = lab(nodepool_doc())
    first = made.store.create(nodeclaim("a", CAPACITY_1))
    made.store.create(linked_node(first, initialized=True))
    second = made.store.create(nodeclaim("b", CAPACITY_2))
    made.store.create(linked_node(second, initialized=True))
    assert _resources(made) == {**BASE, "cpu": "600m", "pods": "1256", "memory": "6Gi", "nodes": "2"}
    made.store.delete("Node", "node-a")
    made.store.delete("NodeClaim", "a")
    # Karpenter's Quantity sums are written in canonical form: 1000 pods is "1k".
    assert _resources(made) == {**BASE, "cpu": "500m", "pods": "1k", "memory": "5Gi", "nodes": "1"}


def test_counter_does_not_count_a_nodeclaim_being_deleted():
    """state/cluster.go updateNodePoolResources (behind the counter): a NodeClaim marked for deletion no longer
    counts, though it and its Node still exist"""
    made = lab(nodepool_doc())
    claim = nodeclaim("a", CAPACITY_1)
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    claim = made.store.create(claim)
    made.store.create(linked_node(claim, initialized=True))
    made.store.delete("NodeClaim", "a")
    assert made.store.get("NodeClaim", "a")["metadata"]["deletionTimestamp"]
    assert _resources(made) == BASE
    assert made.nodepool_status()["default"]["nodes"] == 0


def test_counter_zeroes_out_when_all_nodes_are_deleted():
    """Counter: should zero out the counter when all nodes are deleted"""
    made = lab(nodepool_doc())
    claim = made.store.create(nodeclaim("a", CAPACITY_1))
    made.store.create(linked_node(claim, initialized=True))
    assert _resources(made) == {**BASE, "cpu": "100m", "pods": "256", "memory": "1Gi", "nodes": "1"}
    made.store.delete("Node", "node-a")
    made.store.delete("NodeClaim", "a")
    assert _resources(made) == BASE


def test_status_nodes_is_zero_with_no_nodes():
    """Counter/Status.Nodes Field: should set Status.Nodes to zero when no nodes exist"""
    assert lab(nodepool_doc()).nodepool_status()["default"]["nodes"] == 0


def test_status_nodes_is_two_with_two_nodes():
    """Counter/Status.Nodes Field: should set Status.Nodes to 2 when two nodes exist"""
    made = lab(nodepool_doc())
    for name, capacity in (("a", CAPACITY_1), ("b", CAPACITY_2)):
        made.store.create(linked_node(made.store.create(nodeclaim(name, capacity)), initialized=True))
    assert made.nodepool_status()["default"]["nodes"] == 2


def test_status_nodes_follows_nodes_added_and_removed():
    """Counter/Status.Nodes Field: should update Status.Nodes when nodes are added and removed"""
    made = lab(nodepool_doc())
    counts = [made.nodepool_status()["default"]["nodes"]]
    for name, capacity in (("a", CAPACITY_1), ("b", CAPACITY_2)):
        made.store.create(linked_node(made.store.create(nodeclaim(name, capacity)), initialized=True))
        counts.append(made.nodepool_status()["default"]["nodes"])
    for name in ("a", "b"):
        made.store.delete("Node", f"node-{name}")
        made.store.delete("NodeClaim", name)
        counts.append(made.nodepool_status()["default"]["nodes"])
    assert counts == [0, 1, 2, 1, 0]


def test_status_nodes_for_several_nodepools_including_a_static_one():
    """Counter/Status.Nodes Field: should handle multiple nodepools including static with different node counts"""
    made = lab(nodepool_doc(), nodepool_doc("static", replicas=2))
    made.store.create(linked_node(made.store.create(nodeclaim("a", CAPACITY_1)), initialized=True))
    for name in ("s1", "s2"):
        made.store.create(linked_node(made.store.create(nodeclaim(name, {"cpu": "300m"}, nodepool="static"))))
    status = made.nodepool_status()
    assert (status["default"]["nodes"], status["static"]["nodes"]) == (1, 2)
    assert status["static"]["resources"] == {**BASE, "cpu": "600m", "nodes": "2"}


def test_status_nodes_of_a_static_nodepool_is_its_nodes_not_its_replicas():
    """Counter/Status.Nodes Field: should handle static nodepools with replicas correctly"""
    made = lab(nodepool_doc("static", replicas=3))
    for name in ("s1", "s2"):
        made.store.create(linked_node(made.store.create(nodeclaim(name, {"cpu": "300m"}, nodepool="static"))))
    assert made.nodepool_status()["static"]["nodes"] == 2
    assert made.ctx.nodepool("static").replicas == 3


# nodeclaim/podevents/suite_test.go -------------------------------------------------------------------------------


def _podevents(*objects: dict[str, Any]) -> tuple[ObjectStore, ClusterContext]:
    store = ObjectStore(clock=lambda: START)
    for obj in objects:
        store.create(obj)
    return store, ClusterContext(store, None, START, random.Random(0), [], {}, {}, {})  # type: ignore[arg-type]


def _pod(name: str = "p", node: str = "node-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        "status": {"phase": "Running"},
    }


def _last_pod_event(store: ObjectStore) -> str | None:
    return store.get("NodeClaim", "a")["status"].get("lastPodEventTime")


def test_podevents_sets_the_nodeclaim_last_pod_event():
    """PodEvents: should set the nodeclaim lastPodEvent"""
    claim = nodeclaim("a", CAPACITY_1)
    store, ctx = _podevents(claim, linked_node(claim), _pod())
    assert PodEventsController({}).reconcile(ctx) is True
    assert _last_pod_event(store) == timestamp(START)


def test_podevents_does_not_set_the_last_pod_event_when_the_node_does_not_exist():
    """PodEvents: should not set the nodeclaim lastPodEvent when the node does not exist"""
    store, ctx = _podevents(nodeclaim("a", CAPACITY_1), _pod())
    assert PodEventsController({}).reconcile(ctx) is False
    assert _last_pod_event(store) is None


def test_podevents_succeeds_when_the_nodeclaim_does_not_exist():
    """PodEvents: should succeed when the nodeclaim lastPodEvent when the nodeclaim does not exist"""
    claim = nodeclaim("a", CAPACITY_1)
    store, ctx = _podevents(linked_node(claim), _pod())
    assert PodEventsController({}).reconcile(ctx) is False
    assert store.list("NodeClaim") == []


def test_podevents_sets_the_last_pod_event_when_set_before():
    """PodEvents: should set the nodeclaim lastPodEvent when it's been set before (five minutes ago)"""
    claim = nodeclaim("a", CAPACITY_1, lastPodEventTime=timestamp(START - 5 * 60))
    store, ctx = _podevents(claim, linked_node(claim), _pod())
    PodEventsController({}).reconcile(ctx)
    assert _last_pod_event(store) == timestamp(START)


def test_podevents_sets_the_last_pod_event_once_within_the_dedupe_timeframe():
    """PodEvents: should only set the nodeclaim lastPodEvent once within the dedupe timeframe. Karpenter's test
    reconciles the same pod again; karpui reacts to the pod set changing, so each reconcile follows another bind."""
    claim = nodeclaim("a", CAPACITY_1)
    store, ctx = _podevents(claim, linked_node(claim), _pod())
    controller = PodEventsController({})
    controller.reconcile(ctx)
    assert _last_pod_event(store) == timestamp(START)
    ctx.now = START + 5
    store.create(_pod("p2"))
    controller.reconcile(ctx)
    assert _last_pod_event(store) == timestamp(START)
    ctx.now = START + 10
    store.create(_pod("p3"))
    controller.reconcile(ctx)
    assert _last_pod_event(store) == timestamp(START + 10)


# nodeclaim/hydration and node/hydration suite_test.go ------------------------------------------------------------

UNMANAGED = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"}


@pytest.mark.parametrize(
    ("ref", "label", "expected"),
    [
        pytest.param(KWOK_REF, NODECLASS_LABEL, "default", id="should hydrate missing metadata onto the NodeClaim"),
        pytest.param(
            UNMANAGED,
            "karpenter.test.sh/unmanagednodeclass",
            None,
            id="should ignore NodeClaims which aren't managed by this Karpenter instance",
        ),
    ],
)
def test_nodeclaim_hydration(ref, label, expected):
    """Hydration (nodeclaim): should hydrate missing metadata onto the NodeClaim / should ignore NodeClaims which
    aren't managed by this Karpenter instance"""
    claim = nodeclaim("a", CAPACITY_1, ref=ref)
    del claim["metadata"]["labels"][label]
    store, ctx = _podevents(claim)
    assert HydrationController().reconcile(ctx) is (expected is not None)
    assert store.get("NodeClaim", "a")["metadata"]["labels"].get(label) == expected


@pytest.mark.parametrize(
    ("ref", "label", "expected"),
    [
        pytest.param(KWOK_REF, NODECLASS_LABEL, "default", id="should hydrate missing metadata onto the Node"),
        pytest.param(
            UNMANAGED,
            "karpenter.test.sh/unmanagednodeclass",
            None,
            id="should ignore Nodes which aren't managed by this Karpenter instance",
        ),
    ],
)
def test_node_hydration(ref, label, expected):
    """Hydration (node): should hydrate missing metadata onto the Node / should ignore Nodes which aren't managed
    by this Karpenter instance"""
    claim = nodeclaim("a", CAPACITY_1, ref=ref)
    node = linked_node(claim)
    del node["metadata"]["labels"][label]
    store, ctx = _podevents(claim, node)
    assert HydrationController().reconcile(ctx) is (expected is not None)
    assert store.get("Node", "node-a")["metadata"]["labels"].get(label) == expected


def test_hydration_runs_with_the_other_controllers():
    """The hydration controllers run in the manager's step: a NodeClaim and its Node that lack the label get it."""
    made = lab(nodepool_doc())
    claim = nodeclaim("a", CAPACITY_1)
    node = linked_node(claim, initialized=True)
    del claim["metadata"]["labels"][NODECLASS_LABEL]
    del node["metadata"]["labels"][NODECLASS_LABEL]
    made.store.create(claim)
    made.store.create(node)
    assert "hydration" in made.manager.step(made.ctx)
    assert made.store.get("NodeClaim", "a")["metadata"]["labels"][NODECLASS_LABEL] == "default"
    assert made.store.get("Node", "node-a")["metadata"]["labels"][NODECLASS_LABEL] == "default"
