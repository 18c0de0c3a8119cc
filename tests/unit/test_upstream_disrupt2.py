"""Four disruption parity gaps against Karpenter v1.15.0, each test naming the upstream It or the Go file:line it
follows: single-node consolidation's timeout (pkg/controllers/disruption/singlenodeconsolidation.go,
singlenodeconsolidation_test.go), NodePoolState's pending disruption (pkg/controllers/disruption/queue.go), the
NodePool limits a consolidation replacement is held to (helpers.go SimulateScheduling, provisioning/provisioner.go
Create) and the grace period of a force delete (pkg/controllers/node/termination/terminator/eviction.go).
"""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.adapters.direct import DirectAPI
from provisioner.adapters.kinds import BY_KIND, Resource
from provisioner.adapters.kube import KubeCluster
from provisioner.cluster.composite import KWOK, CompositeCluster
from provisioner.controllers import disruption
from provisioner.controllers.nodecounts import Counts, node_counts
from provisioner.disruption import methods
from provisioner.pods import OwnerReference, Pod
from tests.builders import instance_type, nodepool, pod
from tests.disruption_builders import claimed, run
from tests.lab_builders import lab, nodepool_doc
from tests.unit import test_engine_memos as memos
from tests.unit import test_upstream_terminator as terminator
from tests.unit.test_static_capacity import ON
from tests.unit.test_upstream_state import nodeclaim_doc
from tests.unit.test_upstream_static import running

# Single-node consolidation's timeout (singlenodeconsolidation.go:63-75, 145-172) -------------------------------------


def test_the_controller_keeps_the_nodepools_a_stopped_walk_did_not_reach_for_its_next_pass(monkeypatch):
    """singlenodeconsolidation.go:63-75: the SingleNodeConsolidation method keeps PreviouslyUnseenNodePools from
    one pass to the next. A walk stopped before its first candidate (a bound of 0) leaves the one NodePool unseen;
    the controller keeps it (in its state too) and hands it to its next pass over new inputs."""
    running = memos.lab()
    running.store.create(memos.deployment("full", 22))  # two full 8-vCPU nodes: none can go
    monkeypatch.setattr(methods, "MAX_SINGLE_SIMULATIONS", 0)
    asked: list[frozenset[str]] = []
    original = disruption.disruption_pass

    def recorded(*args: Any, **kwargs: Any) -> methods.PassResult:
        asked.append(frozenset(kwargs["unseen_nodepools"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(disruption, "disruption_pass", recorded)
    running.advance(25)  # the pass at 20 s: the first with consolidatable nodes
    controller = running.manager.disruption
    assert controller.last_result is not None and controller.last_result.unseen_nodepools == frozenset({"default"})
    assert controller.unseen_nodepools == frozenset({"default"})
    assert controller.to_state()["unseenNodePools"] == ["default"]
    assert disruption.DisruptionController(controller.to_state()).unseen_nodepools == frozenset({"default"})
    before = len(asked)
    running.store.create(memos.deployment("more", 1, cpu="100m"))  # new inputs: a pass afresh
    running.advance(10)
    assert len(asked) > before and asked[-1] == frozenset({"default"})


# NodePoolState's pending disruption (queue.go:337-340) ------------------------------------------------------------


def live_command(name: str, pool: str, *nodeclaims: str) -> dict[str, Any]:
    """A DisruptionCommand started and not done yet (Executing), holding `nodeclaims` of `pool`."""
    return {
        "apiVersion": "karpui.dev/v1alpha1",
        "kind": "DisruptionCommand",
        "metadata": {"name": name},
        "spec": {"candidates": [{"nodeclaim": c, "nodepool": pool} for c in nodeclaims]},
        "status": {"phase": "Executing"},
    }


def test_a_dynamic_nodepools_command_candidates_stay_running_in_node_counts():
    """queue.go:337-340 (markDisrupted): only a candidate OwnedByStaticNodePool is marked pending disruption; a
    dynamic NodePool's candidate is counted running until it is marked for deletion."""
    made = lab(nodepool_doc(), options=ON)
    made.store.create(nodeclaim_doc("claim-1"))
    made.store.create(nodeclaim_doc("claim-2"))
    made.store.create(live_command("underutilized-1", "default", "claim-1"))
    assert node_counts(made.ctx, "default") == Counts(active=2, deleting=0, pending_disruption=0)


def test_a_static_nodepools_command_candidates_are_pending_disruption():
    """queue.go:337-340: a static NodePool's candidate is marked pending disruption (not running) while its command
    has not deleted it."""
    made = running(2)
    [first, _] = sorted(c["metadata"]["name"] for c in made.store.list("NodeClaim"))
    made.store.create(live_command("drifted-1", "static", first))
    assert node_counts(made.ctx, "static") == Counts(active=1, deleting=0, pending_disruption=1)


# The NodePool limits a consolidation replacement is held to (helpers.go SimulateScheduling, provisioner.go Create) ---

ON_DEMAND = (("test-zone-1", "on-demand"),)
LIMIT_TYPES = [instance_type("big", "4", "4Gi", zones=ON_DEMAND), instance_type("small", "1", "1Gi", zones=ON_DEMAND)]


def rs_pod(cpu: str) -> Pod:
    return pod(cpu=cpu, owner=OwnerReference("ReplicaSet", "rs"))


def test_a_replacement_may_launch_while_the_node_it_replaces_holds_the_pools_limit():
    """helpers.go:70-72 with scheduler.go:738-745: the simulation counts only the NodePool's nodes that stay against
    its limits, and Provisioner.Create (provisioner.go:485) refuses a launch only when the pool's usage already
    exceeds one. A pool at exactly its cpu limit (4 of 4, the candidate's) is replaced by a 1-cpu node."""
    node = claimed("n1", "big", types=LIMIT_TYPES, pods=[rs_pod("100m")])
    result = run([node], pools=[nodepool(limits={"cpu": "4"})], types=LIMIT_TYPES)
    [command] = result.commands
    assert (command.method, command.decision) == ("single", "replace")
    assert [o.instance_type.name for o in command.replacements[0].options] == ["small"]


def test_no_replacement_is_created_in_a_pool_already_over_its_limits():
    """provisioner.go:485 (Limits.ExceededBy): a NodePool whose nodes already exceed a limit (4 cpu of 3) creates
    no replacement, though the simulation found room for one without the candidate."""
    node = claimed("n1", "big", types=LIMIT_TYPES, pods=[rs_pod("100m")])
    result = run([node], pools=[nodepool(limits={"cpu": "3"})], types=LIMIT_TYPES)
    assert result.commands == []
    assert result.notes["n1"] == [
        'NodePool "default" is already over its limits (cpu 4 of its limit 3): the replacement cannot be created'
    ]


# The grace period of a force delete (terminator/eviction.go:331-340) -------------------------------------------------


def test_the_memory_store_keeps_a_deletions_grace_period_as_the_api_server_does():
    """DeleteOptions.gracePeriodSeconds: kept as the object's deletionGracePeriodSeconds, on a pod held by a
    finalizer as on one removed at once; a delete without one stamps none."""
    made = lab(nodepool_doc())
    for name, finalizers in (("held", ["karpenter.sh/test-finalizer"]), ("gone", []), ("plain", [])):
        made.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "finalizers": finalizers},
                "spec": {"containers": [{"name": "app", "image": "pause"}]},
            }
        )
    made.store.delete("Pod", "held", "default", grace_period_seconds=30)
    assert made.store.get("Pod", "held", "default")["metadata"]["deletionGracePeriodSeconds"] == 30
    gone = made.store.delete("Pod", "gone", "default", grace_period_seconds=1)
    assert (gone["metadata"]["deletionGracePeriodSeconds"], made.store.get("Pod", "gone", "default")) == (1, None)
    plain = made.store.delete("Pod", "plain", "default")
    assert "deletionGracePeriodSeconds" not in plain["metadata"]


def _force_deleted_grace(deadline_seconds: float) -> int:
    """The grace period the drain force-deletes a pod (terminationGracePeriodSeconds 120, held by a finalizer so it
    can be read back) with, its NodeClaim's deadline `deadline_seconds` from now."""
    made = terminator._lab()
    node = terminator._registered_node(made)
    held = terminator._labelled(made, "p", node, terminationGracePeriodSeconds=120)
    held["metadata"]["finalizers"] = ["karpenter.sh/test-finalizer"]
    made.store.update(held)
    terminating = terminator._Terminating(made, node)
    terminator._with_deadline(made, deadline_seconds)
    terminating.run()
    grace: int = made.store.get("Pod", "p", "default")["metadata"]["deletionGracePeriodSeconds"]
    return grace


@pytest.mark.parametrize(
    ("deadline", "grace"),
    [
        pytest.param(60, 60, id="should force-delete a pod via the queue, bypassing PDBs"),
        pytest.param(-3600, 1, id="should clamp gracePeriodSeconds to >= 1 when nodeTerminationTime is in the past"),
    ],
)
def test_a_force_delete_grants_what_is_left_of_the_nodes_grace_period(deadline, grace):
    """Eviction/Queue / Pod Force-Delete via Queue: forceDelete deletes the pod with gracePeriodSeconds clamped to
    the node's remaining terminationGracePeriod, at least 1 (eviction.go:335-340)."""
    assert _force_deleted_grace(deadline) == grace


class DeletingTransport:
    """The transport's `request`, recording each request's body and answering a DELETE with a Status."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method, path, *, query=(), body=None, content_type="", eviction=False):
        self.sent.append((method, path, body))
        return {"kind": "Status", "status": "Success", "details": {"name": "p", "kind": "pods", "uid": "u1"}}


@pytest.mark.parametrize("port", ["cached", "direct"])
def test_the_kube_adapters_delete_sends_the_grace_period_as_delete_options(port):
    """client.DeleteOptions{GracePeriodSeconds} (eviction.go:337-340): a DeleteOptions body with gracePeriodSeconds,
    as the official client's V1DeleteOptions(grace_period_seconds=...) serializes; no body without one."""
    transport = DeletingTransport()
    resources = {"Pod": Resource(BY_KIND["Pod"], "v1")}
    api: KubeCluster | DirectAPI
    if port == "cached":
        api = KubeCluster(transport)  # type: ignore[arg-type]
        api.resources = resources
    else:
        api = DirectAPI(transport, resources)  # type: ignore[arg-type]
    api.delete("Pod", "p", "default", grace_period_seconds=7)
    api.delete("Pod", "p", "default")
    path = "/api/v1/namespaces/default/pods/p"
    assert transport.sent == [
        ("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7}),
        ("DELETE", path, None),
    ]


def test_the_composite_cluster_passes_the_grace_period_on():
    """CompositeCluster routes a Pod's delete to the cluster with its grace period."""
    remote = lab(nodepool_doc()).store
    remote.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "finalizers": ["hold"]},
            "spec": {"containers": [{"name": "app", "image": "pause"}]},
        }
    )
    composite = CompositeCluster(remote, lab(nodepool_doc()).store, mode=KWOK)
    composite.delete("Pod", "p", "default", grace_period_seconds=3)
    assert remote.get("Pod", "p", "default")["metadata"]["deletionGracePeriodSeconds"] == 3
