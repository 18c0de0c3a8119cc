"""The seed experiments through `karp`: each step of the documents as the karp verb of the same kubectl line, with
`karp advance` standing for the time the documents wait, asserting what tests/fixtures/seeds/README.md lists."""

from __future__ import annotations

import json
import re
from collections import Counter

from karpui import models
from provisioner.cluster.objects import parse_timestamp
from tests import karp as cli
from tests.seeds import SEEDS, SETUP

# The documents' kind cluster, `kind create cluster --name karpenter-lab`: every verb here goes to it, as the documents'
# kubectl goes to its current context, kind-karpenter-lab (experiment 2 names its own cluster, taint-lab).
KARPENTER_LAB = ("--cluster", "karpenter-lab")


def _on(args: tuple[str, ...]) -> tuple[str, ...]:
    return args if args[0] in ("--cluster", "cluster") else (*KARPENTER_LAB, *args)


def karp(*args: str) -> tuple[int, str, str]:
    return cli.karp(*_on(args))


def ok(*args: str) -> str:
    return cli.ok(*_on(args))


def rows(*args: str) -> list[list[str]]:
    return cli.rows(*_on(args))


def seed(name: str) -> str:
    return str(SEEDS / name)


def karpenter_lab() -> None:
    """`kind create cluster` and the Karpenter install, as a new lab has them (its control-plane node, Karpenter in
    kube-system), then the document's own line tainting the node, so that every inflate pod waits for a node of
    Karpenter's."""
    ok("cluster", "create", "karpenter-lab")
    assert ok("taint", "node", "karpenter-lab-control-plane", "CriticalAddonsOnly:NoSchedule", "--overwrite") == (
        "node/karpenter-lab-control-plane modified\n"
    )


def lab_now() -> float:
    return models.Cluster.objects.get(name="karpenter-lab").clock.timestamp()


def logs(message: str) -> list[dict]:
    return [json.loads(line) for line in ok("logs").splitlines() if json.loads(line)["message"] == message]


def sample() -> tuple[int, int, dict[str, int]]:
    """The document's sample: NodeClaims, the nodes Karpenter made (all but the control plane), inflate pods by
    status."""
    claims = len(ok("get", "nodeclaim", "--no-headers").splitlines())
    nodes = [n[0] for n in rows("get", "nodes") if n[0] != "karpenter-lab-control-plane"]
    pods = Counter(p[2] for p in rows("get", "pod", "-l", "app=inflate"))
    return claims, len(nodes), dict(pods)


def scaled_to_five() -> list[tuple[int, int, dict[str, int]]]:
    karpenter_lab()
    ok("apply", "-f", seed("exp1-nodepool.yaml"), "-f", seed("exp1-inflate.yaml"))
    assert ok("scale", "deploy", "inflate", "--replicas=5") == "deployment.apps/inflate scaled\n"
    samples = []
    for _ in range(10):  # the document's loop: ten times a sample, then `sleep 5`
        samples.append(sample())
        ok("advance", "5s")
    return samples


# 000, experiment 1: provisioning and scale to zero -------------------------------------------------------------


def test_000_exp1_applied_at_zero_replicas_makes_no_nodeclaim_and_nodes_shows_the_control_plane(lab):
    karpenter_lab()
    assert ok("apply", "-f", seed("exp1-nodepool.yaml"), "-f", seed("exp1-inflate.yaml")) == (
        "nodepool.karpenter.sh/default created\n"
        "kwoknodeclass.karpenter.kwok.sh/default created\n"
        "deployment.apps/inflate created\n"
    )
    ok("advance", "30s")
    assert [n[:3] for n in rows("get", "nodes")] == [["karpenter-lab-control-plane", "Ready", "control-plane"]]
    assert karp("get", "nodeclaim") == (0, "", "No resources found.\n")


def test_000_exp1_five_pods_are_pending_then_running_on_one_nodeclaim_within_5s(lab):
    samples = scaled_to_five()
    assert samples[0] == (0, 0, {"Pending": 5})
    assert samples[1:] == [(1, 1, {"Running": 5})] * 9
    pods = json.loads(ok("get", "pods", "-l", "app=inflate", "-o", "json"))["items"]
    [node] = {p["spec"]["nodeName"] for p in pods}  # all five on the one node, batched
    assert node != "karpenter-lab-control-plane"


def test_000_exp1_the_nodeclaim_is_an_on_demand_c8x_ready_and_its_node_has_7900m_and_16374mi(lab):
    scaled_to_five()
    [claim] = json.loads(ok("get", "nodeclaim", "-o", "json"))["items"]
    labels = claim["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "c-8x-amd64-linux"
    assert labels["karpenter.sh/capacity-type"] == "on-demand"
    assert labels["topology.kubernetes.io/zone"].startswith("test-zone-")
    assert [c["status"] for c in claim["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    node = json.loads(ok("get", "node", claim["status"]["nodeName"], "-o", "json"))
    assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == ("7900m", "16374Mi")


def test_000_exp1_nodes_are_counted_by_the_kwok_in_their_names(lab):
    scaled_to_five()
    names = [n[0] for n in rows("get", "nodes")]
    assert sum("kwok" in name for name in names) == 1
    [claim] = rows("get", "nodeclaim")
    assert re.fullmatch(rf"kwok-{claim[0]}-.+", next(n for n in names if "kwok" in n))


def test_000_exp1_created_nodeclaim_logs_the_batch_requests_and_54_fitting_types_of_72_amd64(lab):
    scaled_to_five()
    [created] = logs("created nodeclaim")
    assert created["requests"] == {"cpu": "5", "pods": "5"}
    assert created["instance-types"] == (
        "c-128x-amd64-linux, c-128x-amd64-windows, c-16x-amd64-linux, c-16x-amd64-windows, c-192x-amd64-linux "
        "and 49 other(s)"
    )
    kwok = models.Catalog.objects.get(name="kwok").instance_types.all()
    assert kwok.count() == 144
    assert sum(1 for it in kwok if it.labels.get("kubernetes.io/arch") == "amd64") == 72


def test_000_exp1_scaled_to_zero_the_nodeclaim_and_node_go_between_31_and_36_seconds(lab):
    scaled_to_five()
    assert ok("scale", "deploy", "inflate", "--replicas=0") == "deployment.apps/inflate scaled\n"
    scaled_at = lab_now()
    scaled = int(scaled_at)  # whole seconds, as the log's times are
    seen = []
    while True:  # the document's loop: sample, stop at 0 NodeClaims, else wait 5 s
        claims, nodes, _ = sample()
        seen.append((round(lab_now() - scaled_at), claims, nodes))
        if claims == 0:
            break
        ok("advance", "5s")
    assert seen == [(t, 1, 1) for t in range(0, 35, 5)] + [(35, 0, 0)]
    decided, tainted, deleted = (
        logs("disrupting node(s)")[-1],
        logs("tainted node")[-1],
        logs("deleted nodeclaim")[-1],
    )
    at = {name: parse_timestamp(r["time"]) - scaled for name, r in (("d", decided), ("t", tainted), ("x", deleted))}
    assert 31 <= at["x"] <= 36
    assert at["d"] <= at["t"] <= at["x"]  # decision, taint, deletion: in that order
    assert 5 <= at["x"] - at["d"] <= 7  # about 6 s from decision to deletion
    assert at["d"] >= 10  # consolidateAfter: 10s of it waits for the node to be consolidatable
    assert re.fullmatch(
        r"Empty/[^:]+: delete: nodepools=\[default\]: \[[^]]+\] \(savings: \$0\.22\)", decided["command"]
    )
    assert (decided["decision"], decided["disrupted-node-count"], decided["replacement-node-count"]) == (
        "delete",
        1,
        0,
    )
    assert decided["pod-count"] == 0
    assert [n["instance-type"] for n in decided["disrupted-nodes"]] == ["c-8x-amd64-linux"]
    assert [n[0] for n in rows("get", "nodes")] == ["karpenter-lab-control-plane"]


# 000, experiment 2: taints ---------------------------------------------------------------------------------------


def placement(cluster: str) -> Counter[str]:
    pods = json.loads(ok("--cluster", cluster, "-n", "nodepool", "get", "pods", "-o", "json"))["items"]
    return Counter(p["spec"].get("nodeName", "") for p in pods)


def test_000_exp2_a_noschedule_taint_moves_pods_only_when_they_are_made_again(lab):
    # `kind create cluster --config kind-taint.yaml`: another cluster, with exp2-nodes.yaml's two workers.
    ok("cluster", "create", "taint-lab")
    k = ("--cluster", "taint-lab")
    ok(*k, "apply", "-f", seed("exp2-nodes.yaml"))
    assert [n[0] for n in rows(*k, "get", "nodes")] == [
        "taint-lab-control-plane",
        "taint-lab-worker",
        "taint-lab-worker2",
    ]
    ok(*k, "apply", "-f", seed("exp2-cpu-only.yaml"))
    assert placement("taint-lab") == {"taint-lab-worker": 2, "taint-lab-worker2": 2}
    assert ok(*k, "taint", "node", "taint-lab-worker", "nvidia.com/gpu=present:NoSchedule", "--overwrite") == (
        "node/taint-lab-worker modified\n"
    )
    assert ok(*k, "get", "node", "taint-lab-worker", "-o", "jsonpath={.spec.taints}") == (
        '[{"effect":"NoSchedule","key":"nvidia.com/gpu","value":"present"}]\n'
    )
    assert placement("taint-lab") == {"taint-lab-worker": 2, "taint-lab-worker2": 2}  # NoSchedule evicts nobody
    assert ok(*k, "-n", "nodepool", "rollout", "restart", "deploy", "cpu-only") == (
        "deployment.apps/cpu-only restarted\n"
    )
    ok(*k, "advance", "10s")
    assert placement("taint-lab") == {"taint-lab-worker2": 4}
    ok(*k, "apply", "-f", seed("exp2-gpu-work.yaml"))
    pods = json.loads(ok(*k, "-n", "nodepool", "get", "pods", "-o", "json"))["items"]
    by_app = Counter((p["metadata"]["labels"]["app"], p["spec"]["nodeName"]) for p in pods)
    assert by_app == {("cpu-only", "taint-lab-worker2"): 4, ("gpu-work", "taint-lab-worker"): 2}
    assert {p["status"]["phase"] for p in pods} == {"Running"}


# 000, experiment 3: DRA ------------------------------------------------------------------------------------------


def dra_state() -> tuple[int, int, int, list[str], Counter[str]]:
    """NodeClaims, nodes (other than the control plane), ResourceSlices, claim states, pods by status."""
    claims = json.loads(ok("get", "resourceclaims", "-o", "json"))["items"]
    states = sorted({_claim_state(c) for c in claims})
    return (
        len(rows("get", "nodeclaims")),
        len([n for n in rows("get", "nodes") if n[0] != "karpenter-lab-control-plane"]),
        len(rows("get", "resourceslices")),
        states,
        Counter(p[2] for p in rows("get", "pod", "-l", "app=dra-test")),
    )


def _claim_state(claim: dict) -> str:
    status = claim.get("status") or {}
    if status.get("allocation"):
        return "allocated,reserved" if status.get("reservedFor") else "allocated"
    return "pending"


def dra_outcome() -> None:
    """Two pods each claiming the one gpu-0 an m-family amd64 type declares: two NodeClaims of the smallest, m-1x;
    their nodes exist before the driver's slices; then each claim holds the gpu-0 of its own pod's node."""
    [*created] = logs("created nodeclaim")[-2:]
    for record in created:
        assert record["requests"] == {"cpu": "10m", "pods": "1"}
        assert record["instance-types"] == (
            "m-128x-amd64-linux, m-128x-amd64-windows, m-16x-amd64-linux, m-16x-amd64-windows, m-192x-amd64-linux "
            "and 19 other(s)"
        )
    claims = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims] == ["m-1x-amd64-linux"] * 2
    assert [[x["status"] for x in c["status"]["conditions"] if x["type"] == "Ready"] for c in claims] == [["True"]] * 2
    slices = json.loads(ok("get", "resourceslices", "-o", "json"))["items"]
    nodes = sorted(c["status"]["nodeName"] for c in claims)
    assert sorted(s["spec"]["nodeName"] for s in slices) == nodes
    assert [(s["spec"]["driver"], [d["name"] for d in s["spec"]["devices"]]) for s in slices] == [
        ("gpu.example.com", ["gpu-0"])
    ] * 2
    pods = {
        p["metadata"]["name"]: p for p in json.loads(ok("get", "pods", "-l", "app=dra-test", "-o", "json"))["items"]
    }
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == nodes
    assert {p["status"]["phase"] for p in pods.values()} == {"Running"}
    for claim in json.loads(ok("get", "resourceclaims", "-o", "json"))["items"]:
        [result] = claim["status"]["allocation"]["devices"]["results"]
        [holder] = claim["status"]["reservedFor"]
        node = pods[holder["name"]]["spec"]["nodeName"]
        assert (result["driver"], result["pool"], result["device"]) == (
            "gpu.example.com",
            f"gpu.example.com/{node}",
            "gpu-0",
        )


def test_000_exp3_each_pod_claiming_the_one_declared_gpu_gets_an_m1x_node_of_its_own(lab):
    karpenter_lab()
    ok("apply", "-f", seed("exp1-nodepool.yaml"), "-f", seed("exp1-inflate.yaml"))
    ok("apply", "-f", str(SETUP / "exp3-kwok-dynamicresources.yaml"))  # step 3: the provider's declaration
    ok("apply", "-f", seed("exp3-dra.yaml"))
    ok("apply", "-f", seed("exp3-dra-test.yaml"))
    seen = [dra_state()]
    for _ in range(13):  # the document's loop: 14 samples, 5 s apart
        ok("advance", "5s")
        seen.append(dra_state())
    assert seen[0] == (0, 0, 0, ["pending"], {"Pending": 2})
    assert seen[1][:3] == (2, 2, 0)  # the nodes first, their devices not yet
    assert seen[-1] == (2, 2, 2, ["allocated,reserved"], {"Running": 2})
    first_slices = next(i for i, s in enumerate(seen) if s[2])
    assert all(s[:2] == (2, 2) for s in seen[1:]) and first_slices > 1
    dra_outcome()
    # From zero again: delete, wait for the NodeClaims to go; nodes and slices go with them.
    ok("delete", "-f", seed("exp3-dra-test.yaml"))
    for _ in range(60):
        if not rows("get", "nodeclaims"):
            break
        ok("advance", "5s")
    assert dra_state() == (0, 0, 0, [], Counter())
    ok("apply", "-f", seed("exp3-dra-test.yaml"))
    ok("advance", "70s")
    assert dra_state() == (2, 2, 2, ["allocated,reserved"], {"Running": 2})
    dra_outcome()


# 004: spot-to-spot consolidation ---------------------------------------------------------------------------------


def spot_nodes() -> dict[str, str]:
    """Node name -> instance type of the NodePool's nodes."""
    claims = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    return {c["status"]["nodeName"]: c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims}


def inflate_placement() -> Counter[str]:
    return Counter(
        p["spec"]["nodeName"] for p in json.loads(ok("get", "pods", "-l", "app=inflate", "-o", "json"))["items"]
    )


def seed_004() -> tuple[str, str]:
    """Seed 000's experiment 1 first (its KWOKNodeClass "default" is left over), then 004 as written; the names of
    the 2xlarge and the large node."""
    karpenter_lab()
    ok("apply", "-f", seed("exp1-nodepool.yaml"), "-f", seed("exp1-inflate.yaml"))
    assert ok("delete", "deployment", "inflate") == 'deployment.apps "inflate" deleted\n'
    assert ok("delete", "nodepool.karpenter.sh", "default") == 'nodepool.karpenter.sh "default" deleted\n'
    assert karp("delete", "ec2nodeclass.karpenter.k8s.aws", "default")[2] == (
        'Error from server (NotFound): ec2nodeclasses.karpenter.k8s.aws "default" not found\n'
    )
    assert ok("apply", "-f", seed("spottospot.yaml")) == (
        "nodepool.karpenter.sh/default created\nec2nodeclass.karpenter.k8s.aws/default created\n"
    )
    nodepool = json.loads(ok("get", "nodepool", "default", "-o", "json"))
    assert nodepool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert ok("apply", "-f", seed("spot-consolidation.yaml")) == "deployment.apps/inflate created\n"
    nodepool = json.loads(ok("get", "nodepool", "default", "-o", "json"))  # as its controller has it now
    assert [c["status"] for c in nodepool["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    ok("advance", "10s")
    nodes = spot_nodes()
    assert sorted(t.split(".")[1] for t in nodes.values()) == ["2xlarge", "large"]
    claims = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    assert {c["metadata"]["labels"]["karpenter.sh/capacity-type"] for c in claims} == {"spot"}
    assert sum(int(c["status"]["capacity"]["cpu"]) for c in claims) == 10  # the NodePool's limit, reached
    assert Counter(p[2] for p in rows("get", "pods")) == {"Running": 8}
    big = next(n for n, t in nodes.items() if t.endswith(".2xlarge"))
    small = next(n for n, t in nodes.items() if t.endswith(".large"))
    return big, small


def test_004_the_nodepool_is_the_ec2nodeclass_of_its_name_and_eight_pods_get_a_2xlarge_and_a_large(lab):
    seed_004()
    [resolved] = [
        e for e in json.loads(ok("get", "events", "-o", "json"))["items"] if e["reason"] == "NodeClassResolved"
    ]
    assert resolved["involvedObject"]["kind"] == "NodePool"
    assert resolved["message"].startswith('the nodeClassRef names no kind: the EC2NodeClass "default"')


def test_004_scaled_to_4_the_large_nodes_pod_moves_and_a_spot_2xlarge_is_never_replaced(lab):
    big, small = seed_004()
    assert ok("scale", "deployment", "inflate", "--replicas", "4") == "deployment.apps/inflate scaled\n"
    assert inflate_placement() == {big: 3, small: 1}
    ok("advance", "60s")
    assert spot_nodes() == {big: spot_nodes()[big]} and inflate_placement() == {big: 4}
    messages = [json.loads(line)["message"] for line in ok("logs").splitlines()]
    deleting = [m for m in messages if m.startswith("disrupting via consolidation delete")]
    assert len(deleting) == 1 and "terminating 1 nodes (1 pods) " + small in deleting[0]
    ok("scale", "deployment", "inflate", "--replicas", "3")
    ok("advance", "10m")
    assert spot_nodes() == {big: spot_nodes()[big]}  # spot: only ever deleted, never replaced by an xlarge
    said = {
        e["message"]
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "Unconsolidatable"
    }
    assert "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node" in said


def test_004_with_spot_to_spot_on_a_spot_node_is_replaced_only_where_15_cheaper_types_exist(lab, settings):
    settings.KARPUI_FEATURE_GATES = {"SpotToSpotConsolidation": True}
    big, _ = seed_004()
    ok("scale", "deployment", "inflate", "--replicas", "3")
    ok("advance", "10m")
    assert list(spot_nodes()) == [big]
    said = {
        e["message"]
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "Unconsolidatable"
    }
    assert any(
        re.fullmatch(
            r"SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to "
            r"consolidate, got \d+",
            m,
        )
        for m in said
    ), said
