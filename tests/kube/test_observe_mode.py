"""observe mode: Karpenter provisions; karpui mirrors, explains and proposes, and carries out an approved command by
deleting its NodeClaims, writing nothing else to the cluster. The stand-in for "a cluster running Karpenter" is
the lab's API in a process of its own running everything (its own provisioning, termination and budgets are
Karpenter's behaviour), reached through the fault proxy, which counts every write."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.test import Client

from karpui import disruption, models, services
from karpui.engines import Engine
from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig
from tests.karp import EXAMPLES
from tests.kube.faults import WRITES, FaultProxy
from tests.kube.rbac import Attributes, attributes, denied, roles

pytestmark = pytest.mark.django_db

# Karpenter's side of the handover: its NodePool says "no voluntary disruption for these reasons" (a budget of
# 0 nodes), so Karpenter never consolidates on its own; karpui reads that budget as its cue and proposes instead.
HANDOVER = [{"nodes": "0", "reasons": ["Empty", "Drifted", "Underutilized"]}, {"nodes": "10%"}]


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
    yield row, UncachedCluster(Transport.from_kubeconfig(str(direct))), proxy
    proxy.stop()
    lab_api.rest(name)


def test_observe_mode_proposes_and_an_approved_delete_is_its_only_write(observed: Any) -> None:
    row, karpenter, proxy = observed
    nodeclass, nodepool = [
        d for d in yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()) if d
    ]
    nodepool["metadata"]["annotations"] = {"karpui.dev/approval-mode": "manual"}
    nodepool["spec"]["disruption"]["budgets"] = HANDOVER
    for document in (
        nodeclass,
        nodepool,
        *yaml.safe_load_all((EXAMPLES / "provisioning" / "deployment.yaml").read_text()),
    ):
        karpenter.create(document)
    karpenter.patch("Deployment", "inflate", "default", {"spec": {"replicas": 2}})
    engine = Engine.open(
        row,
        election=ElectionConfig(
            identity="observer", name="karpui-engine", lease_duration=3.0, renew_deadline=2.0, retry_period=0.25
        ),
    )
    try:
        until(lambda: karpenter.list("NodeClaim") and engine.leading, engine, what="Karpenter launched a node")
        until(
            lambda: models.KubeObject.objects.filter(cluster=row, kind="Pod", phase="Running").count() == 2,
            engine,
            what="the mirror shows both pods running",
        )
        [claim] = karpenter.list("NodeClaim")
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
        time.sleep(2)  # Karpenter's budget of 0 keeps it from removing the node itself meanwhile
        engine.step(time.time())
        assert [c["metadata"]["name"] for c in karpenter.list("NodeClaim")] == [claim["metadata"]["name"]]

        approver = User.objects.create_user("ann", password="ann-pass-1")
        approver.groups.add(Group.objects.get(name="approvers"))
        disruption.command_approve(
            cluster=row, name=command.name, actor=services.Actor.for_user(approver, "web"), reason="empty"
        )
        until(lambda: not karpenter.list("NodeClaim"), engine, what="the approved command deleted the NodeClaim")
        until(
            lambda: (
                models.KubeObject.objects.get(cluster=row, kind="DisruptionCommand", name=command.name).phase
                == "Succeeded"
            ),
            engine,
            what="the command succeeded once Karpenter removed the node",
        )
    finally:
        engine.stop()
    writes = [(method, path) for method, path, _ in proxy.seen if method in WRITES and "/leases" not in path]
    assert writes == [
        (
            "DELETE",
            f"/k8s/clusters/{karpenter_name(proxy, row)}/apis/karpenter.sh/v1/nodeclaims/{claim['metadata']['name']}",
        )
    ]
    # Every request is one deploy/'s observe roles allow: reads, the Lease, and deleting NodeClaims.
    assert denied(proxy.seen, roles("observe")) == []
    sent = {attributes(method, path) for method, path, _ in proxy.seen}
    assert {a for a in sent if a is not None and a.verb not in ("get", "list", "watch")} <= {
        Attributes("karpenter.sh", "nodeclaims", "delete"),
        Attributes("coordination.k8s.io", "leases", "create"),
        Attributes("coordination.k8s.io", "leases", "update"),
    }
    # The dashboard shows the observed cluster from its mirror.
    admin = User.objects.create_superuser("root", password="root-pass-1")
    client = Client()
    client.force_login(admin)
    for page in ("/", "/nodes/", "/pods/pending/", "/disruption/", "/savings/", "/events/"):
        assert client.get(f"{page}?cluster=prod").status_code == 200, page


def karpenter_name(proxy: FaultProxy, row: models.Cluster) -> str:
    path = next(path for _, path, _ in proxy.seen if path.startswith("/k8s/clusters/"))
    return path.split("/")[3]
