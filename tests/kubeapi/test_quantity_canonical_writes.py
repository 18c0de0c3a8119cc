"""Quantities are stored and served in canonical form, as kube-apiserver keeps them, and writing the same amount in
another form changes nothing: no new resourceVersion, no managedFields change, no conflict.

They wait for karpui/writes/objects.py to store objects through provisioner.quantity.canonical_quantities (on create, on
update before comparing, and as server-side apply's `normalized` for the lab's kinds)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tests.kubeapi.admin_api import AdminApi

POD = """apiVersion: v1
kind: Pod
metadata:
  name: half
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {{cpu: {cpu}, memory: {memory}}}
      limits: {{cpu: "1000m", memory: 2048Mi}}
"""


def requests_of(kubectl: Any) -> tuple[dict[str, str], dict[str, str], str]:
    pod = json.loads(kubectl.ok("get", "pod", "half", "-o", "json"))
    resources = pod["spec"]["containers"][0]["resources"]
    return resources["requests"], resources["limits"], pod["metadata"]["resourceVersion"]


def test_kubectl_create_then_apply_stores_canonical_quantities_and_reapplying_writes_nothing(
    kubectl: Any, tmp_path: Any
) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "pod.yaml").write_text(POD.format(cpu="0.5", memory='"1.5Gi"'))
    assert kubectl.ok("apply", "-f", "pod.yaml") == "pod/half created\n"
    requests, limits, version = requests_of(kubectl)
    assert (requests, limits) == ({"cpu": "500m", "memory": "1536Mi"}, {"cpu": "1", "memory": "2Gi"})
    # Applied again: kubectl says "configured", as against kube-apiserver (its patch sets 0.5 over the live 500m,
    # kubernetes/kubernetes#66450), but the server writes nothing.
    assert kubectl.ok("apply", "-f", "pod.yaml") == "pod/half configured\n"
    assert requests_of(kubectl)[2] == version


def test_a_replace_with_the_same_amounts_written_otherwise_writes_nothing(lab: Any) -> None:
    api = AdminApi()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "half"},
        "spec": {"containers": [{"name": "app", "image": "pause", "resources": {"requests": {"cpu": 0.5}}}]},
    }
    assert api.send("POST", "/api/v1/namespaces/default/pods", pod)[0] == 201
    _, stored = api.get("/api/v1/namespaces/default/pods/half")
    assert stored["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}
    stored["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "0.5"}
    code, replaced = api.send("PUT", "/api/v1/namespaces/default/pods/half", stored)
    assert (code, replaced["metadata"]["resourceVersion"]) == (200, stored["metadata"]["resourceVersion"])


def test_server_side_apply_in_another_form_is_no_change_and_no_conflict(kubectl: Any, tmp_path: Any) -> None:
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    (tmp_path / "pod.yaml").write_text(POD.format(cpu="0.5", memory='"1.5Gi"'))
    kubectl.ok("apply", "--server-side", "-f", "pod.yaml")
    requests, _, version = requests_of(kubectl)
    assert requests == {"cpu": "500m", "memory": "1536Mi"}
    kubectl.ok("apply", "--server-side", "-f", "pod.yaml")
    assert requests_of(kubectl)[2] == version
    # Another manager applying the same amounts, written otherwise, shares the fields: no conflict.
    (tmp_path / "other.yaml").write_text(POD.format(cpu='"500m"', memory="1536Mi"))
    done = kubectl.run("apply", "--server-side", "--field-manager", "other", "-f", "other.yaml")
    assert done.returncode == 0, done.stderr
