"""The OpenAPI documents kubectl reads: what tells it how to patch and that the server validates fields, the
schemas `explain` prints, and the unknown-field check built on them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from karpui.kubeapi import openapi
from karpui.kubeapi.auth import token_create

BASE = "/k8s/clusters/lab"


@pytest.fixture
def get(lab: Any) -> Any:
    token = token_create(user=User.objects.create_user("viewer", password="viewer-pass-1"))
    client = Client()

    def fetch(path: str) -> Any:
        response = client.get(BASE + path, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.content
        return json.loads(response.content)

    return fetch


def test_the_v3_index_points_at_one_document_per_group_version(get: Any) -> None:
    index = get("/openapi/v3")["paths"]
    assert set(index) == {
        "api/v1",
        "apis/apps/v1",
        "apis/coordination.k8s.io/v1",
        "apis/policy/v1",
        "apis/rbac.authorization.k8s.io/v1",
        "apis/resource.k8s.io/v1",
        "apis/storage.k8s.io/v1",  # StorageClass
        "apis/karpenter.sh/v1",
        "apis/karpenter.sh/v1beta1",
        "apis/karpenter.sh/v1alpha1",
        "apis/karpenter.kwok.sh/v1alpha1",
        "apis/karpenter.k8s.aws/v1",
        "apis/karpenter.k8s.aws/v1beta1",
        "apis/test.karpenter.sh/v1alpha1",
        "apis/autoscaling.x-k8s.io/v1beta1",  # CapacityBuffer (Karpenter v1.14)
        "apis/karpui.dev/v1alpha1",
    }
    url = index["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")  # kubectl keeps the cluster's prefix before it
    apps = get(url)
    assert apps["openapi"] == "3.0.0"


def patch_of(document: dict[str, Any], path: str) -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"][path]["patch"]
    return operation


def test_patch_operations_take_field_validation_and_strategic_merge_only_for_built_in_kinds(get: Any) -> None:
    apps = get(get("/openapi/v3")["paths"]["apis/apps/v1"]["serverRelativeURL"])
    patch = patch_of(apps, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "kind": "Deployment", "version": "v1"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    karpenter = get(get("/openapi/v3")["paths"]["apis/karpenter.sh/v1"]["serverRelativeURL"])
    patch = patch_of(karpenter, "/apis/karpenter.sh/v1/nodepools/{name}")
    assert sorted(patch["requestBody"]["content"]) == ["application/json-patch+json", "application/merge-patch+json"]
    schema = karpenter["components"]["schemas"]["sh.karpenter.v1.NodePool"]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "karpenter.sh", "kind": "NodePool", "version": "v1"}]
    assert schema["properties"]["metadata"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    }
    # Read-only kinds have no write operations.
    own = get(get("/openapi/v3")["paths"]["apis/karpui.dev/v1alpha1"]["serverRelativeURL"])
    assert "patch" not in own["paths"]["/apis/karpui.dev/v1alpha1/disruptioncommands/{name}"]


def test_the_v2_document_holds_every_definition_in_swagger_form(get: Any) -> None:
    document = get("/openapi/v2")
    assert document["swagger"] == "2.0"
    assert "io.k8s.api.core.v1.Pod" in document["definitions"]
    assert "sh.karpenter.v1beta1.NodePool" in document["definitions"]
    text = json.dumps(document["definitions"])
    assert '"anyOf"' not in text and '"nullable"' not in text  # OpenAPI 3 only


def test_unknown_fields_are_named_with_their_paths() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"any": "label"}, "colour": "blue"},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "web", "imag": "nginx"}], "nodeSelector": {"a": "b"}}},
        },
    }
    assert openapi.unknown_fields("apps", "v1", "Deployment", deployment) == [
        "metadata.colour",
        "spec.template.spec.containers[0].imag",
    ]
    nodepool = {"metadata": {"name": "x"}, "spec": {"template": {"spec": {"requirements": [], "kubelet": {}}}}}
    assert openapi.unknown_fields("karpenter.sh", "v1", "NodePool", nodepool) == ["spec.template.spec.kubelet"]
    assert openapi.unknown_fields("karpenter.sh", "v1beta1", "NodePool", nodepool) == []  # v1beta1 had kubelet
    command = {"metadata": {"name": "x"}, "spec": {"anything": {"goes": 1}}}
    assert openapi.unknown_fields("karpui.dev", "v1alpha1", "DisruptionCommand", command) == []


def test_kubectl_explain_reads_karpenter_s_and_the_built_in_schemas(kubectl: Any) -> None:
    text = kubectl.ok("explain", "nodepools.spec.disruption.consolidateAfter")
    assert text.splitlines()[:3] == ["GROUP:      karpenter.sh", "KIND:       NodePool", "VERSION:    v1"]
    assert "ConsolidateAfter is the duration the controller will wait" in text
    assert "Number of desired pods" in kubectl.ok("explain", "deployment.spec.replicas")
    assert "VERSION:    v1beta1" in kubectl.ok("explain", "nodepools", "--api-version", "karpenter.sh/v1beta1")


def test_the_engines_patch_strategies_are_those_of_the_vendored_openapi() -> None:
    """provisioner/apimachinery/strategies.json is written from kubernetes.json by the vendor tool; they agree."""
    import json

    from karpui.kubeapi.openapi import vendor

    definitions = json.loads((vendor.HERE / "kubernetes.json").read_text())["definitions"]
    assert json.loads(vendor.STRATEGIES.read_text()) == vendor.patch_strategies(definitions)


def test_collections_can_be_deleted_where_discovery_says_so_and_namespaces_cannot(get: Any) -> None:
    core = get(get("/openapi/v3")["paths"]["api/v1"]["serverRelativeURL"])
    assert sorted(core["paths"]["/api/v1/namespaces"]) == ["get", "parameters", "post"]
    assert "delete" in core["paths"]["/api/v1/namespaces/{namespace}/pods"]
