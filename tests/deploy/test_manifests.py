"""deploy/: every overlay renders with kubectl's kustomize, every object is one a real API server takes (strict fields
and required fields by the official client's models, the API's own schemas; workloads as the lab's API validates
them), and the RBAC of each mode is what it says: observe reads, updates the NodePools it gates, patches Nodes' annotations and deletes NodeClaims, nothing more."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from provisioner.manifests.cluster import validate_cluster_object

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ("kwok", "observe", "demo")
READ = ["get", "list", "watch"]

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (1.32 ships here) renders kustomize")


def rendered(overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "deploy" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def model_name(api_version: str, kind: str) -> str:
    """The official client's model of a kind: apps/v1 Deployment -> V1Deployment."""
    version = api_version.rpartition("/")[2]
    return f"{version[0].upper()}{version[1:]}{kind}"


def check(value: Any, type_name: str, path: str, problems: list[str]) -> None:
    """Every field `value` has is one the model declares, of the right shape (what fieldValidation=Strict does)."""
    if type_name.startswith("list["):
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list")
            return
        for index, item in enumerate(value):
            check(item, type_name[5:-1], f"{path}[{index}]", problems)
        return
    if type_name.startswith("dict("):
        inner = type_name[5:-1].split(", ", 1)[1]
        for key, item in (value or {}).items():
            check(item, inner, f"{path}.{key}", problems)
        return
    model = getattr(client, type_name, None)
    if model is None:
        scalars = {"str": str, "int": int, "bool": bool, "float": (int, float)}
        if type_name in scalars and not isinstance(value, scalars[type_name]):
            problems.append(f"{path}: expected {type_name}, got {type(value).__name__}")
        return
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object")
        return
    fields = {json_name: model.openapi_types[attr] for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in fields:
            problems.append(f"{path}.{key}: unknown field")
        else:
            check(item, fields[key], f"{path}.{key}", problems)


class _Response:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.data = json.dumps(obj)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_one_the_api_server_takes(overlay: str) -> None:
    objects = rendered(overlay)
    assert objects
    problems: list[str] = []
    for obj in objects:
        name = model_name(obj["apiVersion"], obj["kind"])
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        check(obj, name, where, problems)
        client.ApiClient().deserialize(_Response(obj), name)  # required fields: the client raises without them
        if obj["kind"] in ("Deployment", "Namespace"):
            validate_cluster_object(obj)  # as the lab's API validates a write (a server-side dry run)
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") in (None, "karpui"), where
    assert problems == []


def rules(objects: list[dict[str, Any]], kind: str) -> list[tuple[str, str, list[str]]]:
    [role] = [o for o in objects if o["kind"] == kind]
    return sorted(
        (group, resource, sorted(r["verbs"]))
        for r in role["rules"]
        for group in r["apiGroups"]
        for resource in r["resources"]
    )


def test_observe_mode_reads_and_writes_only_what_its_gate_and_approved_requests_need() -> None:
    objects = rendered("observe")
    writes = {
        (group, resource, verb)
        for group, resource, verbs in rules(objects, "ClusterRole")
        for verb in verbs
        if verb not in READ
    }
    assert writes == {
        ("karpenter.sh", "nodepools", "update"),  # the gate's hold budgets
        ("", "nodes", "patch"),  # do-not-disrupt on the nodes an approved command does not name, while released
        ("karpenter.sh", "nodeclaims", "delete"),  # a person's approved request to remove a node
    }
    assert {
        (group, resource) for group, resource, verbs in rules(objects, "ClusterRole") if set(READ) <= set(verbs)
    } >= {
        ("", "pods"),
        ("", "nodes"),
        ("", "events"),
        ("karpenter.sh", "nodepools"),
        ("karpenter.sh", "nodeclaims"),
    }
    assert ("coordination.k8s.io", "leases", ["create", "get", "list", "update", "watch"]) in rules(objects, "Role")
    [config] = [o for o in objects if o["kind"] == "ConfigMap"]
    assert config["data"]["KARPUI_MODE"] == "observe"


def test_kwok_mode_writes_only_what_a_provisioner_writes() -> None:
    objects = rendered("kwok")
    writable = {(group, resource) for group, resource, verbs in rules(objects, "ClusterRole") if set(verbs) - set(READ)}
    assert writable == {
        ("", "pods"),  # deleted once a NodeClaim's terminationGracePeriod runs out, as Karpenter does
        ("", "nodes"),
        ("", "nodes/status"),
        ("", "pods/eviction"),
        ("", "events"),
        ("karpenter.sh", "nodepools"),
        ("karpenter.sh", "nodeclaims"),
        ("karpenter.sh", "nodepools/status"),
        ("karpenter.sh", "nodeclaims/status"),
        ("karpenter.sh", "nodeoverlays/status"),  # their ValidationSucceeded condition, as Karpenter writes it
        ("autoscaling.x-k8s.io", "capacitybuffers/status"),  # ReadyForProvisioning and Provisioning, as Karpenter's
        ("karpenter.kwok.sh", "kwoknodeclasses"),
        ("karpenter.k8s.aws", "ec2nodeclasses"),  # a NodePool may launch from an EC2NodeClass (seed 004)
    }
    assert not any(resource in ("secrets", "deployments") for _, resource in writable)
    pods = [verbs for group, resource, verbs in rules(objects, "ClusterRole") if (group, resource) == ("", "pods")]
    assert pods == [["delete"], ["get", "list", "watch"]]  # no create, update or patch: pods are not karpui's
    [config] = [o for o in objects if o["kind"] == "ConfigMap"]
    assert config["data"]["KARPUI_MODE"] == "kwok"


def test_web_worker_beat_and_engine_run_as_described() -> None:
    objects = {o["metadata"]["name"]: o for o in rendered("demo") if o["kind"] == "Deployment"}
    web = objects["karpui-web"]["spec"]["template"]["spec"]["containers"][0]
    assert (web["livenessProbe"]["httpGet"]["path"], web["readinessProbe"]["httpGet"]["path"]) == (
        "/healthz",
        "/readyz",
    )
    assert objects["karpui-engine"]["spec"]["replicas"] == 2  # one leads, one waits
    assert (
        objects["karpui-beat"]["spec"]["replicas"] == 1
        and objects["karpui-beat"]["spec"]["strategy"]["type"] == "Recreate"
    )
    for name in ("karpui-web", "karpui-worker", "karpui-beat", "karpui-engine"):
        pod = objects[name]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "karpui" and pod["securityContext"]["runAsNonRoot"] is True
        [container] = pod["containers"]
        assert container["image"] == "karpui:0.1.0" and container["resources"]["limits"]["memory"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_engine_and_beat_are_live_while_their_heartbeat_is_fresh() -> None:
    """No HTTP port: each touches KARPUI_HEARTBEAT_FILE as its loop goes round, and an exec probe checks its age."""
    objects = {o["metadata"]["name"]: o for o in rendered("demo") if o["kind"] == "Deployment"}
    probes = {}
    for name in ("karpui-engine", "karpui-beat"):
        [container] = objects[name]["spec"]["template"]["spec"]["containers"]
        [env] = [e for e in container["env"] if e["name"] == "KARPUI_HEARTBEAT_FILE"]
        command = container["livenessProbe"]["exec"]["command"]
        assert command[:4] == ["python", "-m", "karpui.heartbeat", env["value"]]
        assert env["value"].startswith("/tmp/")  # the one writable mount: the root filesystem is read-only
        probes[name] = float(command[4])
    assert probes == {"karpui-engine": 120.0, "karpui-beat": 60.0}


def test_the_readmes_walkthrough_names_every_command_it_needs() -> None:
    text = (ROOT / "deploy" / "README.md").read_text()
    for command in (
        "kind create cluster",
        "kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/",
        "manage.py karp crds | kubectl apply -f -",
        "docker build -t karpui:0.1.0 -f deploy/Dockerfile .",
        "kind load docker-image karpui:0.1.0",
        "kubectl apply -k deploy/overlays/demo",
        "kubectl -n karpui port-forward svc/karpui 8000:80",
        "kubectl apply -f examples/provisioning/",
        "kubectl scale deployment inflate --replicas 5",
        "kubectl get nodeclaims",
    ):
        assert command in text, command
    assert re.search(r"createsuperuser", text)
