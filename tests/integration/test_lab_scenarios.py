"""Issue 4's scenarios, driven through `karp` exactly as the examples' READMEs do."""

import json

from karpui import models
from tests.karp import EXAMPLES, karp, logs, ok, rows, table, workload_objects


def test_scaling_a_deployment_provisions_the_cheapest_node_that_fits_all_five(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("advance", "10s")
    assert rows("get", "nodeclaims") == []
    ok("scale", "deploy/inflate", "--replicas", "5")
    assert ok("advance", "5s").startswith("advanced 5s to ")
    [claim] = table("get", "nodeclaims")
    assert [claim["TYPE"], claim["CAPACITY"], claim["ZONE"]] == [
        "c-8x-amd64-linux",
        "on-demand",
        claim["ZONE"],
    ] and claim["READY"] == "True"
    node = json.loads(ok("get", "node", claim["NODE"], "-o", "json"))
    assert node["status"]["allocatable"] == {
        "cpu": "7900m",
        "ephemeral-storage": "20Gi",
        "memory": "16374Mi",
        "pods": "128",
    }
    assert node["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    pods = table("get", "pods", "-o", "wide")
    assert [(p["STATUS"], p["NODE"]) for p in pods] == [("Running", claim["NODE"])] * 5
    [found] = logs("found provisionable pod(s)")
    assert found["Pods"].count("default/inflate-") == 5
    [computed] = logs("computed new nodeclaim(s) to fit pod(s)")
    assert (computed["nodeclaims"], computed["pods"]) == (1, 5)
    assert logs("computed unready node(s) will fit pod(s)") == []  # nothing went on a node already there
    [created] = logs("created nodeclaim")
    assert created["requests"] == {"cpu": "5", "pods": "5"}
    assert created["NodePool"] == {"name": "default"} and created["NodeClaim"] == {"name": claim["NAME"]}
    assert created["instance-types"].endswith("and 49 other(s)")
    assert [r["message"] for r in logs("launched nodeclaim")] == ["launched nodeclaim"]


def test_replaying_the_same_history_gives_the_same_names(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    ok("advance", "5s")
    first = ok("get", "nodeclaims", "-o", "name")
    ok("reset")
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    ok("advance", "5s")
    assert (
        ok("get", "nodeclaims", "-o", "name").count("nodeclaim.karpenter.sh/default-")
        == first.count("nodeclaim.karpenter.sh/default-")
        == 1
    )


def placement(selector: str = "app=web") -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in table("get", "pods", "-o", "wide", "-l", selector):
        counts[pod["NODE"]] = counts.get(pod["NODE"], 0) + 1
    return counts


def test_static_nodes_taints_and_rollouts_behave_as_kube_scheduler_does(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "web.yaml"))
    assert placement() == {"kind-worker": 2, "kind-worker2": 2}
    assert ok("taint", "node", "kind-worker", "dedicated=special:NoSchedule") == "node/kind-worker tainted\n"
    assert placement() == {"kind-worker": 2, "kind-worker2": 2}
    ok("rollout", "restart", "deploy/web")
    assert placement() == {"kind-worker2": 4}
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "tolerating.yaml"))
    assert placement("app=tolerating") == {"kind-worker": 2}
    assert karp("taint", "node", "kind-worker", "dedicated=other:NoSchedule")[2] == (
        "error: node kind-worker already has dedicated taint(s) with same effect(s) and --overwrite is false\n"
    )
    ok("taint", "node", "kind-worker", "dedicated:NoSchedule-")
    assert json.loads(ok("get", "node", "kind-worker", "-o", "json"))["spec"]["taints"] == []


def test_hostname_anti_affinity_gets_one_nodeclaim_per_pod(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    ok("apply", "-f", str(EXAMPLES / "anti-affinity" / "deployment.yaml"))
    ok("advance", "5s")
    claims = table("get", "nodeclaims")
    assert len(claims) == 3
    assert {p["NODE"] for p in table("get", "pods", "-o", "wide")} == {c["NODE"] for c in claims}


def test_pods_beyond_the_cpu_limit_stay_pending_with_the_limit_named(lab):
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "60s")
    claims = table("get", "nodeclaims")
    assert [c["TYPE"] for c in claims] == ["c-4x-amd64-linux"] * 4  # 16 CPU of 4-CPU nodes
    phases = sorted(p["STATUS"] for p in table("get", "pods"))
    assert phases == ["Pending", "Pending", "Running", "Running", "Running", "Running"]
    status = models.NodePool.objects.get(name="capped").status
    assert status["resources"]["cpu"] == "16" and status["nodes"] == 4
    failures = logs("could not schedule pod")
    assert (
        failures[-1]["error"]
        == 'incompatible with nodepool "capped", all available instance types exceed limits for nodepool (remaining cpu=0)'
    )
    pending = next(p["NAME"] for p in table("get", "pods") if p["STATUS"] == "Pending")
    assert "FailedScheduling  " in ok("describe", "pod", pending)


def test_bad_cluster_objects_are_refused_and_nothing_is_written(lab):
    bad = (EXAMPLES / "provisioning" / "deployment.yaml").read_text().replace("cpu: 1", "cpu: 1.5.5")
    code, out, err = karp(
        "apply", "-f", "-", stdin=(EXAMPLES / "static-nodes" / "nodes.yaml").read_text() + "\n---\n" + bad
    )
    assert code == 1 and out == ""
    assert err == (
        "error: document 4 Deployment/inflate: spec.template.spec.containers[0].resources.requests.cpu: "
        "quantities must match the regular expression of Kubernetes quantities: '1.5.5'\n"
    )
    assert workload_objects() == 0


def test_unknown_verbs_kinds_and_names_fail_like_kubectl(lab):
    assert (
        karp("scale", "deploy/missing", "--replicas", "1")[2]
        == 'Error from server (NotFound): deployments.apps "missing" not found\n'
    )
    assert karp("get", "widgets")[0] == 1
    assert karp("advance", "5 minutes")[2].startswith("error: invalid duration")
    assert (
        karp("scale", "deploy/x")[2]
        == "error: --replicas=COUNT is required, and COUNT must be greater than or equal to 0\n"
    )


def test_jsonpath_and_namespaces(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    assert (
        ok("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")
        == "kind-control-plane kind-worker kind-worker2\n"
    )
    assert (
        ok("get", "node", "kind-worker", "-o", "jsonpath={.metadata.labels['kubernetes\\.io/hostname']}")
        == "kind-worker\n"
    )
    other = (
        (EXAMPLES / "static-nodes" / "web.yaml")
        .read_text()
        .replace("name: web\n", "name: web\n  namespace: team-a\n", 1)
    )
    # As on a real cluster, a namespace must exist before anything is made in it.
    assert karp("apply", "-f", "-", stdin=other)[2] == (
        'error: document 1 Deployment/web: metadata.namespace: namespaces "team-a" not found\n'
    )
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\n"
    ok("apply", "-f", "-", stdin=namespace + other)
    assert rows("get", "pods") == []
    assert len(rows("get", "pods", "-n", "team-a")) == 4
    assert {r["NAMESPACE"] for r in table("get", "pods", "-A")} == {"team-a"}


def test_nodepools_show_their_nodes_and_tables_can_drop_headers(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    ok("advance", "5s")
    [pool] = table("get", "nodepools", "-o", "wide")
    assert [pool["NAME"], pool["NODECLASS"], pool["NODES"], pool["READY"]] == ["default", "default", "1", "True"]
    assert [pool["CPU"], pool["MEMORY"]] == ["8", "16Gi"]  # capacity of the launched c-8x (CPU, memory)
    assert ok("get", "pods", "--no-headers").count("Running") == 5
    assert not ok("get", "pods", "--no-headers").startswith("NAME")
