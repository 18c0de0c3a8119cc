"""Reads for the API straight from the rows: the lab's objects, NodePools, node classes, DeviceDeclarations and
instance types, as stored manifests (karpui.kubeapi.versions serves them at the version asked for)."""

from __future__ import annotations

from karpui import models, store
from karpui.kubeapi.changelog import declaration_manifest
from karpui.kubeapi.selectors import FieldSelector
from karpui.kubectl.resources import CATALOGS, DECLARATIONS, LAB, NODECLASSES, NODEPOOLS, Resource
from provisioner.cluster.objects import Obj


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
        return declaration_manifest(declaration) if declaration else None
    assert resource.store == CATALOGS
    return next((m for m in resource.list_manifests(cluster) if m["metadata"]["name"] == name), None)


def list_objects(
    cluster: models.Cluster, resource: Resource, namespace: str | None, fields: FieldSelector
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
        node = fields.equal("spec.nodeName")
        if resource.kind == "Pod" and node is not None:
            rows = rows.filter(node_name=node)  # the indexed summary column: drain and describe node ask this
        items: list[Obj] = list(rows.order_by("namespace", "name").values_list("body", flat=True))
    else:
        items = resource.list_manifests(cluster)
    newest = max((int(item["metadata"].get("resourceVersion") or 0) for item in items), default=0)
    return items, max(version, newest)
