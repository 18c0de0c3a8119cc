"""kube-apiserver's paths as `kubectl get --raw PATH` reaches them (kubectl 1.32 sends PATH from the server's root,
dropping the kubeconfig's cluster path): the non-resource paths and the resource paths, for the cluster the
kubeconfig's token was made for; and the official Python client's DELETE answers: a Status where kube-apiserver
answers one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.karp import EXAMPLES, ok


@pytest.mark.parametrize(
    ("path", "check"),
    [
        ("/version", lambda text: json.loads(text)["gitVersion"].startswith("v1.34.0")),
        ("/api", lambda text: json.loads(text)["versions"] == ["v1"]),
        ("/api/v1", lambda text: json.loads(text)["groupVersion"] == "v1"),
        ("/apis", lambda text: "karpenter.sh" in [g["name"] for g in json.loads(text)["groups"]]),
        ("/apis/karpenter.sh", lambda text: json.loads(text)["preferredVersion"]["version"] == "v1"),
        ("/healthz", lambda text: text == "ok"),
        ("/livez", lambda text: text == "ok"),
        ("/readyz", lambda text: text == "ok"),
        ("/readyz?verbose", lambda text: text.endswith("readyz check passed\n")),
        ("/openapi/v2", lambda text: json.loads(text)["swagger"] == "2.0"),
        ("/openapi/v3", lambda text: "apis/karpenter.sh/v1" in json.loads(text)["paths"]),
        ("/openapi/v3/api/v1", lambda text: json.loads(text)["openapi"] == "3.0.0"),
        ("/", lambda text: {"/api", "/apis", "/healthz", "/openapi/v3", "/version"} <= set(json.loads(text)["paths"])),
    ],
)
def test_kubectl_get_raw_reaches_every_root_path(kubectl: Any, path: str, check: Any) -> None:
    done = kubectl.run("get", "--raw", path)
    assert done.returncode == 0, done.stderr
    assert check(done.stdout), done.stdout[:500]


def test_an_unknown_root_path_is_kube_apiservers_404(kubectl: Any) -> None:
    done = kubectl.run("get", "--raw", "/nonexistent")
    assert (done.returncode, done.stderr) == (
        1,
        "Error from server (NotFound): the server could not find the requested resource\n",
    )


def test_kubectl_get_raw_reaches_resource_paths_of_the_kubeconfigs_cluster(kubectl: Any, tmp_path: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    ok("advance", "5s")
    pods = json.loads(kubectl.ok("get", "--raw", "/api/v1/namespaces/default/pods"))
    assert (pods["kind"], len(pods["items"])) == ("PodList", 2)
    assert {p["metadata"]["labels"]["app"] for p in pods["items"]} == {"inflate"}
    pools = json.loads(kubectl.ok("get", "--raw", "/apis/karpenter.sh/v1/nodepools"))
    assert [p["metadata"]["name"] for p in pools["items"]] == ["default"]
    one = json.loads(kubectl.ok("get", "--raw", "/apis/apps/v1/namespaces/default/deployments/inflate"))
    assert (one["kind"], one["spec"]["replicas"]) == ("Deployment", 2)

    # A kubeconfig made for another cluster reaches that cluster's objects at the root, as its own API server would.
    ok("cluster", "create", "other")
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: only-there}\n"
    ok("--cluster", "other", "apply", "-f", "-", stdin=namespace)
    other = tmp_path / "other-kubeconfig"
    other.write_text(
        ok(
            "--cluster", "other", "kubeconfig", "--as", "admin",
            "--server", kubectl_server(kubectl), "--certificate-authority", kubectl_ca(kubectl),
        )
    )  # fmt: skip
    elsewhere = type(kubectl)(other, kubectl.home)

    def namespaces(client: Any) -> list[str]:
        return [n["metadata"]["name"] for n in json.loads(client.ok("get", "--raw", "/api/v1/namespaces"))["items"]]

    assert "only-there" in namespaces(elsewhere) and "only-there" not in namespaces(kubectl)
    assert json.loads(elsewhere.ok("get", "--raw", "/api/v1/namespaces/default/pods"))["items"] == []
    assert len(json.loads(kubectl.ok("get", "--raw", "/api/v1/namespaces/default/pods"))["items"]) == 2


def test_a_resource_path_at_the_root_without_a_valid_token_is_unauthorized(kubectl: Any) -> None:
    import ssl
    import urllib.error
    import urllib.request

    server = kubectl_server(kubectl)
    context = ssl.create_default_context(cafile=kubectl_ca(kubectl))
    for headers in ({}, {"Authorization": "Bearer karp_not-a-token"}):
        request = urllib.request.Request(f"{server}/api/v1/namespaces/default/pods", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, context=context)  # noqa: S310 - the test's own server
        body = json.loads(refused.value.read())
        assert (refused.value.code, body["kind"], body["reason"]) == (401, "Status", "Unauthorized")


def kubectl_server(kubectl: Any) -> str:
    """The kubeconfig's server, without the cluster's path."""
    import yaml

    server = yaml.safe_load(kubectl.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return str(server).split("/k8s/", 1)[0]


def kubectl_ca(kubectl: Any) -> str:
    import base64

    import yaml

    data = yaml.safe_load(kubectl.kubeconfig.read_text())["clusters"][0]["cluster"]["certificate-authority-data"]
    path = kubectl.kubeconfig.parent / "ca.pem"
    path.write_bytes(base64.b64decode(data))
    return str(path)


def test_the_python_clients_deletes_answer_as_kube_apiservers(kube_client: Any) -> None:
    from kubernetes import client

    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    apps, core = client.AppsV1Api(kube_client), client.CoreV1Api(kube_client)
    uid = apps.read_namespaced_deployment("inflate", "default").metadata.uid
    status = apps.delete_namespaced_deployment("inflate", "default")
    assert isinstance(status, client.V1Status)
    assert (status.status, status.details.name, status.details.group, status.details.kind, status.details.uid) == (
        "Success",
        "inflate",
        "apps",
        "deployments",
        uid,
    )
    # kube-apiserver answers a namespace's deletion with the namespace (the client reads it into its V1Status).
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-a")))
    namespace = core.delete_namespace("team-a")
    assert (namespace.kind, namespace.api_version) == ("Namespace", "v1")
    custom = client.CustomObjectsApi(kube_client)
    gone = custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default")
    assert (gone["kind"], gone["status"], gone["details"]["kind"], gone["details"]["group"]) == (
        "Status",
        "Success",
        "nodepools",
        "karpenter.sh",
    )
