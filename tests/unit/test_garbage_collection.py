"""Karpenter's NodeClaim garbage collection (pkg/controllers/nodeclaim/garbagecollection, suite_test.go): every 2
minutes a registered NodeClaim whose instance the cloud provider no longer lists is deleted, unless its Node is
still Ready; its pods are then provisioned for again."""

from provisioner.cloudprovider.kwok import KwokCloudProvider
from tests.unit.test_engine_memos import deployment, lab


def settled():
    running = lab()
    running.store.create(deployment("web", 1, cpu="1"))
    running.advance(60)
    [claim] = running.store.list("NodeClaim")
    return running, claim


def force_delete_node(running, name):
    node = running.store.get("Node", name)
    node["metadata"]["finalizers"] = []
    running.store.update(node)
    running.store.delete("Node", name)


def test_a_nodeclaim_whose_instance_and_node_are_gone_is_collected_and_its_pod_provisioned_again():
    """'should delete many NodeClaims when the Nodes are gone and the cloudprovider instances are gone'."""
    running, claim = settled()
    name = claim["metadata"]["name"]
    force_delete_node(running, claim["status"]["nodeName"])
    running.advance(120)
    assert name not in [c["metadata"]["name"] for c in running.store.list("NodeClaim")]
    collected = [
        r.record.as_dict()
        for r in running.logs
        if r.record.message == "garbage collecting nodeclaim with no cloudprovider representation"
    ]
    assert [(c["NodeClaim"], c["Node"], c["provider-id"], c["level"]) for c in collected] == [
        ({"name": name}, {"name": claim["status"]["nodeName"]}, claim["status"]["providerID"], "DEBUG")
    ]
    running.advance(30)
    [pod] = running.store.list("Pod", "default")
    [again] = running.store.list("NodeClaim")
    assert pod["spec"]["nodeName"] == again["status"]["nodeName"] != claim["status"]["nodeName"]


def test_a_nodeclaim_whose_node_is_still_ready_is_kept_whatever_the_provider_lists(monkeypatch):
    """'shouldn't delete the NodeClaim when the Node is there in a Ready state but the instance is gone'."""
    running, claim = settled()
    monkeypatch.setattr(KwokCloudProvider, "list", lambda self: [])
    running.advance(600)
    assert [c["metadata"]["name"] for c in running.store.list("NodeClaim")] == [claim["metadata"]["name"]]
    node = running.store.get("Node", claim["status"]["nodeName"])
    node["status"]["conditions"] = [
        {**c, "status": "False"} if c["type"] == "Ready" else c for c in node["status"]["conditions"]
    ]
    running.store.update(node)
    running.advance(120)
    assert claim["metadata"]["name"] not in [c["metadata"]["name"] for c in running.store.list("NodeClaim")]


def test_an_unregistered_nodeclaim_is_left_to_its_registration_timeout(monkeypatch):
    """'shouldn't delete the NodeClaim when it is not registered' (liveness owns it)."""
    running, claim = settled()
    monkeypatch.setattr(KwokCloudProvider, "list", lambda self: [])
    claim = running.store.get("NodeClaim", claim["metadata"]["name"])
    claim["status"]["conditions"] = [
        {**c, "status": "Unknown"} if c["type"] == "Registered" else c for c in claim["status"]["conditions"]
    ]
    running.store.update(claim)
    force_delete_node(running, claim["status"]["nodeName"])
    running.advance(240)
    assert claim["metadata"]["name"] in [c["metadata"]["name"] for c in running.store.list("NodeClaim")]
