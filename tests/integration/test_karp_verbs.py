"""karp's kubectl verbs over the shared write path: apply's three-way merge, label, annotate, cordon, drain, get of
several kinds, and namespaces as a cluster has them."""

from __future__ import annotations

import json

from django.contrib.auth.models import User

from karpui import models
from karpui.clusters import lab as lab_module
from karpui.gate import disruption
from karpui.people.audit import Actor
from provisioner.apimachinery.apply import LAST_APPLIED
from tests.karp import EXAMPLES, columns, karp, ok, table


def deployment() -> dict[str, object]:
    return models.KubeObject.objects.get(kind="Deployment", name="inflate").body


def test_karp_apply_keeps_the_approval_mode_set_on_the_disruption_page(lab):
    """Issue 11.0: an apply of a file holding the NodePool used to drop the dashboard's approval mode."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    admin = User.objects.create_superuser("ada", password="ada-pass-1")
    disruption.nodepool_approval_mode_set(
        cluster=lab, nodepool="default", mode="manual", actor=Actor.for_user(admin, "web")
    )
    assert ok("apply", "-f", str(EXAMPLES / "provisioning")) == (
        "kwoknodeclass.karpenter.kwok.sh/default unchanged\n"
        "nodepool.karpenter.sh/default unchanged\n"
        "deployment.apps/inflate unchanged\n"
    )
    edited = (
        (EXAMPLES / "provisioning" / "nodepool.yaml")
        .read_text()
        .replace("consolidateAfter: 10s", "consolidateAfter: 30s")
    )
    assert "nodepool.karpenter.sh/default configured" in ok("apply", "-f", "-", stdin=edited)
    pool = models.NodePool.objects.get(name="default")
    assert pool.annotations["karpui.dev/approval-mode"] == "manual"
    assert pool.spec["disruption"]["consolidateAfter"] == "30s"


def test_apply_removes_what_the_file_no_longer_says_and_keeps_what_others_added(lab):
    labelled = (
        (EXAMPLES / "provisioning" / "deployment.yaml")
        .read_text()
        .replace("name: inflate\n", "name: inflate\n  labels: {tier: web, app: inflate}\n", 1)
    )
    ok("apply", "-f", "-", stdin=labelled)
    ok("label", "deploy", "inflate", "owner=vera")
    ok("scale", "deploy/inflate", "--replicas", "2")
    assert ok("apply", "-f", "-", stdin=labelled) == "deployment.apps/inflate configured\n"
    assert deployment()["metadata"]["labels"] == {"app": "inflate", "owner": "vera", "tier": "web"}
    assert deployment()["spec"]["replicas"] == 0  # the file says 0: it owns replicas, as kubectl's apply does
    ok("apply", "-f", "-", stdin=labelled.replace("tier: web, ", ""))
    # tier was applied before and is dropped now: removed; owner was never the file's: kept.
    assert deployment()["metadata"]["labels"] == {"app": "inflate", "owner": "vera"}
    assert json.loads(deployment()["metadata"]["annotations"][LAST_APPLIED])["metadata"] == {
        "labels": {"app": "inflate"},
        "name": "inflate",
    }


def test_label_and_annotate_follow_kubectls_rules_and_words(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    assert ok("label", "deployment", "inflate", "team=a") == "deployment.apps/inflate labeled\n"
    assert karp("label", "deployment", "inflate", "team=b") == (
        1,
        "",
        "error: 'team' already has a value (a), and --overwrite is false\n",
    )
    assert ok("label", "deployment/inflate", "team=b", "--overwrite") == "deployment.apps/inflate labeled\n"
    assert ok("label", "deployment", "inflate", "team=b") == "deployment.apps/inflate not labeled\n"
    assert ok("label", "deployment", "inflate", "team-") == "deployment.apps/inflate unlabeled\n"
    assert ok("annotate", "nodepool", "default", "owner=platform") == "nodepool.karpenter.sh/default annotated\n"
    assert models.NodePool.objects.get(name="default").annotations["owner"] == "platform"
    assert karp("annotate", "nodepool", "default", "owner=other")[2] == (
        "error: --overwrite is false but found the following declared annotation(s): "
        "'owner' already has a value (platform)\n"
    )
    assert karp("label", "pod", "ghost", "a=b")[2] == 'Error from server (NotFound): pods "ghost" not found\n'


def test_cordon_uncordon_and_drain_a_node(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "web.yaml"))
    ok("advance", "1s")
    on_worker = sorted(r["NAME"] for r in table("get", "pods", "-o", "wide") if r["NODE"] == "kind-worker")
    assert len(on_worker) == 2
    assert ok("cordon", "kind-worker") == "node/kind-worker cordoned\n"
    assert ok("cordon", "node/kind-worker") == "node/kind-worker already cordoned\n"
    out = ok("drain", "kind-worker", "--ignore-daemonsets")
    assert out == (
        "node/kind-worker already cordoned\n"
        + "".join(f"evicting pod default/{name}\npod/{name} evicted\n" for name in on_worker)
        + "node/kind-worker drained\n"
    )
    ok("advance", "2s")
    placed = [r["NODE"] for r in table("get", "pods", "-o", "wide")]
    assert len(placed) == 4 and "kind-worker" not in placed  # the ReplicaSet made new pods elsewhere
    assert ok("uncordon", "kind-worker") == "node/kind-worker uncordoned\n"
    assert "unschedulable" not in models.KubeObject.objects.get(kind="Node", name="kind-worker").body["spec"]


def test_a_drain_a_pdb_forbids_leaves_the_node_cordoned_and_says_which_pod(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "web.yaml"))
    budget = (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
        "spec: {minAvailable: 4, selector: {matchLabels: {app: web}}}\n"
    )
    ok("apply", "-f", "-", stdin=budget)
    ok("advance", "1s")
    code, out, err = karp("drain", "kind-worker")
    assert code == 1
    assert out.startswith("node/kind-worker cordoned\nevicting pod default/web-")
    assert "Cannot evict pod as it would violate the pod's disruption budget." in err
    assert err.endswith('error: unable to drain node "kind-worker": 2 pod(s) could not be evicted\n')
    assert models.KubeObject.objects.get(kind="Node", name="kind-worker").body["spec"]["unschedulable"] is True


def test_get_of_several_kinds_prints_each_table_with_kind_prefixed_names(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    out = ok("get", "nodeclaims,nodes")
    [claim_table, node_table] = out.strip().split("\n\n")
    assert claim_table.splitlines()[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    [claim] = columns(claim_table)
    assert claim["NAME"].startswith("nodeclaim.karpenter.sh/default-") and claim["TYPE"] == "c-2x-amd64-linux"
    [node] = columns(node_table)
    assert node["NAME"] == f"node/{claim['NODE']}"
    names = ok("get", "nodepools,kwoknodeclasses", "-o", "name")
    assert names == "nodepool.karpenter.sh/default\nkwoknodeclass.karpenter.kwok.sh/default\n"


def test_namespaces_are_those_of_a_cluster_and_a_missing_one_refuses_writes(lab):
    assert [r["NAME"] for r in table("get", "namespaces")] == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
    refused = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: nowhere}\nspec: {containers: [{name: c, image: x}]}\n"
    assert karp("apply", "-f", "-", stdin=refused)[2] == (
        'error: document 1 Pod/p: metadata.namespace: namespaces "nowhere" not found\n'
    )
    assert not models.KubeObject.objects.filter(kind="Pod").exists()
    ok("apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: nowhere}\n---\n" + refused)
    assert [r["NAME"] for r in table("get", "pods", "-n", "nowhere")] == ["p"]
    assert ok("delete", "namespace", "nowhere") == 'namespace "nowhere" deleted\n'
    assert not models.KubeObject.objects.filter(kind="Pod").exists()  # a namespace's objects go with it


def test_a_last_applied_configuration_apply_cannot_read_is_refused_and_an_old_one_is_an_error(lab):
    """Issue 11: 5,000 nested brackets annotated as apply's record were accepted, and the next apply printed a
    RecursionError traceback."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    deep = "[" * 5000 + "]" * 5000
    assert karp("annotate", "deploy", "inflate", f"{LAST_APPLIED}={deep}", "--overwrite") == (
        1,
        "",
        f"error: metadata.annotations.{LAST_APPLIED}: cannot read the last applied configuration: nested deeper "
        "than 100 levels\n",
    )
    assert json.loads(deployment()["metadata"]["annotations"][LAST_APPLIED])["metadata"] == {"name": "inflate"}
    # One stored before writes were checked: the apply names the annotation, as kubectl does, and changes nothing.
    with lab_module.writing(lab.name) as api:
        stored = api.get("Deployment", "inflate", "default")
        stored["metadata"]["annotations"][LAST_APPLIED] = deep
        api.update(stored)
    before = deployment()
    assert karp("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml")) == (
        1,
        "",
        f"error: document 1 Deployment/inflate: metadata.annotations.{LAST_APPLIED}: cannot read the last applied "
        "configuration: nested deeper than 100 levels\n",
    )
    assert deployment() == before
