"""A person's NodePool edits to a kwok cluster (the dashboard's editor, the admin and `karp apply` all go through
these services): the NodePool is the cluster's object, written there first, and the row is its mirror, updated at
once so the page that made the change shows it; each write is audited. Against the lab's API in a process of its
own, as a real cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpui import models
from karpui.people.audit import Actor
from karpui.writes import configs
from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.manifests.nodepool import parse_nodepool
from tests.karp import EXAMPLES

pytestmark = pytest.mark.django_db
ACTOR = Actor("ann", "web")


def test_a_nodepool_applied_and_deleted_for_a_kwok_cluster_lands_in_the_cluster_and_its_mirror(
    lab_api: Any, tmp_path: Path
) -> None:
    name = lab_api.new_cluster("edited", components="none")
    kubeconfig = lab_api.kubeconfig(name, tmp_path / "kubeconfig")
    row = models.Cluster.objects.create(name="edited", mode=models.Cluster.Mode.KWOK, kubeconfig=str(kubeconfig))
    cluster = UncachedCluster(Transport.from_kubeconfig(str(kubeconfig)))
    _, manifest = [d for d in yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()) if d]

    created = configs.nodepool_apply(cluster=row, nodepool=parse_nodepool(manifest), actor=ACTOR)

    assert created.outcome == "created"
    [stored] = cluster.list("NodePool")
    assert stored["metadata"]["name"] == "default"
    assert stored["spec"]["disruption"]["consolidateAfter"] == "10s"
    assert models.NodePool.objects.get(cluster=row, name="default").spec == stored["spec"]

    manifest["spec"]["disruption"]["consolidateAfter"] = "5m"
    configured = configs.nodepool_apply(cluster=row, nodepool=parse_nodepool(manifest), actor=ACTOR)

    assert configured.outcome == "configured"
    [stored] = cluster.list("NodePool")
    assert stored["spec"]["disruption"]["consolidateAfter"] == "5m"
    assert stored["metadata"]["generation"] == 2  # the server saw a spec change
    assert models.NodePool.objects.get(cluster=row, name="default").spec["disruption"]["consolidateAfter"] == "5m"

    message = configs.config_delete(cluster=row, kind="NodePool", name="default", actor=ACTOR)

    assert message == 'nodepool.karpenter.sh "default" deleted'
    assert cluster.list("NodePool") == []
    assert not models.NodePool.objects.filter(cluster=row).exists()
    assert list(
        models.AuditEvent.objects.filter(target_kind="NodePool").order_by("id").values_list("action", "actor_name")
    ) == [("create", "ann"), ("update", "ann"), ("delete", "ann")]
