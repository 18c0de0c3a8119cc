"""The cluster port's implementations, as fixtures the contract suites run against.

Every implementation of `provisioner.cluster.api.ClusterAPI` must pass tests/contract: the lab's in-memory API
server; the kube adapter over HTTP against the lab's Kubernetes API served by a separate process (a fresh bare
cluster per test, at the same fixed clock); and, when KUBECONFIG is set, the kube adapter against that real
cluster (skipped otherwise), so a user can run the suite on kind.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import NotFound, Obj

NOW = 1_800_000_000.0
NOW_TEXT = "2027-01-15T08:00:00Z"
# The kinds the contract suites write: their informers are all a kube adapter needs to start here.
CONTRACT_KINDS = ("Pod", "Node", "Namespace", "PodDisruptionBudget", "Event")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@dataclass
class Implementation:
    """A fresh, empty cluster behind the port, and what a test may expect of it."""

    api: Any
    # The creationTimestamp the cluster gives objects made now; None where the server's own clock decides.
    created_at: str | None = NOW_TEXT
    # Whether resourceVersions go up by exactly one per write (false on a real cluster, where others write too).
    exact_versions: bool = True
    # Bring the api's reads up to date with the server (a no-op in memory; a cache sync for the kube adapter).
    sync: Callable[[], Any] = lambda: None
    # Writes made by someone else (the lab's operator, another client), not through the api under test.
    seed: Callable[[list[Obj]], list[Obj]] | None = None
    # A PodDisruptionBudget's status is worked out by a controller a moment after each write (a real cluster's
    # kube-controller-manager), not at the eviction.
    pdb_controller: bool = False
    cleanup: list[Callable[[], Any]] = field(default_factory=list)


PARAMS = ["memory", "kube"] + (["real"] if os.environ.get("KUBECONFIG") else [])


def _memory() -> Implementation:
    store = ObjectStore(clock=Clock())
    return Implementation(store, seed=lambda objects: [store.create(obj) for obj in objects])


def _kube(lab_api: Any, tmp_path: Any) -> Implementation:
    from provisioner.adapters.kinds import BY_KIND
    from provisioner.adapters.kube import KubeCluster
    from provisioner.adapters.transport import Transport

    name = lab_api.new_cluster("contract", components="none", clock=NOW)
    transport = Transport.from_kubeconfig(str(lab_api.kubeconfig(name, tmp_path / "kubeconfig")))
    cluster = KubeCluster(transport, kinds=[BY_KIND[k] for k in CONTRACT_KINDS])
    cluster.start()
    assert cluster.wait_synced(30), "the informers did not list within 30 s"

    def seed(objects: list[Obj]) -> list[Obj]:
        return _seen(cluster, lab_api.command("write", cluster=name, objects=objects)["objects"])

    implementation = Implementation(cluster, sync=cluster.sync, seed=seed)
    implementation.cleanup.append(cluster.stop)
    for namespace in ("team", "other"):  # pods are refused in a namespace that does not exist
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return implementation


def _seen(cluster: Any, written: list[Obj]) -> list[Obj]:
    """`written`, once the kube adapter's cache holds each object at the version its writer was answered."""
    from tests.kube.harness import eventually

    versions = {
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")): o["metadata"]["resourceVersion"]
        for o in written
    }

    def seen() -> bool:
        # At that version or later: on a real cluster controllers write what others create (the scheduler marks a
        # pod Unschedulable, the node controller taints a node without a kubelet) as soon as it exists.
        return all(
            (got := cluster.get(*key)) is not None and int(got["metadata"]["resourceVersion"]) >= int(version)
            for key, version in versions.items()
        )

    eventually(seen, sync=cluster.sync)
    return list(written)


class _OwnObjects:
    """A real cluster as the suites expect a fresh one: what was there before the test (kube-system's pods, the
    nodes, their events) is left out of lists; everything else is the cluster's adapter, unchanged."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.before = {o["metadata"]["uid"] for kind in CONTRACT_KINDS for o in cluster.list(kind)}

    def list(self, *args: Any, **kwargs: Any) -> list[Obj]:
        return [o for o in self.cluster.list(*args, **kwargs) if o["metadata"]["uid"] not in self.before]

    def scan(self, kind: str) -> list[Obj]:
        return [o for o in self.cluster.scan(kind) if o["metadata"]["uid"] not in self.before]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def _real(tmp_path: Any) -> Implementation:
    """The cluster KUBECONFIG names. Others' writes (`seed`) come from a client of its own, without a cache, as
    kubectl's; everything the test or the seeding creates is deleted afterwards, namespaces included."""
    from provisioner.adapters.direct import UncachedCluster
    from provisioner.adapters.kinds import BY_KIND
    from provisioner.adapters.kube import KubeCluster
    from provisioner.adapters.transport import Transport

    cluster = KubeCluster(Transport.from_kubeconfig(), kinds=[BY_KIND[k] for k in CONTRACT_KINDS])
    cluster.start()
    assert cluster.wait_synced(60)
    other = UncachedCluster(Transport.from_kubeconfig())
    created: list[Obj] = []
    for namespace in ("team", "other"):
        if other.get("Namespace", namespace) is None:
            created.append(other.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
    _seen(cluster, created)
    create = cluster.create

    def tracked(obj: Obj) -> Obj:
        result = create(obj)
        created.append(result)
        return result

    cluster.create = tracked  # type: ignore[method-assign]

    def seed(objects: list[Obj]) -> list[Obj]:
        written = [other.create(obj) for obj in objects]
        created.extend(written)
        return _seen(cluster, written)

    def gone_keys() -> list[tuple[str, str, str]]:
        return [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")) for o in created]

    def clean() -> None:
        cluster.stop()
        for obj in reversed(created):  # namespaces, made first, go last
            meta = obj["metadata"]
            key = (obj["kind"], meta["name"], meta.get("namespace", ""))
            current = other.get(*key)
            if current is not None and current["metadata"].get("finalizers"):
                other.patch(*key, {"metadata": {"finalizers": None}})
            with contextlib.suppress(NotFound):
                # At once, as `kubectl delete --grace-period=0 --force`: a pod bound to a node no kubelet runs
                # would otherwise wait there, Terminating, for the pod garbage collector.
                resource = other._resource(key[0])
                other.transport.request("DELETE", resource.item(key[1], key[2]), body={"gracePeriodSeconds": 0})
        # A namespace goes once the namespace controller has emptied it; the next test makes it again.
        from tests.kube.harness import eventually

        eventually(lambda: all(other.get(*key) is None for key in gone_keys()), timeout=60)

    # kube-controller-manager's disruption controller runs on a real cluster, not on the lab's API standing in for
    # one (tests/kube/test_contract_on_a_real_cluster.py), whose budgets are counted at each eviction.
    lab = "karpui" in str(other.transport.request("GET", "/version").get("gitVersion"))
    implementation = Implementation(
        _OwnObjects(cluster),
        created_at=None,
        exact_versions=False,
        sync=cluster.sync,
        seed=seed,
        pdb_controller=not lab,
    )
    implementation.cleanup.append(clean)
    return implementation


@pytest.fixture(params=PARAMS)
def implementation(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Implementation]:
    if request.param == "memory":
        made = _memory()
    elif request.param == "kube":
        made = _kube(request.getfixturevalue("lab_api"), tmp_path)
    else:
        made = _real(tmp_path)
    yield made
    for clean in made.cleanup:
        clean()


@pytest.fixture
def api(implementation: Implementation) -> Any:
    """A fresh, empty cluster behind the port, written through the port."""
    return implementation.api


def timestamp_ok(implementation: Implementation, text: str) -> bool:
    if implementation.created_at is not None:
        return text == implementation.created_at
    return re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text) is not None
