"""kwok mode: karpui is the provisioner of a cluster it reaches over the Kubernetes API. The cluster here is the lab's
API in a process of its own running only its cluster side (kube-scheduler, kubelets, workload controllers, garbage
collector, DRA driver) at wall time, as a kind + kwok cluster would; the engine (karpui.engines) drives it through
the kube adapter and mirrors it into this process's database for the dashboard."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from karpui import models
from karpui.engines import Engine
from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from tests.karp import EXAMPLES
from tests.kube.faults import FaultProxy
from tests.kube.rbac import Attributes, attributes, denied, roles

pytestmark = pytest.mark.django_db
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def until(check: Any, engines: list[Engine], timeout: float = 60.0, what: str = "") -> Any:
    """Tick the engines (as `manage.py engine` does, but every 0.2 s) until `check()` holds."""
    deadline = time.monotonic() + timeout
    while True:
        for engine in engines:
            engine.step(time.time())
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what or check}"
        time.sleep(0.2)


def election(identity: str) -> ElectionConfig:
    return ElectionConfig(
        identity=identity, name="karpui-engine", lease_duration=3.0, renew_deadline=2.0, retry_period=0.25
    )


class KwokCluster(NamedTuple):
    row: models.Cluster
    client: UncachedCluster
    proxy: FaultProxy  # between the engine and the cluster, injecting nothing: it records what the engine sent


@pytest.fixture
def kwok_cluster(lab_api: Any, tmp_path: Path) -> Iterator[KwokCluster]:
    """A cluster row in kwok mode, reaching a fresh lab cluster that runs its cluster side at wall time, and a
    client of that cluster (what kubectl would be)."""
    name = lab_api.new_cluster("kwok", components="cluster", tick=True)
    proxy = FaultProxy(lab_api.url).start()
    through_proxy = lab_api.kubeconfig(name, tmp_path / "kubeconfig-proxy", server=proxy.url)
    direct = lab_api.kubeconfig(name, tmp_path / "kubeconfig")
    row = models.Cluster.objects.create(name="real", mode=models.Cluster.Mode.KWOK, kubeconfig=str(through_proxy))
    yield KwokCluster(row, UncachedCluster(Transport.from_kubeconfig(str(direct))), proxy)
    proxy.stop()
    lab_api.rest(name)


def scale(client: UncachedCluster, replicas: int) -> None:
    """kubectl scale: a merge patch, so the Deployment controller's own writes meanwhile are no conflict."""
    client.patch("Deployment", "inflate", "default", {"spec": {"replicas": replicas}})


def apply(client: UncachedCluster, path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            client.create(document)


def test_getting_started_in_kwok_mode_one_c8x_then_consolidated_away(kwok_cluster: Any) -> None:
    row, client, proxy = kwok_cluster
    apply(client, EXAMPLES / "provisioning" / "nodepool.yaml")
    apply(client, EXAMPLES / "provisioning" / "deployment.yaml")
    engine = Engine.open(row, election=election("engine-a"))
    try:
        assert until(lambda: engine.leading, [engine], 10, "the engine leads")
        scale(client, 5)
        until(
            lambda: (
                [p for p in client.list("Pod") if (p.get("status") or {}).get("phase") == "Running"]
                and all((p.get("status") or {}).get("phase") == "Running" for p in client.list("Pod"))
                and len(client.list("Pod")) == 5
            ),
            [engine],
            what="five pods Running",
        )
        [claim] = client.list("NodeClaim")
        labels = claim["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "c-8x-amd64-linux"
        [node] = client.list("Node")
        assert node["metadata"]["name"] == claim["status"]["nodeName"]
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == ("7900m", "16374Mi")
        # The dashboard's read model: the cluster mirrored into this database.
        until(lambda: models.KubeObject.objects.filter(cluster=row, kind="Pod", phase="Running").count() == 5, [engine])
        assert models.NodePool.objects.get(cluster=row, name="default").spec["disruption"]["consolidateAfter"] == "10s"
        assert models.KubeObject.objects.filter(cluster=row, kind="NodeClaim").count() == 1
        assert models.LogEntry.objects.filter(cluster=row, message="created nodeclaim").count() == 1

        scale(client, 0)
        until(lambda: not client.list("NodeClaim") and not client.list("Node"), [engine], 90, "the empty node removed")
        assert models.LogEntry.objects.filter(cluster=row, message="disrupting node(s)").count() == 1
        assert models.KubeObject.objects.filter(cluster=row, kind__in=["Node", "NodeClaim"]).count() == 0
    finally:
        engine.stop()
    # Every request the engine sent is one deploy/'s kwok roles allow (a real API server would answer 403).
    assert denied(proxy.seen, roles("kwok")) == []
    sent = {attributes(method, path) for method, path, _ in proxy.seen}
    assert {
        Attributes("karpenter.sh", "nodeclaims", "create"),
        Attributes("karpenter.sh", "nodeclaims/status", "update"),
        Attributes("", "nodes", "create"),
        Attributes("", "nodes", "delete"),
        Attributes("karpenter.sh", "nodeclaims", "delete"),
        Attributes("coordination.k8s.io", "leases", "update"),
        Attributes("", "pods", "watch"),
    } <= sent


def test_two_engines_one_leader_and_the_other_takes_over_without_duplicates(kwok_cluster: Any) -> None:
    row, client, _ = kwok_cluster
    apply(client, EXAMPLES / "provisioning" / "nodepool.yaml")
    apply(client, EXAMPLES / "provisioning" / "deployment.yaml")
    first, second = Engine.open(row, election=election("engine-a")), None
    try:
        until(lambda: first.leading, [first], 10, "the first engine leads")
        second = Engine.open(row, election=election("engine-b"))
        scale(client, 3)
        acted = {"engine-a": 0, "engine-b": 0}

        def tick_both() -> None:
            for engine in (first, second):
                if engine.step(time.time()):
                    acted[engine.elector.config.identity] += 1

        deadline = time.monotonic() + 60
        while len(client.list("NodeClaim")) < 1 or any(
            (p.get("status") or {}).get("phase") != "Running" for p in client.list("Pod")
        ):
            tick_both()
            assert time.monotonic() < deadline, "three pods did not run"
            time.sleep(0.2)
        assert acted["engine-b"] == 0  # it never acted while the first led
        first.stop(release=False)  # a crash: the lease is not released
        killed = time.monotonic()
        while not second.leading:
            tick_both()
            time.sleep(0.1)
        assert time.monotonic() - killed <= 3.0 + 1.0  # within the lease's duration (and a retry)
        scale(client, 12)
        until(
            lambda: (
                len(client.list("Pod")) == 12
                and all((p.get("status") or {}).get("phase") == "Running" for p in client.list("Pod"))
            ),
            [second],
            what="twelve pods Running after the takeover",
        )
        claims = client.list("NodeClaim")
        names = [c["metadata"]["name"] for c in claims]
        assert len(names) == len(set(names)) and len(client.list("Node")) == len(claims)
        assert second.steps > 0  # the successor did the work after the crash
    finally:
        first.stop(release=False)
        if second is not None:
            second.stop()


def test_dra_in_kwok_mode_two_pods_each_claiming_the_only_device_get_two_m1x_nodes(kwok_cluster: Any) -> None:
    """The DRA experiment through the kube adapter: the DRAConfig in the cluster declares a gpu-0 on m-family nodes,
    karpui launches a node per claim, and the cluster's DRA driver publishes the slices its scheduler allocates."""
    row, client, _ = kwok_cluster
    apply(client, EXAMPLES / "dra" / "gpu.yaml")
    engine = Engine.open(row, election=election("engine-dra"))
    try:

        def allocated() -> bool:
            claims = client.list("ResourceClaim")
            pods = client.list("Pod")
            return (
                len(claims) == 2
                and all((c.get("status") or {}).get("allocation") for c in claims)
                and len(pods) == 2
                and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
            )

        until(allocated, [engine], 90, "both claims allocated and both pods Running")
        nodeclaims = client.list("NodeClaim")
        assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in nodeclaims] == [
            "m-1x-amd64-linux",
            "m-1x-amd64-linux",
        ]
        results = [r for c in client.list("ResourceClaim") for r in c["status"]["allocation"]["devices"]["results"]]
        assert sorted((r["driver"], r["device"]) for r in results) == [("gpu.example.com", "gpu-0")] * 2
        assert len({r["pool"] for r in results}) == 2  # one gpu-0 on each node
        assert len(client.list("ResourceSlice")) == 2
    finally:
        engine.stop()


def test_a_drain_past_the_termination_grace_period_deletes_the_pods_a_pdb_protects(kwok_cluster: Any) -> None:
    """Karpenter's terminationGracePeriod through the kube adapter: the PDB refuses every eviction, and once the
    NodeClaim's 5 s run out its pods are deleted (a write deploy/'s kwok role must allow)."""
    row, client, proxy = kwok_cluster
    nodeclass, nodepool = [
        d for d in yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()) if d
    ]
    nodepool["spec"]["template"]["spec"]["terminationGracePeriod"] = "5s"
    nodepool["spec"]["disruption"]["consolidateAfter"] = "Never"
    for document in (nodeclass, nodepool):
        client.create(document)
    apply(client, EXAMPLES / "provisioning" / "deployment.yaml")
    client.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "inflate"}}},
        }
    )
    scale(client, 2)
    engine = Engine.open(row, election=election("engine-grace"))
    try:
        until(lambda: running(client, 2), [engine], what="two pods Running")
        [claim] = client.list("NodeClaim")
        client.delete("NodeClaim", claim["metadata"]["name"])

        def replaced() -> bool:
            names = [c["metadata"]["name"] for c in client.list("NodeClaim")]
            return claim["metadata"]["name"] not in names and running(client, 2)

        until(replaced, [engine], 90, "the old NodeClaim gone and both pods Running elsewhere")
    finally:
        engine.stop()
    sent = [attributes(method, path) for method, path, status in proxy.seen]
    assert Attributes("", "pods/eviction", "create") in sent  # refused by the PDB (429) until the grace ran out
    assert sent.count(Attributes("", "pods", "delete")) == 2
    assert denied(proxy.seen, roles("kwok")) == []


def running(client: UncachedCluster, replicas: int) -> bool:
    pods = client.list("Pod")
    return len(pods) == replicas and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def test_the_consolidation_experiment_in_kwok_mode_deletes_the_smaller_spot_node(kwok_cluster: Any) -> None:
    """examples/disruption through the kube adapter, as the lab test of it: eight pods on a c-8x and a c-2x spot
    node; at four, the c-2x is tainted, drained and deleted (Underutilized), its pod moving to the c-8x, and no spot
    node is replaced by another spot node."""
    row, client, _ = kwok_cluster
    for document in yaml.safe_load_all((EXAMPLES / "disruption" / "spot-nodepool-v1beta1.yaml").read_text()):
        if document["kind"] == "NodePool":  # served as v1 only, as Karpenter 1.x: what its conversion makes of it
            document = nodepool_to_manifest(parse_nodepool(document))
        client.create(document)
    apply(client, EXAMPLES / "disruption" / "inflate.yaml")
    engine = Engine.open(row, election=election("engine-spot"))
    try:
        until(lambda: running(client, 8), [engine], what="eight pods Running")
        sizes = sorted(c["metadata"]["labels"][INSTANCE_TYPE] for c in client.list("NodeClaim"))
        assert sizes == ["c-2x-amd64-linux", "c-8x-amd64-linux"]
        [large] = [c for c in client.list("NodeClaim") if c["metadata"]["labels"][INSTANCE_TYPE] == "c-8x-amd64-linux"]
        scale(client, 4)
        until(
            lambda: len(client.list("NodeClaim")) == 1 and running(client, 4),
            [engine],
            90,
            "the c-2x consolidated away",
        )
        assert [c["metadata"]["name"] for c in client.list("NodeClaim")] == [large["metadata"]["name"]]
        assert {p["spec"]["nodeName"] for p in client.list("Pod")} == {large["status"]["nodeName"]}
        [command] = models.KubeObject.objects.filter(cluster=row, kind="DisruptionCommand")
        assert (command.body["spec"]["reason"], command.body["spec"]["decision"]) == ("Underutilized", "delete")
        tainted = models.LogEntry.objects.filter(cluster=row, message="tainted node")
        assert [t.fields["taint.Key"] for t in tainted] == ["karpenter.sh/disrupted"]
        until(lambda: command_phase(row, command.name) == "Succeeded", [engine], 30, "the command succeeded")
    finally:
        engine.stop()


def command_phase(row: models.Cluster, name: str) -> str:
    return str(models.KubeObject.objects.get(cluster=row, kind="DisruptionCommand", name=name).phase)
