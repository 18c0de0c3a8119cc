"""Leader election with a Lease (provisioner/leaderelection.py), on the in-memory API server with fake clocks: one
leader at a time, take-over only after the lease expired as the candidate observed it, release hands over at once,
and a write race is settled by the resourceVersion."""

from __future__ import annotations

import pytest

from provisioner.cluster.memory import ObjectStore, copy_json
from provisioner.cluster.objects import Conflict, NotLeading
from provisioner.leaderelection import ElectionConfig, LeaderElector

START = 1_800_000_000.0


class Time:
    def __init__(self) -> None:
        self.now = 0.0

    def wall(self) -> float:
        return START + self.now

    def monotonic(self) -> float:
        return self.now


class Client:
    """A client of the shared store: it reads copies, so its writes can be stale, as over HTTP."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.writes = 0

    def get(self, kind, name, namespace=""):
        found = self.store.get(kind, name, namespace)
        return copy_json(found) if found is not None else None

    def create(self, obj):
        self.writes += 1
        return self.store.create(obj)

    def update(self, obj, *, spec_changed=False):
        self.writes += 1
        return self.store.update(copy_json(obj), spec_changed=spec_changed)


@pytest.fixture
def world():
    time = Time()
    store = ObjectStore(clock=time.wall)

    def candidate(identity):
        config = ElectionConfig(identity=identity, lease_duration=15, renew_deadline=10, retry_period=2)
        return LeaderElector(Client(store), config, wall=time.wall, monotonic=time.monotonic)

    return time, store, candidate


def spec(store):
    return store.get("Lease", "karpui-leader-election", "default")["spec"]


def test_the_first_candidate_creates_the_lease_and_the_second_waits(world):
    time, store, candidate = world
    a, b = candidate("a"), candidate("b")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert (a.is_leader(), b.is_leader()) == (True, False)
    assert spec(store) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2027-01-15T08:00:00.000000Z",
        "renewTime": "2027-01-15T08:00:00.000000Z",
        "leaseTransitions": 0,
    }
    time.now = 2
    assert a.try_acquire_or_renew() is True
    assert spec(store)["renewTime"] == "2027-01-15T08:00:02.000000Z"
    assert spec(store)["acquireTime"] == "2027-01-15T08:00:00.000000Z"


def test_a_silent_leader_is_replaced_once_the_lease_expired_as_observed_not_before(world):
    time, store, candidate = world
    a, b = candidate("a"), candidate("b")
    a.try_acquire_or_renew()
    for second in range(0, 15, 2):  # b watches every 2 s; a goes silent at 0
        time.now = second
        assert b.try_acquire_or_renew() is False
    time.now = 10
    assert a.is_leader() is False  # a could not renew within its renew deadline: it stopped acting first
    time.now = 15
    assert b.try_acquire_or_renew() is True
    assert (spec(store)["holderIdentity"], spec(store)["leaseTransitions"]) == ("b", 1)
    assert spec(store)["acquireTime"] == "2027-01-15T08:00:15.000000Z"
    assert a.try_acquire_or_renew() is False  # a comes back: b holds it now


def test_a_candidate_that_only_just_arrived_waits_a_whole_lease_duration(world):
    time, store, candidate = world
    candidate("a").try_acquire_or_renew()
    time.now = 100  # the lease's renewTime is long past, but b has only now seen it: clocks may disagree
    late = candidate("b")
    assert late.try_acquire_or_renew() is False
    time.now = 114
    assert late.try_acquire_or_renew() is False
    time.now = 115
    assert late.try_acquire_or_renew() is True


def test_release_hands_the_lease_over_at_once(world):
    time, store, candidate = world
    a, b = candidate("a"), candidate("b")
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    time.now = 1
    assert a.release() is True
    assert (spec(store)["holderIdentity"], spec(store)["leaseDurationSeconds"]) == ("", 1)
    assert a.is_leader() is False
    assert b.try_acquire_or_renew() is True
    assert a.release() is False  # not the holder: nothing to give up


def test_two_candidates_racing_for_a_free_lease_get_one_leader(world):
    time, store, candidate = world
    a, b = candidate("a"), candidate("b")
    a.try_acquire_or_renew()
    a.release()
    # Both read the free lease; a writes first; b's write carries the old resourceVersion: 409.
    lease_b = b.store.get("Lease", "karpui-leader-election", "default")
    assert a.try_acquire_or_renew() is True
    lease_b["spec"]["holderIdentity"] = "b"
    with pytest.raises(Conflict):
        b.store.update(lease_b)
    assert b.try_acquire_or_renew() is False
    assert spec(store)["holderIdentity"] == "a"


def test_bad_timings_are_refused():
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        ElectionConfig(identity="a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="identity"):
        ElectionConfig(identity="")


def test_a_leader_may_write_only_within_the_renew_deadline_of_its_last_renewal(world):
    time, _, candidate = world
    a, b = candidate("a"), candidate("b")
    with pytest.raises(NotLeading, match="a does not hold lease default/karpui-leader-election"):
        a.fence()
    assert a.try_acquire_or_renew() is True
    time.now = 9.9
    a.fence()  # renewed 9.9 s ago: within the 10 s renew deadline, 5.1 s before anyone may take over
    time.now = 10.0
    with pytest.raises(NotLeading, match=r"a last renewed lease default/karpui-leader-election 10.0 s ago"):
        a.fence()
    # Paused past the lease (SIGSTOP), it wakes to find b leading: it may write nothing, and cannot renew.
    time.now = 31
    assert b.try_acquire_or_renew() is False  # b first sees the lease now: it waits the 15 s out itself
    time.now = 46
    assert b.try_acquire_or_renew() is True
    b.fence()
    assert a.try_acquire_or_renew() is False
    with pytest.raises(NotLeading, match="a does not hold"):
        a.fence()
    assert a.holder == "b"
