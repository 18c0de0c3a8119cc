"""The cluster port's reads (provisioner/cluster/api.py) of objects someone else wrote, run against every
implementation: what a controller sees of the pods, nodes and budgets that users and the cluster's own components
create."""

from __future__ import annotations

import pytest

from provisioner.cluster.objects import NotFound
from provisioner.selectors import LabelSelector
from tests.contract.conftest import timestamp_ok
from tests.contract.test_cluster_api import names, node, pod


@pytest.fixture
def seeded(implementation):
    if implementation.seed is None:
        pytest.skip("this implementation cannot be written by anyone but the api under test")
    return implementation


def test_list_filters_by_namespace_labels_and_fields_and_sorts_by_namespace_then_name(seeded):
    seeded.seed(
        [
            pod("b", "default", {"app": "web"}, "n1"),
            pod("a", "default", {"app": "db"}, "n2"),
            pod("c", "team", {"app": "web"}, "n1"),
            pod("d", "team", {"app": "web"}),
        ]
    )
    api = seeded.api
    assert names(api.list("Pod")) == [("default", "a"), ("default", "b"), ("team", "c"), ("team", "d")]
    assert names(api.list("Pod", "team")) == [("team", "c"), ("team", "d")]
    assert names(api.list("Pod", selector=LabelSelector.parse("app=web"))) == [
        ("default", "b"),
        ("team", "c"),
        ("team", "d"),
    ]
    assert names(api.list("Pod", selector=LabelSelector.parse("app!=web"))) == [("default", "a")]
    assert names(api.list("Pod", fields={"spec.nodeName": "n1"})) == [("default", "b"), ("team", "c")]
    assert names(api.list("Pod", fields={"spec.nodeName": ""})) == [("team", "d")]
    assert names(api.list("Pod", "default", fields={"metadata.name": "b"})) == [("default", "b")]
    assert api.list("Pod", "nowhere") == []
    assert api.list("Node") == []


def test_scan_reads_every_object_of_a_kind_as_list_does_in_any_order(seeded):
    seeded.seed([pod("b", "default", {}, "n1"), pod("a", "team"), node("n1")])
    api = seeded.api
    assert sorted(names(api.scan("Pod"))) == [("default", "b"), ("team", "a")]
    assert sorted(o["metadata"]["resourceVersion"] for o in api.scan("Pod")) == sorted(
        o["metadata"]["resourceVersion"] for o in api.list("Pod")
    )
    assert [o["metadata"]["name"] for o in api.scan("Node")] == ["n1"]
    assert api.scan("PodDisruptionBudget") == []


def test_objects_written_by_others_carry_their_identity(seeded):
    written = seeded.seed([pod("a"), node("n1")])
    got = seeded.api.get("Pod", "a", "default")
    assert got["metadata"]["uid"] == written[0]["metadata"]["uid"]
    # As written, or later: on a real cluster kube-scheduler writes the new pod's status at once.
    version, written_version = (int(o["metadata"]["resourceVersion"]) for o in (got, written[0]))
    assert version == written_version if seeded.exact_versions else version >= written_version
    assert timestamp_ok(seeded, got["metadata"]["creationTimestamp"])
    # (kube-apiserver also fills a container's defaults, such as imagePullPolicy, on create)
    assert [(c["name"], c["image"]) for c in got["spec"]["containers"]] == [("c", "pause")]
    assert seeded.api.get("Node", "n1", "whatever")["metadata"]["uid"] == written[1]["metadata"]["uid"]


def test_a_missing_object_reads_as_none_and_must_get_raises_not_found(seeded):
    seeded.seed([pod("a")])
    assert seeded.api.get("Pod", "a", "team") is None
    assert seeded.api.get("Pod", "b") is None
    with pytest.raises(NotFound):
        seeded.api.must_get("Pod", "b")


def test_the_kind_version_moves_when_an_object_of_that_kind_is_written(seeded):
    api = seeded.api
    pods, nodes = api.kind_version("Pod"), api.kind_version("Node")
    seeded.seed([pod("a", node="n9")])  # bound already: on a real cluster no scheduler writes it afterwards
    assert api.kind_version("Pod") > pods
    assert api.kind_version("Node") == nodes
    pods = api.kind_version("Pod")
    seeded.seed([node("n1")])
    assert api.kind_version("Node") > nodes
    assert api.kind_version("Pod") == pods
