"""deploy/ under real RBAC: `kubectl apply -k` of an overlay against the real control plane, then karpui's engine run
as a process (there is no container runtime here) with a token of the overlay's ServiceAccount (`kubectl create
token`), so kube-apiserver's RBAC authorizer judges every request it sends, not a merge of the roles in a test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.engineprocess import Database, EngineProcess, wait_for
from tests.kube.harness import ROOT

pytestmark = pytest.mark.real
SEEDS = ROOT / "tests" / "fixtures" / "seeds"


def apply_overlay(real: Any, overlay: str) -> str:
    said = real.kubectl("apply", "-k", str(ROOT / "deploy" / "overlays" / overlay)).stdout
    # karpui's own workloads cannot run without a container runtime; left as pods without a node, karpui in kwok
    # mode would launch nodes for them. The engine runs as a process instead, with the ServiceAccount's token.
    real.kubectl("-n", "karpui", "delete", "deployments,jobs", "--all")
    real.kubectl("-n", "karpui", "delete", "pods", "--all", "--grace-period=0", "--force")
    return said


def token_kubeconfig(real: Any) -> Path:
    token = real.kubectl("-n", "karpui", "create", "token", "karpui", "--duration=2h").stdout.strip()
    assert token.count(".") == 2  # a JWT signed by the cluster's service-account key
    return Path(real.token_kubeconfig(token))


@pytest.fixture
def database(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Database:
    return Database(tmp_path / "karpui", tmp_path_factory.getbasetemp())


@pytest.fixture
def engines() -> Iterator[list[EngineProcess]]:
    started: list[EngineProcess] = []
    yield started
    for engine in started:
        engine.stop()


def forbidden(engine: EngineProcess) -> list[str]:
    text = engine.output.read_text(errors="replace") + engine.errors.read_text(errors="replace")
    return [line for line in text.splitlines() if "Forbidden" in line or " 403" in line or "forbidden" in line]


def listed(real: Any, kind: str) -> list[dict[str, Any]]:
    return list(json.loads(real.kubectl("get", kind, "-o", "json").stdout)["items"])


def running(real: Any, count: int) -> bool:
    pods = listed(real, "pods")
    return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


def test_the_kwok_overlay_lets_the_engine_run_the_seeds_with_its_service_account_and_no_403(
    real: Any, database: Database, engines: list[EngineProcess]
) -> None:
    said = apply_overlay(real, "kwok")
    assert "clusterrole.rbac.authorization.k8s.io/karpui-kwok created" in said
    assert "role.rbac.authorization.k8s.io/karpui-leases created" in said
    database.cluster("real", "kwok", token_kubeconfig(real))
    engine = EngineProcess(database, "real").start()
    engines.append(engine)
    wait_for(engine.leads, 90, "the engine leads with its token", (engine,))
    lease = json.loads(real.kubectl("-n", "karpui", "get", "lease", "karpui-engine", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] in "\n".join(engine.lines())

    # 000 exp1: provisioning, then the empty node consolidated away (nodes, NodeClaims, taints, evictions, events).
    real.kubectl("apply", "-f", str(SEEDS / "exp1-nodepool.yaml"), "-f", str(SEEDS / "exp1-inflate.yaml"))
    real.kubectl("scale", "deploy", "inflate", "--replicas=5")
    wait_for(lambda: running(real, 5), 90, "five pods Running", (engine,))
    real.kubectl("scale", "deploy", "inflate", "--replicas=0")
    wait_for(lambda: not listed(real, "nodeclaims") and not listed(real, "nodes"), 120, "the node gone", (engine,))
    # 000 exp3: DRA (DeviceClasses, claims, slices, DRAConfigs read; NodePool status written).
    real.kubectl("apply", "-f", str(SEEDS / "exp3-dra.yaml"), "-f", str(SEEDS / "exp3-dra-test.yaml"))

    def allocated() -> bool:
        claims = listed(real, "resourceclaims")
        return len(claims) == 2 and all((c.get("status") or {}).get("allocation") for c in claims) and running(real, 2)

    wait_for(allocated, 180, "both claims allocated, both pods Running", (engine,))
    assert forbidden(engine) == []
    status = json.loads(real.kubectl("get", "nodepool", "default", "-o", "json").stdout)["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"


def test_the_observe_overlays_token_reads_and_writes_only_what_the_gate_needs(real: Any) -> None:
    apply_overlay(real, "observe")
    kubeconfig = token_kubeconfig(real)

    def can(verb: str, resource: str, namespace: str = "") -> bool:
        scope = ["-n", namespace] if namespace else []
        # kubectl reads `kind/name` as an object's name: a subresource goes in its own flag.
        resource, _, subresource = resource.partition("/")
        scope += [f"--subresource={subresource}"] if subresource else []
        done = real.kubectl("auth", "can-i", verb, resource, *scope, kubeconfig=kubeconfig, check=False)
        return done.stdout.strip() == "yes"

    allowed = {
        ("list", "pods"),
        ("watch", "nodes"),
        ("get", "nodepools.karpenter.sh"),
        ("list", "resourceclaims.resource.k8s.io"),
        ("delete", "nodeclaims.karpenter.sh"),  # a person's approved request to remove a node
        ("update", "nodepools.karpenter.sh"),  # the gate's hold budgets
        ("patch", "nodes"),  # do-not-disrupt on the nodes an approved command does not name, while released
    }
    refused = {
        ("create", "nodeclaims.karpenter.sh"),
        ("update", "nodeclaims.karpenter.sh"),
        ("patch", "nodepools.karpenter.sh"),
        ("update", "nodepools.karpenter.sh/status"),
        ("create", "nodes"),
        ("delete", "nodes"),
        ("delete", "pods"),
        ("create", "pods/eviction"),
        ("create", "events"),
        ("list", "secrets"),
    }
    assert {pair for pair in allowed | refused if can(*pair)} == allowed
    assert can("update", "leases.coordination.k8s.io", "karpui")
    assert not can("update", "leases.coordination.k8s.io", "default")
    assert not can("list", "leases.coordination.k8s.io")  # across every namespace: the Role is karpui's only
    # A write it may not make, sent anyway, is the API server's 403.
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-observes"}}
    done = real.kubectl("create", "-f", "-", input=json.dumps(node), kubeconfig=kubeconfig, check=False)
    assert done.returncode == 1
    assert 'nodes is forbidden: User "system:serviceaccount:karpui:karpui" cannot create resource "nodes"' in (
        done.stderr
    )
