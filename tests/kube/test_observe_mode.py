"""observe mode: Karpenter provisions; karpui mirrors and explains, holds Karpenter's voluntary disruption in the
NodePools a person gates and proposes there instead, writing nothing else to the cluster (the release of an approved
command to Karpenter is tested against Karpenter itself: test_observe_karpenter.py). The stand-in for "a cluster running Karpenter" is
the lab's API in a process of its own running everything (its own provisioning, termination and budgets are
Karpenter's behaviour), reached through the fault proxy, which counts every write."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from karpui import models
from karpui.clusters.engines import Engine
from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig
from tests.karp import EXAMPLES
from tests.kube.faults import WRITES, FaultProxy
from tests.kube.rbac import Attributes, attributes, denied, roles

pytestmark = pytest.mark.django_db

# What Karpenter's CRD defaults a NodePool's budgets to; karpui's gate puts its hold before it.
OWN_BUDGETS = [{"nodes": "10%"}]
HELD = [{"nodes": "0"}, *OWN_BUDGETS]


def until(check: Any, engine: Engine, timeout: float = 90.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        engine.step(time.time())
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.25)


@pytest.fixture
def observed(lab_api: Any, tmp_path: Path) -> Iterator[tuple[models.Cluster, UncachedCluster, FaultProxy]]:
    name = lab_api.new_cluster("karpenter", components="all", tick=True)
    proxy = FaultProxy(lab_api.url).start()
    kubeconfig = lab_api.kubeconfig(name, tmp_path / "kubeconfig", server=proxy.url)
    direct = lab_api.kubeconfig(name, tmp_path / "direct")
    row = models.Cluster.objects.create(name="prod", mode=models.Cluster.Mode.OBSERVE, kubeconfig=str(kubeconfig))
    client = UncachedCluster(Transport.from_kubeconfig(str(direct)))
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karpui"}})
    yield row, client, proxy
    proxy.stop()
    lab_api.rest(name)


def test_observe_mode_holds_a_gated_nodepool_proposes_there_only_and_writes_nothing_else(observed: Any) -> None:
    row, karpenter, proxy = observed
    nodeclass, nodepool = [
        d for d in yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()) if d
    ]
    gated = {**nodepool, "metadata": {"name": "gated", "annotations": {"karpui.dev/approval-mode": "manual"}}}
    gated["spec"] = {**nodepool["spec"], "disruption": {**nodepool["spec"]["disruption"], "budgets": OWN_BUDGETS}}
    left = {**gated, "metadata": {"name": "karpenters"}}  # approval mode auto (none): Karpenter's own to disrupt
    left["spec"] = {**gated["spec"], "weight": 10}  # Karpenter launches here first
    for document in (
        nodeclass,
        gated,
        left,
        *yaml.safe_load_all((EXAMPLES / "provisioning" / "deployment.yaml").read_text()),
    ):
        karpenter.create(document)
    engine = Engine.open(
        row,
        election=ElectionConfig(
            identity="observer",
            name="karpui-engine",
            namespace="karpui",  # where deploy/'s Role grants the Lease
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.25,
        ),
    )
    try:
        until(
            lambda: karpenter.get("NodePool", "gated")["spec"]["disruption"]["budgets"] == HELD,
            engine,
            what="karpui held the gated NodePool (a budget of 0 nodes for every reason, before its own)",
        )
        assert karpenter.get("NodePool", "karpenters")["spec"]["disruption"]["budgets"] == OWN_BUDGETS
        karpenter.patch("Deployment", "inflate", "default", {"spec": {"replicas": 2}})
        until(lambda: karpenter.list("NodeClaim"), engine, what="Karpenter launched a node")
        [first] = karpenter.list("NodeClaim")
        assert first["metadata"]["labels"]["karpenter.sh/nodepool"] == "karpenters"
        until(
            lambda: models.KubeObject.objects.filter(cluster=row, kind="Pod", phase="Running").count() == 2,
            engine,
            what="the mirror shows both pods running",
        )
        karpenter.patch("Deployment", "inflate", "default", {"spec": {"replicas": 0}})
        until(lambda: not karpenter.list("NodeClaim"), engine, what="Karpenter removed its own empty node")
        assert models.KubeObject.objects.filter(cluster=row, kind="DisruptionCommand").count() == 0
        # The same in the gated NodePool: Karpenter is held there, and karpui proposes for a person instead.
        karpenter.patch("NodePool", "karpenters", "", {"spec": {"limits": {"cpu": "0"}}})
        karpenter.patch("Deployment", "inflate", "default", {"spec": {"replicas": 2}})
        until(lambda: karpenter.list("NodeClaim"), engine, what="Karpenter launched a node in the gated NodePool")
        [claim] = karpenter.list("NodeClaim")
        assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "gated"
        until(
            lambda: models.KubeObject.objects.filter(cluster=row, kind="Pod", phase="Running").count() == 2,
            engine,
            what="the mirror shows both pods running",
        )
        karpenter.patch("Deployment", "inflate", "default", {"spec": {"replicas": 0}})
        command = until(
            lambda: models.KubeObject.objects.filter(
                cluster=row, kind="DisruptionCommand", phase="AwaitingApproval"
            ).first(),
            engine,
            what="karpui proposed removing the empty node and waits for a person",
        )
        assert command.body["spec"]["reason"] == "Empty"
        assert [c["nodeclaim"] for c in command.body["spec"]["candidates"]] == [claim["metadata"]["name"]]
        time.sleep(2)  # the hold keeps Karpenter from removing the node itself meanwhile
        engine.step(time.time())
        assert [c["metadata"]["name"] for c in karpenter.list("NodeClaim")] == [claim["metadata"]["name"]]
    finally:
        engine.stop()
    writes = {
        (method, path.split("/", 4)[4]) for method, path, _ in proxy.seen if method in WRITES and "/leases" not in path
    }
    assert writes == {("PUT", "apis/karpenter.sh/v1/nodepools/gated")}
    # Every request is one deploy/'s observe roles allow: reads, the Lease, and the gate's writes.
    assert denied(proxy.seen, roles("observe")) == []
    sent = {attributes(method, path) for method, path, _ in proxy.seen}
    assert {a for a in sent if a is not None and a.verb not in ("get", "list", "watch")} == {
        Attributes("karpenter.sh", "nodepools", "update"),
        Attributes("coordination.k8s.io", "leases", "create"),
        Attributes("coordination.k8s.io", "leases", "update"),
    }
    # The dashboard shows the observed cluster from its mirror.
    admin = User.objects.create_superuser("root", password="root-pass-1")
    client = Client()
    client.force_login(admin)
    for page in ("/", "/nodes/", "/pods/pending/", "/disruption/", "/savings/", "/events/"):
        assert client.get(f"{page}?cluster=prod").status_code == 200, page
