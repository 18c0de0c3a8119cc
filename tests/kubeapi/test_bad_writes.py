"""Bad write requests get the status code and Status body kube-apiserver gives, and write nothing: malformed
bodies, a kind or version or namespace or name that does not match the URL, unknown fields under Strict field
validation, a strategic merge patch of a custom resource, writes to read-only kinds, no token."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from karpui import models
from karpui.kubeapi.auth import token_create

BASE = "/k8s/clusters/lab"


class Writer:
    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def send(self, method: str, path: str, body: Any, content_type: str = "application/json") -> tuple[int, Any]:
        data = body if isinstance(body, str) else json.dumps(body)
        response = self.client.generic(method, BASE + path, data, content_type=content_type, headers=self.headers)
        return response.status_code, json.loads(response.content)


@pytest.fixture
def writer(lab: Any) -> Writer:
    return Writer(token_create(user=User.objects.create_superuser("admin", "", "admin-pass-1")))


@pytest.fixture(autouse=True)
def nothing_is_written(lab: Any) -> Any:
    before = (models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count(), models.NodePool.objects.count())
    yield
    after = (models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count(), models.NodePool.objects.count())
    assert after == before


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web"}]}},
    },
}
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


def test_malformed_json_is_a_bad_request(writer: Writer) -> None:
    code, body = writer.send("POST", DEPLOYMENTS, '{"apiVersion": "apps/v1", "kind": ')
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"].startswith(
        "the object provided is unrecognized (must be of type Deployment): couldn't get version/kind; json parse error:"
    )


def test_a_body_for_another_version_kind_namespace_or_name_is_refused(writer: Writer) -> None:
    assert writer.send("POST", DEPLOYMENTS, {**DEPLOYMENT, "apiVersion": "v1"}) == (
        400,
        status(400, "BadRequest", "the API version in the data (v1) does not match the expected API version (apps/v1)"),
    )
    assert writer.send("POST", DEPLOYMENTS, {**DEPLOYMENT, "kind": "DaemonSet"})[1]["message"] == (
        'DaemonSet in version "v1" cannot be handled as a Deployment: no kind "DaemonSet" is registered for version '
        '"apps/v1"'
    )
    elsewhere = {**DEPLOYMENT, "metadata": {"name": "web", "namespace": "other"}}
    assert writer.send("POST", DEPLOYMENTS, elsewhere)[1]["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    assert writer.send("PUT", f"{DEPLOYMENTS}/api", DEPLOYMENT)[1]["message"] == (
        "the name of the object (web) does not match the name on the URL (api)"
    )
    code, body = writer.send("POST", DEPLOYMENTS, {**DEPLOYMENT, "metadata": {}})
    assert (code, body["reason"], body["details"]["causes"]) == (
        422,
        "Invalid",
        [
            {
                "reason": "FieldValueInvalid",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            }
        ],
    )


def test_unknown_fields_under_strict_validation_are_all_named(writer: Writer) -> None:
    typo = json.loads(json.dumps(DEPLOYMENT))
    typo["spec"]["replica"] = 2
    typo["spec"]["template"]["spec"]["containers"][0]["imag"] = "nginx"
    assert writer.send("POST", f"{DEPLOYMENTS}?fieldValidation=Strict", typo) == (
        400,
        status(
            400,
            "BadRequest",
            'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field '
            '"spec.template.spec.containers[0].imag", unknown field "spec.replica"',  # in the document's order
        ),
    )
    code, body = writer.send("POST", f"{DEPLOYMENTS}?fieldValidation=Sloppy", typo)
    assert (code, body["message"]) == (400, "fieldValidation parameter unsupported: Sloppy")


def test_patches_need_a_media_type_the_kind_takes(writer: Writer) -> None:
    nodepool = "/apis/karpenter.sh/v1/nodepools/default"
    assert writer.send("PATCH", nodepool, {"spec": {}}, "application/strategic-merge-patch+json") == (
        415,
        status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json",
        ),
    )
    code, body = writer.send("PATCH", nodepool, {"op": "add"}, "application/json-patch+json")
    assert (code, body["reason"]) == (400, "BadRequest")
    code, body = writer.send("PATCH", f"{DEPLOYMENTS}/web", [], "application/merge-patch+json")
    assert (code, body["reason"]) == (400, "BadRequest")
    code, body = writer.send(
        "PATCH",
        f"{nodepool}?fieldValidation=Strict",
        {"spec": {"disruption": {"consolidateAftr": "1m"}}},
        "application/merge-patch+json",
    )
    assert (code, body["message"]) == (
        400,
        'NodePool in version "v1" cannot be handled as a NodePool: strict decoding error: unknown field '
        '"spec.disruption.consolidateAftr"',
    )


def test_read_only_kinds_and_wrong_methods_are_405(writer: Writer) -> None:
    assert writer.send("POST", "/apis/karpui.dev/v1alpha1/disruptioncommands", {}) == (
        405,
        status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource"),
    )
    assert writer.send("POST", f"{DEPLOYMENTS}/web", DEPLOYMENT)[0] == 405  # create names no object


def test_writes_without_a_token_are_401(lab: Any) -> None:
    code, body = Writer(None).send("POST", DEPLOYMENTS, DEPLOYMENT)
    assert (code, body["reason"]) == (401, "Unauthorized")
