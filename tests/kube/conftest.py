"""Fixtures for the kube adapter's own tests: a fresh cluster on the lab's API process, reached directly or through
the fault-injecting proxy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.adapters.kinds import BY_KIND
from provisioner.adapters.kube import KubeCluster
from provisioner.adapters.transport import Transport
from tests.kube.faults import FaultProxy
from tests.kube.harness import LabServer


@dataclass
class Remote:
    """A lab cluster served over HTTP, and how to reach it."""

    server: LabServer
    name: str
    folder: Path
    proxy: FaultProxy | None = None

    def kubeconfig(self, via_proxy: bool = True) -> str:
        server = self.proxy.url if via_proxy and self.proxy is not None else None
        return str(self.server.kubeconfig(self.name, self.folder / f"kubeconfig-{bool(server)}", server=server))

    def seed(self, *objects: dict[str, Any], apply: bool = False) -> list[dict[str, Any]]:
        return list(self.server.command("write", cluster=self.name, objects=list(objects), apply=apply)["objects"])

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self.server.command("delete", cluster=self.name, kind=kind, name=name, namespace=namespace)

    def adapter(self, *kinds: str, **options: Any) -> KubeCluster:
        transport_options = {k: options.pop(k) for k in ("qps", "burst", "retries") if k in options}
        transport = Transport.from_kubeconfig(self.kubeconfig(), **transport_options)
        chosen = [BY_KIND[k] for k in kinds] if kinds else None
        cluster = KubeCluster(transport, **({"kinds": chosen} if chosen else {}), **options)
        self.adapters.append(cluster)
        return cluster

    def __post_init__(self) -> None:
        self.adapters: list[KubeCluster] = []


@pytest.fixture
def remote(lab_api: LabServer, tmp_path: Path) -> Iterator[Remote]:
    """A fresh bare cluster (no component reacts to writes) at wall time, behind a fault proxy."""
    name = lab_api.new_cluster("kube", components="none")
    proxy = FaultProxy(lab_api.url).start()
    made = Remote(lab_api, name, tmp_path, proxy)
    yield made
    for cluster in made.adapters:
        cluster.stop()
    proxy.stop()
