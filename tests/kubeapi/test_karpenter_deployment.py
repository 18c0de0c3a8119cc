"""Karpenter in a lab, through kubectl 1.32 as the seed documents use it, installed as `kind create cluster` and `helm
install karpenter` leave a kind cluster (every lab has it from `migrate`, `karp cluster create` and `karp reset` on: a
control-plane node `<cluster>-control-plane`, the chart's Deployment in kube-system and in `karpenter`, its
ClusterRoles): its pods' logs are the engine's JSON lines, its environment the cluster's Karpenter options (`set env`,
audited), and `rollout restart|status` work."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import override_settings

from karpui import models
from karpui.clusters import lab
from karpui.writes import lab_objects
from tests.karp import ok
from tests.kubeapi.conftest import Kubectl

# The seed's own RBAC manifest (000, experiment 3, exp3-02-dra-rbac.yaml), verbatim.
DRA_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: karpenter-dra }
rules:
  - apiGroups: ["resource.k8s.io"]
    resources: ["resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["resource.k8s.io"]
    resources: ["resourceclaims", "resourceclaims/status"]
    verbs: ["update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: karpenter-dra }
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: karpenter-dra
subjects:
  - kind: ServiceAccount
    name: karpenter
    namespace: kube-system
"""
POD_NAME = re.compile(r"^karpenter-[a-z0-9]{10}-[a-z0-9]{5}$")


@pytest.fixture(autouse=True)
def installed(transactional_db: None) -> Iterator[None]:
    """Labs installed as a fresh install's are (KARPUI_LAB_INSTALL, off in the rest of the suite): the default lab as
    migrate leaves it, and every cluster made or reset here. The setting ends with this fixture, before the
    transactional test's flush makes the default lab again: pytest-django's `settings` fixture was restored only
    after that flush, so the next test on the worker started with kind's control-plane node and Karpenter's
    Deployment in its lab."""
    with override_settings(KARPUI_LAB_INSTALL=True):
        lab_objects.lab_install_ensure(models.Cluster.objects.get(name="lab"))
        yield


def inflate(kubectl: Any, replicas: int = 5) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", f"--replicas={replicas}")
    lab.advance("lab", 30)


def controller_env(kubectl: Any, namespace: str) -> dict[str, str]:
    deployment = json.loads(kubectl.ok("-n", namespace, "get", "deploy", "karpenter", "-o", "json"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"] if "value" in e}


def test_a_fresh_lab_runs_the_controller_in_kube_system_on_kinds_control_plane(kubectl: Any) -> None:
    [[name, ready, status, restarts, _age]] = kubectl.rows(
        "-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter"
    )
    assert POD_NAME.match(name) and (ready, status, restarts) == ("1/1", "Running", "0")
    assert kubectl.ok("-n", "kube-system", "rollout", "status", "deploy/karpenter", "--timeout=3m") == (
        'deployment "karpenter" successfully rolled out\n'
    )
    [node] = kubectl.table("get", "nodes")
    assert (node["NAME"], node["STATUS"], node["ROLES"]) == ("lab-control-plane", "Ready", "control-plane")
    assert kubectl.ok("get", "nodes", "--no-headers").count("kwok") == 0  # the document's `grep -c kwok`: 0
    pod = json.loads(kubectl.ok("-n", "kube-system", "get", "pod", name, "-o", "json"))
    assert pod["spec"]["nodeName"] == "lab-control-plane"
    assert [row[:2] for row in kubectl.rows("get", "deploy", "-A")] == [
        ["karpenter", "karpenter"],
        ["kube-system", "karpenter"],
    ]


def test_karp_reset_installs_the_control_plane_and_karpenter_again(kubectl: Any) -> None:
    inflate(kubectl)
    ok("reset")
    assert [row["NAME"] for row in kubectl.table("get", "nodes")] == ["lab-control-plane"]
    assert [row[:2] for row in kubectl.rows("get", "deploy", "-A")] == [
        ["karpenter", "karpenter"],
        ["kube-system", "karpenter"],
    ]
    [[_name, ready, status, *_]] = kubectl.rows(
        "-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter"
    )
    assert (ready, status) == ("1/1", "Running")


def test_a_lab_made_under_other_policies_renders_them_in_its_deployment_and_decides_with_them(kubectl: Any) -> None:
    """The chart always sets PREFERENCE_POLICY and MIN_VALUES_POLICY, and the lab reads its Deployment's environment
    over the settings: a deployment's KARPUI_PREFERENCE_POLICY and KARPUI_MIN_VALUES_POLICY are the values its labs'
    charts are rendered with, or they would be overridden by the chart's defaults."""
    with override_settings(KARPUI_PREFERENCE_POLICY="Ignore", KARPUI_MIN_VALUES_POLICY="BestEffort"):
        ok("reset")
        env = controller_env(kubectl, "kube-system")
        assert (env["PREFERENCE_POLICY"], env["MIN_VALUES_POLICY"]) == ("Ignore", "BestEffort")
        assert controller_env(kubectl, "karpenter") == env
        workload = Path("bench/workloads/karpenter-1.x/preference-policy")
        for name in ("nodepool.yaml", "deployment.yaml"):
            kubectl.ok("apply", "-f", str(workload / name))
        lab.advance("lab", 30)
    # The pod prefers the m family; with the preference ignored it gets the cheapest type.
    assert [row["TYPE"] for row in kubectl.table("get", "nodeclaims")] == ["c-1x-amd64-linux"]


def test_the_seed_documents_context_and_control_plane_lines_run_as_written(kubectl: Kubectl, tmp_path: Path) -> None:
    """000's set-up: `kind create cluster --config kind-karpenter.yaml` (a cluster named karpenter-lab), then
    `kubectl config use-context kind-karpenter-lab`, the control plane's taint and Karpenter's rollout."""
    ok("cluster", "create", "karpenter-lab")
    server = yaml.safe_load(kubectl.kubeconfig.read_text())["clusters"][0]["cluster"]
    config = tmp_path / "kind-kubeconfig"
    ca = tmp_path / "ca.pem"
    ca.write_bytes(base64.b64decode(server["certificate-authority-data"]))
    base = server["server"].split("/k8s/", 1)[0]
    config.write_text(
        ok(
            "kubeconfig",
            "karpenter-lab",
            "--kind",
            "--as",
            "admin",
            "--server",
            base,
            "--certificate-authority",
            str(ca),
        )
    )
    seed = Kubectl(config, kubectl.home)
    assert seed.ok("config", "use-context", "kind-karpenter-lab") == 'Switched to context "kind-karpenter-lab".\n'
    [node] = seed.table("get", "nodes")
    assert (node["NAME"], node["STATUS"], node["ROLES"]) == ("karpenter-lab-control-plane", "Ready", "control-plane")
    assert seed.ok("taint", "node", "karpenter-lab-control-plane", "CriticalAddonsOnly:NoSchedule", "--overwrite") == (
        "node/karpenter-lab-control-plane modified\n"
    )
    assert seed.ok("-n", "kube-system", "rollout", "status", "deploy/karpenter", "--timeout=3m") == (
        'deployment "karpenter" successfully rolled out\n'
    )
    [pod] = seed.table("-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter")
    assert (pod["READY"], pod["STATUS"], pod["RESTARTS"]) == ("1/1", "Running", "0")


def test_the_controllers_logs_are_the_engines_json_lines(kubectl: Any) -> None:
    inflate(kubectl)
    lines = kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter", "--tail=100").splitlines()
    [created] = [json.loads(line) for line in lines if "created nodeclaim" in line]
    assert created["message"] == "created nodeclaim"
    assert created["requests"] == {"cpu": "5", "pods": "5"}
    assert created["instance-types"] == (
        "c-128x-amd64-linux, c-128x-amd64-windows, c-16x-amd64-linux, c-16x-amd64-windows, c-192x-amd64-linux "
        "and 49 other(s)"
    )
    assert list(created)[:4] == ["level", "time", "logger", "message"]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", created["time"])
    every = kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter").splitlines()
    assert every[-1] == lines[-1] and len(every) >= len(lines)
    [last] = kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter", "--tail=1").splitlines()
    assert last == lines[-1]
    stamped = kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter", "--tail=1", "--timestamps").splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \{", stamped[0])
    # The lab's clock has moved 30 s since the scale-up: nothing was logged in the last second of it.
    assert kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter", "--since=1s") == ""
    # As seed 004 reads it: a label selector in the `karpenter` namespace, kubectl's ten last lines of each pod.
    seen = kubectl.ok("-n", "karpenter", "logs", "-l", "app.kubernetes.io/name=karpenter").splitlines()
    assert seen == every[-10:]


def test_a_workloads_pod_has_no_log_as_on_kwok(kubectl: Any) -> None:
    inflate(kubectl, replicas=1)
    [[pod, *_]] = kubectl.rows("get", "pods", "-l", "app=inflate")
    refused = kubectl.run("logs", pod)
    assert (refused.returncode, refused.stderr) == (
        1,
        "Error from server (MethodNotAllowed): the server does not allow this method on the requested resource "
        f"( pods/log {pod})\n",
    )


def test_set_env_changes_the_clusters_options_on_both_releases_with_an_audit_row(kubectl: Any) -> None:
    before = kubectl.rows("-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter")
    assert kubectl.ok(
        "-n", "kube-system", "set", "env", "deploy/karpenter", "FEATURE_GATES=SpotToSpotConsolidation=true"
    ) == ("deployment.apps/karpenter env updated\n")
    assert controller_env(kubectl, "kube-system")["FEATURE_GATES"] == "SpotToSpotConsolidation=true"
    assert controller_env(kubectl, "karpenter")["FEATURE_GATES"] == "SpotToSpotConsolidation=true"
    running = lab.load(models.Cluster.objects.get(name="lab"))
    assert running.ctx.options.gate("SpotToSpotConsolidation") is True
    assert running.ctx.options.ignore_dra_requests is False  # karpui's default, not set there
    [row] = models.AuditEvent.objects.filter(action="set options", via="api")
    assert (row.actor_name, row.via, row.target_kind, row.target_name) == (
        "admin",
        "api",
        "Deployment",
        "kube-system/karpenter",
    )
    assert row.after["FEATURE_GATES"] == "SpotToSpotConsolidation=true" and "FEATURE_GATES" not in row.before
    # The new environment is a new pod template: the controller was restarted, as Karpenter must be to read it.
    after = kubectl.rows("-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter")
    assert [r[0] for r in after] != [r[0] for r in before] and [r[2] for r in after] == ["Running"]

    kubectl.ok("-n", "kube-system", "set", "env", "deploy/karpenter", "IGNORE_DRA_REQUESTS=true")
    assert lab.load(models.Cluster.objects.get(name="lab")).ctx.options.ignore_dra_requests is True
    assert models.AuditEvent.objects.filter(action="set options", via="api").count() == 2


def test_an_option_karpenter_cannot_start_with_is_refused_naming_the_field(kubectl: Any) -> None:
    refused = kubectl.run(
        "-n", "kube-system", "set", "env", "deploy/karpenter", "FEATURE_GATES=SpotToSpotConsolidation=yes"
    )
    assert (refused.returncode, refused.stderr) == (
        1,
        'error: failed to patch env update to pod template: Deployment.apps "karpenter" is invalid: '
        "spec.template.spec.containers[0].env[10].value: FEATURE_GATES: parsing feature gates, invalid value of "
        'SpotToSpotConsolidation: yes, err: strconv.ParseBool: parsing "yes": invalid syntax\n',
    )
    assert "FEATURE_GATES" not in controller_env(kubectl, "kube-system")
    assert not models.AuditEvent.objects.filter(action="set options", via="api").exists()


def test_rollout_restart_replaces_the_controller_pod_and_starts_a_new_log(kubectl: Any) -> None:
    inflate(kubectl)
    [[old, *_]] = kubectl.rows("-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter")
    kubectl.ok("-n", "kube-system", "rollout", "restart", "deploy/karpenter")
    assert kubectl.ok("-n", "kube-system", "rollout", "status", "deploy/karpenter", "--timeout=3m").endswith(
        'deployment "karpenter" successfully rolled out\n'
    )
    [[new, _ready, status, *_]] = kubectl.rows(
        "-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=karpenter"
    )
    assert new != old and status == "Running"
    assert kubectl.ok("-n", "kube-system", "logs", "deploy/karpenter") == ""  # what it logged before is gone
    kubectl.ok("scale", "deployment", "inflate", "--replicas=0")
    lab.advance("lab", 40)
    logged = [json.loads(line)["message"] for line in kubectl.ok("-n", "kube-system", "logs", new).splitlines()]
    assert "disrupting node(s)" in logged and "deleted nodeclaim" in logged


def test_the_clusterrole_answers_and_the_seeds_dra_rbac_applies(kubectl: Any, tmp_path: Any) -> None:
    role = json.loads(kubectl.ok("get", "clusterrole", "karpenter", "-o", "json"))
    assert kubectl.table("get", "clusterrole")[0]["NAME"] == "karpenter"
    assert len([r for r in role["rules"] if "resource.k8s.io" in r.get("apiGroups", [])]) == 0
    manifest = tmp_path / "exp3-02-dra-rbac.yaml"
    manifest.write_text(DRA_RBAC)
    assert kubectl.ok("apply", "-f", str(manifest)) == (
        "clusterrole.rbac.authorization.k8s.io/karpenter-dra created\n"
        "clusterrolebinding.rbac.authorization.k8s.io/karpenter-dra created\n"
    )
    assert kubectl.ok("apply", "-f", str(manifest)) == (
        "clusterrole.rbac.authorization.k8s.io/karpenter-dra unchanged\n"
        "clusterrolebinding.rbac.authorization.k8s.io/karpenter-dra unchanged\n"
    )
    [[name, role_ref, *_]] = kubectl.rows("get", "clusterrolebinding", "karpenter-dra")
    assert (name, role_ref) == ("karpenter-dra", "ClusterRole/karpenter-dra")
    assert kubectl.ok("delete", "-f", str(manifest)) == (
        'clusterrole.rbac.authorization.k8s.io "karpenter-dra" deleted\n'
        'clusterrolebinding.rbac.authorization.k8s.io "karpenter-dra" deleted\n'
    )
