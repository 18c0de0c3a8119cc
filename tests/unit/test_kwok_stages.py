"""hack/kube/cluster.py's copy of kwok's stages: node-initialize passes by nodes holding their conditions, and the
node status heartbeat comes every 20-30 s (kube-controller-manager retries a not-ready taint it failed to lift only
at the node's next status update)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

CLUSTER = Path(__file__).resolve().parents[2] / "hack" / "kube" / "cluster.py"

HEARTBEAT = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat-with-lease
spec:
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next: {}
"""
INITIALIZE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
"""


def cluster_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_kube_cluster", CLUSTER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_heartbeat_comes_every_20_to_30_s_and_node_initialize_passes_by_held_nodes(tmp_path: Path) -> None:
    source = tmp_path / "stages"
    source.mkdir()
    (source / "node-heartbeat-with-lease.yaml").write_text(HEARTBEAT)
    (source / "node-initialize.yaml").write_text(INITIALIZE)
    paths = cluster_module().kwok_stages(source, tmp_path / "copied")
    assert [Path(p).name for p in paths] == ["node-heartbeat-with-lease.yaml", "node-initialize.yaml"]
    heartbeat, initialize = (Path(p).read_text() for p in paths)
    assert heartbeat == HEARTBEAT.replace("600000", "20000").replace("610000", "30000")
    assert initialize == INITIALIZE.replace(
        "    matchExpressions:\n",
        "    matchExpressions:\n"
        "    - key: '.metadata.annotations[\"karpui.dev/kwok-hold-conditions\"]'\n"
        "      operator: 'DoesNotExist'\n",
    )


def test_a_kwok_whose_heartbeat_changed_is_refused_not_copied_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "stages"
    source.mkdir()
    (source / "node-heartbeat-with-lease.yaml").write_text(HEARTBEAT.replace("600000", "300000"))
    with pytest.raises(AssertionError, match="not every 600-610 s any more"):
        cluster_module().kwok_stages(source, tmp_path / "copied")
