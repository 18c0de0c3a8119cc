"""A NodeClaim registered to a Node the engine's cache has not seen (the Node informer still relisting after an API
server restart, the NodeClaim informer back already) is capacity for pending pods, not nothing: found on a real
cluster, where the pods of six such NodeClaims got five duplicate NodeClaims."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

from provisioner.cluster.views import Views, unbound_pods
from provisioner.controllers.provisioning import ProvisioningController, cluster_nodes
from provisioner.lab import Lab
from tests.lab_builders import deployment, lab, nodepool_doc

MI, GI = 2**20 * 1000, 2**30 * 1000
ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "spread-out"}}}
        ]
    }
}


class NodesNotRelisted:
    """The cluster as a cache sees it just after an API server restart: no Nodes yet, and (`unbound`) every pod
    still as it was before the scheduler bound it (no node, Pending)."""

    def __init__(self, store: Any, *, unbound: bool = True) -> None:
        self.store, self.unbound = store, unbound

    def _pods(self) -> list[dict[str, Any]]:
        if not self.unbound:
            return list(self.store.list("Pod"))
        pods = []
        for obj in self.store.list("Pod"):
            unbound = copy.deepcopy(obj)
            unbound["spec"].pop("nodeName", None)
            unbound["status"] = {"phase": "Pending"}
            pods.append(unbound)
        return pods

    def list(self, kind: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if kind == "Node":
            return []
        return self._pods() if kind == "Pod" else list(self.store.list(kind, *args, **kwargs))

    def scan(self, kind: str) -> Iterator[dict[str, Any]]:
        return iter(self.list(kind))

    def get(self, kind: str, name: str, namespace: str = "") -> Any:
        if kind == "Node":
            return None
        if kind == "Pod":
            return next((p for p in self._pods() if p["metadata"]["name"] == name), None)
        return self.store.get(kind, name, namespace)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def pending_pod(app: str, cpu: str, name: str = "", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or app, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}], **spec},
        "status": {"phase": "Pending"},
    }


def three_spread_pods_on_their_nodes() -> Lab:
    made = lab(nodepool_doc(), deployment("spread-out", replicas=3, cpu="500m", affinity=ANTI_AFFINITY))
    made.advance(60)
    bound = [p for p in made.store.list("Pod") if p["spec"].get("nodeName")]
    assert (len(made.store.list("NodeClaim")), len(made.store.list("Node")), len(bound)) == (3, 3, 3)
    return made


def test_a_registered_nodeclaim_whose_node_is_not_in_the_cache_is_capacity_named_by_its_node() -> None:
    made = three_spread_pods_on_their_nodes()
    stale = dataclasses.replace(made.ctx, api=NodesNotRelisted(made.store), views=Views())
    claims = {c["status"]["nodeName"]: c for c in made.store.list("NodeClaim")}
    nodes = cluster_nodes(stale)
    assert sorted(n.name for n in nodes) == sorted(claims)
    for node in nodes:
        assert node.labels["kubernetes.io/hostname"] == node.name
        assert node.labels["karpenter.sh/nodepool"] == "default"
        assert (node.initialized, node.managed, node.nodepool) == (False, True, "default")
        # c-1x's allocatable (900m, 2038Mi, 20Gi, 16 pods) in milli-units, from the NodeClaim's status.
        assert node.allocatable == {"cpu": 900, "memory": 2038 * MI, "ephemeral-storage": 20 * GI, "pods": 16_000}


def test_pending_pods_of_nodeclaims_whose_nodes_the_cache_has_not_seen_get_no_second_nodeclaim() -> None:
    made = three_spread_pods_on_their_nodes()
    stale = dataclasses.replace(made.ctx, api=NodesNotRelisted(made.store), views=Views())
    provisionable = [pod for _, pod in stale.views.readable(stale.api.list("Pod"))]
    assert len(provisionable) == 3
    controller = ProvisioningController({})
    assert controller.provision(stale, provisionable) is False
    assert len(made.store.list("NodeClaim")) == 3
    result = controller.last_result
    assert result is not None
    assert sorted(result.placements) == sorted(c["status"]["nodeName"] for c in made.store.list("NodeClaim"))
    assert sorted(len(pods) for pods in result.placements.values()) == [1, 1, 1]


def test_a_fourth_spread_pod_is_kept_off_nodeclaims_whose_nodes_the_cache_has_not_seen_but_whose_pods_it_has() -> None:
    made = three_spread_pods_on_their_nodes()
    made.store.create(pending_pod("spread-out", cpu="500m", name="spread-out-4", affinity=ANTI_AFFINITY))
    stale = dataclasses.replace(made.ctx, api=NodesNotRelisted(made.store, unbound=False), views=Views())
    assert sorted(len(node.pods) for node in cluster_nodes(stale)) == [1, 1, 1]
    fourth = [pod for _, pod in stale.views.readable([made.store.get("Pod", "spread-out-4", "default")])]
    controller = ProvisioningController({})
    assert controller.provision(stale, fourth) is True
    assert len(made.store.list("NodeClaim")) == 4


def test_a_nodeclaim_whose_node_the_cache_has_not_seen_keeps_its_taints() -> None:
    """Karpenter's StateNode.Taints for a state node without its Node: the NodeClaim's. A pod that does not tolerate
    them gets a NodeClaim of its own."""
    dedicated = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    made = lab(
        nodepool_doc("dedicated", weight=100, template_spec={"taints": [dedicated]}),
        nodepool_doc("general"),
        deployment("batch", replicas=1, cpu="500m", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
    )
    made.advance(60)
    [claim] = made.store.list("NodeClaim")
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "dedicated"
    made.store.create(pending_pod("web", cpu="100m"))
    stale = dataclasses.replace(made.ctx, api=NodesNotRelisted(made.store, unbound=False), views=Views())
    [inflight] = cluster_nodes(stale)
    assert [str(t) for t in inflight.taints] == ["dedicated=batch:NoSchedule"]
    web = [pod for _, pod in stale.views.readable(unbound_pods(made.store))]
    assert [pod.labels["app"] for pod in web] == ["web"]
    assert ProvisioningController({}).provision(stale, web) is True
    pools = sorted(c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in made.store.list("NodeClaim"))
    assert pools == ["dedicated", "general"]
