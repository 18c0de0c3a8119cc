"""The seed experiments (tests/fixtures/seeds/README.md) with karpui in kwok mode on the real control plane: the
documents' kubectl lines against kube-apiserver 1.37, kube-scheduler binding, kwok making nodes Ready and pods
Running, Karpenter's DRA kwok driver publishing ResourceSlices, and `manage.py engine` provisioning and consolidating,
as an operator runs it (its own process and database, its log lines read as `kubectl logs` would be)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.engineprocess import Database, EngineProcess, wait_for
from tests.kube.harness import ROOT

pytestmark = pytest.mark.real
SEEDS = ROOT / "tests" / "fixtures" / "seeds"


@pytest.fixture
def engine(real: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    """karpui's engine in kwok mode for the real cluster, started once the test's cluster has its namespace for the
    Lease."""
    real.kubectl("create", "namespace", "karpui")
    database = Database(tmp_path / "karpui", tmp_path_factory.getbasetemp())
    database.cluster("real", "kwok", real.kubeconfig)
    started = EngineProcess(database, "real").start()
    yield started
    started.stop()


def pods(real: Any, namespace: str = "default") -> list[dict[str, Any]]:
    return list(json.loads(real.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"])


def listed(real: Any, *args: str) -> list[dict[str, Any]]:
    return list(json.loads(real.kubectl("get", *args, "-o", "json").stdout)["items"])


def running(real: Any, count: int, namespace: str = "default") -> bool:
    found = pods(real, namespace)
    return len(found) == count and all(p["status"].get("phase") == "Running" for p in found)


def claim_ready(real: Any) -> bool:
    claims = listed(real, "nodeclaims")
    return len(claims) == 1 and any(
        c["type"] == "Ready" and c["status"] == "True" for c in claims[0].get("status", {}).get("conditions") or []
    )


def test_000_exp1_five_pods_get_one_c8x_and_scaled_to_zero_it_goes(real: Any, engine: EngineProcess) -> None:
    said = real.kubectl("apply", "-f", str(SEEDS / "exp1-nodepool.yaml"), "-f", str(SEEDS / "exp1-inflate.yaml"))
    assert said.stdout == (
        "nodepool.karpenter.sh/default created\n"
        "kwoknodeclass.karpenter.kwok.sh/default created\n"
        "deployment.apps/inflate created\n"
    )
    wait_for(engine.leads, 60, "the engine leads", (engine,))
    assert listed(real, "nodeclaims") == []
    real.kubectl("scale", "deploy", "inflate", "--replicas=5")
    scaled = time.monotonic()
    wait_for(lambda: running(real, 5), 60, "five pods Running", (engine,))
    print(f"exp1: 5 pods Running {time.monotonic() - scaled:.1f} s after the scale")
    # Pods bind as soon as registration lifts the unregistered taint; the NodeClaim turns Ready on the
    # lifecycle's next pass (Karpenter's too: its initialization reads the node after a one-second sleep).
    wait_for(lambda: claim_ready(real), 60, "the NodeClaim Ready", (engine,))
    print(f"exp1: NodeClaim Ready {time.monotonic() - scaled:.1f} s after the scale (the document: within 5 s)")
    [claim] = listed(real, "nodeclaims")
    labels = claim["metadata"]["labels"]
    assert (labels["node.kubernetes.io/instance-type"], labels["karpenter.sh/capacity-type"]) == (
        "c-8x-amd64-linux",
        "on-demand",
    )
    [node] = listed(real, "nodes")
    assert node["metadata"]["name"] == claim["status"]["nodeName"]
    assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == ("7900m", "16374Mi")
    assert {p["spec"]["nodeName"] for p in pods(real)} == {node["metadata"]["name"]}
    [created] = engine.logs("created nodeclaim")
    assert created["requests"] == {"cpu": "5", "pods": "5"}
    assert created["instance-types"].startswith("c-128x-amd64-linux, ")
    assert created["instance-types"].endswith(" and 49 other(s)")

    real.kubectl("scale", "deploy", "inflate", "--replicas=0")
    scaled = time.monotonic()
    wait_for(lambda: not listed(real, "nodeclaims") and not listed(real, "nodes"), 90, "the node gone", (engine,))
    gone = time.monotonic() - scaled
    print(f"exp1: NodeClaim and node gone {gone:.1f} s after the scale to 0 (the document: 31-36 s)")
    messages = [
        e["message"]
        for e in engine.logs()
        if e["message"] in ("disrupting node(s)", "tainted node", "deleted nodeclaim")
    ]
    assert messages == ["disrupting node(s)", "tainted node", "deleted nodeclaim"]
    [disrupting] = engine.logs("disrupting node(s)")
    assert disrupting["command"].startswith("Empty/")
    assert disrupting["decision"] == "delete"


def on_nodes(real: Any, namespace: str, app: str) -> list[str]:
    return sorted(p["spec"].get("nodeName", "") for p in pods(real, namespace) if p["metadata"]["labels"]["app"] == app)


EXP2_NODES = ["taint-lab-control-plane", "taint-lab-worker", "taint-lab-worker2"]


def ready_nodes(real: Any) -> list[str]:
    return sorted(
        n["metadata"]["name"]
        for n in listed(real, "nodes")
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions") or [])
    )


def test_000_exp2_taints_keep_pods_off_a_node_until_they_tolerate_it(real: Any, engine: EngineProcess) -> None:
    """exp2-nodes.yaml stands for kind's control plane and two workers; here kwok keeps them alive (the annotation)
    as a kubelet would, and kube-scheduler places the pods."""
    for document in yaml.safe_load_all((SEEDS / "exp2-nodes.yaml").read_text()):
        document["metadata"].setdefault("annotations", {})["kwok.x-k8s.io/node"] = "fake"
        real.kubectl("create", "-f", "-", input=json.dumps(document))
    # kind's nodes are Ready before the document's first pod; kwok makes these Ready a moment after they are created,
    # and kube-scheduler would put every pod on the only Ready worker meanwhile.
    wait_for(lambda: ready_nodes(real) == EXP2_NODES, 60, "the three nodes Ready", (engine,))
    real.kubectl("apply", "-f", str(SEEDS / "exp2-cpu-only.yaml"))
    wait_for(lambda: running(real, 4, "nodepool"), 60, "four cpu-only pods Running", (engine,))
    assert on_nodes(real, "nodepool", "cpu-only") == ["taint-lab-worker"] * 2 + ["taint-lab-worker2"] * 2

    said = real.kubectl("taint", "node", "taint-lab-worker", "nvidia.com/gpu=present:NoSchedule", "--overwrite")
    assert said.stdout == "node/taint-lab-worker modified\n"
    taints = real.kubectl("get", "node", "taint-lab-worker", "-o", "jsonpath={.spec.taints}").stdout
    assert taints == '[{"effect":"NoSchedule","key":"nvidia.com/gpu","value":"present"}]'
    time.sleep(2)
    assert on_nodes(real, "nodepool", "cpu-only") == ["taint-lab-worker"] * 2 + ["taint-lab-worker2"] * 2

    real.kubectl("-n", "nodepool", "rollout", "restart", "deploy", "cpu-only")
    real.kubectl("-n", "nodepool", "rollout", "status", "deploy", "cpu-only", "--timeout=120s")
    wait_for(
        lambda: on_nodes(real, "nodepool", "cpu-only") == ["taint-lab-worker2"] * 4 and running(real, 4, "nodepool"),
        60,
        "the restarted pods all on taint-lab-worker2",
        (engine,),
    )
    real.kubectl("apply", "-f", str(SEEDS / "exp2-gpu-work.yaml"))
    wait_for(
        lambda: on_nodes(real, "nodepool", "gpu-work") == ["taint-lab-worker"] * 2 and running(real, 6, "nodepool"),
        60,
        "gpu-work on the tainted worker",
        (engine,),
    )
    assert listed(real, "nodeclaims") == []  # no NodePool: karpui launched nothing


def test_000_exp3_dra_two_claims_get_two_m1x_nodes_and_kube_scheduler_allocates_them(
    real: Any, engine: EngineProcess
) -> None:
    """The real resource.k8s.io/v1 API: Karpenter's DRA kwok driver publishes a slice per matching node (every 30
    s), kube-scheduler allocates each claim gpu-0 on its own node, karpui chose the m-1x for the devices."""
    real.kubectl("apply", "-f", str(SEEDS / "exp1-nodepool.yaml"))
    real.kubectl("apply", "-f", str(SEEDS / "exp3-dra.yaml"))

    def allocated() -> bool:
        claims = listed(real, "resourceclaims")
        return len(claims) == 2 and all((c.get("status") or {}).get("allocation") for c in claims) and running(real, 2)

    for round_ in (1, 2):  # applied, deleted, applied again: the same again
        real.kubectl("apply", "-f", str(SEEDS / "exp3-dra-test.yaml"))
        started = time.monotonic()
        wait_for(allocated, 150, "both claims allocated and both pods Running", (engine,))
        print(f"exp3 round {round_}: claims allocated, pods Running {time.monotonic() - started:.1f} s after apply")
        claims = listed(real, "nodeclaims")
        assert (
            sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims)
            == ["m-1x-amd64-linux"] * 2
        )
        nodes = {c["status"]["nodeName"] for c in claims}
        results = [c["status"]["allocation"]["devices"]["results"][0] for c in listed(real, "resourceclaims")]
        assert sorted((r["driver"], r["device"]) for r in results) == [("gpu.example.com", "gpu-0")] * 2
        assert {r["pool"].split("/", 1)[1] for r in results} == nodes  # each on its own node's pool
        slices = listed(real, "resourceslices")
        assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(nodes)
        real.kubectl("delete", "-f", str(SEEDS / "exp3-dra-test.yaml"))
        wait_for(
            lambda: not listed(real, "nodeclaims") and not listed(real, "nodes") and not listed(real, "resourceslices"),
            180,
            "NodeClaims, nodes and slices gone",
            (engine,),
        )


def test_004_spot_nodes_split_3_to_1_and_the_large_is_deleted_not_replaced(real: Any, engine: EngineProcess) -> None:
    """Seed 004 on the real API: its v1beta1 NodePool and EC2NodeClass as Karpenter 1.x serves them (see
    tests/kube/test_kwok_mode.py's seed_004_manifests), the rest as the document's kubectl lines."""
    from tests.kube.test_kwok_mode import seed_004_manifests

    real.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(seed_004_manifests()))
    real.kubectl("apply", "-f", str(SEEDS / "spot-consolidation.yaml"))
    wait_for(lambda: running(real, 8), 90, "eight pods Running", (engine,))
    claims = listed(real, "nodeclaims")
    types = sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims)
    assert [t.split(".")[1] for t in types] == ["2xlarge", "large"]
    assert {c["metadata"]["labels"]["karpenter.sh/capacity-type"] for c in claims} == {"spot"}
    [big] = [c for c in claims if c["metadata"]["labels"]["node.kubernetes.io/instance-type"].endswith(".2xlarge")]
    real.kubectl("scale", "deployment", "inflate", "--replicas", "4")
    wait_for(lambda: len(listed(real, "nodeclaims")) == 1 and running(real, 4), 180, "the large node gone", (engine,))
    assert [c["metadata"]["name"] for c in listed(real, "nodeclaims")] == [big["metadata"]["name"]]
    [disrupting] = engine.logs("disrupting node(s)")
    assert disrupting["command"].startswith("Underutilized/") and disrupting["decision"] == "delete"
    real.kubectl("scale", "deployment", "inflate", "--replicas", "3")
    time.sleep(30)  # consolidation had its chance (consolidateAfter 0s, a pass every 10 s): a spot node stays
    assert [c["metadata"]["name"] for c in listed(real, "nodeclaims")] == [big["metadata"]["name"]]
    assert len(engine.logs("disrupting node(s)")) == 1
