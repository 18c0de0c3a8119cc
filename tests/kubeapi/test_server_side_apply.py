"""Server-side apply with kubectl 1.32 (`kubectl apply --server-side`): create and update, field ownership in
metadata.managedFields, conflicts with another manager's fields and `--force-conflicts`, fields left out removed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml

from karpui import models
from tests.karp import EXAMPLES


def managers(kubectl: Any, *target: str) -> list[tuple[str, str, str, str]]:
    """Each managedFields entry's manager, operation, subresource and time."""
    obj = json.loads(kubectl.ok("get", *target, "-o", "json", "--show-managed-fields"))
    return [
        (e["manager"], e["operation"], e.get("subresource", ""), e["time"])
        for e in obj["metadata"].get("managedFields", [])
    ]


def test_server_side_apply_creates_then_updates_the_getting_started_objects(kubectl: Any, tmp_path: Any) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    nodepool = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text()
    (tmp_path / "nodepool.yaml").write_text(nodepool + '  limits:\n    cpu: "1000"\n')
    (tmp_path / "inflate.yaml").write_text((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    assert kubectl.ok("apply", "--server-side", "-f", "nodepool.yaml", "-f", "inflate.yaml") == (
        "kwoknodeclass.karpenter.kwok.sh/default serverside-applied\n"
        "nodepool.karpenter.sh/default serverside-applied\n"
        "deployment.apps/inflate serverside-applied\n"
    )
    assert [m[:3] for m in managers(kubectl, "deployment", "inflate")] == [("kubectl", "Apply", "")]
    assert [m[:3] for m in managers(kubectl, "nodepool", "default")] == [("kubectl", "Apply", "")]
    # Applied again unchanged: nothing is written.
    version = kubectl.ok("get", "deployment", "inflate", "-o", "jsonpath={.metadata.resourceVersion}")
    assert kubectl.ok("apply", "--server-side", "-f", "inflate.yaml") == "deployment.apps/inflate serverside-applied\n"
    assert kubectl.ok("get", "deployment", "inflate", "-o", "jsonpath={.metadata.resourceVersion}") == version
    # A change to the file is applied; the NodePool's limits, left out of a second apply, go.
    (tmp_path / "inflate.yaml").write_text(
        (tmp_path / "inflate.yaml").read_text().replace("replicas: 0", "replicas: 2")
    )
    kubectl.ok("apply", "--server-side", "-f", "inflate.yaml")
    assert kubectl.ok("get", "deployment", "inflate", "-o", "jsonpath={.spec.replicas}") == "2"
    pool = models.NodePool.objects.get(name="default")
    assert pool.spec["limits"] == {"cpu": "1000"}
    (tmp_path / "nodepool.yaml").write_text(nodepool)
    kubectl.ok("apply", "--server-side", "-f", "nodepool.yaml")
    pool.refresh_from_db()
    assert "limits" not in pool.spec


def test_a_field_another_manager_changed_is_a_conflict_until_forced(kubectl: Any, tmp_path: Any) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "inflate.yaml").write_text((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    kubectl.ok("apply", "--server-side", "-f", "inflate.yaml")
    kubectl.ok("label", "deployment", "inflate", "team=web")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "3")
    owners = managers(kubectl, "deployment", "inflate")
    assert [m[:3] for m in owners] == [
        ("kubectl", "Apply", ""),
        ("kubectl-label", "Update", ""),
        ("kubectl", "Update", "scale"),  # kubectl scale sends no fieldManager: its User-Agent names it
    ]
    refused = kubectl.run("apply", "--server-side", "-f", "inflate.yaml")
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (
        'error: Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1 '
        f"at {owners[2][3]}: .spec.replicas"
    )
    assert kubectl.ok("get", "deployment", "inflate", "-o", "jsonpath={.spec.replicas}") == "3"
    kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", "inflate.yaml")
    assert (
        kubectl.ok("get", "deployment", "inflate", "-o", "jsonpath={.spec.replicas} {.metadata.labels.team}") == "0 web"
    )


def test_the_python_clients_server_side_apply_owns_fields_per_manager(kube_client: Any) -> None:
    from kubernetes import dynamic
    from kubernetes.client.exceptions import ApiException

    resources = dynamic.DynamicClient(kube_client).resources
    deployments = resources.get(api_version="apps/v1", kind="Deployment")
    manifest = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    manifest["metadata"]["namespace"] = "default"
    created = deployments.server_side_apply(body=manifest, field_manager="ci")
    assert [(e.manager, e.operation) for e in created.metadata.managedFields] == [("ci", "Apply")]
    with pytest.raises(ApiException) as refused:
        deployments.server_side_apply(
            body={**manifest, "spec": {**manifest["spec"], "replicas": 4}}, field_manager="cd"
        )
    status = json.loads(refused.value.body)
    assert (refused.value.status, status["reason"], status["details"]["causes"]) == (
        409,
        "Conflict",
        [{"reason": "FieldManagerConflict", "message": 'conflict with "ci"', "field": ".spec.replicas"}],
    )
    taken = deployments.server_side_apply(
        body={**manifest, "spec": {**manifest["spec"], "replicas": 4}}, field_manager="cd", force_conflicts=True
    )
    assert taken.spec.replicas == 4
    owners = {e["manager"]: sorted(e["fieldsV1"]["f:spec"]) for e in taken.to_dict()["metadata"]["managedFields"]}
    assert owners == {"ci": ["f:selector", "f:template"], "cd": ["f:replicas", "f:selector", "f:template"]}


def test_nodes_applied_server_side_register_with_their_status(kubectl: Any) -> None:
    assert kubectl.ok("apply", "--server-side", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml")) == (
        "node/kind-control-plane serverside-applied\nnode/kind-worker serverside-applied\n"
        "node/kind-worker2 serverside-applied\n"
    )
    assert kubectl.ok("get", "node", "kind-worker", "-o", "jsonpath={.status.allocatable}") == (
        '{"cpu":"4","memory":"8Gi","pods":"110"}'
    )


def test_two_managers_applying_the_same_nodepool_share_it_though_the_store_rewrites_its_quantities(
    kubectl: Any, tmp_path: Any
) -> None:
    nodepool = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text() + "  limits:\n    cpu: 1000\n"
    (tmp_path / "nodepool.yaml").write_text(nodepool)
    for manager in ("ci", "cd"):
        kubectl.ok("apply", "--server-side", f"--field-manager={manager}", "-f", str(tmp_path / "nodepool.yaml"))
    assert [m[:2] for m in managers(kubectl, "nodepool", "default")] == [("ci", "Apply"), ("cd", "Apply")]


def test_a_bad_keyed_list_is_invalid_and_managed_fields_reset_as_kube_apiserver_resets_them(
    kubectl: Any, tmp_path: Any
) -> None:
    inflate = (EXAMPLES / "provisioning" / "deployment.yaml").read_text()
    (tmp_path / "inflate.yaml").write_text(inflate)
    kubectl.ok("apply", "--server-side", "-f", str(tmp_path / "inflate.yaml"))
    twice = inflate.replace("          resources:", "          env: [{name: A}, {name: A}]\n          resources:")
    (tmp_path / "twice.yaml").write_text(twice)
    refused = kubectl.run("apply", "--server-side", "-f", str(tmp_path / "twice.yaml"))
    assert refused.stderr.strip() == (
        'The Deployment "inflate" is invalid: .spec.template.spec.containers[name="inflate"].env: duplicate entries '
        'for key [name="A"]'
    )
    # `[]` is ignored (a client that knows nothing of managedFields cannot strip them), `[{}]` clears them.
    kubectl.ok("patch", "deployment", "inflate", "--type=merge", "-p", '{"metadata":{"managedFields":[]}}')
    assert [m[:2] for m in managers(kubectl, "deployment", "inflate")] == [("kubectl", "Apply")]
    kubectl.ok("patch", "deployment", "inflate", "--type=merge", "-p", '{"metadata":{"managedFields":[{}]}}')
    assert managers(kubectl, "deployment", "inflate") == []
