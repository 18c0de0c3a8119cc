"""Uncached reads and writes of one kind through the transport, for what must see the server itself and run in a
thread of its own: the leader election's Lease (the engine's cache belongs to the engine's thread, and may lag)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from provisioner.adapters.kinds import BY_KIND, Resource
from provisioner.adapters.kube import KubeCluster, delete_options
from provisioner.adapters.transport import Transport
from provisioner.cluster.objects import NotFound, Obj
from provisioner.selectors import LabelSelector


class DirectAPI:
    """get, create, update (with optimistic concurrency) and delete of objects of kinds without a status subresource
    (or whose status is not the caller's to write)."""

    def __init__(self, transport: Transport, resources: dict[str, Resource] | None = None) -> None:
        self.transport = transport
        self.resources = resources or {"Lease": Resource(BY_KIND["Lease"], "v1")}

    def _resource(self, kind: str) -> Resource:
        resource = self.resources.get(kind)
        if resource is None:
            raise NotFound(f"kind {kind} is not served")
        return resource

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        try:
            answer: Obj = self.transport.request("GET", self._resource(kind).item(name, namespace))
        except NotFound:
            return None
        answer["kind"] = kind
        return answer

    def create(self, obj: Obj) -> Obj:
        resource = self._resource(obj["kind"])
        namespace = obj["metadata"].get("namespace") or "default"
        body = {**obj, "apiVersion": resource.api_version}
        answer: Obj = self.transport.request("POST", resource.collection(namespace), body=body)
        answer["kind"] = obj["kind"]
        return answer

    def delete(self, kind: str, name: str, namespace: str = "", *, grace_period_seconds: int | None = None) -> Obj:
        path = self._resource(kind).item(name, namespace)
        answer: Obj = self.transport.request("DELETE", path, body=delete_options(grace_period_seconds))
        return answer

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        """PUT with the object's resourceVersion (stale: Conflict); `obj` takes the new version."""
        resource = self._resource(obj["kind"])
        meta = obj["metadata"]
        body = {**obj, "apiVersion": resource.api_version}
        answer: Obj = self.transport.request("PUT", resource.item(meta["name"], meta.get("namespace", "")), body=body)
        meta["resourceVersion"] = answer["metadata"].get("resourceVersion")
        answer["kind"] = obj["kind"]
        return answer


class UncachedCluster(KubeCluster):
    """The whole cluster port with every read going to the server: for a process that writes now and then (a person
    cordoning a node from the dashboard) and keeps no informers. Writes are the kube adapter's."""

    def __init__(self, transport: Transport) -> None:
        super().__init__(transport)
        self.discover()

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        resource = self._resource(kind)
        try:
            answer: Obj = self.transport.request("GET", resource.item(name, namespace))
        except NotFound:
            return None
        return {**answer, "kind": kind, "apiVersion": resource.api_version}

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> builtins.list[Obj]:
        resource = self._resource(kind)
        query = []
        if fields:
            query.append(("fieldSelector", ",".join(f"{path}={value}" for path, value in fields.items())))
        answer = self.transport.request("GET", resource.collection(namespace), query=query)
        items = [{**item, "kind": kind, "apiVersion": resource.api_version} for item in answer.get("items") or []]
        if selector is not None:
            items = [item for item in items if selector.matches(item["metadata"].get("labels") or {})]
        return sorted(items, key=lambda item: (item["metadata"].get("namespace", ""), item["metadata"]["name"]))

    def scan(self, kind: str) -> builtins.list[Obj]:
        return self.list(kind)

    def kind_version(self, kind: str) -> int:
        return 0  # nothing is cached, so nothing can be stale
