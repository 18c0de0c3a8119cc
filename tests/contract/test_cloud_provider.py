"""The cloud provider port's contract (provisioner/cloudprovider/types.py), run against the kwok provider."""

from __future__ import annotations

import random

import pytest

from provisioner.catalog.kwok import kwok_catalog
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cloudprovider.types import InsufficientCapacityError, NodeClaimNotFoundError, NodeClassNotReadyError
from provisioner.cluster.conditions import set_condition
from provisioner.cluster.memory import ObjectStore
from provisioner.objects import NodeClass
from tests.contract.conftest import NOW, Clock

KWOK = NodeClass("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass", "default", {"nodeRegistrationDelay": "30s"})
# NodeClaim default-abcde's Node, named as Karpenter's kwok provider names it: kwok-<nodeclaim>-<RandomName()>-<Uint32>,
# drawn from the seeded RNG.
NODE = "kwok-default-abcde-zebraancient-1-cq9gfz6y1t-4156669319"


@pytest.fixture
def cluster():
    clock = Clock()
    store = ObjectStore(clock=clock)
    provider = KwokCloudProvider(
        store,
        {("KWOKNodeClass", "default"): KWOK},
        {"KWOKNodeClass": list(kwok_catalog().instance_types)},
        random.Random(0),  # noqa: S311 - a seeded simulation RNG
    )
    return store, provider, clock


def nodeclaim(store, name="default-abcde", types=("c-8x-amd64-linux", "c-16x-amd64-linux"), nodeclass="default"):
    return store.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "annotations": {}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": nodeclass},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            },
            "status": {},
        }
    )


def launch(store, provider, claim):
    launched = provider.create(claim)
    claim["metadata"]["labels"] = dict(launched.labels)  # as the lifecycle controller writes them
    claim["status"].update(providerID=launched.provider_id, capacity=dict(launched.capacity))
    claim["status"]["allocatable"] = dict(launched.allocatable)
    claim["metadata"]["annotations"]["karpui.dev/price"] = repr(launched.price)
    set_condition(claim, "Launched", "True", NOW, "Launched")
    store.update(claim)
    return launched


def test_create_launches_the_cheapest_compatible_offering(cluster):
    store, provider, _ = cluster
    launched = provider.create(nodeclaim(store))
    assert (launched.instance_type, launched.capacity_type, launched.provider_id) == (
        "c-8x-amd64-linux",
        "on-demand",
        f"kwok://{NODE}",
    )
    assert launched.price == pytest.approx(0.21718)
    assert (launched.allocatable["cpu"], launched.allocatable["memory"]) == ("7900m", "16374Mi")


def test_each_launch_names_a_node_with_the_next_sequence_number_a_failed_one_too(cluster):
    """As Karpenter's toNode, which names the Node before resolving the node class."""
    store, provider, _ = cluster
    first = provider.create(nodeclaim(store))
    with pytest.raises(NodeClassNotReadyError):
        provider.create(nodeclaim(store, "a", nodeclass="gone"))
    third = provider.create(nodeclaim(store, "default-fghij"))
    assert [first.provider_id, third.provider_id] == [
        f"kwok://{NODE}",
        "kwok://kwok-default-fghij-snagglefootsnapdragon-3-tgue52rvej-432508404",
    ]
    assert provider.names_made == 3


def test_create_refuses_a_missing_node_class_and_an_unknown_type(cluster):
    store, provider, _ = cluster
    with pytest.raises(NodeClassNotReadyError):
        provider.create(nodeclaim(store, "a", nodeclass="gone"))
    with pytest.raises(InsufficientCapacityError):
        provider.create(nodeclaim(store, "b", types=("no-such-type",)))


def test_the_node_appears_after_the_registration_delay_and_then_lists(cluster):
    store, provider, clock = cluster
    claim = nodeclaim(store)
    launch(store, provider, claim)
    assert provider.registered_by(claim) == NOW + 30
    assert provider.next_due(NOW) == NOW + 30
    assert provider.reconcile(NOW + 29) is False and store.get("Node", NODE) is None
    clock.now = NOW + 30
    assert provider.reconcile(NOW + 30) is True
    node = store.get("Node", NODE)
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "default-abcde"
    assert node["spec"]["providerID"] == f"kwok://{NODE}"
    assert [i.instance_type for i in provider.list()] == ["c-8x-amd64-linux"]
    assert provider.get(f"kwok://{NODE}").zone == node["metadata"]["labels"]["topology.kubernetes.io/zone"]
    assert provider.get("kwok://never-launched") is None


def test_delete_removes_the_instance_once_and_then_reports_it_gone(cluster):
    store, provider, clock = cluster
    claim = nodeclaim(store)
    launch(store, provider, claim)
    clock.now = NOW + 30
    provider.reconcile(clock.now)
    provider.delete(claim)
    node = store.get("Node", NODE)
    assert node["metadata"]["deletionTimestamp"]  # the termination finalizer holds it until the lifecycle lets go
    store.remove_finalizer(node, "karpenter.sh/termination")
    with pytest.raises(NodeClaimNotFoundError):
        provider.delete(claim)
