"""Provisioning schedules the pods of nodes on their way out, as Karpenter's provisioner does
(`nodes.Deleting().CurrentlyReschedulablePods` in Provisioner.Schedule): what fits nowhere gets its NodeClaim before the
pods are evicted, and the nodes they are headed for are nominated. Ported from Karpenter's scheduling suite, Describe
"Deleting Nodes" (pkg/controllers/provisioning/scheduling/suite_test.go), and its provisioning suite's "should
schedule all pods on one inflight node when node is in deleting state"."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.controllers.provisioning import ProvisioningController, cluster_nodes, deleting_pods
from provisioner.lab import Lab
from provisioner.taints import DISRUPTED
from tests.lab_builders import deployment, lab, nodepool_doc, reconfigure

ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def one_pod_on_its_node(*documents: dict[str, Any], consolidate: bool = True) -> Lab:
    """A lab whose one pod (one CPU, app=web) runs on the one node launched for it."""
    pool = nodepool_doc() if consolidate else nodepool_doc(disruption={"consolidateAfter": "Never"})
    made = lab(pool, deployment("web", replicas=1, cpu="1"), *documents)
    made.advance(60)
    assert (len(made.store.list("NodeClaim")), len(made.store.list("Node"))) == (1, 1)
    return made


def mark_for_deletion(made: Lab, node_name: str) -> None:
    """As a started disruption command marks its candidate: the `karpenter.sh/disrupted` taint on the Node."""
    node = made.store.get("Node", node_name)
    node["spec"].setdefault("taints", []).append({"key": DISRUPTED, "effect": "NoSchedule"})
    made.store.update(node)


def provision_once(made: Lab) -> ProvisioningController:
    """One provisioning controller, reconciled as its batch opens and again once the one-second idle window closed;
    no other controller runs (none drains the node meanwhile)."""
    controller = ProvisioningController({})
    controller.reconcile(made.ctx)
    controller.reconcile(dataclasses.replace(made.ctx, now=made.ctx.now + 1.5))
    return controller


def instance_types(made: Lab, controller: ProvisioningController | None = None) -> list[str]:
    """The launched NodeClaims' instance types, and the cheapest of each NodeClaim `controller` planned last (the one
    it launches as)."""
    launched = [c["metadata"]["labels"].get(INSTANCE_TYPE) for c in made.store.list("NodeClaim")]
    result = controller.last_result if controller is not None else None
    planned = [plan.cheapest.instance_type.name for plan in result.new_nodeclaims] if result is not None else []
    return sorted([t for t in launched if t] + planned)


def web_pod(made: Lab) -> dict[str, Any]:
    [pod] = [p for p in made.store.list("Pod") if p["metadata"]["labels"].get("app") == "web"]
    return pod


def test_an_active_pod_of_a_deleting_node_gets_a_node_of_the_same_size_before_it_is_evicted() -> None:
    """ "should re-schedule pods from a deleting node when pods are active"."""
    made = one_pod_on_its_node()
    [node] = made.store.list("Node")
    mark_for_deletion(made, node["metadata"]["name"])
    controller = provision_once(made)
    assert len(made.store.list("NodeClaim")) == 2
    assert instance_types(made, controller) == ["c-2x-amd64-linux", "c-2x-amd64-linux"]
    assert web_pod(made)["spec"]["nodeName"] == node["metadata"]["name"]  # still running where it was


def test_the_disrupted_taint_opens_a_batch_without_any_pending_pod() -> None:
    """Karpenter's provisioner.trigger.node: a node carrying the disrupted taint triggers the batcher (every 10 s
    while it does); nothing pending, nothing tainted: no batch."""
    made = one_pod_on_its_node()
    controller = ProvisioningController({})
    controller.reconcile(made.ctx)
    assert controller.batcher.closes_at is None
    [node] = made.store.list("Node")
    mark_for_deletion(made, node["metadata"]["name"])
    controller.reconcile(made.ctx)
    assert controller.batcher.closes_at == made.ctx.now + 1.0
    assert controller.triggers == {f"node/{node['metadata']['name']}": made.ctx.now + 10.0}


def test_a_terminating_replicaset_pod_of_a_deleting_node_gets_no_node() -> None:
    """ "should not reschedule pods from a deleting node when pods are not active and they are owned by a
    ReplicaSet": its ReplicaSet makes the pod that replaces it, which is the one to provision for."""
    made = one_pod_on_its_node()
    pod = web_pod(made)
    pod["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    made.store.update(pod)
    mark_for_deletion(made, pod["spec"]["nodeName"])
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux"]


def test_a_terminating_statefulset_pod_of_a_deleting_node_gets_a_node() -> None:
    """ "should reschedule pods from a deleting node when pods are not active and they are owned by a StatefulSet":
    a StatefulSet makes its pod again only after this one is gone, so it is provisioned for while it terminates."""
    made = one_pod_on_its_node()
    pod = web_pod(made)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "uid-web", "controller": True}
    ]
    pod["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    made.store.update(pod)
    mark_for_deletion(made, pod["spec"]["nodeName"])
    controller = provision_once(made)
    assert len(made.store.list("NodeClaim")) == 2
    assert instance_types(made, controller) == ["c-2x-amd64-linux", "c-2x-amd64-linux"]


def test_a_daemonset_pod_of_a_deleting_node_gets_no_node() -> None:
    """ "should not re-schedule pods from a deleting node when pods are owned by a DaemonSet"."""
    made = one_pod_on_its_node()
    pod = web_pod(made)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "uid-agent", "controller": True}
    ]
    made.store.update(pod)
    mark_for_deletion(made, pod["spec"]["nodeName"])
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux"]


def unschedulable_pod(name: str) -> dict[str, Any]:
    """A one-CPU pod kube-scheduler found no node for."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "pending"}},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


@pytest.mark.parametrize(
    "budgets",
    [
        [pdb("zero", maxUnavailable=0)],
        [pdb("zero-percent", maxUnavailable="0%")],
        [pdb("all-available", minAvailable="100%")],
        [pdb("pdb-1", minAvailable="100%"), pdb("pdb-2", minAvailable="100%")],
    ],
    ids=["0 max unavailable", "0% max unavailable", "100% min available", "multiple PDBs on the same pod"],
)
def test_a_pod_a_pdb_fully_blocks_gets_no_node(budgets: list[dict[str, Any]]) -> None:
    """ "should not reschedule pods from a deleting node when pods are blocked due to fully blocking PDBs": no
    eviction will move it, so capacity for it would wait idle."""
    made = one_pod_on_its_node(*budgets)
    mark_for_deletion(made, web_pod(made)["spec"]["nodeName"])
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux"]


def test_a_do_not_disrupt_pod_of_a_deleting_node_gets_no_node() -> None:
    """IsCurrentlyReschedulable's IsDisruptable: a pod with `karpenter.sh/do-not-disrupt: "true"` will not move."""
    made = lab(nodepool_doc(), deployment("web", replicas=1, cpu="1"))
    web = made.store.get("Deployment", "web", "default")
    web["spec"]["template"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    made.store.update(web)
    made.advance(60)
    mark_for_deletion(made, web_pod(made)["spec"]["nodeName"])
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux"]


def test_the_pods_of_a_deleting_node_go_to_a_node_with_room_which_is_nominated() -> None:
    """Moved onto a node already there, they launch nothing, and that node is nominated for twice the batch's
    maximum (20 s by default: Karpenter's nominationWindow), so disruption leaves it alone meanwhile."""
    made = one_pod_on_its_node(consolidate=False)  # or web and big would share one node
    made.store.create(deployment("big", replicas=1, cpu="2"))
    made.advance(60)
    web = web_pod(made)
    [big] = [p for p in made.store.list("Pod") if p["metadata"]["labels"]["app"] == "big"]
    assert web["spec"]["nodeName"] != big["spec"]["nodeName"]
    assert instance_types(made) == ["c-2x-amd64-linux", "c-4x-amd64-linux"]  # big's node has room for web
    mark_for_deletion(made, web["spec"]["nodeName"])
    made.ctx.nominations.clear()
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux", "c-4x-amd64-linux"]
    assert made.ctx.nominations == {big["spec"]["nodeName"]: made.ctx.now + 1.5 + 20.0}


def test_the_candidates_of_a_batch_step_not_started_yet_are_not_provisioned_for() -> None:
    """A batch's later step is tainted ahead of its turn (`held`): its command launches the replacements when it
    starts, so provisioning must not launch a second set for its pods meanwhile."""
    made = one_pod_on_its_node()
    node = web_pod(made)["spec"]["nodeName"]
    [claim] = made.store.list("NodeClaim")
    mark_for_deletion(made, node)
    made.store.create(
        {
            "apiVersion": "karpui.dev/v1alpha1",
            "kind": "DisruptionCommand",
            "metadata": {"name": "held-step"},
            "spec": {"candidates": [{"node": node, "nodeclaim": claim["metadata"]["name"]}]},
            "status": {"phase": "Approved", "held": True},
        }
    )
    assert deleting_pods(made.ctx, cluster_nodes(made.ctx)) == []
    provision_once(made)
    assert instance_types(made) == ["c-2x-amd64-linux"]


def test_a_moving_pod_counts_where_it_lands_not_on_the_node_it_leaves() -> None:
    """Karpenter's Topology excludes the pods it schedules from the counts: a pod with zone anti-affinity to its
    siblings leaving a node in zone a may go to zone a again, the only zone it does not share."""
    apart = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}
            ]
        }
    }
    made = lab(nodepool_doc(), deployment("web", replicas=4, cpu="1", affinity=apart))
    made.advance(60)
    zones = {c["status"]["nodeName"]: c["metadata"]["labels"][ZONE] for c in made.store.list("NodeClaim")}
    assert sorted(zones.values()) == ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"]
    leaving = next(node for node, zone in zones.items() if zone == "test-zone-a")
    mark_for_deletion(made, leaving)
    controller = provision_once(made)
    assert controller.last_result is not None and controller.last_result.failures == {}
    new = [c for c in made.store.list("NodeClaim") if not (c.get("status") or {}).get("nodeName")]
    assert [c["metadata"]["labels"].get(ZONE) for c in new] == ["test-zone-a"]


def test_pods_pending_beside_a_deleting_node_fill_one_new_node_with_its_pods() -> None:
    """ "should schedule all pods on one inflight node when node is in deleting state": three pods of a deleting
    node and two pending ones, one CPU each, all go to one new node, none to the deleting one."""
    made = lab(nodepool_doc(), deployment("web", replicas=3, cpu="1"))
    made.advance(60)
    [node] = made.store.list("Node")
    assert instance_types(made) == ["c-4x-amd64-linux"]
    mark_for_deletion(made, node["metadata"]["name"])
    for name in ("pending-1", "pending-2"):
        made.store.create(unschedulable_pod(name))
    controller = provision_once(made)
    assert controller.last_result is not None
    [plan] = controller.last_result.new_nodeclaims
    assert len(plan.pods) == 5
    assert len(made.store.list("NodeClaim")) == 2


def test_a_deleting_nodes_pod_that_fits_nowhere_is_told_once_and_its_verdict_kept_while_it_waits() -> None:
    """Karpenter's Results.Record: a deleting node's pod that cannot be scheduled is logged ("could not schedule
    pod") and gets a FailedScheduling event. karpui tells it once per verdict, as for pending pods, and drops the
    verdict once the pod is no longer among those to move."""
    made = one_pod_on_its_node()
    # Only a type too small for its one CPU is left (a node marked for deletion counts against no limit).
    only_small = [{"key": INSTANCE_TYPE, "operator": "In", "values": ["c-1x-amd64-linux"]}]
    reconfigure(made, nodepool_doc(template_spec={"requirements": only_small}))
    pod = web_pod(made)
    mark_for_deletion(made, pod["spec"]["nodeName"])
    controller = ProvisioningController({})
    for at in (0.0, 1.5, 11.5, 12.5):  # two batches: the node trigger's requeue opens the second
        controller.reconcile(dataclasses.replace(made.ctx, now=made.ctx.now + at))
    told = [r for r in made.ctx.logs if r.record.message == "could not schedule pod"]
    assert len(told) == 1
    assert [
        e["reason"]
        for e in made.store.list("Event")
        if e["involvedObject"].get("name") == pod["metadata"]["name"] and e["reason"] == "FailedScheduling"
    ] == ["FailedScheduling"]
    assert list(controller.verdicts) == [pod["metadata"]["uid"]]
    assert len(made.store.list("NodeClaim")) == 1
    node = made.store.get("Node", pod["spec"]["nodeName"])
    node["spec"]["taints"] = []
    made.store.update(node)
    controller.provision(made.ctx, [])
    assert controller.verdicts == {}
