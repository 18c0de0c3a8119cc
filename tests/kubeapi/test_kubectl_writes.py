"""The seed experiments with kubectl 1.32, their command lines verbatim, asserting what the `karp` tests of the same
experiments assert (tests/integration/test_lab_scenarios.py, test_dra_lab.py); `karpui.clusters.lab.advance` stands in for
the worker's tick between steps.

They run once the shared write path (karpui.writes.objects, built beside this API) is there; until then they are skipped.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from karpui import models
from karpui.clusters import lab
from karpui.people.audit import Actor
from tests.karp import EXAMPLES


def placement(kubectl: Any, selector: str = "app=web") -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in kubectl.table("get", "pods", "-o", "wide", "-l", selector):
        counts[pod["NODE"]] = counts.get(pod["NODE"], 0) + 1
    return counts


def test_getting_started_apply_scale_get_describe_and_delete(kubectl: Any, tmp_path: Any) -> None:
    # Karpenter's getting-started lines, verbatim: its nodepool.yaml (KWOKNodeClass and NodePool) and inflate.yaml.
    (tmp_path / "nodepool.yaml").write_text((EXAMPLES / "provisioning" / "nodepool.yaml").read_text())
    (tmp_path / "inflate.yaml").write_text((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    kubectl = dataclasses.replace(kubectl, cwd=tmp_path)
    assert kubectl.ok("apply", "-f", "nodepool.yaml") == (
        "kwoknodeclass.karpenter.kwok.sh/default created\nnodepool.karpenter.sh/default created\n"
    )
    assert kubectl.ok("apply", "-f", "inflate.yaml") == "deployment.apps/inflate created\n"
    watching = kubectl.popen("get", "pods", "-w")
    try:
        assert kubectl.ok("scale", "deployment", "inflate", "--replicas", "5") == "deployment.apps/inflate scaled\n"
        lab.advance("lab", 5)
        seen = [watching.stdout.readline().split() for _ in range(11)]  # the header, 5 Pending, 5 Running
    finally:
        watching.terminate()
        watching.wait(timeout=10)
    assert seen[0][:3] == ["NAME", "READY", "STATUS"]
    assert sorted(row[2] for row in seen[1:]) == ["Pending"] * 5 + ["Running"] * 5
    [claim] = kubectl.table("get", "nodeclaims")
    assert [claim["TYPE"], claim["CAPACITY"]] == ["c-8x-amd64-linux", "on-demand"] and claim["READY"] == "True"
    node = json.loads(kubectl.ok("get", "node", claim["NODE"], "-o", "json"))
    assert node["status"]["allocatable"] == {
        "cpu": "7900m",
        "ephemeral-storage": "20Gi",
        "memory": "16374Mi",
        "pods": "128",
    }
    [wide] = kubectl.table("get", "nodes", "-o", "wide")
    assert (wide["NAME"], wide["STATUS"]) == (claim["NODE"], "Ready")
    assert [(p["STATUS"], p["NODE"]) for p in kubectl.table("get", "pods", "-o", "wide")] == [
        ("Running", claim["NODE"])
    ] * 5
    described = kubectl.ok("describe", "nodeclaim", claim["NAME"])
    assert f"Name:         {claim['NAME']}\n" in described
    conditions = [line.split(":")[1].strip() for line in described.splitlines() if line.strip().startswith("Type:")]
    statuses = [line.split(":")[1].strip() for line in described.splitlines() if line.strip().startswith("Status:")]
    # In Karpenter's order (by transition time, Ready last). ConsistentStateFound comes from the consistency
    # controller's first scan that finds the Node.
    assert conditions == ["Launched", "Registered", "Initialized", "ConsistentStateFound", "Ready"]
    assert statuses[-5:] == ["True"] * 5
    events = described[described.index("Events:") :].splitlines()
    assert events[3].split()[:2] == ["Normal", "Launched"]
    assert events[3].endswith(
        "karpenter  Status condition transitioned, Type: Launched, Status: True, Reason: Launched"
    )
    assert kubectl.ok("delete", "-f", "inflate.yaml") == 'deployment.apps "inflate" deleted\n'
    lab.advance("lab", 60)
    assert kubectl.run("get", "pods").stderr == "No resources found in default namespace.\n"
    assert kubectl.rows("get", "nodeclaims") == []  # empty, consolidated away


def test_re_applying_an_edited_manifest_changes_only_what_changed(kubectl: Any, tmp_path: Any) -> None:
    kubectl.ok("apply", "-f", "examples/provisioning/")
    kubectl.ok("scale", "deployment", "inflate", "--replicas", "3")
    edited = tmp_path / "nodepool.yaml"
    edited.write_text((EXAMPLES / "provisioning" / "nodepool.yaml").read_text().replace("10s", "30s"))
    assert kubectl.ok("apply", "-f", str(edited)) == (
        "kwoknodeclass.karpenter.kwok.sh/default unchanged\nnodepool.karpenter.sh/default configured\n"
    )
    pool = models.NodePool.objects.get(name="default")
    assert (pool.spec["disruption"]["consolidateAfter"], pool.generation) == ("30s", 2)
    # kubectl's three-way rule: the manifest owns replicas (it says 0), so the apply scales back to 0, as kubectl
    # does on a real cluster; a label someone else added is not the manifest's and stays.
    assert kubectl.ok("label", "deployment", "inflate", "team=a") == "deployment.apps/inflate labeled\n"
    assert kubectl.ok("apply", "-f", "examples/provisioning/deployment.yaml") == "deployment.apps/inflate configured\n"
    deployment = models.KubeObject.objects.get(kind="Deployment").body
    assert (deployment["spec"]["replicas"], deployment["metadata"]["labels"]) == (0, {"team": "a"})
    # The manifest's `cpu: 1` is a number, stored as the canonical string "1": kubectl's patch sets it again and
    # says "configured" though nothing changes, as against kube-apiserver (kubernetes/kubernetes#66450).
    version = deployment["metadata"]["resourceVersion"]
    assert kubectl.ok("apply", "-f", "examples/provisioning/deployment.yaml") == "deployment.apps/inflate configured\n"
    assert models.KubeObject.objects.get(kind="Deployment").body["metadata"]["resourceVersion"] == version


def test_an_apply_keeps_the_approval_mode_the_dashboard_set(kubectl: Any) -> None:
    from django.contrib.auth.models import User

    from karpui.gate import disruption

    kubectl.ok("apply", "-f", "examples/provisioning/")
    admin = User.objects.create_superuser("ops", password="ops-pass-1")
    disruption.nodepool_approval_mode_set(
        cluster=models.Cluster.objects.get(name="lab"),
        nodepool="default",
        mode="manual",
        actor=Actor.for_user(admin, "web"),
    )
    assert kubectl.ok("apply", "-f", "examples/provisioning/nodepool.yaml") == (
        "kwoknodeclass.karpenter.kwok.sh/default unchanged\nnodepool.karpenter.sh/default unchanged\n"
    )
    assert models.NodePool.objects.get(name="default").annotations["karpui.dev/approval-mode"] == "manual"


def test_static_nodes_taints_and_rollout_restart(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/static-nodes/nodes.yaml")
    kubectl.ok("apply", "-f", "examples/static-nodes/web.yaml")
    lab.advance("lab", 1)
    assert placement(kubectl) == {"kind-worker": 2, "kind-worker2": 2}
    assert kubectl.ok("taint", "nodes", "kind-worker", "dedicated=special:NoSchedule") == "node/kind-worker tainted\n"
    lab.advance("lab", 1)
    assert placement(kubectl) == {"kind-worker": 2, "kind-worker2": 2}
    assert kubectl.ok("rollout", "restart", "deployment", "web") == "deployment.apps/web restarted\n"
    lab.advance("lab", 5)
    assert placement(kubectl) == {"kind-worker2": 4}
    refused = kubectl.run("taint", "nodes", "kind-worker", "dedicated=other:NoSchedule")
    assert refused.stderr == (
        "error: node kind-worker already has dedicated taint(s) with same effect(s) and --overwrite is false\n"
    )
    assert kubectl.ok("taint", "nodes", "kind-worker", "dedicated:NoSchedule-") == "node/kind-worker untainted\n"
    assert json.loads(kubectl.ok("get", "node", "kind-worker", "-o", "json"))["spec"].get("taints", []) == []
    # The seed's own lines: `key=value:NoSchedule`, then `key-` (every effect of that key).
    assert kubectl.ok("taint", "nodes", "kind-worker", "key=value:NoSchedule") == "node/kind-worker tainted\n"
    assert kubectl.ok("taint", "nodes", "kind-worker", "key-") == "node/kind-worker untainted\n"
    assert json.loads(kubectl.ok("get", "node", "kind-worker", "-o", "json"))["spec"].get("taints", []) == []


def test_dra_claims_and_slices(kubectl: Any) -> None:
    kubectl.ok("apply", "-f", "examples/dra/gpu.yaml")
    lab.advance("lab", 35)
    claims = kubectl.table("get", "nodeclaims")
    assert [c["TYPE"] for c in claims] == ["m-1x-amd64-linux", "m-1x-amd64-linux"]
    both = kubectl.ok("get", "resourceclaims,resourceslices")
    assert both.count("resourceclaim.resource.k8s.io/") == 2
    assert both.count("resourceslice.resource.k8s.io/") == 2
    assert both.count("allocated,reserved") == 2


def test_a_viewer_may_read_but_not_write(kubectl: Any, tls_server: str, certificate: Any, tmp_path: Any) -> None:
    from django.contrib.auth.models import User

    from tests.kubeapi.conftest import Kubectl, write_kubeconfig

    User.objects.create_user("vera", password="vera-pass-1")
    viewer = Kubectl(write_kubeconfig(tmp_path / "vera", tls_server, certificate, "vera"), kubectl.home)
    assert viewer.rows("get", "nodepools") == []
    done = viewer.run("apply", "-f", "examples/provisioning/nodepool.yaml")
    assert done.returncode == 1
    assert (
        'Error from server (Forbidden): error when creating "examples/provisioning/nodepool.yaml": '
        'kwoknodeclasses.karpenter.kwok.sh is forbidden: User "vera" cannot create resource "kwoknodeclasses" '
        'in API group "karpenter.kwok.sh" at the cluster scope'
    ) in done.stderr
    assert models.NodeClass.objects.count() == models.NodePool.objects.count() == 0


def test_bad_manifests_are_refused_as_the_api_server_refuses_them_and_write_nothing(
    kubectl: Any, tmp_path: Any
) -> None:
    before = models.ChangeLogEntry.objects.count()
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (EXAMPLES / "provisioning" / "nodepool.yaml").read_text().replace("consolidateAfter", "consolidateAftr")
    )
    done = kubectl.run("apply", "-f", str(bad))
    assert done.returncode == 1
    assert 'strict decoding error: unknown field "spec.disruption.consolidateAftr"' in done.stderr
    weight = tmp_path / "weight.yaml"
    weight.write_text(
        (EXAMPLES / "provisioning" / "nodepool.yaml")
        .read_text()
        .replace("  disruption:", "  weight: 101\n  disruption:")
    )
    done = kubectl.run("apply", "-f", str(weight))
    assert (
        # kubectl words a 422 with causes as "The KIND NAME is invalid: FIELD: MESSAGE"; the message is karp apply's.
        done.stderr == 'The NodePool "default" is invalid: spec.weight: must be less than or equal to 100, got 101\n'
    )
    unknown = tmp_path / "widget.yaml"
    unknown.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
    done = kubectl.run("apply", "-f", str(unknown))
    assert 'no matches for kind "Widget" in version "example.com/v1"' in done.stderr
    assert models.NodePool.objects.count() == 0
    assert models.ChangeLogEntry.objects.count() - before <= 1  # at most the node class of the first document
