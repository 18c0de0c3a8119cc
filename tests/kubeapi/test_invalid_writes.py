"""Issue 27, point 8: writes kube-apiserver refuses were stored. Each is refused here with kube-apiserver's code
and words (pkg/apis/core/validation, pkg/apis/apps/validation, apimachinery's ObjectMeta validation), through the
API and `karp apply`, and nothing is written."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from tests.karp import karp
from tests.kubeapi.admin_api import AdminApi


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}], **spec},
    }


def deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
            **spec,
        },
    }


def daemonset(**spec: Any) -> dict[str, Any]:
    obj = deployment(**spec)
    obj["kind"] = "DaemonSet"
    obj["spec"].pop("replicas")
    return obj


def with_meta(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].update(meta)
    return obj


def containers(*items: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"image": "nginx", **item} for item in items]


PERCENT = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for "
    "validation is '[0-9]+%')"
)

# (name, object, field: body) -- each refused with a 422 `<Kind> "<name>" is invalid: <field: body>`.
INVALID = [
    (
        "duplicate container names",
        pod(containers=containers({"name": "app"}, {"name": "app"})),
        'spec.containers[1].name: Duplicate value: "app"',
    ),
    (
        "an init container named as a container",
        pod(initContainers=containers({"name": "app"})),
        'spec.initContainers[0].name: Duplicate value: "app"',
    ),
    (
        "duplicate host ports",
        pod(
            containers=containers(
                {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                {"name": "b", "ports": [{"containerPort": 81, "hostPort": 8080}]},
            )
        ),
        'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"',
    ),
    (
        "a container name that is no DNS label",
        pod(containers=containers({"name": "App"})),
        'spec.containers[0].name: Invalid value: "App": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ),
    ("a container without an image", pod(containers=[{"name": "app"}]), "spec.containers[0].image: Required value"),
    (
        "duplicate port names",
        pod(
            containers=containers(
                {"name": "a", "ports": [{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]}
            )
        ),
        'spec.containers[0].ports[1].name: Duplicate value: "http"',
    ),
    (
        "a port without its number",
        pod(containers=containers({"name": "a", "ports": [{"name": "http"}]})),
        "spec.containers[0].ports[0].containerPort: Required value",
    ),
    (
        "an environment variable name starting with a digit",
        pod(containers=containers({"name": "a", "env": [{"name": "1X", "value": "v"}]})),
        'spec.containers[0].env[0].name: Invalid value: "1X": a valid environment variable name must consist of '
        "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or "
        "'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
    ),
    (
        "a volume mount of no volume",
        pod(containers=containers({"name": "a", "volumeMounts": [{"name": "data", "mountPath": "/d"}]})),
        'spec.containers[0].volumeMounts[0].name: Not found: "data"',
    ),
    (
        "duplicate volumes",
        pod(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
        'spec.volumes[1].name: Duplicate value: "v"',
    ),
    (
        "a restart policy that is none",
        pod(restartPolicy="Sometimes"),
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
    ),
    (
        "a DNS policy that is none",
        pod(dnsPolicy="Google"),
        'spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", '
        '"Default", "None"',
    ),
    (
        "an image pull policy that is none",
        pod(containers=containers({"name": "a", "imagePullPolicy": "Sometimes"})),
        'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"IfNotPresent", "Never"',
    ),
    (
        "a node name with capitals",
        pod(nodeName="Node-1"),
        'spec.nodeName: Invalid value: "Node-1": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ),
    (
        "an active deadline of 0",
        pod(activeDeadlineSeconds=0),
        "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
    ),
    (
        "a finalizer that is no qualified name",
        with_meta(pod(), finalizers=["a b"]),
        "metadata.finalizers: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
        "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ),
    (
        "an owner reference without a uid",
        with_meta(pod(), ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": ""}]),
        "metadata.ownerReferences[0].uid: Required value: must not be empty",
    ),
    (
        "two controllers",
        with_meta(
            pod(),
            ownerReferences=[
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": True},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2", "controller": True},
            ],
        ),
        'metadata.ownerReferences: Invalid value: [{"apiVersion":"apps/v1","controller":true,"kind":"ReplicaSet",'
        '"name":"a","uid":"1"},{"apiVersion":"apps/v1","controller":true,"kind":"ReplicaSet","name":"b","uid":"2"}]: '
        'Only one reference can have Controller set to true. Found "true" in references for ReplicaSet/a and '
        "ReplicaSet/b",
    ),
    (
        "a Deployment strategy Bogus",
        deployment(strategy={"type": "Bogus"}),
        'spec.strategy: Unsupported value: {"Type":"Bogus","RollingUpdate":null}: supported values: "Recreate", '
        '"RollingUpdate"',
    ),
    (
        "maxUnavailable -5%",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "-5%"}}),
        f'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "-5%": {PERCENT}',
    ),
    (
        "maxUnavailable -1",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": -1}}),
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "maxUnavailable 150%",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%"}}),
        'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
    ),
    (
        "maxUnavailable and maxSurge 0",
        deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}),
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
    ),
    (
        "a rolling update of a Recreate strategy",
        deployment(strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
        "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
    ),
    (
        "revisionHistoryLimit -1",
        deployment(revisionHistoryLimit=-1),
        "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "minReadySeconds -1",
        deployment(minReadySeconds=-1),
        "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "a progress deadline under minReadySeconds",
        deployment(minReadySeconds=30, progressDeadlineSeconds=30),
        "spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds",
    ),
    (
        "a workload's pods restarting OnFailure",
        deployment(
            template={
                "metadata": {"labels": {"app": "web"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "app", "image": "nginx"}]},
            }
        ),
        'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"',
    ),
    (
        "a DaemonSet update strategy Bogus",
        daemonset(updateStrategy={"type": "Bogus"}),
        'spec.updateStrategy: Unsupported value: {"Type":"Bogus","RollingUpdate":null}: supported values: '
        '"RollingUpdate", "OnDelete"',
    ),
    (
        "a DaemonSet with both maxSurge and maxUnavailable",
        daemonset(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}),
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero",
    ),
]


@pytest.fixture
def api(lab) -> AdminApi:
    return AdminApi()


def collection(obj: dict[str, Any]) -> str:
    group = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
    return f"{group}/namespaces/default/{obj['kind'].lower()}s"


@pytest.mark.parametrize(("name", "obj", "error"), INVALID, ids=[case[0] for case in INVALID])
def test_a_write_kube_apiserver_refuses_is_a_422_in_its_words_and_nothing_is_stored(api, name, obj, error):
    status, body = api.send("POST", collection(obj), obj)
    qualified = obj["kind"] if obj["apiVersion"] == "v1" else f"{obj['kind']}.apps"
    assert (status, body["reason"], body["message"]) == (
        422,
        "Invalid",
        f'{qualified} "{obj["metadata"]["name"]}" is invalid: {error}',
    )
    assert api.get(f"{collection(obj)}/{obj['metadata']['name']}")[0] == 404


@pytest.mark.parametrize(("name", "obj", "error"), INVALID[:6], ids=[case[0] for case in INVALID[:6]])
def test_karp_apply_refuses_them_naming_the_document_and_field(api, name, obj, error):
    code, _, err = karp("apply", "-f", "-", stdin=yaml.safe_dump(obj))
    assert (code, err.strip()) == (1, f"error: document 1 {obj['kind']}/{obj['metadata']['name']}: {error}")


def test_several_errors_are_listed_together_as_kube_apiserver_lists_them(api):
    obj = deployment(revisionHistoryLimit=-1, minReadySeconds=-2)
    status, body = api.send("POST", collection(obj), obj)
    assert (status, body["message"]) == (
        422,
        'Deployment.apps "web" is invalid: [spec.minReadySeconds: Invalid value: -2: must be greater than or equal '
        "to 0, spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0]",
    )


def test_an_update_into_an_invalid_object_is_refused_too(api):
    assert api.send("POST", collection(deployment()), deployment())[0] == 201
    status, body = api.send(
        "PATCH",
        f"{collection(deployment())}/web",
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "-5%"}}}},
        content_type="application/merge-patch+json",
    )
    assert (status, body["message"]) == (
        422,
        f'Deployment.apps "web" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "-5%": {PERCENT}',
    )


def test_an_owner_reference_uid_that_is_a_number_cannot_be_decoded_a_400(api):
    obj = with_meta(pod(), ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": 5}])
    status, body = api.send("POST", collection(obj), obj)
    assert (status, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field '
        "OwnerReference.metadata.ownerReferences.uid of type types.UID",
    )
    assert api.get(f"{collection(obj)}/p")[0] == 404


def test_managed_fields_a_create_sends_are_not_kept_the_creator_owns_the_object(api):
    garbage = [{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": "no"}}]
    obj = with_meta(deployment(), managedFields=garbage)
    assert api.send("POST", collection(obj) + "?fieldManager=ci", obj)[0] == 201
    _, stored = api.get(f"{collection(obj)}/web")
    assert [(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]] == [("ci", "Update")]


def test_an_update_with_managed_fields_that_cannot_be_read_is_refused_naming_the_entry(api):
    assert api.send("POST", collection(deployment()), deployment())[0] == 201
    garbage = [{"manager": "x", "operation": "Bogus", "apiVersion": "apps/v1", "fieldsType": "FieldsV1"}]
    status, body = api.send(
        "PATCH",
        f"{collection(deployment())}/web",
        {"metadata": {"managedFields": garbage}},
        content_type="application/merge-patch+json",
    )
    assert (status, body["message"]) == (
        422,
        'Deployment.apps "web" is invalid: metadata.managedFields[0]: operation: Unsupported value: "Bogus": '
        'supported values: "Apply", "Update"',
    )


def test_a_json_patch_of_more_than_ten_thousand_operations_is_a_413(api):
    assert api.send("POST", collection(deployment()), deployment())[0] == 201
    operations = [{"op": "test", "path": "/metadata/name", "value": "web"}] * 20000
    status, body = api.send(
        "PATCH", f"{collection(deployment())}/web", operations, content_type="application/json-patch+json"
    )
    assert (status, body["reason"], body["message"]) == (
        413,
        "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 20000",
    )
    assert json.loads(json.dumps(api.get(f"{collection(deployment())}/web")[1]))["metadata"]["name"] == "web"
