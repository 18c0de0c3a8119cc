"""The real control plane itself (hack/kube/cluster.py over the binaries hack/kube/build.sh builds), and the cluster
port's contract suites against it: what a user gets from `hack/kube/cluster.py up`, checked with kubectl 1.32 and
the kube adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.kube.harness import run_contract_suites

pytestmark = pytest.mark.real


def test_the_local_cluster_is_kubernetes_1_37_with_dra_and_karpenters_crds(real: Any) -> None:
    version = json.loads(real.kubectl("get", "--raw", "/version").stdout)
    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "37", "v1.37.2")
    resources = real.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert {"deviceclasses.resource.k8s.io", "resourceclaims.resource.k8s.io", "resourceslices.resource.k8s.io"} <= set(
        resources
    )
    versions = json.loads(real.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
    assert versions["preferredVersion"]["version"] == "v1"
    crds = real.kubectl("get", "crd", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert {"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "kwoknodeclasses.karpenter.kwok.sh"} <= set(crds)
    # The controller-manager made the default ServiceAccount; the scheduler and kwok answer their health checks.
    assert real.kubectl("get", "serviceaccount", "default", "-o", "name").stdout.strip() == "serviceaccount/default"
    assert real.kubectl("get", "nodes", "-o", "name").stdout == ""
    ready = real.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert ready.rstrip().endswith("readyz check passed")


def test_a_deployment_gets_pods_bound_by_the_scheduler_and_run_by_kwok_on_a_fake_node(real: Any) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "kwok-node-0", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": []},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }
    real.kubectl("create", "-f", "-", input=json.dumps(node))
    real.kubectl("create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=3")
    real.kubectl("wait", "--for=condition=Available", "deployment/web", "--timeout=90s")
    pods = json.loads(real.kubectl("get", "pods", "-o", "json").stdout)["items"]
    assert sorted((p["spec"]["nodeName"], p["status"]["phase"]) for p in pods) == [("kwok-node-0", "Running")] * 3
    ready = real.kubectl("get", "node", "kwok-node-0", "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
    assert ready.stdout == "True"


def test_the_contract_suites_pass_against_the_real_api_server_and_leave_it_clean(real: Any) -> None:
    """tests/contract's "real" parametrisation, as a user runs it with KUBECONFIG set: every test that runs against
    the lab's API runs here too. The seeding reads (objects others wrote) are included."""
    client = real.client()
    before = {kind: len(client.list(kind)) for kind in ("Namespace", "Node", "Pod", "PodDisruptionBudget")}
    passed = run_contract_suites(real.kubeconfig)
    assert passed.count("PASSED tests/contract/test_cluster_reads.py") == 5
    assert passed.count("PASSED tests/contract/test_cluster_api.py") == 12
    assert {kind: len(client.list(kind)) for kind in before} == before


def test_a_node_holding_its_conditions_stays_not_ready_where_kwok_makes_another_ready_again(real: Any) -> None:
    # What a node repair comparison needs (bench/versus_karpenter.py's node-condition step): hack/kube's kwok stages
    # pass by a node annotated karpui.dev/kwok-hold-conditions, where kwok's node-initialize makes any other Ready.
    for name in ("kwok-held", "kwok-plain"):
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        }
        real.kubectl("create", "-f", "-", input=json.dumps(node))
    real.kubectl("wait", "--for=condition=Ready", "node/kwok-held", "node/kwok-plain", "--timeout=60s")
    real.kubectl("annotate", "node", "kwok-held", "karpui.dev/kwok-hold-conditions=true")
    not_ready = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Test"}]}})
    for name in ("kwok-held", "kwok-plain"):
        real.kubectl("patch", "node", name, "--subresource=status", "--type=strategic", "-p", not_ready)
    real.kubectl("wait", "--for=condition=Ready", "node/kwok-plain", "--timeout=60s")
    ready = "jsonpath={.status.conditions[?(@.type=='Ready')].status} {.status.conditions[?(@.type=='Ready')].reason}"
    assert real.kubectl("get", "node", "kwok-held", "-o", ready).stdout == "False Test"
