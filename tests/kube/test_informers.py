"""The kube adapter's informers against the lab's API over HTTP: the synced gate, following changes, and recovering
from what real API servers do to watches (cuts, 410 Gone, errors), always ending with the server's state."""

from __future__ import annotations

import pytest

from tests.kube.harness import eventually


def pod(name: str, node: str = "", namespace: str = "default") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
    }


def pod_names(cluster) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.list("Pod")]


def test_nothing_is_decided_before_every_informer_has_listed(remote):
    remote.seed(pod("a"))
    remote.proxy.fail(503, "ServiceUnavailable", path="/api/v1/pods\\?", times=2)  # the pod list fails twice
    cluster = remote.adapter("Pod", "Node", retries=0)
    assert not cluster.synced()
    cluster.start()
    cluster.sync()
    assert not cluster.synced()  # the Node informer may have listed; the Pod one is backing off
    assert cluster.wait_synced(20)
    assert pod_names(cluster) == ["a"]
    assert cluster.informers["Pod"].errors == 2
    assert cluster.informers["Pod"].last_error.startswith("ServerError")


def test_changes_made_by_others_reach_the_cache_in_order(remote):
    cluster = remote.adapter("Pod")
    cluster.start()
    assert cluster.wait_synced(20)
    before = cluster.kind_version("Pod")
    remote.seed(pod("a"), pod("b", "n1"))
    eventually(lambda: pod_names(cluster) == ["a", "b"], sync=cluster.sync)
    remote.delete("Pod", "a")
    eventually(lambda: pod_names(cluster) == ["b"], sync=cluster.sync)
    assert cluster.kind_version("Pod") >= before + 3
    assert [p["metadata"]["name"] for p in cluster.list("Pod", fields={"spec.nodeName": "n1"})] == ["b"]


def test_a_watch_cut_mid_stream_resumes_from_the_last_version_without_listing_again(remote):
    cluster = remote.adapter("Pod")
    cluster.start()
    assert cluster.wait_synced(20)
    remote.seed(pod("a"))
    eventually(lambda: pod_names(cluster) == ["a"], sync=cluster.sync)
    eventually(lambda: remote.proxy.open_watches() == 1)
    assert remote.proxy.cut_watches() == 1
    remote.seed(pod("b"))  # written while no watch was open
    eventually(lambda: pod_names(cluster) == ["a", "b"], sync=cluster.sync)
    informer = cluster.informers["Pod"]
    assert (informer.lists, informer.expired) == (1, 0)
    assert informer.watches >= 2
    watches = [path for method, path, _ in remote.proxy.seen if "watch=true" in path]
    assert "resourceVersion=&" not in watches[-1]  # resumed from a version, not from scratch


def test_410_gone_lists_again_and_the_relist_removes_what_was_deleted_meanwhile(remote):
    remote.seed(pod("a"), pod("b"))
    cluster = remote.adapter("Pod")
    cluster.start()
    assert cluster.wait_synced(20)
    # Synced means listed; the watch opens just after. Refusing watches before it has opened left none to cut.
    eventually(lambda: remote.proxy.open_watches() == 1)
    remote.proxy.fail(503, "ServiceUnavailable", path="watch=true", times=1000)  # no new watch for now
    assert remote.proxy.cut_watches() == 1
    remote.delete("Pod", "a")
    remote.seed(pod("c"))
    remote.proxy.expire_watches(1)  # the version it resumes from is no longer kept
    remote.proxy.faults.failures.clear()
    eventually(lambda: pod_names(cluster) == ["b", "c"], timeout=40, sync=cluster.sync)
    informer = cluster.informers["Pod"]
    assert informer.expired == 1
    assert informer.lists == 2


@pytest.mark.parametrize("status", [500, 429])
def test_reads_the_server_refuses_or_fails_are_retried_with_back_off(remote, status):
    remote.seed(pod("a"))
    remote.proxy.fail(status, "InternalError" if status == 500 else "TooManyRequests", path="/pods\\?", times=2)
    cluster = remote.adapter("Pod", retries=3)
    cluster.start()
    assert cluster.wait_synced(20)
    assert pod_names(cluster) == ["a"]
    assert cluster.informers["Pod"].errors == 0  # the transport's retries absorbed both
    assert [s for _, p, s in remote.proxy.seen if "/pods?" in p and "watch" not in p] == [status, status, 200]


def test_a_periodic_resync_lists_again_and_moves_the_kind_version(remote):
    remote.seed(pod("a"))
    cluster = remote.adapter("Pod", resync_seconds=1.0)
    cluster.start()
    assert cluster.wait_synced(20)
    version = cluster.kind_version("Pod")
    eventually(lambda: cluster.informers["Pod"].lists >= 3, timeout=20)
    cluster.sync()
    assert cluster.kind_version("Pod") >= version + 2
    assert pod_names(cluster) == ["a"]
