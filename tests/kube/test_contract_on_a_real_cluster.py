"""The contract suites' "real" parametrisation — what a user runs on kind with KUBECONFIG set — run here against
the lab's API in a process of its own, named by KUBECONFIG as a real cluster would be: nothing skipped, and the
cluster left as it was found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from tests.kube.harness import run_contract_suites


def test_the_contract_suites_pass_against_the_cluster_kubeconfig_names_and_leave_it_clean(
    lab_api: Any, tmp_path: Path
) -> None:
    name = lab_api.new_cluster("real", components="none")
    kubeconfig = lab_api.kubeconfig(name, tmp_path / "kubeconfig")
    cluster = UncachedCluster(Transport.from_kubeconfig(str(kubeconfig)))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kind-control-plane"}}
    cluster.create(node)  # a real cluster is never empty: what was there is not the suites' business
    before = {kind: len(cluster.list(kind)) for kind in ("Namespace", "Node", "Pod", "PodDisruptionBudget")}
    passed = run_contract_suites(kubeconfig)
    # The reads of objects others wrote, which need `seed`, ran too (they were skipped on a real cluster).
    assert passed.count("PASSED tests/contract/test_cluster_reads.py") == 5
    assert passed.count("PASSED tests/contract/test_cluster_api.py") == 12
    assert {kind: len(cluster.list(kind)) for kind in before} == before
