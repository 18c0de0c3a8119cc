"""Karpenter v1.15.0's NodeClaim lifecycle suite (pkg/controllers/nodeclaim/lifecycle: registration_test.go,
initialization_test.go, liveness_test.go, launch_test.go, termination_test.go, suite_test.go) ported onto karpui's
lifecycle controller, each test naming the It it follows.

As the Go suite does, a test makes a NodeClaim, reconciles it once (the kwok provider launches it), creates its Node
by hand (kwok's, with the karpenter.sh/unregistered taint unless the test says otherwise) and reconciles again; the
lab's other controllers do not run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from provisioner.cloudprovider.kwok import node_for
from provisioner.cluster.conditions import set_claim_condition
from provisioner.cluster.objects import timestamp
from provisioner.controllers import lifecycle
from provisioner.lab import Lab
from tests.lab_builders import KWOK_REF, condition, lab, nodepool_doc

REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"
TAINTS = [
    {"key": "custom-taint", "effect": "NoSchedule", "value": "custom-value"},
    {"key": "other-custom-taint", "effect": "NoExecute", "value": "other-custom-value"},
]
STARTUP_TAINTS = [
    {"key": "custom-startup-taint", "effect": "NoSchedule", "value": "custom-startup-value"},
    {"key": "other-custom-startup-taint", "effect": "NoExecute", "value": "other-custom-startup-value"},
]
UNMANAGED_REF = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"}


def _lab() -> Lab:
    return lab(nodepool_doc(disruption={"consolidateAfter": "Never"}))


def _nodeclaim(
    made: Lab,
    name: str = "default-x7k2p",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
    requests: dict[str, str] | None = None,
    node_class_ref: dict[str, str] | None = None,
) -> dict[str, Any]:
    """test.NodeClaim: owned by the NodePool `default`, on the 2-CPU kwok type, created in the lab's store."""
    claim: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": "default", **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": [lifecycle.TERMINATION_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": "default",
                    "uid": "uid-default",
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeClassRef": dict(node_class_ref or KWOK_REF),
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-2x-amd64-linux"]}
            ],
            "taints": list(taints or []),
            "startupTaints": list(startup_taints or []),
            "resources": {"requests": dict(requests or {"cpu": "100m"})},
        },
        "status": {},
    }
    return made.store.create(claim)


def _reconcile(made: Lab, name: str = "default-x7k2p") -> dict[str, Any]:
    """ExpectObjectReconciled then ExpectExists: the NodeClaim after one lifecycle run."""
    lifecycle.reconcile(made.ctx)
    claim = made.store.get("NodeClaim", name)
    assert claim is not None
    return claim


def _node(
    made: Lab,
    claim: dict[str, Any],
    *,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    owner_references: list[dict[str, Any]] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    """test.Node with the NodeClaim's providerID: kwok's Node, bearing `taints` (the unregistered taint by default)
    and none of the NodeClaim's labels but `labels`."""
    node = node_for(claim, made.now)
    node["metadata"]["labels"] = {"kubernetes.io/hostname": node["metadata"]["name"], **(labels or {})}
    node["metadata"]["annotations"] = {}
    node["metadata"]["finalizers"] = []
    if owner_references is not None:
        node["metadata"]["ownerReferences"] = owner_references
    node["spec"]["taints"] = list([UNREGISTERED_TAINT] if taints is None else taints)
    if not ready:
        for cond in node["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond.update(status="False", reason="KubeletNotReady")
    return made.store.create(node)


def _launched_and_node(made: Lab, **node_options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    claim = _reconcile(made)
    return claim, _node(made, claim, **node_options)


def _taints(made: Lab, node: dict[str, Any]) -> list[dict[str, str]]:
    return list(made.store.get("Node", node["metadata"]["name"])["spec"].get("taints") or [])


def _events(made: Lab, reason: str) -> list[dict[str, Any]]:
    return [e for e in made.store.list("Event") if e.get("reason") == reason]


# Registration (registration_test.go)


def test_registration_should_match_the_nodeclaim_to_the_node_when_the_node_comes_online():
    made = _lab()
    _nodeclaim(made)
    _claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert claim["status"]["nodeName"] == node["metadata"]["name"]


def test_registration_should_ignore_nodeclaims_not_managed_by_this_karpenter_instance():
    made = _lab()
    _nodeclaim(made, node_class_ref=UNMANAGED_REF)
    claim = _reconcile(made)
    assert condition(claim, "Launched") is None
    assert condition(claim, "Registered") is None
    assert claim["status"].get("nodeName", "") == ""


def test_registration_should_add_the_owner_reference_to_the_node_when_the_node_comes_online():
    made = _lab()
    _nodeclaim(made)
    _claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    owners = made.store.get("Node", node["metadata"]["name"])["metadata"]["ownerReferences"]
    assert owners == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "name": claim["metadata"]["name"],
            "uid": claim["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]


def test_registration_should_not_add_the_owner_reference_to_the_node_when_the_node_already_has_the_owner_reference():
    made = _lab()
    _nodeclaim(made)
    claim = _reconcile(made)
    owner = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "name": claim["metadata"]["name"],
        "uid": claim["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    node = _node(made, claim, owner_references=[owner])
    _reconcile(made)
    assert made.store.get("Node", node["metadata"]["name"])["metadata"]["ownerReferences"] == [owner]


def test_registration_should_sync_the_registered_label_and_remove_the_unregistered_taint_when_the_node_comes_online():
    made = _lab()
    _nodeclaim(made)
    _claim, node = _launched_and_node(made)
    _reconcile(made)
    stored = made.store.get("Node", node["metadata"]["name"])
    assert stored["metadata"]["labels"][REGISTERED] == "true"
    assert UNREGISTERED_TAINT not in stored["spec"]["taints"]


def test_registration_should_succeed_if_the_unregistered_taint_is_not_present_and_emit_an_event():
    made = _lab()
    _nodeclaim(made)
    _claim, node = _launched_and_node(made, taints=[])
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert claim["status"]["nodeName"] == node["metadata"]["name"]
    assert made.store.get("Node", node["metadata"]["name"])["metadata"]["labels"][REGISTERED] == "true"
    [event] = _events(made, "UnregisteredTaintMissing")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "NodeClaim"
    assert event["message"] == (
        "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on "
        "Karpenter-managed nodes"
    )


def test_registration_should_sync_the_labels_to_the_node_when_the_node_comes_online():
    made = _lab()
    _nodeclaim(made, labels={"custom-label": "custom-value", "other-custom-label": "other-custom-value"})
    _claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    assert claim["metadata"]["labels"]["custom-label"] == "custom-value"
    assert claim["metadata"]["labels"]["other-custom-label"] == "other-custom-value"
    labels = made.store.get("Node", node["metadata"]["name"])["metadata"]["labels"]
    assert {k: labels.get(k) for k in claim["metadata"]["labels"]} == claim["metadata"]["labels"]


def test_registration_should_sync_the_annotations_to_the_node_when_the_node_comes_online():
    made = _lab()
    _nodeclaim(made, annotations={"karpenter.sh/do-not-disrupt": "true", "my-custom-annotation": "my-custom-value"})
    _claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    assert claim["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert claim["metadata"]["annotations"]["my-custom-annotation"] == "my-custom-value"
    annotations = made.store.get("Node", node["metadata"]["name"])["metadata"]["annotations"]
    assert {k: annotations.get(k) for k in claim["metadata"]["annotations"]} == claim["metadata"]["annotations"]


def test_registration_should_sync_the_taints_if_node_label_do_not_sync_taints_is_not_present():
    made = _lab()
    _nodeclaim(made, taints=TAINTS)
    _claim, node = _launched_and_node(made)
    _reconcile(made)
    assert _taints(made, node) == TAINTS


def test_registration_should_sync_the_taints_if_node_label_do_not_sync_taints_is_present_but_not_true():
    made = _lab()
    _nodeclaim(made, taints=TAINTS)
    _claim, node = _launched_and_node(made, labels={DO_NOT_SYNC_TAINTS: "false"})
    _reconcile(made)
    assert _taints(made, node) == TAINTS


def test_registration_should_not_sync_the_taints_with_node_label_do_not_sync_taints():
    made = _lab()
    _nodeclaim(made, taints=TAINTS)
    # test.Node's NotReady taint stands for the one taint the kubelet put there.
    _claim, node = _launched_and_node(
        made, labels={DO_NOT_SYNC_TAINTS: "true"}, taints=[UNREGISTERED_TAINT, NOT_READY_TAINT], ready=False
    )
    claim = _reconcile(made)
    assert _taints(made, node) == [NOT_READY_TAINT]
    assert claim["spec"]["taints"] == TAINTS
    assert condition(claim, "Registered") == ("True", "Registered", "")


def test_registration_should_not_sync_the_startup_taints_with_node_label_do_not_sync_taints():
    made = _lab()
    _nodeclaim(made, taints=TAINTS, startup_taints=STARTUP_TAINTS)
    _claim, node = _launched_and_node(
        made, labels={DO_NOT_SYNC_TAINTS: "true"}, taints=[UNREGISTERED_TAINT, NOT_READY_TAINT], ready=False
    )
    claim = _reconcile(made)
    assert _taints(made, node) == [NOT_READY_TAINT]
    assert claim["spec"]["startupTaints"] == STARTUP_TAINTS


def test_registration_should_sync_the_startup_taints_if_node_label_do_not_sync_taints_is_not_present():
    made = _lab()
    _nodeclaim(made, taints=TAINTS, startup_taints=STARTUP_TAINTS)
    _claim, node = _launched_and_node(made)
    _reconcile(made)
    assert _taints(made, node) == TAINTS + STARTUP_TAINTS


def test_registration_should_sync_the_startup_taints_if_node_label_do_not_sync_taints_is_present_but_not_true():
    made = _lab()
    _nodeclaim(made, taints=TAINTS, startup_taints=STARTUP_TAINTS)
    _claim, node = _launched_and_node(made, labels={DO_NOT_SYNC_TAINTS: "false"})
    _reconcile(made)
    assert _taints(made, node) == TAINTS + STARTUP_TAINTS


def test_registration_should_not_re_sync_the_startup_taints_when_the_startup_taints_are_removed():
    made = _lab()
    _nodeclaim(made, startup_taints=STARTUP_TAINTS)
    # Not Ready, so that karpui's stand-in for the agent that lifts startup taints does not do it first.
    _claim, node = _launched_and_node(made, taints=[*STARTUP_TAINTS, UNREGISTERED_TAINT], ready=False)
    _reconcile(made)
    assert _taints(made, node) == STARTUP_TAINTS
    stored = made.store.get("Node", node["metadata"]["name"])
    stored["spec"]["taints"] = []
    made.store.update(stored)
    _reconcile(made)
    assert _taints(made, node) == []


# Initialization (initialization_test.go)

SIZED = {
    "capacity": {"cpu": "10", "memory": "100Mi", "pods": "110"},
    "allocatable": {"cpu": "8", "memory": "80Mi", "pods": "110"},
}
REQUESTS = {"cpu": "2", "memory": "50Mi", "pods": "5"}


def _registered(
    made: Lab, requests: dict[str, str] = REQUESTS, **claim_options: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A NodeClaim launched and registered to its Ready Node (ExpectMakeNodesReady), not yet initialized."""
    _nodeclaim(made, requests=requests, **claim_options)
    claim, node = _launched_and_node(made, ready=False)
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    _make_ready(made, node, **SIZED)  # test.Node's own resources, no extended ones
    return claim, node


def _make_ready(made: Lab, node: dict[str, Any], **status: Any) -> None:
    """ExpectMakeNodesReady: Ready=True and the not-ready taint gone (and the Node's status fields as given)."""
    stored = made.store.get("Node", node["metadata"]["name"])
    for cond in stored["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond.update(status="True", reason="KubeletReady")
    stored["spec"]["taints"] = [t for t in stored["spec"].get("taints") or [] if t["key"] != NOT_READY_TAINT["key"]]
    stored["status"].update(status)
    made.store.update(stored)


def test_initialization_should_consider_the_nodeclaim_initialized_when_all_initialization_conditions_are_met():
    made = _lab()
    claim, node = _registered(made)
    _make_ready(made, node, **SIZED)
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert condition(claim, "Initialized") == ("True", "Initialized", "")


def test_initialization_should_ignore_nodeclaims_which_arent_managed_by_this_karpenter_instance():
    made = _lab()
    _nodeclaim(made, node_class_ref=UNMANAGED_REF, requests=REQUESTS)
    claim = _reconcile(made)
    set_claim_condition(claim, "Registered", "True", made.now, "Registered")
    made.store.update(claim)
    claim = _reconcile(made)
    assert condition(claim, "Initialized") is None
    assert claim["metadata"].get("deletionTimestamp") is None


def test_initialization_shouldnt_consider_the_nodeclaim_initialized_when_it_has_not_registered():
    """Two Nodes with the NodeClaim's providerID: Registered False (MultipleNodesFound), never Initialized."""
    made = _lab()
    _nodeclaim(made, requests=REQUESTS)
    claim = _reconcile(made)
    first = _node(made, claim)
    second = node_for(claim, made.now)
    second["metadata"]["name"] = "second-node"
    made.store.create(second)
    claim = _reconcile(made)
    _make_ready(made, first, **SIZED)
    _make_ready(made, second, **SIZED)
    assert condition(claim, "Registered") == (
        "False",
        "MultipleNodesFound",
        "Invariant violated, matched multiple nodes",
    )
    claim = _reconcile(made)
    assert condition(claim, "Registered")[0] == "False"
    assert condition(claim, "Initialized")[0] == "Unknown"


def test_initialization_should_add_the_initialization_label_to_the_node_when_the_nodeclaim_is_initialized():
    made = _lab()
    _claim, node = _registered(made)
    _reconcile(made)
    assert made.store.get("Node", node["metadata"]["name"])["metadata"]["labels"][INITIALIZED] == "true"


def test_initialization_should_not_consider_the_node_to_be_initialized_when_the_status_of_the_node_is_not_ready():
    made = _lab()
    _nodeclaim(made, requests=REQUESTS)
    _claim, node = _launched_and_node(made, ready=False)
    _reconcile(made)
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert condition(claim, "Initialized") == ("Unknown", "NodeNotReady", "Node status is NotReady")
    assert INITIALIZED not in made.store.get("Node", node["metadata"]["name"])["metadata"]["labels"]


def test_initialization_should_not_consider_the_node_initialized_when_all_requested_resources_arent_registered():
    made = _lab()
    claim, node = _registered(made, requests={**REQUESTS, "fake.com/vendor-a": "1"})
    claim = _reconcile(made)
    assert condition(claim, "Initialized") == (
        "Unknown",
        "ResourceNotRegistered",
        'Resource "fake.com/vendor-a" was requested but not registered',
    )


def test_initialization_should_consider_the_node_to_be_initialized_once_all_the_resources_are_registered():
    made = _lab()
    claim, node = _registered(made, requests={**REQUESTS, "fake.com/vendor-a": "1"})
    claim = _reconcile(made)
    assert condition(claim, "Initialized")[0] == "Unknown"
    _make_ready(
        made,
        node,
        capacity={**SIZED["capacity"], "fake.com/vendor-a": "2"},
        allocatable={**SIZED["allocatable"], "fake.com/vendor-a": "2"},
    )
    claim = _reconcile(made)
    assert condition(claim, "Initialized") == ("True", "Initialized", "")


STARTUP = [
    {"key": "example.com/startup-taint1", "value": "true", "effect": "NoSchedule"},
    {"key": "example.com/startup-taint2", "value": "true", "effect": "NoExecute"},
]


def test_initialization_should_not_consider_the_node_to_be_initialized_when_all_startup_taints_arent_removed():
    made = _lab()
    claim, node = _registered(made, startup_taints=STARTUP)
    claim = _reconcile(made)
    assert _taints(made, node) == STARTUP
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert condition(claim, "Initialized") == (
        "Unknown",
        "StartupTaintsExist",
        'StartupTaint "example.com/startup-taint1=true:NoSchedule" still exists',
    )


def test_initialization_should_consider_the_node_to_be_initialized_once_the_startup_taints_are_removed():
    made = _lab()
    claim, node = _registered(made, startup_taints=STARTUP)
    claim = _reconcile(made)
    assert condition(claim, "Initialized")[0] == "Unknown"
    stored = made.store.get("Node", node["metadata"]["name"])
    stored["spec"]["taints"] = []
    made.store.update(stored)
    claim = _reconcile(made)
    assert condition(claim, "Initialized") == ("True", "Initialized", "")


def test_initialization_should_not_consider_the_node_initialized_while_a_readiness_taint_is_present():
    """ "should not consider the Node to be initialized while a readiness.k8s.io/ taint is present, and initialize
    once it is removed"."""
    made = _lab()
    claim, node = _registered(made)
    stored = made.store.get("Node", node["metadata"]["name"])
    stored["spec"]["taints"] = [{"key": "readiness.k8s.io/some-rule", "effect": "NoSchedule"}]
    made.store.update(stored)
    claim = _reconcile(made)
    assert condition(claim, "Registered")[0] == "True"
    assert condition(claim, "Initialized") == (
        "Unknown",
        "KnownEphemeralTaintsExist",
        'KnownEphemeralTaint "readiness.k8s.io/some-rule:NoSchedule" still exists',
    )
    stored = made.store.get("Node", node["metadata"]["name"])
    stored["spec"]["taints"] = []
    made.store.update(stored)
    claim = _reconcile(made)
    assert condition(claim, "Initialized") == ("True", "Initialized", "")


# Liveness (liveness_test.go)


def _step(made: Lab, seconds: float) -> None:
    """env.Clock.Step: time passes and nothing runs."""
    made.now += seconds
    made.ctx.now = made.now


def _launch_fails(made: Lab) -> dict[str, Any]:
    """cloudProvider.AllowedCreateCalls = 0: a NodeClaim whose every Create() fails (kwok cannot translate a NodeClaim
    that names no instance type), reconciled once."""
    claim = _nodeclaim(made)
    claim["spec"]["requirements"] = []
    made.store.update(claim)
    return _reconcile(made)


def _retry(made: Lab, name: str = "default-x7k2p") -> dict[str, Any] | None:
    """Reconcile again at once, as a test's ExpectObjectReconciled does, however the controller backs off."""
    made.ctx.backoffs.clear()
    lifecycle.reconcile(made.ctx)
    claim = made.store.get("NodeClaim", name)
    if claim is not None and claim["metadata"].get("deletionTimestamp"):
        for finalizer in list(claim["metadata"].get("finalizers") or []):  # ExpectFinalizersRemoved
            made.store.remove_finalizer(claim, finalizer)
        return made.store.get("NodeClaim", name)
    return claim


def test_liveness_should_delete_the_nodeclaim_when_the_node_hasnt_registered_past_the_registration_timeout():
    made = _lab()
    _nodeclaim(made)
    _reconcile(made)
    _step(made, 20 * 60)
    assert _retry(made) is None


def test_liveness_should_ignore_nodeclaims_not_managed_by_this_karpenter_instance():
    made = _lab()
    claim = _nodeclaim(made, node_class_ref=UNMANAGED_REF)
    set_claim_condition(claim, "Launched", "True", made.now, "Launched")
    made.store.update(claim)
    _reconcile(made)
    _step(made, 20 * 60)
    claim = _retry(made)
    assert claim is not None
    assert claim["metadata"].get("deletionTimestamp") is None


def test_liveness_shouldnt_delete_the_nodeclaim_when_the_node_has_registered_past_the_registration_timeout():
    made = _lab()
    _nodeclaim(made)
    _claim, node = _launched_and_node(made)
    _step(made, 20 * 60)
    assert _retry(made) is not None
    assert made.store.get("Node", node["metadata"]["name"]) is not None


def test_liveness_should_delete_the_nodeclaim_when_the_nodeclaim_hasnt_launched_past_the_launch_timeout():
    made = _lab()
    claim = _launch_fails(made)
    assert condition(claim, "Launched") == (
        "Unknown",
        "LaunchFailed",
        "translating nodeclaim to node, instance type requirement not found",
    )
    _step(made, 6 * 60)
    assert _retry(made) is None


def test_liveness_should_not_delete_the_nodeclaim_when_the_nodeclaim_hasnt_launched_before_the_launch_timeout():
    made = _lab()
    _launch_fails(made)
    _step(made, 60)
    claim = _retry(made)
    assert claim is not None
    assert claim["metadata"].get("deletionTimestamp") is None


def test_liveness_should_use_the_status_condition_transition_time_for_launch_timeout_not_the_creation_timestamp():
    made = _lab()
    claim = _launch_fails(made)
    later = made.now + 10 * 60
    for cond in claim["status"]["conditions"]:
        cond["lastTransitionTime"] = timestamp(later)
    made.store.update(claim)
    _step(made, 12 * 60)
    claim = _retry(made)
    assert claim is not None
    assert claim["metadata"].get("deletionTimestamp") is None


def test_liveness_should_use_the_status_condition_transition_time_for_registration_timeout_not_the_creation_timestamp():
    made = _lab()
    _nodeclaim(made)
    claim = _reconcile(made)
    later = made.now + 10 * 60
    for cond in claim["status"]["conditions"]:
        cond["lastTransitionTime"] = timestamp(later)
    made.store.update(claim)
    _step(made, 16 * 60)
    claim = _retry(made)
    assert claim is not None
    assert claim["metadata"].get("deletionTimestamp") is None
    # RequeueAfter: due again when the 15 minutes from the moved transition time are up, not before.
    assert lifecycle.next_due(made.ctx) == later + 15 * 60


# Launch (launch_test.go)


def test_launch_should_launch_an_instance_when_a_new_nodeclaim_is_created():
    made = _lab()
    _nodeclaim(made)
    claim = _reconcile(made)
    assert condition(claim, "Launched") == ("True", "Launched", "")
    assert claim["status"]["providerID"].startswith("kwok://kwok-default-x7k2p-")


def test_launch_should_ignore_nodeclaims_which_arent_managed_by_this_karpenter_instance():
    made = _lab()
    _nodeclaim(made, node_class_ref=UNMANAGED_REF)
    claim = _reconcile(made)
    assert claim["status"].get("providerID") is None
    assert claim["metadata"].get("deletionTimestamp") is None


# Finalizer (suite_test.go)


def test_finalizer_should_add_the_finalizer_if_it_doesnt_exist():
    made = _lab()
    claim = _nodeclaim(made)
    claim["metadata"]["finalizers"] = []
    made.store.update(claim)
    claim = _reconcile(made)
    assert claim["metadata"]["finalizers"] == [lifecycle.TERMINATION_FINALIZER]


def test_finalizer_shouldnt_add_the_finalizer_to_nodeclaims_not_managed_by_this_instance_of_karpenter():
    made = _lab()
    claim = _nodeclaim(made, node_class_ref=UNMANAGED_REF)
    claim["metadata"]["finalizers"] = []
    made.store.update(claim)
    claim = _reconcile(made)
    assert claim["metadata"].get("finalizers") in (None, [])


# Termination (termination_test.go)


def _drain(made: Lab, seconds: int = 10) -> None:
    """The node termination controller and the lifecycle controller, once a second."""
    from provisioner.controllers.termination import TerminationController

    controller = TerminationController({})
    for _ in range(seconds):
        controller.reconcile(made.ctx)
        lifecycle.reconcile(made.ctx)
        _step(made, 1)


def test_termination_should_delete_the_node_and_the_cloudprovider_nodeclaim_when_nodeclaim_deletion_is_triggered():
    """ "... when NodeClaim deletion is triggered", and "shouldn't mark the root condition of the NodeClaim as unknown
    when setting the Termination condition"."""
    made = _lab()
    claim, node = _registered(made)
    assert condition(_reconcile(made), "Ready") == ("True", "Ready", "")
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    _drain(made)
    assert made.store.get("Node", node["metadata"]["name"]) is None
    assert made.store.get("NodeClaim", claim["metadata"]["name"]) is None
    gone = made.store.removed[("NodeClaim", "", claim["metadata"]["name"])]
    assert condition(gone, "InstanceTerminating") == ("True", "InstanceTerminating", "")
    assert condition(gone, "Ready") == ("True", "Ready", "")
    assert made.cloud.get(claim["status"]["providerID"]) is None


def test_termination_should_ignore_nodeclaims_which_arent_managed_by_this_karpenter_instance():
    made = _lab()
    claim = _nodeclaim(made, node_class_ref=UNMANAGED_REF)
    claim["status"]["providerID"] = "kwok://unmanaged-node"
    set_claim_condition(claim, "Registered", "True", made.now, "Registered")
    claim = made.store.update(claim)
    node = node_for(claim, made.now)
    made.store.create(node)
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    _reconcile(made)
    assert made.store.get("Node", "unmanaged-node") is not None
    assert made.store.get("NodeClaim", claim["metadata"]["name"])["metadata"]["finalizers"] == [
        lifecycle.TERMINATION_FINALIZER
    ]


def test_termination_should_not_call_delete_on_the_cloudprovider_if_the_nodeclaim_hasnt_been_launched_yet(monkeypatch):
    made = _lab()
    claim = _nodeclaim(made)
    deletes: list[str] = []
    monkeypatch.setattr(made.cloud, "delete", lambda c: deletes.append(c["metadata"]["name"]))
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    lifecycle.reconcile(made.ctx)
    assert deletes == []
    assert made.store.get("NodeClaim", claim["metadata"]["name"]) is None


def test_termination_should_not_delete_nodes_without_provider_ids_if_the_nodeclaim_hasnt_been_launched_yet():
    made = _lab()
    for i in range(10):
        made.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"}, "spec": {}})
    claim = _nodeclaim(made)
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    lifecycle.reconcile(made.ctx)
    assert made.store.get("NodeClaim", claim["metadata"]["name"]) is None
    assert sorted(n["metadata"]["name"] for n in made.store.list("Node")) == [f"node-{i}" for i in range(10)]


def _deleted_registered(made: Lab, **claim_options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    _nodeclaim(made, **claim_options)
    claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    assert condition(claim, "Registered") == ("True", "Registered", "")
    _pod_on(made, node)  # keeps the node draining, as the Go suite's Node without a termination controller stays
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    lifecycle.reconcile(made.ctx)
    assert made.store.get("Node", node["metadata"]["name"]) is not None
    return made.store.get("NodeClaim", claim["metadata"]["name"]), node


def _pod_on(made: Lab, node: dict[str, Any]) -> None:
    made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "running", "namespace": "default"},
            "spec": {"nodeName": node["metadata"]["name"], "containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Running"},
        }
    )


def test_termination_should_not_annotate_the_node_if_the_nodeclaim_has_no_termination_grace_period():
    made = _lab()
    claim, _node_obj = _deleted_registered(made)
    assert "karpenter.sh/nodeclaim-termination-timestamp" not in claim["metadata"]["annotations"]


def test_termination_should_annotate_the_node_if_the_nodeclaim_has_a_termination_grace_period():
    made = _lab()
    _nodeclaim(made)
    stored = made.store.get("NodeClaim", "default-x7k2p")
    stored["spec"]["terminationGracePeriod"] = "300s"
    made.store.update(stored)
    claim, _launched = _launched_and_node(made)
    claim = _reconcile(made)
    _pod_on(made, _launched)
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    deleted_at = made.now
    lifecycle.reconcile(made.ctx)
    claim = made.store.get("NodeClaim", "default-x7k2p")
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] == timestamp(
        deleted_at + 300
    )


def test_termination_should_not_change_the_annotation_if_the_nodeclaim_has_a_grace_period_and_the_annotation_exists():
    made = _lab()
    _nodeclaim(made, annotations={"karpenter.sh/nodeclaim-termination-timestamp": "2024-04-01T12:00:00-05:00"})
    stored = made.store.get("NodeClaim", "default-x7k2p")
    stored["spec"]["terminationGracePeriod"] = "300s"
    made.store.update(stored)
    claim, node = _launched_and_node(made)
    claim = _reconcile(made)
    _pod_on(made, node)
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    lifecycle.reconcile(made.ctx)
    annotations = made.store.get("NodeClaim", "default-x7k2p")["metadata"]["annotations"]
    assert annotations["karpenter.sh/nodeclaim-termination-timestamp"] == "2024-04-01T12:00:00-05:00"


def test_termination_should_not_delete_nodes_if_the_nodeclaim_is_not_registered():
    """An unregistered NodeClaim's instance is deleted at once, without waiting for a drain of a Node it never
    registered (controller.go:213): here a Node carrying its providerID that registration refused (a second one)."""
    made = _lab()
    _nodeclaim(made)
    claim = _reconcile(made)
    _node(made, claim)
    other = node_for(claim, made.now)
    other["metadata"]["name"] = "other"
    made.store.create(other)
    claim = _reconcile(made)
    assert condition(claim, "Registered")[0] == "False"
    made.store.delete("NodeClaim", claim["metadata"]["name"])
    lifecycle.reconcile(made.ctx)
    lifecycle.reconcile(made.ctx)
    assert made.store.get("Node", "other") is not None
    assert made.store.get("NodeClaim", claim["metadata"]["name"]) is None


# DRA Initialization Gating (suite_test.go)

DRIVER_A, DRIVER_B = "driver-a.example.com", "driver-b.example.com"


def _awaiting_dra(made: Lab, drivers: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """registeredReadyNodeClaim: only the DRA gate stands between the NodeClaim and initialization."""
    return _registered(made, annotations={DRA_DRIVERS: drivers} if drivers else None)


def _slice(made: Lab, node: dict[str, Any], driver: str, pool: str, generation: int, count: int, device: str) -> None:
    name = node["metadata"]["name"]
    made.store.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": f"{name}-{pool}-{device}",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}],
            },
            "spec": {
                "driver": driver,
                "nodeName": name,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                "devices": [{"name": device}],
            },
        }
    )


def test_dra_initialization_gating_holds_initialization_until_the_expected_driver_publishes_a_complete_pool():
    made = _lab()
    _claim, node = _awaiting_dra(made, DRIVER_A)
    claim = _reconcile(made)
    assert condition(claim, "Initialized") == (
        "Unknown",
        "DRADriverPoolsNotPublished",
        'DRA driver "driver-a.example.com" has not published a complete resource pool',
    )
    _slice(made, node, DRIVER_A, "pool-a", 1, 1, "dev-0")
    assert condition(_reconcile(made), "Initialized") == ("True", "Initialized", "")


def test_dra_initialization_gating_does_not_consider_an_incomplete_pool_satisfied():
    made = _lab()
    _claim, node = _awaiting_dra(made, DRIVER_A)
    _slice(made, node, DRIVER_A, "pool-a", 1, 2, "dev-0")
    assert condition(_reconcile(made), "Initialized")[0] == "Unknown"
    _slice(made, node, DRIVER_A, "pool-a", 1, 2, "dev-1")
    assert condition(_reconcile(made), "Initialized") == ("True", "Initialized", "")


def test_dra_initialization_gating_does_not_let_stale_older_generation_slices_satisfy_a_newer_incomplete_pool():
    made = _lab()
    _claim, node = _awaiting_dra(made, DRIVER_A)
    _slice(made, node, DRIVER_A, "pool-a", 1, 1, "dev-old")
    _slice(made, node, DRIVER_A, "pool-a", 2, 2, "dev-0")
    assert condition(_reconcile(made), "Initialized")[0] == "Unknown"


def test_dra_initialization_gating_requires_every_expected_driver_to_publish_a_complete_pool():
    made = _lab()
    _claim, node = _awaiting_dra(made, f"{DRIVER_A},{DRIVER_B}")
    _slice(made, node, DRIVER_A, "pool-a", 1, 1, "dev-0")
    assert condition(_reconcile(made), "Initialized") == (
        "Unknown",
        "DRADriverPoolsNotPublished",
        'DRA driver "driver-b.example.com" has not published a complete resource pool',
    )
    _slice(made, node, DRIVER_B, "pool-b", 1, 1, "dev-0")
    assert condition(_reconcile(made), "Initialized") == ("True", "Initialized", "")


def test_dra_initialization_gating_initializes_a_nodeclaim_with_no_requested_dra_drivers_annotation():
    made = _lab()
    _awaiting_dra(made, "")
    assert condition(_reconcile(made), "Initialized") == ("True", "Initialized", "")


def test_dra_initialization_gating_skips_the_gate_when_dra_is_disabled():
    made = _lab()
    made.ctx.options = replace(made.ctx.options, ignore_dra_requests=True)
    _awaiting_dra(made, DRIVER_A)
    assert condition(_reconcile(made), "Initialized") == ("True", "Initialized", "")
