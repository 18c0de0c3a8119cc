"""Events name their object as client-go's recorder does, so `kubectl events --for KIND/NAME` finds them."""

from __future__ import annotations

from provisioner.cluster import events
from provisioner.cluster.memory import ObjectStore

T0 = 1_800_000_000.0


def test_events_name_their_object_with_its_api_version_as_client_go_does() -> None:
    store = ObjectStore(clock=lambda: T0)
    node = store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    claim = store.create({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "n1"}})
    events.record(store, node, "Normal", "Unconsolidatable", "no", T0)
    events.record(store, claim, "Normal", "Launched", "yes", T0)
    events.record(store, {"kind": "NodePool", "metadata": {"name": "default"}}, "Warning", "Bad", "no", T0)
    assert [e["involvedObject"] for e in store.list("Event")] == [
        {"kind": "NodePool", "namespace": "", "name": "default", "uid": "", "apiVersion": "karpenter.sh/v1"},
        {
            "kind": "Node",
            "namespace": "",
            "name": "n1",
            "uid": node["metadata"]["uid"],
            "apiVersion": "v1",
            "resourceVersion": "1",
        },
        {
            "kind": "NodeClaim",
            "namespace": "",
            "name": "n1",
            "uid": claim["metadata"]["uid"],
            "apiVersion": "karpenter.sh/v1",
            "resourceVersion": "2",
        },
    ]
    # An Event recorded before the apiVersion was said gets it when it is counted again.
    [old] = [e for e in store.list("Event") if e["involvedObject"]["kind"] == "Node"]
    del old["involvedObject"]["apiVersion"]
    events.record(store, node, "Normal", "Unconsolidatable", "no", T0 + 1)
    assert (old["count"], old["involvedObject"]["apiVersion"]) == (2, "v1")
