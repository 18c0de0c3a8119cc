"""Writes answered as kube-apiserver answers them where a client relies on it: the namespaces kube-apiserver never
deletes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpui import lab as labs
from karpui import models
from tests.karp import EXAMPLES, karp, ok
from tests.kubeapi.admin_api import BASE, AdminApi
from tests.kubeapi.test_bad_writes import status

INFLATE = "/apis/apps/v1/namespaces/default/deployments/inflate"
NAMESPACES = "/api/v1/namespaces"


def written() -> tuple[int, int]:
    """What the lab has stored: every write adds a change-log entry, so equal counts mean nothing was written."""
    return models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count()


@pytest.fixture
def api(lab: Any) -> AdminApi:
    """The getting-started experiment at three replicas, and an admin's client."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    labs.advance("lab", 5)
    return AdminApi()


# Namespaces -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_the_namespaces_kube_apiserver_keeps_cannot_be_deleted(api: AdminApi, name: str) -> None:
    before = written()
    assert api.send("DELETE", f"{NAMESPACES}/{name}") == (
        403,
        status(
            403,
            "Forbidden",
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            {"name": name, "kind": "namespaces"},
        ),
    )
    assert written() == before
    assert karp("delete", "namespace", name)[2] == (
        f'error: namespaces "{name}" is forbidden: this namespace may not be deleted\n'
    )
    assert written() == before


def test_once_kube_node_lease_is_deleted_every_create_into_it_is_a_404_naming_it(api: AdminApi) -> None:
    assert api.send("DELETE", f"{NAMESPACES}/kube-node-lease")[0] == 200
    before = written()
    deployment = api.get(INFLATE)[1]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "kube-node-lease"},
        "spec": {**deployment["spec"], "replicas": 0},
    }
    gone = status(
        404,
        "NotFound",
        'namespaces "kube-node-lease" not found',
        {"name": "kube-node-lease", "kind": "namespaces"},
    )
    path = "/apis/apps/v1/namespaces/kube-node-lease/deployments"
    assert api.send("POST", path, deployment) == (404, gone)
    apply = api.client.patch(
        f"{BASE}{path}/web?fieldManager=kubectl",
        json.dumps(deployment),
        content_type="application/apply-patch+yaml",
        headers=api.headers,
    )
    assert (apply.status_code, json.loads(apply.content)) == (404, gone)
    code, _, err = karp("apply", "-f", "-", stdin=json.dumps(deployment))
    assert (code, err) == (
        1,
        'error: document 1 Deployment/web: metadata.namespace: namespaces "kube-node-lease" not found\n',
    )
    assert written() == before


def inflate_on_a_node() -> str:
    """The getting-started experiment at two replicas, on one node: its name."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    labs.advance("lab", 5)
    [node] = models.KubeObject.objects.filter(kind="Node").values_list("name", flat=True)
    return str(node)


def test_kubectl_may_not_delete_the_default_namespace(kubectl: Any) -> None:
    inflate_on_a_node()
    before = written()
    refused = kubectl.run("delete", "ns", "default")
    assert (refused.returncode, refused.stderr) == (
        1,
        'Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted\n',
    )
    assert written() == before
