"""The kwok-mode engine on a bad day: faults injected between it and the cluster's API (a watch cut mid-stream,
410 Gone, 409 on update, 429 on eviction, 500s, 2 s of latency, the API server killed and restarted). After each:
no duplicate NodeClaim or Node, no lost pod, and the engine catches up (the time it took is printed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpui import models
from karpui.clusters.engines import Engine
from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig
from tests.karp import EXAMPLES
from tests.kube.faults import FaultProxy
from tests.kube.harness import LabServer

pytestmark = pytest.mark.django_db
REPLICAS = 3


class Setting:
    """A kwok cluster on the lab's API, an engine reaching it through the fault proxy, and a client of its own."""

    def __init__(self, server: LabServer, folder: Path) -> None:
        self.server = server
        self.name = server.new_cluster("faults", components="cluster", tick=True)
        self.proxy = FaultProxy(server.url).start()
        through_proxy = server.kubeconfig(self.name, folder / "kubeconfig-proxy", server=self.proxy.url)
        self.direct = server.kubeconfig(self.name, folder / "kubeconfig")
        self.row = models.Cluster.objects.create(
            name="faulty", mode=models.Cluster.Mode.KWOK, kubeconfig=str(through_proxy)
        )
        self.client = UncachedCluster(Transport.from_kubeconfig(str(self.direct)))
        for path in (EXAMPLES / "provisioning" / "nodepool.yaml", EXAMPLES / "provisioning" / "deployment.yaml"):
            for document in yaml.safe_load_all(path.read_text()):
                if document:
                    self.client.create(document)
        self.engine = Engine.open(
            self.row,
            lease_transport=Transport.from_kubeconfig(str(self.direct)),  # leadership is not what is tested here
            election=ElectionConfig(
                identity="engine", name="karpui-engine", lease_duration=3.0, renew_deadline=2.0, retry_period=0.25
            ),
        )

    def settle(self, check: Callable[[], bool], timeout: float, what: str) -> float:
        """Tick the engine until `check()` holds; how long it took."""
        start = time.monotonic()
        while not check():
            self.engine.step(time.time())
            assert time.monotonic() - start < timeout, f"not within {timeout} s: {what}"
            time.sleep(0.2)
        return time.monotonic() - start

    def running(self, replicas: int = REPLICAS) -> bool:
        pods = self.client.list("Pod")
        return len(pods) == replicas and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    def consistent(self, *, one_node: bool = True) -> None:
        """No duplicates and nothing lost: each Node is a NodeClaim's, each pod runs on one, names unique, and no
        NodeClaim is there for nothing (with `one_node`: the three pods share the one node they fit on)."""
        claims = self.client.list("NodeClaim")
        nodes = self.client.list("Node")
        pods = self.client.list("Pod")
        assert sorted((c.get("status") or {}).get("nodeName") for c in claims) == sorted(
            n["metadata"]["name"] for n in nodes
        )
        assert len({p["metadata"]["name"] for p in pods}) == len(pods) == REPLICAS
        assert {p["spec"]["nodeName"] for p in pods} <= {n["metadata"]["name"] for n in nodes}
        assert all(any(p["spec"]["nodeName"] == n["metadata"]["name"] for p in pods) for n in nodes)
        if one_node:
            assert len(claims) == 1  # three one-CPU pods fit one node: a second NodeClaim would be a duplicate

    def stop(self) -> None:
        self.engine.stop()
        self.proxy.stop()
        self.server.rest(self.name)


@pytest.fixture
def setting(lab_api: LabServer, tmp_path: Path) -> Iterator[Setting]:
    made = Setting(lab_api, tmp_path)
    made.settle(lambda: made.engine.leading, 10, "the engine leads")
    yield made
    made.stop()


def scale(setting: Setting, replicas: int) -> None:
    setting.client.patch("Deployment", "inflate", "default", {"spec": {"replicas": replicas}})


FAULTS: dict[str, Callable[[FaultProxy], Any]] = {
    "watch cut mid-stream": lambda proxy: proxy.cut_watches(),
    "410 Gone": lambda proxy: proxy.expire_watches(times=4),
    "409 on update": lambda proxy: proxy.fail(409, "Conflict", method="PUT", path="nodeclaims", times=3),
    "500s": lambda proxy: proxy.fail(500, "InternalError", times=8),
    # The worst case of the eight: every one on the NodeClaim POST, retried after 1, 2, 4, 5, 5, 5, 5 and 5 s.
    "500s on the NodeClaim POST": lambda proxy: proxy.fail(
        500, "InternalError", method="POST", path="nodeclaims$", times=8
    ),
    "2 s latency": lambda proxy: setattr(proxy.faults, "latency", 2.0),
    # Done, but answered 500: the retry must see the NodeClaim (or Node) it made and not make a second one.
    "500 after the NodeClaim POST was done": lambda proxy: proxy.fail(
        500, "InternalError", method="POST", path="nodeclaims$", forward=True
    ),
    "500 after the Node POST was done": lambda proxy: proxy.fail(
        500, "InternalError", method="POST", path="/nodes$", forward=True
    ),
}


# Seconds each fault may take to catch up: the slowest measured, with room for a loaded machine. Any eight 500s
# may all land on the NodeClaim POST (one run in four did), so they get that worst case's limit.
LIMITS = {"2 s latency": 60.0, "500s": 50.0, "500s on the NodeClaim POST": 50.0}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_provisioning_through_a_fault_makes_one_node_and_loses_no_pod(setting: Setting, fault: str) -> None:
    FAULTS[fault](setting.proxy)
    scale(setting, REPLICAS)
    took = setting.settle(setting.running, LIMITS.get(fault, 30.0), f"three pods Running through {fault}")
    setting.proxy.faults.latency = 0.0
    time.sleep(1.0)
    setting.engine.step(time.time())  # one more step after the fault: nothing new is made
    setting.consistent()
    assert len(setting.client.list("Node")) == 1
    assert all(failure.times == 0 for failure in setting.proxy.faults.failures if failure.forward)  # it was met
    print(f"{fault}: caught up in {took:.1f} s")


def test_evictions_refused_with_429_are_retried_and_the_drain_completes(setting: Setting) -> None:
    scale(setting, REPLICAS)
    setting.settle(setting.running, 60, "three pods Running")
    [claim] = setting.client.list("NodeClaim")
    setting.proxy.fail(429, "TooManyRequests", method="POST", path="eviction", times=4)
    setting.client.delete("NodeClaim", claim["metadata"]["name"])  # as a person or a command would

    def replaced() -> bool:
        """Running elsewhere, the old NodeClaim gone, and any node the scheduler left empty consolidated away."""
        claims = setting.client.list("NodeClaim")
        names = [c["metadata"]["name"] for c in claims]
        nodes = {(c.get("status") or {}).get("nodeName") for c in claims}  # kwok names each kwok-<nodeclaim>-...
        used = {p["spec"].get("nodeName") for p in setting.client.list("Pod")}
        return setting.running() and claim["metadata"]["name"] not in names and nodes <= used

    took = setting.settle(replaced, 120, "the pods drained and running on new nodes, the old one gone")
    refused = [s for s in setting.proxy.seen if "eviction" in s[1] and s[2] == 429]
    assert len(refused) == 4  # each refused eviction was retried
    # Pods evicted at different moments may come in two provisioning batches, so two nodes are not a duplicate;
    # one the scheduler left empty is consolidated away before this point.
    setting.consistent(one_node=False)
    print(f"429 on eviction: drained and replaced in {took:.1f} s")


def test_the_api_server_killed_and_restarted_mid_provisioning(tmp_path: Path) -> None:
    server = LabServer(tmp_path / "own").start()  # its own API process: the others' must keep running
    made = Setting(server, tmp_path)
    try:
        made.settle(lambda: made.engine.leading, 10, "the engine leads")
        scale(made, REPLICAS)
        made.settle(lambda: made.client.list("NodeClaim"), 30, "a NodeClaim made")
        server.restart()  # SIGKILL, then the same port and database
        server.command("cluster", name=made.name, components="cluster", tick=True)  # beat again
        took = made.settle(made.running, 90, "three pods Running after the restart")
        made.consistent()
        print(f"API server restarted: caught up in {took:.1f} s")
    finally:
        made.stop()
        server.stop()
