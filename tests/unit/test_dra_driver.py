"""The lab's dra-kwok-driver polls every 30 s from the moment it has a DRAConfig (dra-kwok-driver's
pkg/controllers/resourceslice.go: a singleton requeued after pollingPeriod from its start)."""

from pathlib import Path

import yaml

from provisioner.cluster.memory import ObjectStore
from provisioner.sim.dra import publish

GPU = next(d for d in yaml.safe_load_all(Path("examples/dra/gpu.yaml").read_text()) if d["kind"] == "DRAConfig")
KWOK_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "kwok-a",
        "annotations": {"kwok.x-k8s.io/node": "fake"},
        "labels": {"karpenter.kwok.sh/instance-family": "m", "kubernetes.io/arch": "amd64"},
    },
}


def slices(store: ObjectStore) -> list[str]:
    return [s["metadata"]["name"] for s in store.list("ResourceSlice")]


def test_the_driver_starts_its_30_s_grid_when_its_first_draconfig_exists():
    store = ObjectStore([], clock=lambda: 0.0)
    store.create(KWOK_NODE)
    assert publish(store, 100.0, None) == (False, None)  # no configuration yet: no poll, no phase
    store.create(GPU)
    assert publish(store, 107.0, None) == (True, 107.0)
    assert slices(store) == ["gpu-example-com-kwok-a-gpu"]
    store.delete("ResourceSlice", "gpu-example-com-kwok-a-gpu")
    assert publish(store, 136.0, 107.0) == (False, 107.0)  # the next poll is at 137
    assert slices(store) == []
    assert publish(store, 137.0, 107.0) == (True, 137.0)
    assert slices(store) == ["gpu-example-com-kwok-a-gpu"]
