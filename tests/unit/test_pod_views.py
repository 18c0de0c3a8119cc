"""The parsed pods the controllers share (`Views`): a pod whose spec did not change keeps its spec's view, and what
is kept for that comparison is the newest version's, so an older version of every pod is not held on to."""

from __future__ import annotations

import copy

from provisioner.cluster.views import Views


def manifest(version: str, phase: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "a", "namespace": "default", "uid": "ua", "resourceVersion": version},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase},
    }


def test_a_pod_whose_spec_did_not_change_keeps_its_spec_view_and_only_the_newest_spec_is_held():
    views = Views()
    first = views.pod(manifest("1", "Pending"))
    newer = copy.deepcopy(manifest("2", "Running"))  # decoded afresh, as each watch event is
    second = views.pod(newer)
    assert (first.phase, second.phase) == ("Pending", "Running")
    assert second.requests is first.requests  # the spec's view, kept
    shape, _ = views._specs["ua"]
    assert shape[1]["containers"] is newer["spec"]["containers"]
