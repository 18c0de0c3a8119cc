"""Fixtures for the kube adapter's own tests: a fresh cluster on the lab's API process, or the session's real control
plane (tests/kube/backends.py), reached directly or through the fault-injecting proxy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from provisioner.adapters.kinds import BY_KIND
from provisioner.adapters.kube import KubeCluster
from provisioner.adapters.transport import Transport
from tests.kube.backends import BACKENDS, Target, target


@dataclass
class Remote:
    """A cluster served over HTTP, and how to reach it."""

    target: Target
    adapters: list[KubeCluster] = field(default_factory=list)

    @property
    def proxy(self) -> Any:
        return self.target.proxy

    def kubeconfig(self, via_proxy: bool = True) -> str:
        return str(self.target.kubeconfig(via_proxy))

    def seed(self, *objects: dict[str, Any]) -> list[dict[str, Any]]:
        return self.target.seed(*objects)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self.target.delete(kind, name, namespace)

    def adapter(self, *kinds: str, **options: Any) -> KubeCluster:
        transport_options = {k: options.pop(k) for k in ("qps", "burst", "retries") if k in options}
        transport = Transport.from_kubeconfig(self.kubeconfig(), **transport_options)
        chosen = [BY_KIND[k] for k in kinds] if kinds else None
        cluster = KubeCluster(transport, **({"kinds": chosen} if chosen else {}), **options)
        self.adapters.append(cluster)
        return cluster


@pytest.fixture(params=BACKENDS)
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Remote]:
    """A fresh bare cluster (on the lab: no component reacts to writes) at wall time, behind a fault proxy."""
    made = Remote(target(request, tmp_path, "kube", components="none", tick=False))
    yield made
    for cluster in made.adapters:
        cluster.stop()
    made.target.close()
