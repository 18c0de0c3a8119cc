"""NodePools, node classes and DeviceDeclarations as the API server's store keeps them: read from their tables,
locked, replaced under their resourceVersion with their managedFields, their status written by whoever provisions;
the rows themselves are written by karpui.writes.configs."""

from __future__ import annotations

import copy
from typing import Any

from django.db import transaction

from karpui import models
from karpui.clusters import storage
from karpui.kinds.resources import DECLARATIONS, NODECLASSES, NODEPOOLS, Resource
from karpui.people.audit import Actor
from karpui.writes import configs
from karpui.writes.checks import resource_versions
from karpui.writes.configs import ApplyResult
from karpui.writes.managed import Owner, given_managed_fields, store_managed
from provisioner.apimachinery.apply import last_applied
from provisioner.cluster.objects import (
    Conflict,
    NotFound,
    Obj,
)
from provisioner.manifests import ManifestError

CONFIG_STORES = (NODEPOOLS, NODECLASSES, DECLARATIONS)


def stored_config(cluster: models.Cluster, resource: Resource, name: str) -> Obj | None:
    return storage.get_object(cluster, resource, name, "")


def config_store(cluster: models.Cluster, obj: Obj, actor: Actor) -> ApplyResult:
    """Validate a NodePool, node class or DeviceDeclaration manifest and store it (create or replace)."""
    last_applied(obj)  # apply's record must stay readable by the next apply (bounded, a JSON object)
    parse, store_value = configs.APPLIERS[obj["kind"]]
    return store_value(cluster, parse(obj), actor)


def locked_config(cluster: models.Cluster, resource: Resource, name: str) -> Obj:
    """The stored object, its row locked until the transaction ends (so writes to it are serial); NotFound if there
    is none."""
    lock_config(cluster, resource, name)
    stored = stored_config(cluster, resource, name)
    if stored is None:
        raise NotFound(f'{resource.qualified} "{name}" not found')
    return stored


def config_replace(
    cluster: models.Cluster, obj: Obj, resource: Resource, subresource: str, actor: Actor, owner: Owner | None = None
) -> Obj:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    with transaction.atomic():
        stored = locked_config(cluster, resource, name)
        given = str(meta.get("resourceVersion") or "")
        if given and given != stored["metadata"].get("resourceVersion"):
            raise Conflict(f'{resource.qualified} "{name}": the object has been modified')
        if subresource == "status":
            _config_status(cluster, resource, name, obj.get("status") or {})
        else:
            body = copy.deepcopy(obj)
            body.pop("status", None)
            if body.get("apiVersion") not in resource_versions(resource):
                raise ManifestError(f'no matches for kind "{resource.kind}" in version "{body.get("apiVersion")}"')
            # The service records the write under the actor's field manager, on the object as stored; managedFields
            # the body sets itself (a server-side apply's, a reset with [{}], entries a client wrote) replace them.
            config_store(cluster, body, actor if owner is None else actor.managing(owner.manager))
            updated = {**body, "metadata": {**(body.get("metadata") or {})}}
            if not given_managed_fields(updated["metadata"], stored["metadata"]):
                store_managed(cluster, resource, name, updated["metadata"].get("managedFields") or [])
        written = stored_config(cluster, resource, name)
        assert written is not None
        return written


def lock_config(cluster: models.Cluster, resource: Resource, name: str) -> None:
    if resource.store == NODEPOOLS:
        models.NodePool.objects.select_for_update().filter(cluster=cluster, name=name).first()
    elif resource.store == NODECLASSES:
        models.NodeClass.objects.select_for_update().filter(cluster=cluster, kind=resource.kind, name=name).first()
    else:
        models.DeviceDeclaration.objects.select_for_update().filter(name=name).first()


def _config_status(cluster: models.Cluster, resource: Resource, name: str, status: dict[str, Any]) -> None:
    """The status of a NodePool or node class: written by whoever provisions for it (the lab's run, or an engine
    over the API)."""
    if resource.store == NODEPOOLS:
        row: models.NodePool | models.NodeClass | None = models.NodePool.objects.filter(
            cluster=cluster, name=name
        ).first()
    elif resource.store == NODECLASSES:
        row = models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind, name=name).first()
    else:
        return  # a DeviceDeclaration has no status
    if row is not None and getattr(row, "status", None) != status and hasattr(row, "status"):
        row.status = status  # type: ignore[union-attr]
        row.save(update_fields=["status"])
