"""The clusters tests/kube runs its engines against, one shape for both: the lab's API in a process of its own
(`lab`), and the real control plane of the session (`real`: hack/kube/cluster.py's kube-apiserver 1.37, with its
scheduler, controller-manager and kwok). Either is reached by the engine through a fault proxy that records every
request, and by the test through a client of its own, as kubectl would.

On the real cluster "components" are always there: its kube-scheduler binds, kwok makes nodes Ready and pods
Running, its controllers do what Kubernetes' do. A test that asks the lab for a bare cluster gets the real one as it
is, which is what a user's cluster would be."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.adapters.direct import UncachedCluster
from provisioner.adapters.transport import Transport
from provisioner.cluster.objects import NotFound
from tests.kube.faults import FaultProxy

BACKENDS = ["lab", pytest.param("real", marks=pytest.mark.real)]


@dataclass
class Target:
    """One cluster for one test: the proxy the engine goes through, kubeconfigs, and the test's own client."""

    backend: str  # "lab" or "real"
    name: str  # the lab's cluster name, or "real"
    folder: Path
    proxy: FaultProxy
    direct: Path  # a kubeconfig straight to the cluster, as its admin
    server: Any  # the LabServer or the RealCluster
    client: UncachedCluster = field(init=False)

    def __post_init__(self) -> None:
        self.client = UncachedCluster(Transport.from_kubeconfig(str(self.direct)))

    @property
    def real(self) -> bool:
        return self.backend == "real"

    def kubeconfig(self, via_proxy: bool = True) -> Path:
        """How the engine reaches the cluster: through the proxy (which authenticates upstream as the admin on the
        real cluster), or directly."""
        if not via_proxy:
            return self.direct
        path = self.folder / f"kubeconfig-proxy-{self.name}"
        if self.real:
            config = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "real", "cluster": {"server": self.proxy.url}}],
                "users": [{"name": "admin", "user": {}}],
                "contexts": [{"name": "real", "context": {"cluster": "real", "user": "admin"}}],
                "current-context": "real",
            }
            path.write_text(yaml.safe_dump(config))
            return path
        return Path(self.server.kubeconfig(self.name, path, server=self.proxy.url))

    def seed(self, *objects: dict[str, Any]) -> list[dict[str, Any]]:
        """Objects written by someone else (the cluster's operator), not through the client under test."""
        if not self.real:
            return list(self.server.command("write", cluster=self.name, objects=list(objects))["objects"])
        return [self.client.create(obj) for obj in objects]

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        if not self.real:
            self.server.command("delete", cluster=self.name, kind=kind, name=name, namespace=namespace)
            return
        resource = self.client._resource(kind)
        with contextlib.suppress(NotFound):  # at once, as `kubectl delete --grace-period=0 --force`
            self.client.transport.request("DELETE", resource.item(name, namespace), body={"gracePeriodSeconds": 0})

    def close(self) -> None:
        self.proxy.stop()
        if not self.real and self.server.ticking(self.name):
            self.server.rest(self.name)


def target(request: pytest.FixtureRequest, folder: Path, prefix: str, components: str, tick: bool) -> Target:
    """A fresh cluster of the backend the test is parametrised with (`request.param`)."""
    if request.param == "real":
        real = request.getfixturevalue("real")
        proxy = FaultProxy(real.server, ssl_context=real.ssl_context(), token_context=real.ssl_context(False))
        return Target("real", "real", folder, proxy.start(), real.kubeconfig, real)
    lab_api = request.getfixturevalue("lab_api")
    name = lab_api.new_cluster(prefix, components=components, tick=tick)
    proxy = FaultProxy(lab_api.url).start()
    return Target("lab", name, folder, proxy, lab_api.kubeconfig(name, folder / f"kubeconfig-{name}"), lab_api)
