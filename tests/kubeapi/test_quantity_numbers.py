"""Quantities written as JSON or YAML numbers with a fraction (`cpu: 0.5`) are quantities, as kube-apiserver reads
them, through every write kubectl makes: apply, apply --server-side and create."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from provisioner.quantity import parse_quantity, parse_resources
from tests.kubeapi.admin_api import AdminApi

POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {{cpu: {cpu}, memory: 64Mi}}
"""


@pytest.mark.parametrize("command", [("apply",), ("apply", "--server-side"), ("create",)])
def test_a_cpu_request_given_as_a_number_with_a_fraction_is_taken(kubectl: Any, tmp_path: Any, command: Any) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "pods.yaml").write_text(
        POD.format(name="half", cpu="0.5") + "---\n" + POD.format(name="tenth", cpu="0.1")
    )
    done = kubectl.run(*command, "-f", "pods.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"pod/{name} {_verb(command)}" for name in ("half", "tenth")]
    # 0.1 is exactly 100m (its float's binary value would round up to 101m), whatever form the pod keeps it in.
    cpus = [
        json.loads(kubectl.ok("get", "pod", name, "-o", "json"))["spec"]["containers"][0]["resources"]["requests"]
        for name in ("half", "tenth")
    ]
    assert [parse_quantity(c["cpu"]) for c in cpus] == [500, 100]


def _verb(command: tuple[str, ...]) -> str:
    return {"apply": "created", "create": "created"}.get(command[0], "") if len(command) == 1 else "serverside-applied"


def post_pod(api: AdminApi, name: str, requests: str) -> Any:
    """POST a pod whose requests are written as given, JSON numbers as their text."""
    data = (
        f'{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"containers":[{{"name":"app",'
        f'"image":"pause","resources":{{"requests":{requests}}}}}]}}}}'
    )
    return api.client.generic(
        "POST", "/k8s/clusters/lab/api/v1/namespaces/default/pods", data, "application/json", headers=api.headers
    )


def test_a_number_with_an_exponent_is_a_quantity(lab: Any) -> None:
    api = AdminApi()
    response = post_pod(api, "exp", '{"cpu":1.5e0,"memory":1e6}')
    assert response.status_code == 201, response.content
    status, pod = api.get("/api/v1/namespaces/default/pods/exp")
    assert status == 200
    assert parse_resources(pod["spec"]["containers"][0]["resources"]["requests"]) == {
        "cpu": 1500,
        "memory": 10**9,
    }


def test_an_endless_json_number_is_refused_naming_its_field(lab: Any) -> None:
    response = post_pod(AdminApi(), "endless", '{"cpu":1e999}')
    assert response.status_code == 400
    assert (
        "spec.containers[0].resources.requests.cpu: must be a finite number, got inf"
        in json.loads(response.content)["message"]
    )
