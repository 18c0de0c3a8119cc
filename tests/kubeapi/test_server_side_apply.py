"""Server-side apply with kubectl 1.32 (`kubectl apply --server-side`): create and update, field ownership in
metadata.managedFields, conflicts with another manager's fields and `--force-conflicts`, fields left out removed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml

from karpui import models
from tests.karp import EXAMPLES, ok


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
    # The whole of details: kube-apiserver names no object in an apply conflict's, only the causes.
    assert (refused.value.status, status["reason"], status["details"]) == (
        409,
        "Conflict",
        {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "ci"', "field": ".spec.replicas"}]},
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
    # A null in the status sets nothing, as anywhere else in an applied configuration.
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n3"},
        "status": {"capacity": {"cpu": "2", "pods": None}, "allocatable": {"cpu": "2"}},
    }
    kubectl.ok("apply", "--server-side", "-f", "-", stdin=json.dumps(node))
    assert kubectl.ok("get", "node", "n3", "-o", "jsonpath={.status.capacity}") == '{"cpu":"2"}'


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


# Found in a second review ----------------------------------------------------------------------------------------


def test_after_client_side_apply_kubectl_takes_over_its_fields_and_others_conflict_with_the_applier(
    kubectl: Any, kube_client: Any, tmp_path: Any
) -> None:
    from kubernetes import client, dynamic
    from kubernetes.client.exceptions import ApiException

    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))  # client-side, karp's own field manager
    changed = (EXAMPLES / "provisioning" / "deployment.yaml").read_text().replace("replicas: 0", "replicas: 2")
    manifest = yaml.safe_load(changed)
    manifest["metadata"]["namespace"] = "default"
    deployments = dynamic.DynamicClient(kube_client).resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(ApiException) as refused:
        deployments.server_side_apply(body=manifest, field_manager="ci")
    assert json.loads(refused.value.body)["details"]["causes"][0]["field"] == ".spec.replicas"
    assert json.loads(refused.value.body)["details"]["causes"][0]["message"].startswith(
        'conflict with "karp-client-side-apply" using apps/v1 at 20'
    )
    (tmp_path / "inflate.yaml").write_text(changed)
    assert kubectl.ok("apply", "--server-side", "-f", str(tmp_path / "inflate.yaml")) == (
        "deployment.apps/inflate serverside-applied\n"
    )
    # kubectl then moves the client-side applier's fields to itself (its own JSON patch of managedFields), and the
    # typed client parses every entry's time.
    read = client.AppsV1Api(kube_client).read_namespaced_deployment("inflate", "default")
    assert (read.spec.replicas, sorted(e.manager for e in read.metadata.managed_fields)) == (
        2,
        ["kubectl", "kubectl-last-applied"],
    )


def test_nodepool_managed_fields_keep_on_an_empty_list_and_a_bad_nodepool_is_invalid_not_a_conflict(
    kubectl: Any, tmp_path: Any
) -> None:
    nodepool = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text()
    (tmp_path / "nodepool.yaml").write_text(nodepool)
    kubectl.ok("apply", "--server-side", "--field-manager=ci", "-f", str(tmp_path / "nodepool.yaml"))
    kubectl.ok("patch", "nodepool", "default", "--type=merge", "-p", '{"metadata":{"managedFields":[]}}')
    assert [m[:2] for m in managers(kubectl, "nodepool", "default")] == [("ci", "Apply")]
    (tmp_path / "heavy.yaml").write_text(nodepool + "  weight: 1000\n")
    refused = kubectl.run("apply", "--server-side", "--field-manager=cd", "-f", str(tmp_path / "heavy.yaml"))
    assert refused.stderr.strip().startswith('The NodePool "default" is invalid: spec.weight: ')


def test_managed_fields_that_cannot_be_read_are_refused_naming_the_entry(kubectl: Any, tmp_path: Any) -> None:
    (tmp_path / "inflate.yaml").write_text((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    kubectl.ok("apply", "--server-side", "-f", str(tmp_path / "inflate.yaml"))
    bad = {
        "manager": "x",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": ["f:spec"],
    }
    refused = kubectl.run(
        "patch", "deployment", "inflate", "--type=merge", "-p", json.dumps({"metadata": {"managedFields": [bad]}})
    )
    assert refused.stderr.strip() == (
        'The Deployment "inflate" is invalid: metadata.managedFields[0]: fieldsV1: expected an object of path '
        "elements, got list"
    )
    assert [m[:2] for m in managers(kubectl, "deployment", "inflate")] == [("kubectl", "Apply")]
