"""Creates of deterministically named objects are idempotent: a taken name is the object a lost answer (or a cache
that has not seen it yet) hid, so it counts as done, not as a reconcile error."""

from __future__ import annotations

import random
from typing import Any

from provisioner.cloudprovider.kwok import KwokCloudProvider, node_for
from provisioner.cluster import events
from provisioner.cluster.conditions import set_condition
from provisioner.cluster.memory import ObjectStore


class NotYetSeen:
    """The cluster through an informer cache that has not seen the kinds given yet (a real cluster's lag)."""

    def __init__(self, store: ObjectStore, *kinds: str) -> None:
        self.store, self.kinds = store, kinds

    def get(self, kind: str, name: str, namespace: str = "") -> Any:
        return None if kind in self.kinds else self.store.get(kind, name, namespace)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def launched_nodeclaim(store: ObjectStore) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "annotations": {}},
        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}},
        "status": {"providerID": "kwok://default-abcde", "capacity": {"cpu": "8"}, "allocatable": {"cpu": "7900m"}},
    }
    set_condition(claim, "Launched", "True", 0.0, "Launched")
    set_condition(claim, "Registered", "Unknown", 0.0, "AwaitingReconciliation")
    return store.create(claim)


def test_a_node_whose_create_answer_was_lost_is_taken_as_created() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    claim = launched_nodeclaim(store)
    store.create(node_for(claim, 1.0))  # the POST that was done, answered 500
    cloud = KwokCloudProvider(NotYetSeen(store, "Node"), {}, {}, random.Random(0))  # type: ignore[arg-type]
    assert cloud.reconcile(1.0) is False  # nothing new made, and no AlreadyExists raised
    assert [n["metadata"]["name"] for n in store.list("Node")] == ["default-abcde"]


def test_an_event_whose_create_answer_was_lost_is_one_event() -> None:
    store = ObjectStore(clock=lambda: 0.0)
    claim = launched_nodeclaim(store)
    events.record(store, claim, "Normal", "Launched", "launched", 0.0)
    events.record(NotYetSeen(store, "Event"), claim, "Normal", "Launched", "launched", 1.0)  # type: ignore[arg-type]
    assert [(e["reason"], e["count"]) for e in store.list("Event")] == [("Launched", 1)]
