"""The kube adapter's pure parts: the token bucket, jittered back-off, API error mapping, REST paths, and the
cache's rules for events that arrive late or out of order."""

from __future__ import annotations

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
