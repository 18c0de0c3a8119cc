"""node_view: how a stored Node (and its NodeClaim) reads as the scheduler's Node, as Karpenter's StateNode."""

from __future__ import annotations

from provisioner.cluster.views import node_view
from provisioner.quantity import parse_resources

GPU = "fake.com/vendor-a"


def node_object(labels: dict[str, str] | None = None, *, ready: bool = True, **status: dict[str, str]) -> dict:
    return {
        "metadata": {"name": "node-1", "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": status.get("allocatable", {"cpu": "4", GPU: "0"}),
            "capacity": status.get("capacity", {"cpu": "4", GPU: "0"}),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def nodeclaim_object(*, initialized: bool) -> dict:
    conditions = ["Launched", "Registered", *(["Initialized"] if initialized else [])]
    figures = {"cpu": "4", "memory": "8Gi", GPU: "2"}
    return {
        "metadata": {"name": "nodeclaim-1"},
        "spec": {},
        "status": {
            "allocatable": figures,
            "capacity": figures,
            "conditions": [{"type": t, "status": "True"} for t in conditions],
        },
    }


def test_a_managed_node_without_the_initialized_label_is_not_initialized_whatever_its_nodeclaim_says():
    view = node_view(node_object(), [], nodeclaim_object(initialized=True))
    assert view.initialized is False


def test_a_node_karpui_did_not_launch_counts_as_initialized_even_when_not_ready():
    assert node_view(node_object(ready=False), [], None).initialized is True


def test_an_uninitialized_node_takes_zero_and_missing_resources_from_its_nodeclaim():
    view = node_view(node_object(), [], nodeclaim_object(initialized=False))
    assert view.allocatable == parse_resources({"cpu": "4", "memory": "8Gi", GPU: "2"})
    assert view.capacity == parse_resources({"cpu": "4", "memory": "8Gi", GPU: "2"})


def test_an_uninitialized_node_keeps_what_its_kubelet_reports_when_not_zero():
    obj = node_object(allocatable={"cpu": "3500m", GPU: "1"})
    assert node_view(obj, [], nodeclaim_object(initialized=False)).allocatable[GPU] == parse_resources({GPU: "1"})[GPU]


def test_an_initialized_node_is_read_as_its_kubelet_reports_it():
    labels = {"karpenter.sh/initialized": "true"}
    view = node_view(node_object(labels), [], nodeclaim_object(initialized=True))
    assert view.allocatable == parse_resources({"cpu": "4", GPU: "0"})
