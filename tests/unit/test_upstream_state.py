"""Karpenter v1.15.0's cluster state suite (pkg/controllers/state/suite_test.go) ported onto karpui's state: the
Nodes and NodeClaims of a store read as the scheduler's nodes (`cluster_nodes`), what each offers as an existing node
(`ExistingNode`), what its NodePool's limits count (`pool_usage`), and the DaemonSets' overhead (`daemonsets`).

karpui keeps no event-fed cache: each read builds the state from the store, so an upstream "reconcile" is a store
write followed by a fresh read. Karpenter's StateNode.Available() is `ExistingNode.available` without DaemonSets;
its MarkedForDeletion() is `Node.marked_for_deletion`; NodePoolResourcesFor() is `pool_usage` over the state nodes.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from provisioner.cluster.objects import timestamp
from provisioner.controllers.nodecounts import node_counts
from provisioner.controllers.provisioning import cluster_nodes, daemonsets, nomination_seconds
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.candidates import node_blockers
from provisioner.lab import Lab
from provisioner.nodes import DaemonSet, Node
from provisioner.pods import HostPort
from provisioner.quantity import MILLI, Resources, parse_quantity, parse_resources
from provisioner.scheduling.existing import ExistingNode
from provisioner.scheduling.limits import pool_usage
from tests.builders import HOSTNAME, node, pod, schedule, term
from tests.lab_builders import lab, nodepool_doc

NODEPOOL = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
INITIALIZED = "karpenter.sh/initialized"
REGISTERED = "karpenter.sh/registered"
TERMINATION = "karpenter.sh/termination"
DISRUPTED = "karpenter.sh/disrupted"
ZONE = "topology.kubernetes.io/zone"
EPHEMERAL = [
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule", "value": "true"},
]
STARTUP = [
    {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"},
    {"key": "taint-key2", "value": "taint-value2", "effect": "NoExecute"},
]


def cpu(text: str) -> int:
    return parse_quantity(text)


def empty_lab() -> Lab:
    return lab(nodepool_doc(), nodepool_doc("nodepool2"))


def node_doc(
    name: str,
    *,
    allocatable: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    finalizers: list[str] | None = None,
    pool: str | None = "default",
) -> dict[str, Any]:
    """test.Node: a Ready Node with a providerID, in `pool` (the NodePool label), with the given status."""
    allocatable = {"cpu": "4"} if allocatable is None else allocatable
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                INSTANCE_TYPE: "default-instance-type",
                **({NODEPOOL: pool} if pool else {}),
                **(labels or {}),
            },
            "finalizers": list(finalizers or []),
        },
        "spec": {"providerID": f"fake://{name}", "taints": list(taints or [])},
        "status": {
            "allocatable": allocatable,
            "capacity": capacity if capacity is not None else allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def nodeclaim_doc(
    name: str,
    node: str | None = None,
    *,
    pool: str = "default",
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    startup_taints: list[dict[str, str]] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    """test.NodeClaim: launched (and registered to `node` when given)."""
    capacity = {"cpu": "4"} if capacity is None else capacity
    conditions = [{"type": "Launched", "status": "True"}]
    if node:
        conditions.append({"type": "Registered", "status": "True"})
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {NODEPOOL: pool}, "finalizers": list(finalizers or [])},
        "spec": {"startupTaints": list(startup_taints or []), "requirements": []},
        "status": {
            "providerID": f"fake://{node or name}",
            **({"nodeName": node} if node else {}),
            "capacity": capacity,
            "allocatable": allocatable if allocatable is not None else capacity,
            "conditions": conditions,
        },
    }


def nodeclaim_and_node(made: Lab, name: str, **claim: Any) -> None:
    """test.NodeClaimAndNode, applied: a NodeClaim and its registered Node of the same figures."""
    node_options = {k: claim.pop(k) for k in ("labels", "taints") if k in claim}
    made.store.create(nodeclaim_doc(f"{name}-claim", name, **claim))
    capacity = claim.get("capacity") or {"cpu": "4"}
    labels = {REGISTERED: "true", **node_options.pop("labels", {})}
    made.store.create(
        node_doc(
            name,
            allocatable=claim.get("allocatable") or capacity,
            capacity=capacity,
            labels=labels,
            pool=claim.get("pool", "default"),
            **node_options,
        )
    )


def pod_doc(
    name: str,
    cpu_request: str | None = None,
    *,
    memory: str | None = None,
    phase: str = "Pending",
    owner: dict[str, Any] | None = None,
    affinity: dict[str, Any] | None = None,
    host_ports: tuple[int, ...] = (),
) -> dict[str, Any]:
    """test.UnschedulablePod with the given requests."""
    requests = {
        **({"cpu": cpu_request} if cpu_request is not None else {}),
        **({"memory": memory} if memory is not None else {}),
    }
    container: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": requests}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    spec: dict[str, Any] = {"containers": [container]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {},
            **({"ownerReferences": [owner]} if owner is not None else {}),
        },
        "spec": spec,
        "status": {
            "phase": phase,
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def bind(made: Lab, pod: str, node: str) -> None:
    """ExpectManualBinding."""
    obj = made.store.must_get("Pod", pod, "default")
    obj["spec"]["nodeName"] = node
    made.store.update(obj)


def state(made: Lab) -> list[Node]:
    return cluster_nodes(made.ctx)


def state_node(made: Lab, name: str) -> Node:
    """ExpectStateNodeExists."""
    [found] = [n for n in state(made) if n.name == name]
    return found


def available(node: Node, overhead: list[DaemonSet] | None = None) -> Resources:
    """StateNode.Available(), less the overhead of `overhead`'s DaemonSets not running there yet."""
    return ExistingNode(0, node, overhead or []).available


def requested_cpu(node: Node) -> int:
    """StateNode.PodRequests()[cpu], as what is no longer available of the node's allocatable."""
    return node.allocatable.get("cpu", 0) - available(node)["cpu"]


def effective_taints(node: Node) -> list[dict[str, str]]:
    """StateNode.Taints(): the taints the scheduler holds against pods for an existing node."""
    return [t.to_spec() for t in ExistingNode(0, node, []).taints]


# Describe("Node Resource Level")


def two_pods_and_a_node(made: Lab) -> None:
    made.store.create(pod_doc("pod-1", "1.5"))
    made.store.create(pod_doc("pod-2", "2"))
    made.store.create(node_doc("node-1"))


def test_should_not_count_pods_not_bound_to_nodes() -> None:
    made = empty_lab()
    two_pods_and_a_node(made)
    assert requested_cpu(state_node(made, "node-1")) == 0


def test_should_count_new_pods_bound_to_nodes() -> None:
    made = empty_lab()
    two_pods_and_a_node(made)
    bind(made, "pod-1", "node-1")
    assert requested_cpu(state_node(made, "node-1")) == cpu("1.5")
    bind(made, "pod-2", "node-1")
    assert requested_cpu(state_node(made, "node-1")) == cpu("3.5")


def test_should_count_existing_pods_bound_to_nodes() -> None:
    made = empty_lab()
    made.store.create({**pod_doc("pod-1", "1.5"), "spec": {**pod_doc("pod-1", "1.5")["spec"], "nodeName": "node-1"}})
    made.store.create({**pod_doc("pod-2", "2"), "spec": {**pod_doc("pod-2", "2")["spec"], "nodeName": "node-1"}})
    made.store.create(node_doc("node-1"))
    assert requested_cpu(state_node(made, "node-1")) == cpu("3.5")


def test_should_subtract_requests_if_the_pod_is_deleted() -> None:
    made = empty_lab()
    two_pods_and_a_node(made)
    bind(made, "pod-1", "node-1")
    bind(made, "pod-2", "node-1")
    assert requested_cpu(state_node(made, "node-1")) == cpu("3.5")
    made.store.delete("Pod", "pod-2", "default")
    assert requested_cpu(state_node(made, "node-1")) == cpu("1.5")
    made.store.delete("Pod", "pod-1", "default")
    assert requested_cpu(state_node(made, "node-1")) == 0


def test_should_not_add_requests_if_the_pod_is_terminal() -> None:
    made = empty_lab()
    made.store.create(pod_doc("pod-1", "1.5", phase="Failed"))
    made.store.create(pod_doc("pod-2", "2", phase="Succeeded"))
    made.store.create(node_doc("node-1"))
    bind(made, "pod-1", "node-1")
    bind(made, "pod-2", "node-1")
    assert requested_cpu(state_node(made, "node-1")) == 0


def test_a_terminating_pod_still_counts_on_its_node() -> None:
    """Not an It: Karpenter's Cluster.UpdatePod (cluster.go:451) drops a pod's requests from its node only once the
    pod is terminal or gone; a pod being deleted (deletionTimestamp, still running) keeps its room until then."""
    made = empty_lab()
    two_pods_and_a_node(made)
    pod = made.store.must_get("Pod", "pod-1", "default")
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    made.store.update(pod)
    bind(made, "pod-1", "node-1")
    made.store.delete("Pod", "pod-1", "default")
    assert made.store.must_get("Pod", "pod-1", "default")["metadata"]["deletionTimestamp"]
    assert requested_cpu(state_node(made, "node-1")) == cpu("1.5")


def test_should_stop_tracking_nodes_that_are_deleted() -> None:
    made = empty_lab()
    made.store.create(pod_doc("pod-1", "1.5"))
    made.store.create(node_doc("node-1"))
    bind(made, "pod-1", "node-1")
    [node] = state(made)
    assert (available(node)["cpu"], requested_cpu(node)) == (cpu("2.5"), cpu("1.5"))
    made.store.delete("Node", "node-1")
    assert state(made) == []


def test_should_track_pods_correctly_if_we_miss_events_or_they_are_consolidated() -> None:
    made = empty_lab()
    made.store.create(pod_doc("stateful-set-pod", "1.5"))
    made.store.create(node_doc("node-1"))
    bind(made, "stateful-set-pod", "node-1")
    [node] = state(made)
    assert (available(node)["cpu"], requested_cpu(node)) == (cpu("2.5"), cpu("1.5"))
    made.store.delete("Pod", "stateful-set-pod", "default")
    made.store.create(node_doc("node-2", allocatable={"cpu": "8"}))
    made.store.create(pod_doc("stateful-set-pod", "5.0"))
    bind(made, "stateful-set-pod", "node-2")
    seen = {n.name: (available(n)["cpu"], requested_cpu(n)) for n in state(made)}
    assert seen == {"node-1": (cpu("4"), 0), "node-2": (cpu("3"), cpu("5"))}


def test_should_maintain_a_correct_count_of_resource_usage_as_pods_are_deleted_and_added() -> None:
    """Go draws 100 CPU requests of 0.0-2.0 (one decimal); a seeded draw stands for them."""
    draw = random.Random(7)
    requests = [f"{draw.randint(0, 20) / 10:.1f}" for _ in range(100)]
    made = empty_lab()
    made.store.create(node_doc("node-1", allocatable={"cpu": "200", "pods": "500"}))
    node = state_node(made, "node-1")
    assert (requested_cpu(node), available(node)["pods"]) == (0, 500 * MILLI)
    total = 0
    for index, request in enumerate(requests):
        made.store.create(pod_doc(f"pod-{index}", request))
        bind(made, f"pod-{index}", "node-1")
        total += cpu(request)
        node = state_node(made, "node-1")
        assert (requested_cpu(node), available(node)["pods"]) == (total, (500 - index - 1) * MILLI)
    for index, request in enumerate(requests):
        made.store.delete("Pod", f"pod-{index}", "default")
        total -= cpu(request)
        node = state_node(made, "node-1")
        assert (requested_cpu(node), available(node)["pods"]) == (total, (401 + index) * MILLI)
    assert requested_cpu(state_node(made, "node-1")) == 0


def test_should_track_daemonset_requested_resources_separately() -> None:
    """The DaemonSet's overhead is reserved on the node until its pod runs there, then counted once, as the pod."""
    made = empty_lab()
    template = pod_doc("template", "1", memory="2Gi")
    made.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "default"},
            "spec": {"template": {"metadata": {}, "spec": template["spec"]}},
        }
    )
    ds = made.store.must_get("DaemonSet", "ds", "default")
    made.store.create(pod_doc("pod-1", "1.5"))
    made.store.create(node_doc("node-1", allocatable={"cpu": "4", "memory": "8Gi"}))
    bind(made, "pod-1", "node-1")
    before = available(state_node(made, "node-1"), daemonsets(made.ctx))
    assert (before["cpu"], before["memory"]) == (cpu("1.5"), parse_quantity("6Gi"))
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "ds",
        "uid": ds["metadata"]["uid"],
        "controller": True,
    }
    made.store.create(pod_doc("ds-pod", "1", memory="2Gi", owner=owner))
    bind(made, "ds-pod", "node-1")
    after = available(state_node(made, "node-1"), daemonsets(made.ctx))
    assert (after["cpu"], after["memory"]) == (cpu("1.5"), parse_quantity("6Gi"))
    node = state_node(made, "node-1")
    assert requested_cpu(node) == cpu("2.5")
    assert node.allocatable["memory"] - available(node)["memory"] == parse_quantity("2Gi")


def test_should_mark_node_for_deletion_when_node_is_deleted() -> None:
    made = empty_lab()
    made.store.create(node_doc("node-1", finalizers=[TERMINATION]))
    assert len(state(made)) == 1
    made.store.delete("Node", "node-1")
    assert made.store.get("Node", "node-1") is not None
    assert state_node(made, "node-1").marked_for_deletion is True


def test_should_mark_node_for_deletion_when_nodeclaim_is_deleted() -> None:
    made = empty_lab()
    made.store.create(
        nodeclaim_doc(
            "claim-1",
            "node-1",
            capacity={"cpu": "2", "memory": "32Gi", "ephemeral-storage": "20Gi"},
            allocatable={"cpu": "1", "memory": "30Gi", "ephemeral-storage": "18Gi"},
            finalizers=[TERMINATION],
        )
    )
    made.store.create(node_doc("node-1", allocatable={"cpu": "1"}, labels={REGISTERED: "true"}))
    assert len(state(made)) == 1
    made.store.delete("NodeClaim", "claim-1")
    assert made.store.get("NodeClaim", "claim-1") is not None
    assert state_node(made, "node-1").marked_for_deletion is True


def test_should_nominate_the_node_until_the_nomination_time_passes() -> None:
    """A node the provisioner nominates (for nomination_seconds: 20 s by default) is Nominated() to the disruption
    controller's snapshot for that long, and no longer."""
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", labels={INITIALIZED: "true"}, finalizers=[TERMINATION])
    start = made.ctx.now
    made.ctx.nominations["node-1"] = start + nomination_seconds(made.ctx)
    nominated = []
    for later in (0.0, 10.0, 21.0):
        ctx = dataclasses.replace(made.ctx, now=start + later)
        [claimed] = cluster_view(ctx)[1]
        nominated.append(
            "Node is nominated for a pending pod" in node_blockers(claimed, ctx.nodepool("default"), ctx.now)
        )
    assert nominated == [True, True, False]


def test_should_handle_a_node_changing_from_no_provider_id_to_registering_a_provider_id() -> None:
    made = empty_lab()
    doc = node_doc("node-1")
    doc["spec"].pop("providerID")
    made.store.create(doc)
    assert [n.name for n in state(made)] == ["node-1"]
    node = made.store.must_get("Node", "node-1")
    node["spec"]["providerID"] = "fake://node-1"
    made.store.update(node)
    assert [n.name for n in state(made)] == ["node-1"]


# Describe("Node Deletion")


def test_should_not_leak_a_state_node_when_the_nodeclaim_and_node_names_match() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("same", "same"))
    made.store.create(node_doc("same", labels={REGISTERED: "true"}))
    assert len(state(made)) == 1
    made.store.delete("NodeClaim", "same")
    assert len(state(made)) == 1
    made.store.delete("Node", "same")
    assert state(made) == []


# Describe("Pod Anti-Affinity"): ForPodsWithAntiAffinity is the node's anti_affinity_pods.

ANTI_REQUIRED = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"foo": "bar"}}, "topologyKey": ZONE}
        ]
    }
}
ANTI_PREFERRED = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 15, "podAffinityTerm": {"labelSelector": {"matchLabels": {"foo": "bar"}}, "topologyKey": ZONE}}
        ]
    }
}


def anti_affinity_pods(made: Lab) -> list[str]:
    return [p.name for n in state(made) for p in n.anti_affinity_pods]


def one_pod_on_a_node(made: Lab, affinity: dict[str, Any]) -> None:
    made.store.create(pod_doc("pod-1", "1.5", affinity=affinity))
    made.store.create(node_doc("node-1"))
    bind(made, "pod-1", "node-1")


def test_should_track_pods_with_required_anti_affinity() -> None:
    made = empty_lab()
    one_pod_on_a_node(made, ANTI_REQUIRED)
    assert anti_affinity_pods(made) == ["pod-1"]


def test_should_not_track_pods_with_preferred_anti_affinity() -> None:
    made = empty_lab()
    one_pod_on_a_node(made, ANTI_PREFERRED)
    assert anti_affinity_pods(made) == []


def test_should_stop_tracking_pods_with_required_anti_affinity_if_the_pod_is_deleted() -> None:
    made = empty_lab()
    one_pod_on_a_node(made, ANTI_REQUIRED)
    assert anti_affinity_pods(made) == ["pod-1"]
    made.store.delete("Pod", "pod-1", "default")
    assert anti_affinity_pods(made) == []


def test_should_handle_anti_affinity_events_out_of_order() -> None:
    """ "should handle events out of order": the node goes before its pod."""
    made = empty_lab()
    one_pod_on_a_node(made, ANTI_REQUIRED)
    made.store.delete("Node", "node-1")
    assert anti_affinity_pods(made) == []


# Describe("HostPort Usage")


def ten_host_port_pods(made: Lab) -> None:
    made.store.create(nodeclaim_doc("claim-1", "node-1"))
    made.store.create(node_doc("node-1", labels={REGISTERED: "true"}))
    for port in range(10):
        made.store.create(pod_doc(f"pod-{port}", host_ports=(port,)))
        bind(made, f"pod-{port}", "node-1")


def test_should_hydrate_the_host_port_usage_on_a_node_update() -> None:
    made = empty_lab()
    ten_host_port_pods(made)
    assert len(state(made)) == 1
    ports = ExistingNode(0, state_node(made, "node-1"), []).ports
    assert ports.conflict([HostPort(5, "TCP", "0.0.0.0")]) == HostPort(5, "TCP", "0.0.0.0")


def test_should_maintain_the_host_port_usage_state_when_receiving_nodeclaim_updates() -> None:
    made = empty_lab()
    ten_host_port_pods(made)
    claim = made.store.must_get("NodeClaim", "claim-1")
    claim["metadata"].setdefault("annotations", {})["touched"] = "true"
    made.store.update(claim)
    ports = ExistingNode(0, state_node(made, "node-1"), []).ports
    assert ports.conflict([HostPort(5, "TCP", "0.0.0.0")]) == HostPort(5, "TCP", "0.0.0.0")


# Describe("DaemonSet Controller"): GetDaemonSetPod is the pod `daemonsets` takes the DaemonSet's overhead from.


def daemonset_doc(made: Lab) -> dict[str, Any]:
    made.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "default"},
            "spec": {"template": {"metadata": {}, "spec": pod_doc("t", "1", memory="1Gi")["spec"]}},
        }
    )
    return made.store.must_get("DaemonSet", "ds", "default")


def daemon_pod(made: Lab, name: str, ds: dict[str, Any], cpu_request: str) -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "ds",
        "uid": ds["metadata"]["uid"],
        "controller": True,
    }
    made.store.create(pod_doc(name, cpu_request, memory="1Gi", owner=owner))


def test_should_update_daemonset_cache_when_daemonset_pod_is_created() -> None:
    """The pod stands for the DaemonSet (here asking 3 CPUs where the template asks 1, to tell them apart)."""
    made = empty_lab()
    ds = daemonset_doc(made)
    daemon_pod(made, "ds-pod", ds, "3")
    [overhead] = daemonsets(made.ctx)
    assert overhead.template.requests == parse_resources({"cpu": "3", "memory": "1Gi"})


def test_should_delete_daemonset_in_cache_when_daemonset_is_deleted() -> None:
    made = empty_lab()
    ds = daemonset_doc(made)
    daemon_pod(made, "ds-pod", ds, "3")
    assert len(daemonsets(made.ctx)) == 1
    made.store.delete("DaemonSet", "ds", "default")
    made.store.delete("Pod", "ds-pod", "default")
    assert daemonsets(made.ctx) == []


def test_should_only_return_daemonset_pods_from_the_daemonset_cache() -> None:
    """1,000 pods in the DaemonSet's namespace that it does not own: none stands for it (its template does)."""
    made = empty_lab()
    daemonset_doc(made)
    for index in range(1000):
        made.store.create(pod_doc(f"other-{index}", "3"))
    [overhead] = daemonsets(made.ctx)
    assert overhead.template.requests == parse_resources({"cpu": "1", "memory": "1Gi"})


# Describe("Taints")


def managed(made: Lab, *, initialized: bool, node_taints: list[dict[str, str]], startup=None) -> Node:
    labels = {INITIALIZED: "true"} if initialized else {}
    nodeclaim_and_node(made, "node-1", labels=labels, taints=node_taints, startup_taints=startup)
    return state_node(made, "node-1")


def test_managed_should_not_consider_ephemeral_taints_on_a_managed_node_that_isnt_initialized() -> None:
    assert effective_taints(managed(empty_lab(), initialized=False, node_taints=EPHEMERAL)) == []


def test_managed_should_not_consider_node_readiness_controller_taints_on_a_managed_node_that_isnt_initialized() -> None:
    readiness = [
        {"key": "readiness.k8s.io/some-rule", "effect": "NoSchedule"},
        {"key": "readiness.k8s.io/another-rule", "effect": "NoExecute"},
    ]
    assert effective_taints(managed(empty_lab(), initialized=False, node_taints=readiness)) == []


def test_managed_should_consider_ephemeral_taints_on_a_managed_node_after_the_node_is_initialized() -> None:
    assert effective_taints(managed(empty_lab(), initialized=True, node_taints=EPHEMERAL)) == EPHEMERAL


def test_managed_should_consider_startup_taints_on_a_managed_node_that_isnt_initialized() -> None:
    """ "should consider startup taints on a managed node that isn't initialized": none are held against pods."""
    node = managed(empty_lab(), initialized=False, node_taints=STARTUP, startup=STARTUP)
    assert effective_taints(node) == []


def test_managed_should_consider_startup_taints_on_a_managed_node_after_the_node_is_initialized() -> None:
    node = managed(empty_lab(), initialized=True, node_taints=STARTUP, startup=STARTUP)
    assert effective_taints(node) == STARTUP


def test_a_startup_taint_whose_value_the_node_changed_is_still_a_startup_taint_until_initialized() -> None:
    """Not an It: StateNode.Taints (statenode.go:425) matches startup taints with MatchTaint, key and effect only."""
    changed = [{"key": "taint-key", "value": "other-value", "effect": "NoSchedule"}]
    node = managed(empty_lab(), initialized=False, node_taints=changed, startup=STARTUP[:1])
    assert effective_taints(node) == []


def test_unmanaged_should_consider_ephemeral_taints_on_an_unmanaged_node_that_isnt_initialized() -> None:
    made = empty_lab()
    made.store.create(node_doc("node-1", taints=EPHEMERAL, pool=None))
    assert effective_taints(state_node(made, "node-1")) == EPHEMERAL


def test_unmanaged_should_consider_ephemeral_taints_on_an_unmanaged_node_after_the_node_is_initialized() -> None:
    made = empty_lab()
    made.store.create(node_doc("node-1", taints=EPHEMERAL, pool=None, labels={INITIALIZED: "true"}))
    assert effective_taints(state_node(made, "node-1")) == EPHEMERAL


# Describe("NodePool Resources"): NodePoolResourcesFor is `pool_usage` over the state nodes.


def usage_cpu(made: Lab, pool: str) -> int:
    return pool_usage(pool, state(made)).get("cpu", 0)


def test_should_calculate_nodepool_resources_for_multiple_nodepools() -> None:
    made = lab(nodepool_doc("pool-1"), nodepool_doc("pool-2"), nodepool_doc("pool-3"))
    for pool, size in (("pool-1", 1), ("pool-2", 2), ("pool-3", 3)):
        for index in range(3):
            nodeclaim_and_node(
                made,
                f"{pool}-node-{index}",
                pool=pool,
                capacity={"cpu": str(2 * size), "memory": f"{2 * size}Gi"},
                allocatable={"cpu": str(2 * size - 1), "memory": f"{2 * size - 1}Gi"},
            )
    assert [usage_cpu(made, p) for p in ("pool-1", "pool-2", "pool-3")] == [cpu("6"), cpu("12"), cpu("18")]
    for pool in ("pool-1", "pool-2", "pool-3"):
        made.store.delete("Node", f"{pool}-node-2")
    assert [usage_cpu(made, p) for p in ("pool-1", "pool-2", "pool-3")] == [cpu("6"), cpu("12"), cpu("18")]
    for pool in ("pool-1", "pool-2", "pool-3"):
        made.store.delete("NodeClaim", f"{pool}-node-2-claim")
    assert [usage_cpu(made, p) for p in ("pool-1", "pool-2", "pool-3")] == [cpu("4"), cpu("8"), cpu("12")]
    for pool in ("pool-1", "pool-2", "pool-3"):
        for index in range(2):
            made.store.delete("NodeClaim", f"{pool}-node-{index}-claim")
            made.store.delete("Node", f"{pool}-node-{index}")
    assert [usage_cpu(made, p) for p in ("pool-1", "pool-2", "pool-3")] == [0, 0, 0]


def test_should_update_nodepool_resources_when_a_node_switches_from_one_nodepool_to_another() -> None:
    made = lab(nodepool_doc("old"), nodepool_doc("new"))
    nodeclaim_and_node(made, "node-1", pool="old", capacity={"cpu": "2"}, allocatable={"cpu": "1"})
    assert usage_cpu(made, "old") == cpu("2")
    claim = made.store.must_get("NodeClaim", "node-1-claim")
    claim["metadata"]["labels"][NODEPOOL] = "new"
    made.store.update(claim)
    assert (usage_cpu(made, "old"), usage_cpu(made, "new")) == (cpu("2"), 0)
    node = made.store.must_get("Node", "node-1")
    node["metadata"]["labels"][NODEPOOL] = "new"
    made.store.update(node)
    assert (usage_cpu(made, "old"), usage_cpu(made, "new")) == (0, cpu("2"))


def test_should_handle_nodepool_resources_when_node_inside_of_the_state_node_is_removed() -> None:
    """The first of the two Its of this name: the Node goes, the NodeClaim's capacity stands for it."""
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", capacity={"cpu": "2"})
    node = made.store.must_get("Node", "node-1")
    node["status"]["capacity"] = {"cpu": "1"}
    made.store.update(node)
    assert usage_cpu(made, "default") == cpu("1")
    made.store.delete("Node", "node-1")
    assert usage_cpu(made, "default") == cpu("2")


def test_should_handle_nodepool_resources_when_nodeclaim_inside_of_the_state_node_is_removed() -> None:
    """The second It named "should handle nodepool resources when node inside of the state node is removed": the
    NodeClaim goes, the Node's capacity stays."""
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", capacity={"cpu": "2"})
    node = made.store.must_get("Node", "node-1")
    node["status"]["capacity"] = {"cpu": "1"}
    made.store.update(node)
    assert usage_cpu(made, "default") == cpu("1")
    made.store.delete("NodeClaim", "node-1-claim")
    assert usage_cpu(made, "default") == cpu("1")


def test_should_update_nodepool_resources_when_node_is_terminating() -> None:
    """ "should update nodepool resources when node is terminating (deletionTimestamp set)"."""
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", capacity={"cpu": "2"}, finalizers=[TERMINATION])
    assert usage_cpu(made, "default") == cpu("2")
    made.store.delete("NodeClaim", "node-1-claim")
    assert usage_cpu(made, "default") == 0


def set_disrupted(made: Lab, node_name: str, on: bool) -> None:
    """MarkForDeletion / UnmarkForDeletion: karpui's mark is the disrupted taint a started command puts on."""
    node = made.store.must_get("Node", node_name)
    taints = [t for t in node["spec"].get("taints") or [] if t["key"] != DISRUPTED]
    node["spec"]["taints"] = [*taints, {"key": DISRUPTED, "effect": "NoSchedule"}] if on else taints
    made.store.update(node)


def test_should_update_nodepool_resources_when_node_is_marked_and_unmarked_for_deletion() -> None:
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", capacity={"cpu": "2"})
    assert usage_cpu(made, "default") == cpu("2")
    set_disrupted(made, "node-1", True)
    assert usage_cpu(made, "default") == 0
    set_disrupted(made, "node-1", False)
    assert usage_cpu(made, "default") == cpu("2")


def test_should_not_double_subtract_resources_when_marking_for_deletion_and_then_deleting() -> None:
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", capacity={"cpu": "2"}, finalizers=[TERMINATION])
    node = made.store.must_get("Node", "node-1")
    node["metadata"]["finalizers"] = [TERMINATION]
    made.store.update(node)
    assert usage_cpu(made, "default") == cpu("2")
    set_disrupted(made, "node-1", True)
    assert usage_cpu(made, "default") == 0
    made.store.delete("NodeClaim", "node-1-claim")
    assert usage_cpu(made, "default") == 0
    made.store.delete("Node", "node-1")
    assert usage_cpu(made, "default") == 0
    made.store.remove_finalizer(made.store.must_get("NodeClaim", "node-1-claim"), TERMINATION)
    assert usage_cpu(made, "default") == 0
    made.store.remove_finalizer(made.store.must_get("Node", "node-1"), TERMINATION)
    assert usage_cpu(made, "default") == 0


# Describe("StateNode Capacity"): every state node counts as one node.


def test_should_include_resources_node_in_capacity_for_an_initialized_node() -> None:
    made = empty_lab()
    nodeclaim_and_node(made, "node-1", labels={INITIALIZED: "true"})
    assert pool_usage("default", state(made))["nodes"] == MILLI


def test_should_include_resources_node_in_capacity_for_a_nodeclaim_without_a_node() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("claim-1"))
    assert pool_usage("default", state(made))["nodes"] == MILLI


def test_should_include_resources_node_in_capacity_for_uninitialized_node_with_nodeclaim() -> None:
    made = empty_lab()
    nodeclaim_and_node(made, "node-1")
    assert pool_usage("default", state(made))["nodes"] == MILLI


# Describe("NodePoolState Tracking"): GetNodeCount is `node_counts` (running, deleting, pending disruption).


def counts(made: Lab, pool: str = "default") -> tuple[int, int, int]:
    found = node_counts(made.ctx, pool)
    return found.active, found.deleting, found.pending_disruption


def test_should_track_nodeclaim_in_running_state_when_created_with_provider_id() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim"))
    assert counts(made) == (1, 0, 0)


def test_should_track_nodeclaim_without_provider_id() -> None:
    made = empty_lab()
    doc = nodeclaim_doc("test-nodeclaim-no-provider")
    doc["status"] = {}
    made.store.create(doc)
    assert counts(made) == (1, 0, 0)


def test_should_not_track_nodeclaim_that_has_no_nodepool() -> None:
    made = empty_lab()
    doc = nodeclaim_doc("test-nodeclaim-no-nodepool")
    doc["metadata"]["labels"] = {}
    made.store.create(doc)
    assert (counts(made), counts(made, "nodepool2")) == ((0, 0, 0), (0, 0, 0))


def test_should_track_multiple_nodeclaims_in_the_same_nodepool() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim"))
    made.store.create(nodeclaim_doc("test-nodeclaim-3"))
    assert counts(made) == (2, 0, 0)


def test_should_track_nodeclaims_across_different_nodepools() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim"))
    made.store.create(nodeclaim_doc("test-nodeclaim-2", pool="nodepool2"))
    assert (counts(made), counts(made, "nodepool2")) == ((1, 0, 0), (1, 0, 0))


def test_should_remove_nodeclaim_from_nodepool_state() -> None:
    """ "DeleteNodeClaim should remove NodeClaim from nodepool state"."""
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim"))
    assert counts(made) == (1, 0, 0)
    made.store.delete("NodeClaim", "test-nodeclaim")
    assert counts(made) == (0, 0, 0)


def test_should_move_nodeclaim_to_deleting_state_when_its_deletion_starts() -> None:
    """ "should move NodeClaim to deleting state when Node is marked for deletion", as the NodeClaim's own
    deletion (karpui counts a NodeClaim deleting once its deletionTimestamp is set)."""
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim", finalizers=[TERMINATION]))
    made.store.delete("NodeClaim", "test-nodeclaim")
    assert made.store.get("NodeClaim", "test-nodeclaim")["metadata"]["deletionTimestamp"] == timestamp(made.ctx.now)
    assert counts(made) == (0, 1, 0)


def test_should_be_a_no_op_when_nodeclaim_is_already_tracked_and_no_state_change() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim"))
    assert counts(made) == (1, 0, 0)
    claim = made.store.must_get("NodeClaim", "test-nodeclaim")
    claim["metadata"]["annotations"] = {"test": "annotation"}
    made.store.update(claim)
    assert counts(made) == (1, 0, 0)


def test_should_handle_nodeclaim_cleanup_correctly() -> None:
    made = empty_lab()
    made.store.create(nodeclaim_doc("test-nodeclaim", finalizers=[TERMINATION]))
    assert counts(made) == (1, 0, 0)
    made.store.delete("NodeClaim", "test-nodeclaim")
    made.store.remove_finalizer(made.store.must_get("NodeClaim", "test-nodeclaim"), TERMINATION)
    assert made.store.get("NodeClaim", "test-nodeclaim") is None
    assert counts(made) == (0, 0, 0)


# Not Its: the DaemonSet overhead an existing node still has to make room for (scheduler.go:826-850
# calculateExistingNodeClaims, getCompatibleDaemonPods, isDaemonPodCompatibleWithNode).


def daemonset_with(made: Lab, spec: dict[str, Any]) -> None:
    made.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "default"},
            "spec": {"template": {"metadata": {}, "spec": {**pod_doc("t", "1")["spec"], **spec}}},
        }
    )


def test_a_daemonset_not_tolerating_a_startup_taint_still_takes_room_on_an_uninitialized_node() -> None:
    """Karpenter checks daemons against StateNode.Taints() (scheduler.go:826), which an uninitialized node's startup
    taints are not among: the DaemonSet's pod will run there once they are lifted."""
    made = empty_lab()
    startup = [{"key": "example.com/agent", "effect": "NoSchedule"}]
    nodeclaim_and_node(made, "node-1", taints=startup, startup_taints=startup)
    daemonset_with(made, {})
    assert available(state_node(made, "node-1"), daemonsets(made.ctx))["cpu"] == cpu("3")


def test_a_terminating_pods_required_anti_affinity_still_keeps_matching_pods_out_of_its_domain() -> None:
    """Not an It: ForPodsWithAntiAffinity (cluster.go:252) yields every tracked pod with required anti-affinity
    whose node is known, a terminating one too (only a terminal or deleted pod's binding is dropped), and the
    scheduler's Topology keeps matching pods out of its domains (topology.go:313 updateInverseAffinities)."""
    guard = dataclasses.replace(
        pod("1", labels={"app": "guard"}, anti_affinity=[term(HOSTNAME, app="web")], node_name="node-1"),
        deleting=True,
    )
    existing = node("node-1", scheduled=[guard])
    result = schedule([pod("1", labels={"app": "web"})], nodes=[existing])
    assert (dict(result.placements).get("node-1"), len(result.new_nodeclaims)) == (None, 1)


def test_a_node_not_registered_yet_is_one_state_node_with_its_nodeclaim_read_from_the_nodeclaim() -> None:
    """Not an It: Karpenter keys its state nodes by providerID (cluster.go:383 UpdateNodeClaim, :416 UpdateNode), so
    a Node its NodeClaim has not registered yet is that NodeClaim's state node, not a second one; until the Node
    carries the registered label its labels and taints are the NodeClaim's (statenode.go:380 Labels, :406 Taints)."""
    made = empty_lab()
    dedicated = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    claim = nodeclaim_doc("claim-1", capacity={"cpu": "2"})
    claim["status"]["providerID"] = "fake://node-1"
    claim["spec"]["taints"] = [dedicated]
    claim["metadata"]["labels"][ZONE] = "test-zone-a"
    made.store.create(claim)
    unregistered = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]
    made.store.create(node_doc("node-1", allocatable={"cpu": "2"}, taints=unregistered))
    [only] = state(made)
    assert (only.name, only.managed, only.initialized, only.labels.get(ZONE)) == ("node-1", True, False, "test-zone-a")
    assert effective_taints(only) == [dedicated]
    assert pool_usage("default", state(made)) == {"cpu": cpu("2"), "nodes": MILLI}
