"""The cluster port's contract (provisioner/cluster/api.py), run against every implementation."""

from __future__ import annotations

import time

import pytest

from provisioner.cluster.objects import AlreadyExists, Conflict, NotFound, TooManyRequests, is_deleting
from provisioner.selectors import LabelSelector
from tests.contract.conftest import timestamp_ok
from tests.kube.harness import eventually


def pod(name, namespace="default", labels=None, node="", phase="Running"):
    """A pod; with a phase it has a status, which a real API server takes as a second write (POST, then /status).
    A Running pod is Ready, as kube-controller-manager's disruption controller counts only Ready pods as healthy."""
    ready = {"conditions": [{"type": "Ready", "status": "True"}]} if phase == "Running" else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        **({"status": {"phase": phase, **ready}} if phase else {}),
    }


def node(name, finalizers=()):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "finalizers": list(finalizers)}}


def names(objects):
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]


def test_create_fills_identity_and_every_write_raises_the_resource_version(implementation, api):
    first = api.create(pod("a", phase=None))
    second = api.create(pod("b", phase=None))
    assert first["metadata"]["generation"] == 1
    assert first["metadata"]["uid"] and first["metadata"]["uid"] != second["metadata"]["uid"]
    assert timestamp_ok(implementation, first["metadata"]["creationTimestamp"])
    step = int(second["metadata"]["resourceVersion"]) - int(first["metadata"]["resourceVersion"])
    # On a real cluster other clients write too: versions only go up.
    assert step == 1 if implementation.exact_versions else step > 0


def test_a_taken_name_is_already_exists_but_namespaces_separate_names(api):
    api.create(pod("a"))
    api.create(pod("a", namespace="other"))
    with pytest.raises(AlreadyExists):
        api.create(pod("a"))


def test_list_filters_by_namespace_labels_and_fields_and_sorts_by_namespace_then_name(api):
    for name, namespace, labels, node_name in (
        ("b", "default", {"app": "web"}, "n1"),
        ("a", "default", {"app": "db"}, "n2"),
        ("c", "team", {"app": "web"}, "n1"),
    ):
        api.create(pod(name, namespace, labels, node_name))
    assert names(api.list("Pod")) == [("default", "a"), ("default", "b"), ("team", "c")]
    assert names(api.list("Pod", "team")) == [("team", "c")]
    assert names(api.list("Pod", selector=LabelSelector.parse("app=web"))) == [("default", "b"), ("team", "c")]
    assert names(api.list("Pod", fields={"spec.nodeName": "n1"})) == [("default", "b"), ("team", "c")]
    assert names(api.list("Pod", "default", fields={"metadata.name": "b"})) == [("default", "b")]


def test_cluster_scoped_kinds_ignore_the_namespace(api):
    api.create(node("n1"))
    assert api.get("Node", "n1", "whatever")["metadata"]["name"] == "n1"
    assert "namespace" not in api.get("Node", "n1")["metadata"]


def test_update_with_a_stale_resource_version_is_a_conflict(implementation, api):
    created = api.create(pod("a"))
    stale = {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}}
    updated(implementation, api, ("Pod", "a"), lambda p: p["metadata"].update(labels={"y": "2"}))
    with pytest.raises(Conflict):
        api.update(stale)
    assert api.get("Pod", "a")["metadata"]["labels"] == {"y": "2"}


def updated(implementation, api, key, change, **options):
    """Read, change, update; on a real cluster a controller may write the object in between (409), and the update
    is read and made again, as `kubectl edit` would."""
    while True:
        current = api.get(*key)
        change(current)
        try:
            return api.update(current, **options)
        except Conflict:
            implementation.sync()
            if implementation.exact_versions:
                raise


def test_a_spec_change_bumps_the_generation(implementation, api):
    # A PodDisruptionBudget, whose spec may change (kube-apiserver refuses most changes of a pod's spec).
    api.create(pdb(1))
    key = ("PodDisruptionBudget", "guard", "default")
    answer = updated(implementation, api, key, lambda b: b["spec"].update(minAvailable=2), spec_changed=True)
    assert answer["metadata"]["generation"] == 2
    answer = updated(implementation, api, key, lambda b: b["metadata"].setdefault("labels", {}).update(x="1"))
    assert answer["metadata"]["generation"] == 2


def test_merge_patch_changes_only_what_it_names(api):
    api.create(pod("a", labels={"app": "web", "tier": "front"}))
    patched = api.patch("Pod", "a", "default", {"metadata": {"labels": {"tier": None, "team": "x"}}})
    assert patched["metadata"]["labels"] == {"app": "web", "team": "x"}
    # (kube-apiserver also fills a container's defaults, such as imagePullPolicy, on create)
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [("c", "pause")]


def test_update_and_delete_of_a_missing_object_are_not_found(api):
    with pytest.raises(NotFound):
        api.update(pod("ghost"))
    with pytest.raises(NotFound):
        api.delete("Pod", "ghost")


def test_finalizers_hold_an_object_until_the_last_one_is_removed(implementation, api):
    api.create(node("n1", finalizers=["karpenter.sh/termination"]))
    held = api.delete("Node", "n1")
    assert timestamp_ok(implementation, held["metadata"]["deletionTimestamp"])
    assert api.get("Node", "n1") is not None
    remove_as_a_controller_does(api, "Node", "n1", "karpenter.sh/termination", implementation.sync)
    assert api.get("Node", "n1") is None


def remove_as_a_controller_does(api, kind, name, finalizer, sync, tries=10):
    """The removal is optimistically locked, as Karpenter's is: on a real cluster kube-controller-manager may write
    the new node (its taints, its lifecycle) between the read and the patch, and the answer is to read it again
    from a cache brought up to date (`sync`: the informers' deltas applied, as the engine's next step does), after
    a requeue's backoff. Without the sync the cache kept the version the write had overtaken, conflict after
    conflict."""
    for attempt in range(tries):
        try:
            api.remove_finalizer(api.get(kind, name), finalizer)
            return
        except Conflict:
            time.sleep(0.1 * (attempt + 1))
            sync()
    raise AssertionError(f"{kind} {name}: {tries} conflicts in a row")


def pdb(min_available):
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }


def counted(implementation, api, allowed):
    """On a real cluster the budget's status is kube-controller-manager's to work out, a moment after the write."""
    if implementation.pdb_controller:
        eventually(
            lambda: (
                (api.get("PodDisruptionBudget", "guard", "default").get("status") or {}).get("disruptionsAllowed")
                == allowed
            ),
            timeout=30,
            sync=implementation.sync,
        )


def test_eviction_answers_too_many_requests_when_a_pdb_allows_no_disruption(implementation, api):
    api.create(pod("a", labels={"app": "web"}, node="n1"))
    api.create(pod("b", labels={"app": "web"}, node="n1"))
    api.create(pdb(2))
    counted(implementation, api, 0)
    with pytest.raises(TooManyRequests, match="would violate the pod's disruption budget"):
        api.evict(api.get("Pod", "a"))
    assert api.get("Pod", "a") is not None


def test_evict_all_answers_pod_by_pod_as_evict_would(implementation, api):
    """Many evictions at once under a budget allowing two: two pods go and the third is refused, whichever the server
    took first; a pod already gone counts as evicted."""
    for name in ("a", "b", "c"):
        api.create(pod(name, labels={"app": "web"}, node="n1"))
    api.create(pdb(1))
    counted(implementation, api, 2)
    implementation.sync()
    pods = [api.get("Pod", name) for name in ("a", "b", "c")]
    gone = api.create(pod("gone", phase=""))  # unscheduled: deleted at once
    api.delete("Pod", "gone", "default")
    outcomes = api.evict_all([*pods, gone])
    assert len(outcomes) == 4
    assert outcomes[3] is None
    refused = [error for error in outcomes[:3] if error is not None]
    assert len(refused) == 1
    assert isinstance(refused[0], TooManyRequests)
    assert "would violate the pod's disruption budget" in str(refused[0])
    assert api.evict_all([]) == []


def test_eviction_deletes_the_pod_when_the_pdb_allows_it(implementation, api):
    api.create(pod("a", labels={"app": "web"}, node="n1"))
    api.create(pod("b", labels={"app": "web"}, node="n1"))
    api.create(pdb(1))
    counted(implementation, api, 1)
    api.evict(api.get("Pod", "a"))
    # The eviction answers before the pod's deletion reaches a watching cache; on a real cluster the pod first
    # terminates gracefully.
    eventually(lambda: (got := api.get("Pod", "a")) is None or is_deleting(got), sync=implementation.sync)
    assert api.get("Pod", "b") is not None
