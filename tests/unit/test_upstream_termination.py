"""Karpenter v1.15.0's node termination suite (pkg/controllers/node/termination/suite_test.go) ported onto karpui's
termination and lifecycle controllers, each test naming the It it follows.

A NodeClaim is launched and registered as in test_upstream_lifecycle.py; a test puts pods on its Node, deletes the
Node (as the Go suite does) and runs the lifecycle controller (which deletes the Node's NodeClaim) and the termination
controller once a second. Where the Go test deletes an evicted pod by hand (ExpectDeleted), karpui's store has
already deleted it: the eviction API removes a pod without finalizers at once.
"""

from __future__ import annotations

from typing import Any

from provisioner import labels as wk
from provisioner.cluster.objects import timestamp
from provisioner.controllers import lifecycle
from provisioner.controllers.termination import TerminationController
from provisioner.lab import Lab
from tests.lab_builders import condition
from tests.unit.test_upstream_lifecycle import _lab, _node, _nodeclaim, _reconcile, _step

OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]


def _registered_node(made: Lab) -> dict[str, Any]:
    _nodeclaim(made)
    claim = _reconcile(made)
    node = _node(made, claim)
    _reconcile(made)
    return made.store.get("Node", node["metadata"]["name"])


def _pod(
    made: Lab,
    name: str,
    node: dict[str, Any],
    *,
    owners: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """test.Pod on the Node (owned by a ReplicaSet unless `owners` says otherwise)."""
    phase = spec.pop("phase", "Running")
    return made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": OWNER if owners is None else owners},
            "spec": {
                "nodeName": node["metadata"]["name"],
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}],
                **spec,
            },
            "status": {"phase": phase},
        }
    )


def _pods(made: Lab) -> list[str]:
    return sorted(p["metadata"]["name"] for p in made.store.list("Pod"))


class _Terminating:
    """The Node deleted, then the lifecycle and termination controllers run once per `run`, a second apart."""

    def __init__(self, made: Lab, node: dict[str, Any]) -> None:
        self.made, self.name = made, node["metadata"]["name"]
        self.controller = TerminationController({})
        made.store.delete("Node", self.name)

    def run(self, seconds: float = 1.0) -> None:
        lifecycle.reconcile(self.made.ctx)
        self.controller.reconcile(self.made.ctx)
        lifecycle.reconcile(self.made.ctx)
        _step(self.made, seconds)

    def run_for(self, seconds: int) -> None:
        for _ in range(seconds):
            self.run()

    def node_gone(self) -> bool:
        return self.made.store.get("Node", self.name) is None


def test_reconciliation_should_delete_nodes():
    made = _lab()
    node = _registered_node(made)
    terminating = _Terminating(made, node)
    terminating.run_for(10)
    assert terminating.node_gone()
    assert made.store.list("NodeClaim") == []


def test_reconciliation_should_delete_nodeclaims_associated_with_nodes():
    made = _lab()
    node = _registered_node(made)
    _Terminating(made, node).run()
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["deletionTimestamp"] is not None


def test_reconciliation_should_exclude_nodes_from_load_balancers_when_terminating():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "keep", node)  # keeps the node draining, so its labels can be read
    terminating = _Terminating(made, node)
    terminating.run()
    labels = made.store.get("Node", node["metadata"]["name"])["metadata"]["labels"]
    assert labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "karpenter"


def test_reconciliation_should_not_evict_pods_that_tolerate_karpenter_disruption_taint_with_equal_operator():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "evict", node)
    toleration = {"key": "karpenter.sh/disrupted", "operator": "Equal", "effect": "NoSchedule", "value": ""}
    _pod(made, "skip", node, tolerations=[toleration])
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == ["skip"]
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_not_evict_pods_that_tolerate_karpenter_disruption_taint_with_exists_operator():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "evict", node)
    _pod(
        made,
        "skip",
        node,
        tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}],
    )
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == ["skip"]
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_evict_pods_that_tolerate_the_node_unschedulable_taint():
    made = _lab()
    node = _registered_node(made)
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    _pod(made, "evict", node, tolerations=[unschedulable])
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == []
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_evict_a_pod_whose_disrupted_toleration_is_for_another_effect():
    """ToleratesDisruptedNoScheduleTaint is Kubernetes' toleration match against karpenter.sh/disrupted:NoSchedule: a
    toleration of the key for NoExecute does not tolerate it, so the pod is drained (utils/pod/scheduling.go:283)."""
    made = _lab()
    node = _registered_node(made)
    _pod(
        made,
        "evict",
        node,
        tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoExecute"}],
    )
    _Terminating(made, node).run()
    assert _pods(made) == []


def test_reconciliation_should_delete_nodes_that_have_pods_without_an_owner_ref():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "orphan", node, owners=[])
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == []
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_delete_nodes_with_terminal_pods():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "succeeded", node, phase="Succeeded")
    _pod(made, "failed", node, phase="Failed")
    terminating = _Terminating(made, node)
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_evict_non_critical_pods_first():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "evict", node)
    _pod(made, "node-critical", node, priorityClassName="system-node-critical")
    _pod(made, "cluster-critical", node, priorityClassName="system-cluster-critical")
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == ["cluster-critical", "node-critical"]
    terminating.run()
    assert _pods(made) == []
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_not_evict_static_pods():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "evict", node)
    mirror = [{"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}]
    _pod(made, "static", node, owners=mirror)
    terminating = _Terminating(made, node)
    terminating.run()
    assert _pods(made) == ["static"]
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_evict_pods_in_order_and_wait_until_pods_are_fully_deleted():
    """A terminating pod (a finalizer holds it) is waited on: the next tier is not evicted, nor the Node drained,
    until it is gone."""
    made = _lab()
    node = _registered_node(made)
    held = _pod(made, "held", node)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    made.store.update(held)
    _pod(made, "critical", node, priorityClassName="system-node-critical")
    terminating = _Terminating(made, node)
    terminating.run()
    assert made.store.get("Pod", "held", "default")["metadata"]["deletionTimestamp"] is not None
    terminating.run_for(10)
    assert _pods(made) == ["critical", "held"]
    assert (made.store.get("Node", node["metadata"]["name"])["metadata"].get("annotations") or {}).get(
        wk.DRAINED
    ) is None
    made.store.remove_finalizer(made.store.get("Pod", "held", "default"), "example.com/hold")
    terminating.run()
    assert _pods(made) == []
    terminating.run_for(10)
    assert terminating.node_gone()


def test_reconciliation_should_bypass_pods_which_are_stuck_terminating_past_their_grace_period():
    made = _lab()
    node = _registered_node(made)
    held = _pod(made, "stuck", node)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    made.store.update(held)
    terminating = _Terminating(made, node)
    terminating.run_for(30)
    assert not terminating.node_gone()
    terminating.run_for(60)  # a minute past its deletionTimestamp, the pod no longer holds the drain
    assert terminating.node_gone()
    assert _pods(made) == ["stuck"]


def test_reconciliation_should_fail_to_evict_pods_that_violate_a_pdb():
    made = _lab()
    node = _registered_node(made)
    _pod(made, "guarded", node, **{})
    guarded = made.store.get("Pod", "guarded", "default")
    guarded["metadata"]["labels"] = {"app": "guarded"}
    made.store.update(guarded)
    made.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    terminating = _Terminating(made, node)
    terminating.run_for(20)
    assert _pods(made) == ["guarded"]
    [claim] = made.store.list("NodeClaim")
    assert condition(claim, "Drained") == ("Unknown", "Draining", "Draining")
    assert not terminating.node_gone()


def _with_grace_period(made: Lab) -> dict[str, Any]:
    """The registered Node of a NodeClaim with a 300 s terminationGracePeriod, annotated to end 300 s from now."""
    node = _registered_node(made)
    [claim] = made.store.list("NodeClaim")
    claim["spec"]["terminationGracePeriod"] = "300s"
    claim["metadata"]["annotations"][wk.TERMINATION_TIMESTAMP] = timestamp(made.now + 300)
    made.store.update(claim)
    return node


def test_reconciliation_should_preemptively_delete_pods_to_satisfy_their_termination_grace_period_seconds():
    made = _lab()
    node = _with_grace_period(made)
    _pod(made, "held", node, terminationGracePeriodSeconds=300)
    held = made.store.get("Pod", "held", "default")
    held["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    made.store.update(held)
    terminating = _Terminating(made, node)
    _step(made, 10)  # 2 * MinDrainTime
    terminating.run()
    assert not terminating.node_gone()
    assert _pods(made) == []


def test_reconciliation_should_not_gate_past_deadline_pods_behind_graceful_eviction_of_earlier_tiers():
    made = _lab()
    node = _with_grace_period(made)
    _pod(made, "non-critical", node, terminationGracePeriodSeconds=30)
    _pod(made, "critical", node, priorityClassName="system-node-critical", terminationGracePeriodSeconds=600)
    made.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {}},
        }
    )
    terminating = _Terminating(made, node)
    _step(made, 10)
    terminating.run()
    assert _pods(made) == ["non-critical"]  # the PDB holds the graceful one; the past-deadline one is deleted


def test_reconciliation_should_only_delete_pods_when_their_grace_period_is_less_than_the_nodes_remaining_one():
    """ "should only delete pods when their terminationGracePeriodSeconds is less than the the node's remaining
    terminationGracePeriod"."""
    made = _lab()
    node = _with_grace_period(made)
    _pod(made, "held", node, terminationGracePeriodSeconds=60)
    held = made.store.get("Pod", "held", "default")
    held["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    made.store.update(held)
    terminating = _Terminating(made, node)
    _step(made, 90)
    terminating.run()
    assert _pods(made) == ["held"]
    [claim] = made.store.list("NodeClaim")
    assert condition(claim, "Drained") == ("Unknown", "Draining", "Draining")
    _step(made, 175)  # 265 s in: less than the pod's 60 s is left of the node's 300 s
    terminating.run()
    assert _pods(made) == []


def _managed_node(made: Lab, name: str, provider_id: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """test.Node of this Karpenter (its node class label) with the termination finalizer and a provider ID."""
    return made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"karpenter.kwok.sh/kwoknodeclass": "default"} if labels is None else labels,
                "finalizers": [lifecycle.TERMINATION_FINALIZER],
            },
            "spec": {"providerID": provider_id},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )


def test_reconciliation_should_delete_nodes_without_nodeclaims():
    made = _lab()
    node = _managed_node(made, "lonely", "kwok://lonely")
    terminating = _Terminating(made, node)
    terminating.run()
    assert terminating.node_gone()


def test_reconciliation_should_delete_nodes_with_duplicate_nodeclaims():
    made = _lab()
    node = _managed_node(made, "twice", "kwok://twice")
    for name in ("claim-a", "claim-b"):
        made.store.create(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": name, "finalizers": [lifecycle.TERMINATION_FINALIZER]},
                "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "x"}},
                "status": {"providerID": "kwok://twice"},
            }
        )
    terminating = _Terminating(made, node)
    terminating.run()
    assert terminating.node_gone()


def test_reconciliation_should_ignore_nodes_not_managed_by_this_karpenter_instance():
    made = _lab()
    node = _managed_node(made, "other", "kwok://other", labels={"karpenter.test.sh/unmanagednodeclass": "default"})
    terminating = _Terminating(made, node)
    terminating.run_for(10)
    assert not terminating.node_gone()
