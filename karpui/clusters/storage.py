"""Reads for the API straight from the rows: the lab's objects, NodePools, node classes, DeviceDeclarations and
instance types, as stored manifests (karpui.kinds.versions serves them at the version asked for)."""

from __future__ import annotations

from karpui import models
from karpui.clusters import store
from karpui.kinds.printers import Manifest
from karpui.kinds.resources import CATALOGS, DECLARATIONS, LAB, NODECLASSES, NODEPOOLS, Resource
from provisioner.cluster.objects import Obj
from provisioner.dra.declarations import declare


def current_version(cluster: models.Cluster) -> int:
    return int(models.Cluster.objects.values_list("resource_version", flat=True).get(pk=cluster.pk))


def compacted_version(cluster: models.Cluster) -> int:
    return int(models.Cluster.objects.values_list("compacted_resource_version", flat=True).get(pk=cluster.pk))


def get_object(cluster: models.Cluster, resource: Resource, name: str, namespace: str) -> Obj | None:
    if resource.store == LAB:
        rows = models.KubeObject.objects.filter(cluster=cluster, kind=resource.kind, name=name)
        if resource.namespaced:
            rows = rows.filter(namespace=namespace)
        body: Obj | None = rows.values_list("body", flat=True).first()
        return body
    if resource.store == NODEPOOLS:
        nodepool = models.NodePool.objects.filter(cluster=cluster, name=name).first()
        return store.nodepool_manifest(nodepool) if nodepool else None
    if resource.store == NODECLASSES:
        nodeclass = models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind, name=name).first()
        return store.nodeclass_manifest(nodeclass) if nodeclass else None
    if resource.store == DECLARATIONS:
        declaration = models.DeviceDeclaration.objects.filter(name=name).first()
        return store.declaration_manifest(declaration) if declaration else None
    assert resource.store == CATALOGS
    return next((m for m in list_manifests(cluster, resource) if m["metadata"]["name"] == name), None)


def list_objects(
    cluster: models.Cluster, resource: Resource, namespace: str | None, node_name: str | None = None
) -> tuple[list[Obj], int]:
    """A kind's objects (in one namespace, or all when None), sorted by namespace and name, and the list's
    resourceVersion: a watch from it misses nothing the list did not show."""
    # Read before the rows, so the version is never newer than what they show; and since versions are taken in
    # commit order, any later version a row carries means every change up to it is in the rows too.
    version = current_version(cluster)
    if resource.store == LAB:
        rows = models.KubeObject.objects.filter(cluster=cluster, kind=resource.kind)
        if resource.namespaced and namespace is not None:
            rows = rows.filter(namespace=namespace)
        if resource.kind == "Pod" and node_name is not None:
            rows = rows.filter(node_name=node_name)  # the indexed summary column: drain and describe node ask this
        items: list[Obj] = list(rows.order_by("namespace", "name").values_list("body", flat=True))
    else:
        items = list_manifests(cluster, resource)
    newest = max((int(item["metadata"].get("resourceVersion") or 0) for item in items), default=0)
    return items, max(version, newest)


def list_manifests(cluster: models.Cluster, resource: Resource) -> list[Manifest]:
    """Every object of a kind, from the table that holds it: a lab's rows by namespace and name, the configuration
    tables by name, and the instance types of every catalog with the devices declared on them."""
    if resource.store == LAB:
        rows = models.KubeObject.objects.filter(cluster=cluster, kind=resource.kind).order_by("namespace", "name")
        return [row.body for row in rows]
    if resource.store == NODEPOOLS:
        return [
            store.nodepool_manifest(row) for row in models.NodePool.objects.filter(cluster=cluster).order_by("name")
        ]
    if resource.store == NODECLASSES:
        rows = models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind).order_by("name")
        return [store.nodeclass_manifest(row) for row in rows]
    if resource.store == DECLARATIONS:
        return [store.declaration_manifest(row) for row in models.DeviceDeclaration.objects.order_by("name")]
    assert resource.store == CATALOGS
    declarations = store.device_declarations()
    return [
        store.instance_type_manifest(row.name, it)
        for row in store.catalogs_with_types()
        for it in declare(row.name, [store.instance_type_domain(t) for t in row.instance_types.all()], declarations)
    ]
