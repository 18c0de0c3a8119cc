"""Issue 27, point 5: inputs that were 500s (none of them logged in production) are the client's errors, answered
as kube-apiserver answers them; a request that does fail inside karpui is answered with a request id, logged as a
JSON line naming it, and counted in /metrics. Run on PostgreSQL too (CI's DATABASE_URL): a NUL, or a value longer
than a column, is refused by PostgreSQL where SQLite takes it."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import socket
import threading

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from karpui import requests
from tests.karp import EXAMPLES, karp, ok
from tests.kubeapi.admin_api import BASE, AdminApi


@pytest.fixture
def api(lab) -> AdminApi:
    return AdminApi()


def status(response) -> tuple[int, str, str]:
    body = json.loads(response.content)
    return response.status_code, body["reason"], body["message"]


def test_a_nul_in_an_api_path_is_a_400(api):
    for path in ("/api/v1/namespaces/de%00fault/pods", "/api/v1/namespaces/default/pods/a%00b", "/api/v1/nodes/%00"):
        response = api.client.get(BASE + path, headers=api.headers)
        assert status(response) == (400, "BadRequest", "the request's path holds a NUL character"), path


def test_a_nul_in_a_dashboard_path_is_a_400(lab):
    client = Client()
    client.force_login(User.objects.create_superuser("root", "", "root-pass-1"))
    for path in ("/nodes/ab%00c/", "/objects/Pod/de%00f/x/", "/nodepools/a%00/", "/disruption/x%00/approve"):
        response = client.get(path) if "approve" not in path else client.post(path)
        assert (response.status_code, response.content) == (400, b"the request's path holds a NUL character\n"), path


def continue_token(body: bytes) -> str:
    return base64.urlsafe_b64encode(body).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        b'{"v": "meta.k8s.io/v1", "rv": 1e999, "start": "default/a"}',
        b'{"v": "meta.k8s.io/v1", "rv": -1e999, "start": "default/a"}',
        b'{"v": "meta.k8s.io/v1", "rv": 1.5, "start": "default/a"}',
        b'{"v": "meta.k8s.io/v1", "rv": 3, "start": "de\\u0000fault/a"}',
        b'{"v": "meta.k8s.io/v1", "rv": 3, "start": ["x"]}',
        b"[]",
    ],
)
def test_a_continue_token_that_cannot_be_read_is_a_400(api, token):
    text = continue_token(token)
    response = api.client.get(BASE + "/api/v1/pods", {"limit": "1", "continue": text}, headers=api.headers)
    assert status(response) == (400, "BadRequest", f"continue key is not valid: {text}")


@pytest.mark.parametrize("body", ["1e999", "-1e999", "1e400", "[1e999]", '{"a": 1e999}'])
def test_a_body_of_a_number_past_floats_is_a_400(api, body):
    response = api.client.generic(
        "POST", BASE + "/api/v1/namespaces/default/pods", body, content_type="application/json", headers=api.headers
    )
    assert response.status_code == 400
    assert json.loads(response.content)["reason"] == "BadRequest"


NAMESPACE = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})


@pytest.mark.parametrize(
    ("manager", "message"),
    [
        ("%00", 'fieldManager: Invalid value: "\\x00": invalid character U+0000 (at position 0)'),
        ("ci%07", 'fieldManager: Invalid value: "ci\\a": invalid character U+0007 (at position 2)'),
        ("a" * 129, "fieldManager: Too long: may not be more than 128 bytes"),
        ("a" * 300, "fieldManager: Too long: may not be more than 128 bytes"),
    ],
)
def test_a_field_manager_kube_apiserver_refuses_is_a_422_naming_the_options(api, manager, message):
    response = api.client.generic(
        "POST",
        f"{BASE}/api/v1/namespaces?fieldManager={manager}",
        NAMESPACE,
        content_type="application/json",
        headers=api.headers,
    )
    assert status(response) == (422, "Invalid", f'CreateOptions.meta.k8s.io "" is invalid: {message}')
    patch = api.client.generic(
        "PATCH",
        f"{BASE}/api/v1/namespaces/default?fieldManager={manager}",
        '{"metadata":{"labels":{"a":"b"}}}',
        content_type="application/merge-patch+json",
        headers=api.headers,
    )
    assert status(patch) == (422, "Invalid", f'PatchOptions.meta.k8s.io "" is invalid: {message}')
    assert api.get("/api/v1/namespaces/team-a")[0] == 404


def test_a_field_manager_of_128_characters_is_taken(api):
    response = api.client.generic(
        "POST",
        f"{BASE}/api/v1/namespaces?fieldManager={'a' * 128}",
        NAMESPACE,
        content_type="application/json",
        headers=api.headers,
    )
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"preconditions": "x"},
            "json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of type v1.Preconditions",
        ),
        (
            {"preconditions": ["x"]},
            "json: cannot unmarshal array into Go struct field DeleteOptions.preconditions of type v1.Preconditions",
        ),
        (
            {"preconditions": {"uid": 5}},
            "json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID",
        ),
        (
            {"preconditions": {"resourceVersion": {"a": 1}}},
            "json: cannot unmarshal object into Go struct field Preconditions.preconditions.resourceVersion of type "
            "string",
        ),
    ],
)
def test_delete_options_preconditions_that_are_not_preconditions_are_a_400(api, options, message):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    response = api.client.generic(
        "DELETE",
        BASE + "/apis/apps/v1/namespaces/default/deployments/inflate",
        json.dumps(options),
        content_type="application/json",
        headers=api.headers,
    )
    assert status(response) == (400, "BadRequest", message)
    assert api.get("/apis/apps/v1/namespaces/default/deployments/inflate")[0] == 200


def long_node_pod(length: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n" * length, "containers": [{"name": "c", "image": "x"}]},
    }


def test_a_pod_whose_node_name_is_no_node_name_is_a_422_and_karp_apply_says_so(api):
    response = api.client.generic(
        "POST",
        BASE + "/api/v1/namespaces/default/pods",
        json.dumps(long_node_pod(300)),
        content_type="application/json",
        headers=api.headers,
    )
    code, reason, message = status(response)
    assert (code, reason) == (422, "Invalid")
    assert message.startswith('Pod "p" is invalid: spec.nodeName: Invalid value: "nnnn')
    assert message.endswith('": must be no more than 253 characters')
    code, _, err = karp("apply", "-f", "-", stdin=yaml.safe_dump(long_node_pod(254)))
    assert code == 1
    assert err.startswith("error: document 1 Pod/p: spec.nodeName: ")
    assert err.strip().endswith("must be no more than 253 characters")
    assert "Traceback" not in err
    assert api.get("/api/v1/namespaces/default/pods/p")[0] == 404


def test_a_failure_inside_karpui_is_a_500_with_a_request_id_logged_as_json_and_counted(api, monkeypatch, caplog):
    from karpui.kubeapi import views

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "_list", broken)
    before = requests.internal_errors()
    with caplog.at_level(logging.ERROR, logger="karpui.requests"):
        response = api.client.get(BASE + "/api/v1/pods", headers={**api.headers, "X-Request-ID": "req-42"})
    assert response.status_code == 500
    assert response["X-Request-ID"] == "req-42"
    assert json.loads(response.content) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Internal error occurred: an unexpected error (request id req-42)",
        "reason": "InternalError",
        "details": {"causes": [{"message": "request id req-42"}]},
        "code": 500,
    }
    [record] = [r for r in caplog.records if r.name == "karpui.requests"]
    assert (record.request_id, record.method, record.path, record.error) == (
        "req-42",
        "GET",
        "/k8s/clusters/lab/api/v1/pods",
        "RuntimeError",
    )
    assert record.exc_info is not None
    assert requests.internal_errors() == before + 1
    metrics = Client().get("/metrics").content.decode()
    assert f"karpui_http_internal_errors_total {float(before + 1)}" in metrics


def test_every_answer_carries_a_request_id_a_sane_one_given_is_kept(lab):
    given = Client().get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert given["X-Request-ID"] == "abc-123"
    made = Client().get("/healthz", headers={"X-Request-ID": "bad id <script>"})
    assert len(made["X-Request-ID"]) == 32 and made["X-Request-ID"] != "bad id <script>"


def test_the_json_log_line_of_an_internal_error_names_its_request_id(api, monkeypatch, capsys):
    """The production log format (python-json-logger through the console handler), not only the record."""
    import logging.config

    from django.conf import settings

    from karpui.kubeapi import views

    logging.config.dictConfig(settings.LOGGING)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "_list", broken)
    api.client.get(BASE + "/api/v1/pods", headers={**api.headers, "X-Request-ID": "req-7"})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    error = next(line for line in lines if line.get("message") == "internal server error")
    assert (error["request_id"], error["levelname"], error["error"], error["path"]) == (
        "req-7",
        "ERROR",
        "RuntimeError",
        "/k8s/clusters/lab/api/v1/pods",
    )
    assert "RuntimeError: a bug" in error["exc_info"]


class _Answers500(threading.Thread):
    """An API server that answers every request 500, on a port of its own."""

    def __init__(self) -> None:
        super().__init__(daemon=True)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}')

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def run(self) -> None:
        self.server.serve_forever()


def kwok_cluster(name: str, server: str, tmp_path) -> None:
    from karpui import models

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "u"}}],
        "current-context": name,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    models.Cluster.objects.create(name=name, mode=models.Cluster.Mode.KWOK, kubeconfig=str(path))


@pytest.mark.parametrize("state", ["down", "answering 500"])
def test_a_nodepool_editor_save_on_a_kwok_cluster_that_is_down_or_failing_is_a_409_saying_so(lab, tmp_path, state):
    from karpui import models

    if state == "down":
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        server = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening: refused
    else:
        failing = _Answers500()
        failing.start()
        server = failing.url
    kwok_cluster("kw", server, tmp_path)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "", "root-pass-1"))
    form = client.get("/nodepools/new/?cluster=kw").context["form"]
    data = {field: ("" if value is None else value) for field, value in form.initial.items()}
    response = client.post("/nodepools/new/?cluster=kw", {**data, "action": "save"})
    assert response.status_code == 409
    page = response.content.decode()
    assert "cluster kw&#x27;s API server" in page and "nothing was saved" in page
    assert not models.NodePool.objects.filter(cluster__name="kw").exists()
    # The admin's save of the same NodePool, and karp apply, say the same.
    manifest = yaml.safe_load(data["manifest"])
    cluster = models.Cluster.objects.get(name="kw")
    admin = client.post("/admin/karpui/nodepool/add/", {"cluster": cluster.id, "manifest": yaml.safe_dump(manifest)})
    assert admin.status_code == 409 and b"nothing was saved" in admin.content
    code, _, err = karp("apply", "--cluster", "kw", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert code == 1 and "cluster kw's API server did not take the write" in err and "Traceback" not in err
    if state != "down":
        failing.server.shutdown()
    else:
        probe.close()
