"""A pod's Ready condition as PodDisruptionBudgets' unhealthyPodEvictionPolicy reads it (Karpenter's pdb.go)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.manifests.pod import pod_from_manifest
from tests.builders import pod
from tests.disruption_builders import pdb


def manifest(*conditions: tuple[str, str]) -> dict:
    return {
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "pause"}], "nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": t, "status": s} for t, s in conditions]},
    }


@pytest.mark.parametrize(
    ("conditions", "unready"),
    [
        ((("Ready", "False"),), True),
        ((("Ready", "True"),), False),
        # Karpenter's check is for Ready=False itself: Unknown or no condition yet is not "unhealthy" to it.
        ((("Ready", "Unknown"),), False),
        ((), False),
        ((("ContainersReady", "False"),), False),
    ],
)
def test_a_pod_is_unready_only_when_its_ready_condition_is_false(conditions, unready):
    assert pod_from_manifest(manifest(*conditions)).unready is unready


@pytest.mark.parametrize(
    ("always_allow", "unready", "lets_go"), [(True, True, True), (True, False, False), (False, True, False)]
)
def test_a_pdb_lets_a_pod_go_whatever_it_allows_only_when_it_always_allows_unhealthy_pods_and_the_pod_is_not_ready(
    always_allow, unready, lets_go
):
    policy = replace(pdb(allowed=0, app="web"), fully_blocking=True, always_allow_unhealthy=always_allow)
    assert policy.lets_go(replace(pod(labels={"app": "web"}), unready=unready)) is lets_go
