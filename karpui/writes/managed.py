"""managedFields as kube-apiserver tracks them: which manager set which fields, kept on every write (`Owner`), so a
later server-side apply knows whose fields it would take."""

from __future__ import annotations

import copy
from typing import Any

from karpui import models
from karpui.kinds.resources import NODEPOOLS, Resource
from provisioner.apimachinery import fieldmanager
from provisioner.apimachinery.strategic import root_type
from provisioner.cluster.objects import (
    Obj,
)
from provisioner.manifests import ManifestError


class Owner:
    """Who a write is by (the API's fieldManager, a karp verb's, the dashboard's: Actor.field_manager) and the time
    its managedFields entry records: the cluster's clock, which a lab's `karp advance` moves."""

    def __init__(self, cluster: models.Cluster, manager: str) -> None:
        self.manager = manager
        self.time = cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def created(self, obj: Obj, resource: Resource) -> None:
        """Give a new object its creator's managedFields entry, as kube-apiserver tracks every object it creates."""
        entries = fieldmanager.created(
            obj, manager=self.manager, root_type=root_type(resource.api_version, resource.kind), time=self.time
        )
        obj["metadata"]["managedFields"] = [entry.to_json() for entry in entries]

    def track(self, stored: Obj, new: Obj, resource: Resource, subresource: str) -> None:
        """Give `new` the managedFields after this update of `stored`, when the object has any and the writer left
        them as they were (a body with other managedFields sets them, as kube-apiserver lets it)."""
        before = (stored.get("metadata") or {}).get("managedFields")
        after = (new.get("metadata") or {}).get("managedFields")
        if not self.manager or not before or (after is not None and after != before):
            return
        entries = fieldmanager.updated(
            stored,
            new,
            manager=self.manager,
            root_type=root_type(resource.api_version, resource.kind),
            time=self.time,
            subresource=subresource,
        )
        new["metadata"]["managedFields"] = [entry.to_json() for entry in entries]


def given_managed_fields(meta: dict[str, Any], stored: dict[str, Any]) -> bool:
    """managedFields as an update leaves them, as kube-apiserver reads what a writer sent: left out or `[]` keeps
    the stored ones (so a client that knows nothing of them cannot strip them), `[{}]` clears them, other entries
    replace them. True when they are the stored ones, for the update to be recorded in them."""
    given = meta.get("managedFields")
    if given == [{}]:
        meta.pop("managedFields")
        return False
    if not given:
        meta.pop("managedFields", None)
        if stored.get("managedFields"):
            meta["managedFields"] = stored["managedFields"]
        return True
    for index, entry in enumerate(given if isinstance(given, list) else [given]):
        problem = fieldmanager.entry_problem(entry)
        if problem is not None:
            raise ManifestError(problem, field=f"metadata.managedFields[{index}]")
    return bool(given == stored.get("managedFields"))


def with_managed(obj: Obj, managed: list[fieldmanager.ManagedEntry]) -> Obj:
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {})["managedFields"] = [entry.to_json() for entry in managed]
    return obj


def store_managed(cluster: models.Cluster, resource: Resource, name: str, managed: list[Any]) -> None:
    """A NodePool's or node class's managedFields, kept beside the fields its parser reads."""
    if resource.store == NODEPOOLS:
        models.NodePool.objects.filter(cluster=cluster, name=name).update(managed_fields=managed)
    else:
        models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind, name=name).update(managed_fields=managed)
