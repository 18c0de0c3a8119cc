"""A pod the simulation puts on a node already there is nominated to it by name: "Pod should schedule on:
nodeclaim/x, node/y", as Karpenter's Results.Record publishes NominatePodEvent for existing nodes."""

from provisioner.cluster.conditions import set_condition
from tests.unit.test_engine_memos import deployment, lab


def test_a_pod_pending_for_a_node_that_is_not_ready_is_nominated_to_its_nodeclaim_and_node():
    running = lab()
    running.store.create(deployment("web", 1, cpu="1"))
    running.advance(30)
    [claim] = running.store.list("NodeClaim")
    [node] = running.store.list("Node")
    # kube-scheduler binds nothing to a node that is not Ready; Karpenter's simulation still has room there.
    set_condition(node, "Ready", "False", running.now, "KubeletNotReady")
    running.store.update(node)
    web = running.store.get("Deployment", "web", "default")
    web["spec"]["replicas"] = 2
    running.store.update(web)
    running.advance(40)

    told = sorted(e["message"] for e in running.store.list("Event") if e["reason"] == "Nominated")
    name, node_name = claim["metadata"]["name"], node["metadata"]["name"]
    assert told == [
        f"Pod should schedule on: nodeclaim/{name}",
        f"Pod should schedule on: nodeclaim/{name}, node/{node_name}",
    ]
    assert [c["metadata"]["name"] for c in running.store.list("NodeClaim")] == [name]  # no second node for it
