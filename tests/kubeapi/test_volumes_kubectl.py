"""kubectl with a StorageClass, a PersistentVolumeClaim and a pod using it: applied, patched, printed with
kube-apiserver's columns, explained from the served schema; the engine places the pod's node in the class's zone."""

from __future__ import annotations

import json
from typing import Any

from karpui.clusters import lab
from tests.integration.test_karp_volumes import CLAIM, CLASS, DEPLOYMENT
from tests.karp import EXAMPLES


def test_kubectl_applies_a_waiting_claim_and_its_pod_gets_a_node_in_the_class_zone(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", str(EXAMPLES / "provisioning"))
    applied = kubectl.ok("apply", "-f", "-", stdin=CLASS + "---" + CLAIM + "---" + DEPLOYMENT)
    assert applied.splitlines() == [
        "storageclass.storage.k8s.io/zonal created",
        "persistentvolumeclaim/data created",
        "deployment.apps/writer created",
    ]
    [pvc] = kubectl.table("get", "pvc")
    assert (pvc["NAME"], pvc["STATUS"], pvc["STORAGECLASS"], pvc["VOLUMEATTRIBUTESCLASS"]) == (
        "data",
        "Pending",
        "zonal",
        "<unset>",
    )
    [sc] = kubectl.table("get", "storageclasses")
    assert (sc["RECLAIMPOLICY"], sc["VOLUMEBINDINGMODE"], sc["ALLOWVOLUMEEXPANSION"]) == (
        "Delete",
        "WaitForFirstConsumer",
        "false",
    )
    # A strategic merge patch, as on kube-apiserver for a built-in kind.
    kubectl.ok("patch", "pvc", "data", "-p", '{"metadata": {"labels": {"team": "a"}}}')
    assert json.loads(kubectl.ok("get", "pvc", "data", "-o", "json"))["metadata"]["labels"] == {"team": "a"}
    assert "FIELD: volumeBindingMode <string>" in kubectl.ok("explain", "storageclass.volumeBindingMode")
    lab.advance("lab", 30)
    [nodeclaim] = kubectl.table("get", "nodeclaims")
    assert nodeclaim["ZONE"] == "test-zone-a"
