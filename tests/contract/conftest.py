"""The cluster port's implementations, as fixtures the contract suites run against.

Every implementation of `provisioner.cluster.api.ClusterAPI` must pass tests/contract: today the lab's in-memory
API server; the kube adapter (over HTTP, against the lab's Kubernetes API or a real cluster) joins the list.
"""

from __future__ import annotations

import pytest

from provisioner.cluster.memory import ObjectStore

NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory"])
def api(request):
    """A fresh, empty cluster behind the port."""
    if request.param == "memory":
        return ObjectStore(clock=Clock())
    raise AssertionError(request.param)
