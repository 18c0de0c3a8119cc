"""The kube adapter's pure parts: the token bucket, jittered back-off, API error mapping, REST paths, and the
cache's rules for events that arrive late or out of order."""

from __future__ import annotations

import json
import random

import pytest

from provisioner.adapters.backoff import Backoff
from provisioner.adapters.cache import Cache, Event, Replace
from provisioner.adapters.errors import Expired, ServerError, error_for
from provisioner.adapters.kinds import BY_KIND, KINDS, resolve, served_versions
from provisioner.adapters.ratelimit import TokenBucket
from provisioner.cluster.objects import AlreadyExists, Conflict, NotFound, TooManyRequests


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_token_bucket_lets_a_burst_through_then_paces_requests_at_qps():
    time = FakeTime()
    bucket = TokenBucket(qps=5, burst=3, clock=time.clock, sleep=time.sleep)
    waits = [bucket.take() for _ in range(6)]
    assert waits[:3] == [0, 0, 0]
    assert waits[3:] == pytest.approx([0.2, 0.2, 0.2])
    assert time.now == pytest.approx(0.6)
    time.now += 10  # idle: the bucket refills up to the burst, no further
    assert [bucket.take() for _ in range(4)] == pytest.approx([0, 0, 0, 0.2])


def test_a_zero_qps_bucket_never_waits_and_bad_limits_are_refused():
    assert all(TokenBucket(0, 1).take() == 0 for _ in range(100))
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(5, 0)


def test_back_off_doubles_to_its_cap_with_up_to_double_jitter_and_resets():
    backoff = Backoff(initial=1, maximum=8, factor=2, jitter=1, rng=random.Random(7))
    waits = [backoff.next() for _ in range(6)]
    bases = [1, 2, 4, 8, 8, 8]
    assert all(base <= wait < 2 * base for wait, base in zip(waits, bases, strict=True))
    assert len({round(w / b, 6) for w, b in zip(waits, bases, strict=True)}) == 6  # jittered, not lock-step
    backoff.reset()
    assert 1 <= backoff.next() < 2


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", Expired),
        (429, "TooManyRequests", TooManyRequests),
        (503, "ServiceUnavailable", ServerError),
    ],
)
def test_error_answers_become_the_ports_exceptions(code, reason, error):
    raised = error_for(code, f'{{"kind":"Status","reason":"{reason}","message":"it said no"}}'.encode())
    assert type(raised) is error
    assert str(raised) == "it said no"
    assert raised.code == code


def test_an_error_without_a_status_body_keeps_its_text():
    raised = error_for(502, b"Bad Gateway\n")
    assert (type(raised), str(raised), raised.code) == (ServerError, "Bad Gateway", 502)


def test_kinds_resolve_to_served_versions_and_paths():
    served = served_versions(
        {"versions": ["v1"]},
        {"groups": [{"name": "karpenter.sh", "versions": [{"version": "v1"}, {"version": "v1beta1"}]}]},
    )
    resources = resolve(KINDS, served)
    assert "ResourceSlice" not in resources  # resource.k8s.io is not served: absent, not an error
    assert resources["Pod"].collection() == "/api/v1/pods"
    assert resources["Pod"].collection("team") == "/api/v1/namespaces/team/pods"
    assert resources["Pod"].item("a", "", "eviction") == "/api/v1/namespaces/default/pods/a/eviction"
    assert resources["NodeClaim"].item("default-x", "ignored") == "/apis/karpenter.sh/v1/nodeclaims/default-x"
    assert resources["NodeClaim"].api_version == "karpenter.sh/v1"


def pod(name, version, uid="u1", node=""):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": str(version)},
        "spec": {"nodeName": node},
    }


def test_an_event_older_than_the_engines_own_write_does_not_roll_the_cache_back():
    cache = Cache()
    cache.replace(Replace("Pod", (pod("a", 5),), "5"))
    cache.store(pod("a", 9, node="n1"))  # the engine's write answered with version 9
    assert cache.apply(Event("Pod", "MODIFIED", pod("a", 7))) is False  # queued before the write returned
    assert cache.get("Pod", "a")["metadata"]["resourceVersion"] == "9"
    assert [p["metadata"]["name"] for p in cache.list("Pod", fields={"spec.nodeName": "n1"})] == ["a"]
    assert cache.apply(Event("Pod", "MODIFIED", pod("a", 10))) is True
    assert cache.list("Pod", fields={"spec.nodeName": "n1"}) == []


def test_an_object_seen_deleted_never_comes_back_from_a_late_event_but_its_name_may_be_reused():
    cache = Cache()
    cache.replace(Replace("Pod", (pod("a", 5),), "5"))
    cache.remove(pod("a", 6))
    assert cache.apply(Event("Pod", "MODIFIED", pod("a", 5))) is False
    assert cache.get("Pod", "a") is None
    assert cache.apply(Event("Pod", "ADDED", pod("a", 8, uid="u2"))) is True
    assert cache.apply(Event("Pod", "DELETED", pod("a", 6))) is False  # the old pod's deletion, again
    assert cache.get("Pod", "a")["metadata"]["uid"] == "u2"


def test_a_relist_drops_what_was_deleted_meanwhile_but_keeps_what_the_engine_wrote_after_it():
    cache = Cache()
    cache.replace(Replace("Pod", (pod("a", 1), pod("b", 2, uid="ub")), "2"))
    cache.store(pod("c", 12, uid="uc"))  # created by the engine after the relist below was taken
    cache.store(pod("b", 11, uid="ub", node="n1"))
    cache.replace(Replace("Pod", (pod("b", 2, uid="ub"), pod("d", 9, uid="ud")), "10"))
    assert [(p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in cache.list("Pod")] == [
        ("b", "11"),
        ("c", "12"),
        ("d", "9"),
    ]
    assert "Pod" in cache.listed


def test_reads_are_copies_and_kind_versions_move_per_change():
    cache = Cache()
    cache.replace(Replace("Pod", (pod("a", 1),), "1"))
    version = cache.kind_version("Pod")
    got = cache.get("Pod", "a")
    got["spec"]["nodeName"] = "changed"
    assert cache.get("Pod", "a")["spec"]["nodeName"] == ""
    cache.apply(Event("Pod", "MODIFIED", pod("a", 2)))
    assert cache.kind_version("Pod") == version + 1
    assert cache.kind_version("Node") == 0
    assert BY_KIND["Node"].namespaced is False


def test_peek_all_is_the_kinds_cached_objects_themselves_by_key():
    cache = Cache()
    cache.replace(Replace("Pod", (pod("a", 1), pod("b", 2, uid="ub")), "2"))
    peeked = cache.peek_all("Pod")
    assert sorted(peeked) == [("Pod", "default", "a"), ("Pod", "default", "b")]
    assert peeked[("Pod", "default", "a")] is cache.peek("Pod", "a")
    assert cache.peek_all("Node") == {}


MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]


def with_managed_fields(obj, managed=MANAGED):
    return {**obj, "metadata": {**obj["metadata"], "managedFields": managed}}


def test_the_cache_keeps_objects_without_managed_fields_and_serves_them_back_with_them():
    cache = Cache()
    listed = with_managed_fields(pod("a", 1))
    cache.replace(Replace("Pod", (listed, pod("b", 2, uid="ub")), "2"))
    assert cache.get("Pod", "a") == pod("a", 1)
    assert cache.list("Pod", fields={"spec.nodeName": ""}) == [pod("a", 1), pod("b", 2, uid="ub")]
    assert "managedFields" not in cache.peek("Pod", "a")["metadata"]
    assert cache.served(cache.peek("Pod", "a")) == listed
    assert cache.served(cache.peek("Pod", "b")) is cache.peek("Pod", "b")  # it had none: the object itself
    assert listed["metadata"]["managedFields"] == MANAGED  # what the server sent is left as it was


def test_managed_fields_follow_the_object_the_cache_keeps_through_writes_events_relists_and_deletes():
    cache = Cache()
    cache.replace(Replace("Pod", (with_managed_fields(pod("a", 1)),), "1"))
    written = [{"manager": "karpui", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    cache.store(with_managed_fields(pod("a", 9, node="n1"), written))  # the engine's write answered version 9
    cache.replace(Replace("Pod", (with_managed_fields(pod("a", 5)),), "5"))  # a relist older than the write
    assert cache.served(cache.peek("Pod", "a")) == with_managed_fields(pod("a", 9, node="n1"), written)
    cache.apply(Event("Pod", "MODIFIED", pod("a", 10)))  # an object the server sent without any
    assert cache.served(cache.peek("Pod", "a")) == pod("a", 10)
    cache.apply(Event("Pod", "MODIFIED", with_managed_fields(pod("a", 11))))
    stale = cache.peek("Pod", "a")
    cache.apply(Event("Pod", "DELETED", pod("a", 12)))
    assert cache.peek("Pod", "a") is None
    assert cache.served(stale) is stale  # no longer cached: nothing is kept for it
    assert cache._managed == {"Pod": {}}


def test_cached_objects_are_copies_of_their_own_with_keys_and_short_strings_interned():
    long_message = "0/5 nodes are available: " + "x" * 40
    decoded = [json.loads(json.dumps({**pod(name, 1, uid=name), "status": {"message": long_message}})) for name in "ab"]
    assert decoded[0]["status"]["message"] is not decoded[1]["status"]["message"]
    cache = Cache()
    for obj in decoded:
        cache.store(obj)
    a, b = cache.peek("Pod", "a"), cache.peek("Pod", "b")
    assert a is not decoded[0] and a == decoded[0]
    key_a, key_b = next(iter(a["metadata"])), next(iter(b["metadata"]))
    assert (key_a, key_a is key_b) == ("name", True)
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["status"]["message"] == b["status"]["message"] == long_message
    assert a["status"]["message"] is not b["status"]["message"]  # longer than SHORT_STRING: left as it is


class RecordingTransport:
    """The transport's `request`, answering each PUT with the body at the next resourceVersion and the managedFields
    the server keeps (kube-apiserver keeps an object's managedFields when a PUT leaves them out)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict]] = []

    def request(self, method, path, *, query=(), body=None, content_type="", eviction=False):
        self.sent.append((method, path, body))
        version = int(body["metadata"]["resourceVersion"]) + 1
        return with_managed_fields({**body, "metadata": {**body["metadata"], "resourceVersion": str(version)}})


def test_an_update_of_a_cached_object_puts_its_resource_version_without_managed_fields():
    from provisioner.adapters.kinds import Resource
    from provisioner.adapters.kube import KubeCluster

    transport = RecordingTransport()
    kube = KubeCluster(transport)  # type: ignore[arg-type]
    kube.resources = {"Node": Resource(BY_KIND["Node"], "v1")}
    node = {"kind": "Node", "metadata": {"name": "n1", "uid": "un", "resourceVersion": "4"}, "spec": {}, "status": {}}
    kube.cache.replace(Replace("Node", (with_managed_fields(node),), "4"))
    mine = kube.get("Node", "n1")
    mine["spec"]["unschedulable"] = True
    kube.update(mine)
    assert transport.sent == [
        (
            "PUT",
            "/api/v1/nodes/n1",
            {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"name": "n1", "uid": "un", "resourceVersion": "4"},
                "spec": {"unschedulable": True},
                "status": {},
            },
        )
    ]
    assert mine["metadata"]["resourceVersion"] == "5"
    assert kube.get("Node", "n1") == {**mine, "apiVersion": "v1"}
    assert kube.served(kube.cache.peek("Node", "n1"))["metadata"]["managedFields"] == MANAGED


def test_the_official_client_is_imported_without_its_models_and_leaves_a_later_whole_import_as_it_would_be():
    import subprocess
    import sys

    script = (
        "import sys, resource\n"
        "from provisioner.adapters import official\n"
        "print(official.client.Configuration.__module__, official.client.ApiException.__module__,"
        " official.client.rest.ApiException is official.client.ApiException)\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes')))\n"
        "from kubernetes import client, watch\n"
        "print(client.rest.ApiException is client.ApiException, client.ApiException is official.client.ApiException,"
        " official.client.models.V1Pod is client.V1Pod)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert ran.stdout.splitlines() == [
        "kubernetes.client.configuration kubernetes.client.exceptions True",
        "[]",
        "True False True",
    ]


class PagedTransport:
    """A LIST of two pages of one pod each, as kube-apiserver pages with limit and continue."""

    def __init__(self, pages: list[dict]) -> None:
        self.pages = pages
        self.queries: list[list[tuple[str, str]]] = []

    def request(self, method, path, *, query=(), body=None, content_type="", eviction=False):
        self.queries.append(list(query))
        return self.pages[len(self.queries) - 1]


def test_an_informers_list_hands_over_its_pages_compact_with_their_managed_fields_apart():
    from provisioner.adapters.informer import Informer
    from provisioner.adapters.kinds import Resource

    listed = [
        {
            "metadata": {
                "name": "a",
                "namespace": "default",
                "uid": "ua",
                "resourceVersion": "3",
                "managedFields": MANAGED,
            }
        },
        {"metadata": {"name": "b", "namespace": "default", "uid": "ub", "resourceVersion": "4"}},
    ]
    transport = PagedTransport(
        [
            {"metadata": {"continue": "next", "resourceVersion": "5"}, "items": [json.loads(json.dumps(listed[0]))]},
            {"metadata": {"resourceVersion": "5"}, "items": [json.loads(json.dumps(listed[1]))]},
        ]
    )
    handed: list = []
    informer = Informer(Resource(BY_KIND["Pod"], "v1"), transport, handed.append)  # type: ignore[arg-type]
    assert informer._list() == "5"
    assert transport.queries == [[("limit", "500")], [("limit", "500"), ("continue", "next")]]
    [delta] = handed
    expected_a = {"metadata": {k: v for k, v in listed[0]["metadata"].items() if k != "managedFields"}}
    assert delta.items == (
        {**expected_a, "kind": "Pod", "apiVersion": "v1", "status": {}},
        {**listed[1], "kind": "Pod", "apiVersion": "v1", "status": {}},
    )
    assert [json.loads(m) if m else m for m in delta.managed] == [MANAGED, None]
    cache = Cache()
    cache.replace(delta)
    assert cache.served(cache.peek("Pod", "a")) == {**listed[0], "kind": "Pod", "apiVersion": "v1", "status": {}}
    assert cache.get("Pod", "b") == {**listed[1], "kind": "Pod", "apiVersion": "v1", "status": {}}


def test_an_update_of_a_write_answer_that_differs_from_the_cache_only_in_managed_fields_writes_only_its_status():
    from provisioner.adapters.kinds import Resource
    from provisioner.adapters.kube import KubeCluster

    transport = RecordingTransport()
    kube = KubeCluster(transport)  # type: ignore[arg-type]
    kube.resources = {"Node": Resource(BY_KIND["Node"], "v1")}
    node = {"kind": "Node", "metadata": {"name": "n1", "uid": "un", "resourceVersion": "4"}, "spec": {}, "status": {}}
    kube.cache.store(with_managed_fields(node))
    answer = with_managed_fields(node)  # as create or patch hands the server's answer back
    answer["status"] = {"phase": "Running"}
    kube.update(answer)
    assert [(method, path) for method, path, _ in transport.sent] == [("PUT", "/api/v1/nodes/n1/status")]


class WatchTransport:
    """One watch whose events are the given ones."""

    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def watch(self, path, query, read_timeout):
        events = self.events

        class Stream(list):
            def close(self) -> None:
                pass

        return Stream(events)


def test_an_informers_watch_hands_over_added_and_modified_objects_compact_and_deletions_as_they_came():
    from provisioner.adapters.informer import Informer
    from provisioner.adapters.kinds import Resource

    sent = {
        "metadata": {"name": "a", "namespace": "default", "uid": "ua", "resourceVersion": "3", "managedFields": MANAGED}
    }
    gone = {"metadata": {"name": "a", "namespace": "default", "uid": "ua", "resourceVersion": "4"}}
    transport = WatchTransport(
        [{"type": "ADDED", "object": json.loads(json.dumps(sent))}, {"type": "DELETED", "object": dict(gone)}]
    )
    handed: list = []
    informer = Informer(Resource(BY_KIND["Pod"], "v1"), transport, handed.append)  # type: ignore[arg-type]
    assert informer._watch_once(100.0) == 2
    added, deleted = handed
    typed = {"kind": "Pod", "apiVersion": "v1", "status": {}}
    expected_meta = {k: v for k, v in sent["metadata"].items() if k != "managedFields"}
    assert (added.type, added.compacted, added.obj) == ("ADDED", True, {"metadata": expected_meta, **typed})
    assert json.loads(added.managed) == MANAGED
    assert (deleted.type, deleted.compacted, deleted.managed, deleted.obj) == (
        "DELETED",
        False,
        None,
        {**gone, **typed},
    )
    assert informer.version == "4"
    cache = Cache()
    cache.apply(added)
    assert cache.served(cache.peek("Pod", "a")) == {**sent, **typed}
    cache.apply(deleted)
    assert cache.peek("Pod", "a") is None
