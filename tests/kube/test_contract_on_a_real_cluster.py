"""The contract suites' "real" parametrisation — what a user runs on kind with KUBECONFIG set — run here against
the lab's API in a process of its own, named by KUBECONFIG as a real cluster would be: nothing skipped, and the
cluster left as it was found."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from tests.kube.harness import ROOT


def test_the_contract_suites_pass_against_the_cluster_kubeconfig_names_and_leave_it_clean(
    lab_api: Any, tmp_path: Path
) -> None:
    name = lab_api.new_cluster("real", components="none")
    kubeconfig = lab_api.kubeconfig(name, tmp_path / "kubeconfig")
    cluster = UncachedCluster(Transport.from_kubeconfig(str(kubeconfig)))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kind-control-plane"}}
    cluster.create(node)  # a real cluster is never empty: what was there is not the suites' business
    before = {kind: len(cluster.list(kind)) for kind in ("Namespace", "Node", "Pod", "PodDisruptionBudget")}
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KARPUI_TEST_WORKERS": "0"}

    done = subprocess.run(  # noqa: S603 - this interpreter, this repository's tests
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "tests/contract", "-k", "real"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("SKIPPED", "FAILED", "ERROR"))], done.stdout[-4000:]
    passed = [line.split("::")[0] for line in lines if line.startswith("PASSED") and line.endswith("[real]")]
    # The reads of objects others wrote, which need `seed`, ran too (they were skipped on a real cluster).
    assert passed.count("PASSED tests/contract/test_cluster_reads.py") == 4
    assert passed.count("PASSED tests/contract/test_cluster_api.py") == 11
    assert {kind: len(cluster.list(kind)) for kind in before} == before
