"""Watch through the official Python client and kubectl: every change in order, resuming from a resourceVersion,
410 Gone for a version older than the change log keeps, bookmarks, selectors, and `kubectl get pods -w`."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from karpui import models
from karpui.clusters import changelog, lab
from tests.karp import EXAMPLES, ok


def setup_inflate() -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))


def events_from(core: client.CoreV1Api, version: str, **kwargs: Any) -> list[dict[str, Any]]:
    stream = watch.Watch().stream(
        core.list_namespaced_pod, "default", resource_version=version, timeout_seconds=1, **kwargs
    )
    return list(stream)


def pods_changes(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["raw_object"]["metadata"]["name"], e["raw_object"].get("status", {}).get("phase", ""))
        for e in events
        if e["type"] != "BOOKMARK"
    ]


def test_a_watch_from_a_list_sees_every_change_in_order_and_resumes_from_any_version(kube_client: Any) -> None:
    setup_inflate()
    core = client.CoreV1Api(kube_client)
    start = core.list_namespaced_pod("default").metadata.resource_version
    ok("scale", "deploy/inflate", "--replicas", "2")
    lab.advance("lab", 5)
    events = events_from(core, start)
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    names = sorted({name for _, name, _ in pods_changes(events)})
    assert len(names) == 2
    for name in names:
        assert [(t, phase) for t, n, phase in pods_changes(events) if n == name] == [
            ("ADDED", "Pending"),
            ("MODIFIED", "Running"),
        ]
    # Resuming from the second event's version replays exactly what came after it.
    resumed = events_from(core, str(versions[1]))
    assert pods_changes(resumed) == pods_changes(events)[2:]
    assert [type(e["object"]).__name__ for e in resumed] == ["V1Pod"] * len(resumed)


def test_a_watch_follows_changes_as_they_are_committed(kube_client: Any) -> None:
    setup_inflate()
    core = client.CoreV1Api(kube_client)
    start = core.list_namespaced_pod("default").metadata.resource_version
    seen: list[dict[str, Any]] = []

    def follow() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=8
        ):
            seen.append(event)
            if sum(1 for e in seen if e["raw_object"].get("status", {}).get("phase") == "Running") == 3:
                return

    watcher = threading.Thread(target=follow)
    watcher.start()
    time.sleep(0.5)  # the watch is open and polling before anything changes
    ok("scale", "deploy/inflate", "--replicas", "3")
    lab.advance("lab", 5)
    watcher.join(timeout=10)
    assert not watcher.is_alive()
    assert [t for t, _, _ in pods_changes(seen)] == ["ADDED"] * 3 + ["MODIFIED"] * 3


def test_a_version_older_than_the_log_keeps_is_410_gone(kube_client: Any, monkeypatch: Any) -> None:
    setup_inflate()
    core = client.CoreV1Api(kube_client)
    start = core.list_namespaced_pod("default").metadata.resource_version
    monkeypatch.setattr(changelog, "MAX_VERSIONS", 5)  # keep only the last five versions
    ok("scale", "deploy/inflate", "--replicas", "4")
    lab.advance("lab", 5)
    cluster = models.Cluster.objects.get(name="lab")
    assert cluster.compacted_resource_version == cluster.resource_version - 5
    with pytest.raises(ApiException) as refused:
        events_from(core, start)
    assert refused.value.status == 410
    assert refused.value.reason == f"Expired: too old resource version: {start} ({cluster.compacted_resource_version})"
    # Listing again gives a version to watch from.
    again = core.list_namespaced_pod("default").metadata.resource_version
    assert pods_changes(events_from(core, again)) == []


def test_bookmarks_carry_the_version_seen_so_far(kube_client: Any) -> None:
    setup_inflate()
    core = client.CoreV1Api(kube_client)
    start = core.list_namespaced_pod("default").metadata.resource_version
    ok("scale", "deploy/inflate", "--replicas", "1")
    events = events_from(core, start, allow_watch_bookmarks=True)
    assert events[-1]["type"] == "BOOKMARK"
    assert events[-1]["raw_object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "resourceVersion": str(models.Cluster.objects.get(name="lab").resource_version),
            "creationTimestamp": None,
        },
    }


def test_a_pod_that_stops_matching_the_selector_is_deleted_for_the_watcher(kube_client: Any) -> None:
    setup_inflate()
    ok("scale", "deploy/inflate", "--replicas", "1")
    core = client.CoreV1Api(kube_client)
    listed = core.list_namespaced_pod("default", label_selector="team=a")
    assert listed.items == []

    def relabel(team: str) -> None:
        def change(running: Any) -> None:
            [pod] = running.store.list("Pod")
            pod["metadata"]["labels"]["team"] = team
            running.store.update(pod)

        lab.run("lab", change)

    relabel("a")
    relabel("b")
    events = events_from(core, listed.metadata.resource_version, label_selector="team=a")
    assert [(e["type"], e["raw_object"]["metadata"]["labels"]["team"]) for e in events] == [
        ("ADDED", "a"),
        ("DELETED", "b"),
    ]


def test_without_a_version_a_watch_starts_with_every_object(kube_client: Any) -> None:
    setup_inflate()
    ok("scale", "deploy/inflate", "--replicas", "2")
    core = client.CoreV1Api(kube_client)
    events = list(watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]


def test_kubectl_get_pods_watch_shows_pending_then_running(kubectl: Any) -> None:
    setup_inflate()
    ok("scale", "deploy/inflate", "--replicas", "2")
    watching = kubectl.popen("get", "pods", "-w")
    try:
        lines = [watching.stdout.readline() for _ in range(3)]  # the header and the two pods, listed
        assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
        assert [line.split()[2] for line in lines[1:]] == ["Pending", "Pending"]
        lab.advance("lab", 5)
        running = [watching.stdout.readline().split() for _ in range(2)]
        assert [(row[1], row[2]) for row in running] == [("1/1", "Running")] * 2
    finally:
        watching.terminate()
        watching.wait(timeout=10)
