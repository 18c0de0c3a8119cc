"""Writes answered as kube-apiserver answers them where a client relies on it: dry runs asked for in the body
(kubectl and client-go put dryRun in DeleteOptions and an Eviction's deleteOptions) write nothing and answer with the
live resourceVersion; the namespaces kube-apiserver never deletes; bodies without apiVersion and kind (the Python
client's models); DELETE of a collection; patches that would rename an object, change its uid, miss a JSON patch
path or are no JSON; and protobuf bodies, refused with 415."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from karpui import models
from karpui.clusters import lab as labs
from karpui.kubeapi.auth import token_create
from tests.karp import EXAMPLES, karp, ok
from tests.kubeapi.admin_api import BASE, AdminApi
from tests.kubeapi.test_bad_writes import status

INFLATE = "/apis/apps/v1/namespaces/default/deployments/inflate"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
PODS = "/api/v1/namespaces/default/pods"
NAMESPACES = "/api/v1/namespaces"
MERGE = "application/merge-patch+json"


def written() -> tuple[int, int]:
    """What the lab has stored: every write adds a change-log entry, so equal counts mean nothing was written."""
    return models.ChangeLogEntry.objects.count(), models.KubeObject.objects.count()


def raw(api: AdminApi, method: str, path: str, body: bytes, content_type: str) -> tuple[int, Any]:
    response = api.client.generic(method, BASE + path, body, content_type=content_type, headers=api.headers)
    return response.status_code, json.loads(response.content)


def pod(name: str, namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }


@pytest.fixture
def api(lab: Any) -> AdminApi:
    """The getting-started experiment at three replicas, and an admin's client."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    labs.advance("lab", 5)
    return AdminApi()


@pytest.fixture
def team_b(api: AdminApi) -> AdminApi:
    """Namespace team-b with three bare pods: a1 and a2 labelled app=a, b1 app=b."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}
    assert api.send("POST", NAMESPACES, namespace)[0] == 201
    for name, app in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        assert api.send("POST", "/api/v1/namespaces/team-b/pods", pod(name, "team-b", app))[0] == 201
    return api


# Dry runs ---------------------------------------------------------------------------------------------------------


def test_a_delete_whose_delete_options_ask_for_a_dry_run_deletes_nothing(api: AdminApi) -> None:
    # What `kubectl delete deploy inflate --dry-run=server` and the Python client's V1DeleteOptions(dry_run=["All"])
    # send: the query says nothing.
    deployment = api.get(INFLATE)[1]
    before = written()
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background", "dryRun": ["All"]}
    code, answered = api.send("DELETE", INFLATE, options)
    assert (code, answered["kind"], answered["details"]["uid"]) == (200, "Status", deployment["metadata"]["uid"])
    assert written() == before
    assert api.get(INFLATE)[1] == deployment
    assert len(api.items(PODS)) == 3


def test_a_dry_run_delete_of_an_object_a_finalizer_holds_answers_it_marked_and_writes_nothing(api: AdminApi) -> None:
    hold = {"metadata": {"finalizers": ["example.com/hold"]}}
    assert api.send("PATCH", INFLATE, hold, MERGE)[0] == 200
    deployment = api.get(INFLATE)[1]
    before = written()
    code, answered = api.send("DELETE", INFLATE, {"kind": "DeleteOptions", "dryRun": ["All"]})
    assert code == 200
    assert answered["metadata"]["finalizers"] == ["example.com/hold"] and answered["metadata"]["deletionTimestamp"]
    assert answered["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]
    assert written() == before
    assert "deletionTimestamp" not in api.get(INFLATE)[1]["metadata"]


def test_an_eviction_whose_delete_options_ask_for_a_dry_run_evicts_nothing(api: AdminApi) -> None:
    # kubectl drain --dry-run=server's eviction, verbatim.
    pods = api.items(PODS)
    name = pods[0]["metadata"]["name"]
    eviction = {
        "kind": "Eviction",
        "apiVersion": "policy/v1",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": None},
        "deleteOptions": {"dryRun": ["All"]},
    }
    before = written()
    assert api.send("POST", f"{PODS}/{name}/eviction", eviction) == (
        201,
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
    )
    assert written() == before
    assert api.items(PODS) == pods


def test_a_dry_run_patch_answers_the_patched_object_under_the_live_resource_version(api: AdminApi) -> None:
    deployment = api.get(INFLATE)[1]
    before = written()
    code, answered = api.send("PATCH", f"{INFLATE}?dryRun=All", {"spec": {"replicas": 7}}, MERGE)
    assert (code, answered["spec"]["replicas"]) == (200, 7)
    assert answered["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]
    assert written() == before
    assert api.get(INFLATE)[1] == deployment


def test_a_dry_run_create_answers_the_object_without_a_resource_version_and_stores_nothing(api: AdminApi) -> None:
    before = written()
    code, answered = api.send("POST", f"{NAMESPACES}?dryRun=All", {"metadata": {"name": "team-c"}})
    assert (code, answered["metadata"]["name"], answered["status"]) == (201, "team-c", {"phase": "Active"})
    assert answered["metadata"]["uid"] and "resourceVersion" not in answered["metadata"]
    assert written() == before
    assert api.get(f"{NAMESPACES}/team-c")[0] == 404


def test_a_dry_run_value_other_than_all_is_refused_and_deletes_nothing(api: AdminApi) -> None:
    before = written()
    message = (
        'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"true"}: supported values: "All"'
    )
    cause = {
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: []string{"true"}: supported values: "All"',
        "field": "dryRun",
    }
    details = {"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [cause]}
    assert api.send("DELETE", f"{INFLATE}?dryRun=true") == (422, status(422, "Invalid", message, details))
    assert api.send("DELETE", INFLATE, {"dryRun": ["true"]}) == (422, status(422, "Invalid", message, details))
    assert written() == before


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


# Bodies without apiVersion and kind ---------------------------------------------------------------------------------


def test_a_create_or_update_without_api_version_and_kind_takes_them_from_the_url(api: AdminApi) -> None:
    code, namespace = api.send("POST", NAMESPACES, {"metadata": {"name": "team-c"}})
    assert (code, namespace["apiVersion"], namespace["kind"]) == (201, "v1", "Namespace")
    deployment = api.get(INFLATE)[1]
    body = {"metadata": {"name": "web"}, "spec": {**deployment["spec"], "replicas": 0}}
    code, created = api.send("POST", DEPLOYMENTS, body)
    assert (code, created["apiVersion"], created["kind"]) == (201, "apps/v1", "Deployment")
    current = api.get(f"{DEPLOYMENTS}/web")[1]  # as the lab's controllers left it
    replaced = {"metadata": current["metadata"], "spec": {**current["spec"], "replicas": 2}}
    code, updated = api.send("PUT", f"{DEPLOYMENTS}/web", replaced)
    assert (code, updated["kind"], updated["spec"]["replicas"]) == (200, "Deployment", 2)
    # What a body does say is still checked against the URL.
    assert api.send("POST", DEPLOYMENTS, {"kind": "DaemonSet", "metadata": {"name": "x"}})[1]["message"] == (
        'DaemonSet in version "v1" cannot be handled as a Deployment: no kind "DaemonSet" is registered for version '
        '"apps/v1"'
    )


def test_a_server_side_apply_without_api_version_or_kind_is_refused_as_its_field_manager_refuses_it(
    api: AdminApi,
) -> None:
    before = written()
    for config, problem in (
        ({"metadata": {"name": "web"}}, "invalid object type: /, Kind="),
        ({"kind": "Deployment", "metadata": {"name": "web"}}, "invalid object type: /, Kind=Deployment"),
        ({"apiVersion": "apps/v1", "metadata": {"name": "web"}}, "invalid object type: apps/v1, Kind="),
    ):
        response = api.client.patch(
            f"{BASE}{DEPLOYMENTS}/web?fieldManager=kubectl",
            json.dumps(config),
            content_type="application/apply-patch+yaml",
            headers=api.headers,
        )
        assert (response.status_code, json.loads(response.content)) == (400, status(400, "BadRequest", problem))
    assert written() == before


# DELETE of a collection -------------------------------------------------------------------------------------------


def test_discovery_advertises_deletecollection_for_pods_but_not_for_namespaces(api: AdminApi) -> None:
    listed = {r["name"]: r["verbs"] for r in api.get("/api/v1")[1]["resources"]}
    aggregated = api.get("/api", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")[1]
    [core] = aggregated["items"]
    served = {r["resource"]: r["verbs"] for r in core["versions"][0]["resources"]}
    for verbs in (listed, served):
        assert verbs["namespaces"] == ["create", "delete", "get", "list", "patch", "update", "watch"]
        assert "deletecollection" in verbs["pods"]


def test_a_collection_delete_deletes_what_its_selector_lists_and_answers_the_list(team_b: AdminApi) -> None:
    code, answered = team_b.send("DELETE", "/api/v1/namespaces/team-b/pods?labelSelector=app%3Da")
    assert (code, answered["kind"], answered["apiVersion"]) == (200, "PodList", "v1")
    assert [item["metadata"]["name"] for item in answered["items"]] == ["a1", "a2"]
    assert answered["metadata"]["resourceVersion"]
    assert [p["metadata"]["name"] for p in team_b.items("/api/v1/namespaces/team-b/pods")] == ["b1"]
    assert len(team_b.items(PODS)) == 3  # another namespace's pods are not the collection's


def test_a_dry_run_collection_delete_answers_the_list_and_deletes_nothing(team_b: AdminApi) -> None:
    before = written()
    code, answered = team_b.send("DELETE", "/api/v1/namespaces/team-b/pods", {"dryRun": ["All"]})
    assert (code, [item["metadata"]["name"] for item in answered["items"]]) == (200, ["a1", "a2", "b1"])
    assert written() == before


def test_a_cluster_scoped_collection_delete_takes_field_selectors(lab: Any) -> None:
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    api = AdminApi()
    names = [node["metadata"]["name"] for node in api.items("/api/v1/nodes")]
    assert "kind-worker" in names
    code, answered = api.send("DELETE", "/api/v1/nodes?fieldSelector=metadata.name%3Dkind-worker")
    assert (code, [item["metadata"]["name"] for item in answered["items"]]) == (200, ["kind-worker"])
    assert [node["metadata"]["name"] for node in api.items("/api/v1/nodes")] == [n for n in names if n != "kind-worker"]


def test_collections_kube_apiserver_deletes_no_collection_of_are_405(team_b: AdminApi) -> None:
    before = written()
    not_allowed = status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    assert team_b.send("DELETE", NAMESPACES) == (405, not_allowed)
    assert team_b.send("DELETE", "/api/v1/pods") == (405, not_allowed)  # every namespace's: only listed
    assert written() == before


def test_a_collection_delete_by_a_user_who_may_not_delete_is_forbidden_even_when_it_is_empty(team_b: AdminApi) -> None:
    viewer = Client()
    headers = {"Authorization": f"Bearer {token_create(user=User.objects.create_user('vera', password='vera-pass-1'))}"}
    before = written()
    for selector in ("app%3Da", "app%3Dnone"):  # two pods, and none
        response = viewer.delete(f"{BASE}/api/v1/namespaces/team-b/pods?labelSelector={selector}", headers=headers)
        assert (response.status_code, json.loads(response.content)) == (
            403,
            status(
                403,
                "Forbidden",
                'pods is forbidden: User "vera" cannot deletecollection resource "pods" in API group "" in the '
                'namespace "team-b"',
                {"kind": "pods"},
            ),
        ), selector
    assert written() == before


# Patches ----------------------------------------------------------------------------------------------------------


def test_a_patch_that_renames_the_object_is_a_bad_request(api: AdminApi) -> None:
    before = written()
    assert api.send("PATCH", INFLATE, {"metadata": {"name": "other"}}, MERGE) == (
        400,
        status(400, "BadRequest", "the name of the object (other) does not match the name on the URL (inflate)"),
    )
    assert api.send("PATCH", INFLATE, {"metadata": {"namespace": "kube-system"}}, MERGE) == (
        400,
        status(
            400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request"
        ),
    )
    assert written() == before


def test_a_patch_of_the_uid_is_invalid_and_a_put_of_another_uid_a_conflict(api: AdminApi) -> None:
    deployment = api.get(INFLATE)[1]
    uid = deployment["metadata"]["uid"]
    before = written()
    assert api.send("PATCH", INFLATE, {"metadata": {"uid": "not-its-uid"}}, MERGE) == (
        422,
        status(
            422,
            "Invalid",
            'Deployment.apps "inflate" is invalid: metadata.uid: Invalid value: "not-its-uid": field is immutable',
            {
                "name": "inflate",
                "group": "apps",
                "kind": "Deployment",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": 'Invalid value: "not-its-uid": field is immutable',
                        "field": "metadata.uid",
                    }
                ],
            },
        ),
    )
    other = {**deployment, "metadata": {**deployment["metadata"], "uid": "not-its-uid"}}
    assert api.send("PUT", INFLATE, other) == (
        409,
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on deployments.apps "inflate": Precondition failed: UID in precondition: '
            f"not-its-uid, UID in object meta: {uid}",
            {"name": "inflate", "group": "apps", "kind": "deployments"},
        ),
    )
    assert written() == before


def test_a_json_patch_on_a_path_that_is_not_there_is_kube_apiservers_generic_422(api: AdminApi) -> None:
    before = written()
    remove = [{"op": "remove", "path": "/spec/nothere"}]
    generic = status(422, "Invalid", "the server rejected our request due to an error in our request")
    assert api.send("PATCH", INFLATE, remove, "application/json-patch+json") == (422, generic)
    scale = [{"op": "replace", "path": "/spec/nothere", "value": 1}]
    assert api.send("PATCH", f"{INFLATE}/scale", scale, "application/json-patch+json") == (422, generic)
    assert written() == before


def test_a_merge_patch_that_is_no_json_is_a_patch_decoding_error(api: AdminApi) -> None:
    before = written()
    problem = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    assert raw(api, "PATCH", INFLATE, b"{bad", MERGE) == (
        400,
        status(400, "BadRequest", f"error decoding patch: {problem}"),
    )
    assert raw(api, "PATCH", f"{INFLATE}?fieldValidation=Ignore", b"{bad", MERGE) == (
        400,
        status(400, "BadRequest", "Invalid JSON Patch"),
    )
    assert written() == before


# Protobuf ---------------------------------------------------------------------------------------------------------


def test_a_protobuf_body_is_415_naming_the_media_types_decoded(api: AdminApi) -> None:
    # The start of what `kubectl create namespace team-b` sends: kubectl's typed clients choose protobuf themselves.
    body = bytes.fromhex("6b3873000a0f0a02763112094e616d657370616365121e0a160a067465616d2d62")
    before = written()
    assert raw(api, "POST", NAMESPACES, body, "application/vnd.kubernetes.protobuf") == (
        415,
        status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, "
            "application/yaml",
        ),
    )
    assert written() == before


# kubectl 1.32 and the Python client, as the tester ran them -------------------------------------------------------


def inflate_on_a_node() -> str:
    """The getting-started experiment at two replicas, on one node: its name."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    labs.advance("lab", 5)
    [node] = models.KubeObject.objects.filter(kind="Node").values_list("name", flat=True)
    return str(node)


def test_kubectls_server_dry_runs_delete_drain_and_patch_nothing(kubectl: Any) -> None:
    node = inflate_on_a_node()
    pods = kubectl.ok("get", "pods", "-o", "name")
    version = kubectl.ok("get", "deploy", "inflate", "-o", "jsonpath={.metadata.resourceVersion}")
    before = written()
    deleted = kubectl.ok("delete", "deploy", "inflate", "--dry-run=server")
    assert deleted == 'deployment.apps "inflate" deleted (server dry run)\n'
    drained = kubectl.ok("drain", node, "--dry-run=server", "--ignore-daemonsets", "--force")
    assert drained.endswith(f"node/{node} drained (server dry run)\n")
    patched = kubectl.ok(
        "patch", "deploy", "inflate", "--type", "merge", "-p", '{"spec":{"replicas":5}}', "--dry-run=server",
        "-o", "jsonpath={.metadata.resourceVersion} {.spec.replicas}",
    )  # fmt: skip
    assert patched == f"{version} 5"
    assert written() == before
    assert kubectl.ok("get", "pods", "-o", "name") == pods
    assert kubectl.ok("get", "node", node, "-o", "jsonpath={.spec.unschedulable}") == ""


def test_kubectl_may_not_delete_the_default_namespace(kubectl: Any) -> None:
    inflate_on_a_node()
    before = written()
    refused = kubectl.run("delete", "ns", "default")
    assert (refused.returncode, refused.stderr) == (
        1,
        'Error from server (Forbidden): namespaces "default" is forbidden: this namespace may not be deleted\n',
    )
    assert written() == before


def test_kubectl_patches_that_rename_change_the_uid_or_miss_a_path_are_refused(kubectl: Any) -> None:
    inflate_on_a_node()
    before = written()
    cases = [
        (
            ["--type", "merge", "-p", '{"metadata":{"name":"other"}}'],
            "Error from server (BadRequest): the name of the object (other) does not match the name on the URL "
            "(inflate)\n",
        ),
        (
            ["--type", "merge", "-p", '{"metadata":{"uid":"x"}}'],
            'The Deployment "inflate" is invalid: metadata.uid: Invalid value: "x": field is immutable\n',
        ),
        (
            ["--type", "json", "-p", '[{"op":"remove","path":"/spec/nothere"}]'],
            "The request is invalid: the server rejected our request due to an error in our request\n",
        ),
        (
            ["--type", "merge", "-p", "{bad"],
            "Error from server (BadRequest): error decoding patch: Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1)\n",
        ),
    ]
    for args, error in cases:
        refused = kubectl.run("patch", "deploy", "inflate", *args)
        assert (refused.returncode, refused.stderr) == (1, error), args
    assert written() == before


def test_kubectl_create_namespace_sends_protobuf_and_is_told_what_is_taken(kubectl: Any) -> None:
    # kubectl's typed clients choose protobuf before asking the server anything (no discovery, no OpenAPI), so no
    # answer of ours makes it send JSON; `kubectl create -f` and `apply` send JSON and work.
    refused = kubectl.run("create", "namespace", "team-b")
    assert (refused.returncode, refused.stderr) == (
        1,
        "Error from server (UnsupportedMediaType): the body of the request was in an unknown format - accepted "
        "media types include: application/json, application/yaml\n",
    )
    namespace = '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}'
    assert kubectl.ok("create", "-f", "-", stdin=namespace) == "namespace/team-b created\n"


def test_the_python_clients_models_dry_run_deletes_creates_and_collection_deletes(kube_client: Any) -> None:
    from kubernetes import client

    inflate_on_a_node()
    apps, core = client.AppsV1Api(kube_client), client.CoreV1Api(kube_client)
    before = written()
    apps.delete_namespaced_deployment("inflate", "default", body=client.V1DeleteOptions(dry_run=["All"]))
    assert written() == before
    assert apps.read_namespaced_deployment("inflate", "default").spec.replicas == 2
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-b")))
    assert (created.kind, created.metadata.name, created.status.phase) == ("Namespace", "team-b", "Active")
    container = client.V1Container(name="c", image="pause")
    for name in ("a1", "a2"):
        body = client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(containers=[container]))
        core.create_namespaced_pod("team-b", body)
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "web"}), spec=client.V1PodSpec(containers=[container])
    )
    spec = client.V1DeploymentSpec(
        replicas=0, selector=client.V1LabelSelector(match_labels={"app": "web"}), template=template
    )
    deployment = apps.create_namespaced_deployment(
        "team-b", client.V1Deployment(metadata=client.V1ObjectMeta(name="web"), spec=spec)
    )
    assert (deployment.api_version, deployment.kind) == ("apps/v1", "Deployment")
    core.delete_collection_namespaced_pod("team-b")
    assert core.list_namespaced_pod("team-b").items == []
