"""Bad write requests get the status code and Status body kube-apiserver gives, and write nothing: malformed
bodies (JSON and YAML), bodies past the loader's bounds (aliases, depth, size), a kind or version or namespace or
name that does not match the URL, unknown or repeated fields under Strict field validation, a strategic merge patch
of a custom resource, a stale resourceVersion, writes to read-only kinds, a viewer's write, no token."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from karpui import models
from karpui.kubeapi.auth import token_create
from tests.karp import EXAMPLES, ok

BASE = "/k8s/clusters/lab"


class Writer:
    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def send(self, method: str, path: str, body: Any, content_type: str = "application/json") -> tuple[int, Any]:
        response = self.response(method, path, body, content_type)
        return response.status_code, json.loads(response.content)

    def response(self, method: str, path: str, body: Any, content_type: str = "application/json") -> Any:
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return self.client.generic(method, BASE + path, data, content_type=content_type, headers=self.headers)


@pytest.fixture
def writer(lab: Any) -> Writer:
    return Writer(token_create(user=User.objects.create_superuser("admin", "", "admin-pass-1")))


@pytest.fixture
def inflate(lab: Any) -> None:
    """The getting-started Deployment, there before the bad request."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))


@pytest.fixture
def nodes(lab: Any) -> None:
    """The static-nodes example's Nodes (kind-worker among them), there before the bad request."""
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))


@pytest.fixture(autouse=True)
def nothing_is_written(lab: Any, request: pytest.FixtureRequest) -> Any:
    for given in ("inflate", "nodes"):  # made first, so what the test starts with is counted as before
        if given in request.fixturenames:
            request.getfixturevalue(given)
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
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
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
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
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


def test_malformed_yaml_is_a_bad_request_in_yamls_words(writer: Writer) -> None:
    body = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web\n"
    assert writer.send("POST", DEPLOYMENTS, body, "application/yaml") == (
        400,
        status(
            400,
            "BadRequest",
            "the object provided is unrecognized (must be of type Deployment): error converting YAML to JSON: "
            "malformed YAML at line 4, column 1: did not find expected ',' or '}' "
            "(61706956657273696f6e3a20617070732f76310a6b696e643a204465706c ...)",
        ),
    )


def alias_bomb(levels: int = 8) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def test_a_yaml_alias_bomb_is_refused_before_it_expands(writer: Writer) -> None:
    # 560 bytes that expand to 9^8 strings: it took 33 s and ~1.2 GB, and was stored.
    bomb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\n" + alias_bomb()
    bomb += "\nspec: {minAvailable: *a8, selector: {matchLabels: {app: w}}}"
    assert len(bomb) == 560
    tracemalloc.start()
    try:
        code, body = writer.send(
            "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", bomb, "application/yaml"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"].startswith(
        "the object provided is unrecognized (must be of type PodDisruptionBudget): error converting YAML to JSON: "
        "a4: line 8, column 10: YAML aliases expand to more than 10000 nodes ("
    )
    assert peak < 16 * 2**20


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "problem"),
    [
        ("POST", DEPLOYMENTS, DEEP, "application/json", "json parse error: nested deeper than 100 levels"),
        (
            "POST",
            DEPLOYMENTS,
            '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":' + DEEP + "}",
            "application/json",
            "json parse error: nested deeper than 100 levels",
        ),
        ("PATCH", f"{DEPLOYMENTS}/web", '{"spec":' + DEEP + "}", "application/merge-patch+json", "nested deeper"),
        (
            "PATCH",
            f"{DEPLOYMENTS}/web",
            '{"spec":' + '{"a":' * 150 + "1" + "}" * 150 + "}",
            "application/strategic-merge-patch+json",
            "json parse error: nested deeper than 100 levels",
        ),
        ("POST", DEPLOYMENTS, "x: " + "[" * 200 + "]" * 200, "application/yaml", "nested deeper than 100 levels"),
        ("POST", DEPLOYMENTS, '{"kind": NaN}', "application/json", "must be a finite number, got NaN"),
        ("POST", DEPLOYMENTS, '{"kind": "a\\u0000b"}', "application/json", "kind: NUL characters"),
        ("POST", DEPLOYMENTS, b'{"kind": "caf\xe9"}', "application/json", "not UTF-8 text (byte 0xe9 at offset 13)"),
        (
            "POST",
            DEPLOYMENTS,
            json.dumps({**DEPLOYMENT, "metadata": {"name": "web", "annotations": {"a": "x" * 2_000_000}}}),
            "application/json",
            "over the API server's limit of 1572864 (1.5 MiB)",
        ),
    ],
    ids=[
        "deep-json",
        "deep-spec",
        "deep-merge-patch",
        "deep-strategic-patch",
        "deep-yaml",
        "nan",
        "nul",
        "latin-1",
        "2-mb",
    ],
)
def test_bodies_past_the_loaders_bounds_are_bad_requests(
    writer: Writer, method: str, path: str, body: str, content_type: str, problem: str
) -> None:
    response = writer.response(method, path, body, content_type)
    assert (response.status_code, json.loads(response.content)["reason"]) == (400, "BadRequest")
    assert problem in json.loads(response.content)["message"]
    assert b"Traceback" not in response.content


def test_a_body_over_3_mib_is_413(writer: Writer) -> None:
    body = json.dumps({**DEPLOYMENT, "metadata": {"name": "web", "annotations": {"a": "x" * 3 * 2**20}}})
    assert writer.send("POST", DEPLOYMENTS, body) == (
        413,
        status(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    )


TWICE_JSON = json.dumps(DEPLOYMENT)[:-1] + ', "spec": ' + json.dumps(DEPLOYMENT["spec"]) + "}"
TWICE_YAML = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: web, image: nginx}]}}
"""


def test_repeated_fields_under_strict_validation_are_refused_as_kube_apiserver_refuses_them(writer: Writer) -> None:
    assert writer.send("POST", f"{DEPLOYMENTS}?fieldValidation=Strict", TWICE_JSON) == (
        400,
        status(
            400,
            "BadRequest",
            'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
            'duplicate field "spec"',
        ),
    )
    assert writer.send("POST", f"{DEPLOYMENTS}?fieldValidation=Strict", TWICE_YAML, "application/yaml") == (
        400,
        status(
            400,
            "BadRequest",
            'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
            'yaml: unmarshal errors:\n  line 8: key "spec" already set in map',
        ),
    )
    patch = '{"metadata": {"labels": {"a": "1", "a": "2"}}}'
    code, body = writer.send(
        "PATCH", f"{DEPLOYMENTS}/web?fieldValidation=Strict", patch, "application/merge-patch+json"
    )
    assert (code, body["message"]) == (
        400,
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'duplicate field "metadata.labels.a"',
    )


def test_repeated_fields_are_a_warning_under_warn_and_nothing_under_ignore(writer: Writer) -> None:
    # dryRun=All: accepted and answered as a create, but nothing is stored.
    warned = writer.response("POST", f"{DEPLOYMENTS}?fieldValidation=Warn&dryRun=All", TWICE_JSON)
    assert (warned.status_code, warned["Warning"]) == (201, '299 - "duplicate field \\"spec\\""')
    warned = writer.response("POST", f"{DEPLOYMENTS}?dryRun=All", TWICE_YAML, "application/yaml")
    assert (warned.status_code, warned["Warning"]) == (
        201,
        '299 - "yaml: unmarshal errors:   line 8: key \\"spec\\" already set in map"',
    )
    assert json.loads(warned.content)["spec"]["replicas"] == 2  # the last one, as kube-apiserver keeps it
    ignored = writer.response("POST", f"{DEPLOYMENTS}?fieldValidation=Ignore&dryRun=All", TWICE_JSON)
    assert (ignored.status_code, ignored.has_header("Warning")) == (201, False)


def test_a_put_with_a_stale_resource_version_is_a_conflict(writer: Writer, inflate: None) -> None:
    path = f"{DEPLOYMENTS}/inflate"
    code, current = writer.send("GET", path, "")
    assert code == 200
    stale = {
        **current,
        "metadata": {**current["metadata"], "resourceVersion": "1"},
        "spec": {**current["spec"], "replicas": 3},
    }
    assert writer.send("PUT", path, stale) == (
        409,
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on deployments.apps "inflate": the object has been modified; please '
            "apply your changes to the latest version and try again",
            {"name": "inflate", "group": "apps", "kind": "deployments"},
        ),
    )
    assert writer.send("GET", path, "") == (200, current)


def test_a_viewers_write_is_forbidden(lab: Any, inflate: None) -> None:
    viewer = Writer(token_create(user=User.objects.create_user("vera", password="vera-pass-1")))
    code, current = viewer.send("GET", f"{DEPLOYMENTS}/inflate", "")
    assert code == 200
    scaled = {**current, "spec": {**current["spec"], "replicas": 3}}
    assert viewer.send("PUT", f"{DEPLOYMENTS}/inflate", scaled) == (
        403,
        status(
            403,
            "Forbidden",
            'deployments.apps "inflate" is forbidden: User "vera" cannot update resource "deployments" in API '
            'group "apps" in the namespace "default"',
            {"name": "inflate", "group": "apps", "kind": "deployments"},
        ),
    )
    assert viewer.send("GET", f"{DEPLOYMENTS}/inflate", "") == (200, current)


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "-4"}}}


def test_a_nodes_status_is_checked_as_karp_apply_checks_it(writer: Writer, nodes: None) -> None:
    # A Node registers with its status, which the scheduler packs against: a create kept it unchecked (201).
    code, body = writer.send("POST", "/api/v1/nodes", NODE)
    assert (code, body["details"]["causes"]) == (
        422,
        [
            {
                "reason": "FieldValueInvalid",
                "message": "must be greater than or equal to 0, got -4",
                "field": "status.allocatable.cpu",
            }
        ],
    )
    code, current = writer.send("GET", "/api/v1/nodes/kind-worker", "")
    assert code == 200
    negative = {**current, "status": {**current["status"], "allocatable": {"cpu": "-4"}}}
    code, body = writer.send("PUT", "/api/v1/nodes/kind-worker/status", negative)
    assert (code, body["details"]["causes"][0]["field"]) == (422, "status.allocatable.cpu")
    assert writer.send("GET", "/api/v1/nodes/kind-worker", "") == (200, current)


APPLY = "application/apply-patch+yaml"
INFLATE_CONFIG = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "inflate"},
    "spec": {
        "selector": {"matchLabels": {"app": "inflate"}},
        "template": {
            "metadata": {"labels": {"app": "inflate"}},
            "spec": {"containers": [{"name": "inflate", "image": "pause"}]},
        },
    },
}


def test_a_bad_server_side_apply_is_refused_naming_the_problem_and_creates_nothing(writer: Writer) -> None:
    inflate = f"{DEPLOYMENTS}/inflate"
    assert writer.send("PATCH", inflate, INFLATE_CONFIG, APPLY) == (
        400,
        status(400, "BadRequest", "fieldManager is required for apply requests"),
    )
    managed = {**INFLATE_CONFIG, "metadata": {"name": "inflate", "managedFields": [{"manager": "x"}]}}
    assert writer.send("PATCH", f"{inflate}?fieldManager=ci", managed, APPLY) == (
        400,
        status(400, "BadRequest", "metadata.managedFields must be nil"),
    )
    typo = {**INFLATE_CONFIG, "spec": {**INFLATE_CONFIG["spec"], "replica": 2}}
    code, body = writer.send("PATCH", f"{inflate}?fieldManager=ci&fieldValidation=Strict", typo, APPLY)
    assert (code, body["message"]) == (
        400,
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.replica"',
    )
    code, body = writer.send("PATCH", f"{inflate}?fieldManager=ci&force=maybe", INFLATE_CONFIG, APPLY)
    assert (code, body["message"]) == (400, 'force: Invalid value: "maybe": must be true or false')
    pool = {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {}}
    code, body = writer.send("PATCH", "/apis/karpenter.sh/v1beta1/nodepools/default?fieldManager=ci", pool, APPLY)
    assert (code, body["message"]) == (
        415,
        "server-side apply of karpenter.sh/v1beta1 is not served: apply nodepools at karpenter.sh/v1",
    )
    assert writer.send("GET", inflate, None)[0] == 404


def test_a_write_into_a_namespace_that_does_not_exist_names_the_namespace(writer: Writer) -> None:
    nowhere = "/apis/apps/v1/namespaces/nope/deployments"
    config = {**INFLATE_CONFIG, "metadata": {"name": "inflate", "namespace": "nope"}}
    expected = (404, status(404, "NotFound", 'namespaces "nope" not found', {"name": "nope", "kind": "namespaces"}))
    assert writer.send("POST", nowhere, config) == expected
    assert writer.send("PATCH", f"{nowhere}/inflate?fieldManager=ci", config, APPLY) == expected
