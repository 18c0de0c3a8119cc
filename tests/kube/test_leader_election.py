"""Leader election over HTTP: two candidates against one cluster's API (the lab's, in its own process), each with
its own client, as two karpui deployments would be."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from provisioner.adapters.direct import DirectAPI
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig, LeaderElector
from tests.kube.harness import eventually

LEASE = 3.0


def candidate(remote, identity: str) -> LeaderElector:
    store = DirectAPI(Transport.from_kubeconfig(remote.kubeconfig()))
    config = ElectionConfig(identity=identity, lease_duration=LEASE, renew_deadline=2.0, retry_period=0.25)
    return LeaderElector(store, config)


def _seconds(micro_time: str) -> float:
    """A Lease's MicroTime (RFC 3339 with microseconds) as seconds since the epoch."""
    return datetime.strptime(micro_time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def leaders(*candidates: LeaderElector) -> list[str]:
    return [c.config.identity for c in candidates if c.is_leader()]


@pytest.fixture
def pair(remote):
    """Two candidates running, engine-a leading since before engine-b started."""
    a, b = candidate(remote, "engine-a"), candidate(remote, "engine-b")
    a.start()
    eventually(lambda: a.is_leader(), timeout=10)
    b.start()
    yield a, b
    a.stop(release=False)
    b.stop()


def test_exactly_one_of_two_candidates_leads_and_the_other_takes_over_when_it_dies(pair):
    a, b = pair
    for _ in range(20):  # 2 s of both running: b never leads while a renews
        assert leaders(a, b) == ["engine-a"]
        time.sleep(0.1)
    a.stop(release=False)  # a crash: no release
    last_renewal = b.store.get("Lease", "karpui-leader-election", "default")["spec"]["renewTime"]
    # How soon b takes over depends on how busy the machine is; that it waits out the lease does not.
    eventually(lambda: b.is_leader(), timeout=LEASE + 15)
    assert leaders(a, b) == ["engine-b"]
    lease = b.store.get("Lease", "karpui-leader-election", "default")
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("engine-b", 1)
    waited = _seconds(lease["spec"]["acquireTime"]) - _seconds(last_renewal)
    assert waited >= LEASE, f"took the lease {waited:.3f} s after a's last renewal"


def test_an_orderly_stop_releases_the_lease_and_the_other_takes_over_at_once(pair):
    a, b = pair
    time.sleep(0.5)
    stopped = time.monotonic()
    a.stop()
    eventually(lambda: b.is_leader(), timeout=LEASE)
    assert time.monotonic() - stopped < 1.5
