"""Uncached reads and writes of one kind through the transport, for what must see the server itself and run in a
thread of its own: the leader election's Lease (the engine's cache belongs to the engine's thread, and may lag)."""

from __future__ import annotations

from provisioner.adapters.kinds import BY_KIND, Resource
from provisioner.adapters.transport import Transport
from provisioner.cluster.objects import NotFound, Obj


class DirectAPI:
    """get, create and update (with optimistic concurrency) of objects of kinds without a status subresource."""

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

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        """PUT with the object's resourceVersion (stale: Conflict); `obj` takes the new version."""
        resource = self._resource(obj["kind"])
        meta = obj["metadata"]
        body = {**obj, "apiVersion": resource.api_version}
        answer: Obj = self.transport.request("PUT", resource.item(meta["name"], meta.get("namespace", "")), body=body)
        meta["resourceVersion"] = answer["metadata"].get("resourceVersion")
        answer["kind"] = obj["kind"]
        return answer
