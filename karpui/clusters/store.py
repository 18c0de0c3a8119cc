"""Conversions between stored rows and the engine's domain types and Kubernetes-shaped manifests."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db.models import Prefetch

from karpui import models
from provisioner.catalog import Catalog, InstanceType, Offering, Overhead
from provisioner.catalog.files import instance_type_to_spec
from provisioner.cluster.objects import Obj
from provisioner.controllers.context import TimedRecord
from provisioner.dra.declarations import API_VERSION as DECLARATION_API
from provisioner.dra.declarations import DeviceDeclaration, parse_declaration
from provisioner.manifests.nodeclass import nodeclass_to_manifest
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass, NodePool
from provisioner.quantity import format_resources, parse_resources

CATALOG_LABEL = "karpui.dev/catalog"
INSTANCE_TYPE_API = "karpui.dev/v1alpha1"


# A NodePool nobody has reconciled yet says so, as Karpenter's conditions start out (operatorpkg's status).
AWAITING_RECONCILIATION = {
    "conditions": [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "AwaitingReconciliation",
            "message": "object is awaiting reconciliation",
        }
    ]
}


def nodepool_manifest(row: models.NodePool) -> dict[str, Any]:
    """The stored NodePool as Kubernetes would print it (status reports readiness of the node class)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": row.metadata(),
        "spec": row.spec,
        "status": row.status or AWAITING_RECONCILIATION,
    }


def nodepool_domain(row: models.NodePool) -> NodePool:
    manifest = nodepool_manifest(row)
    manifest.pop("status")
    return parse_nodepool(manifest)


def nodeclass_manifest(row: models.NodeClass) -> dict[str, Any]:
    manifest = nodeclass_to_manifest(
        NodeClass(api_version=row.api_version, kind=row.kind, name=row.name, spec=row.spec)
    )
    manifest["metadata"] = row.metadata()
    return manifest


def catalogs_with_types() -> list[models.Catalog]:
    """Every catalog with its types and offerings in three queries."""
    types = models.InstanceType.objects.order_by("position").prefetch_related("offerings")
    return list(models.Catalog.objects.order_by("name").prefetch_related(Prefetch("instance_types", queryset=types)))


def catalog_domain(row: models.Catalog) -> Catalog:
    return Catalog(
        name=row.name,
        instance_types=tuple(instance_type_domain(it) for it in row.instance_types.all()),
        node_class_kinds=tuple(row.node_class_kinds),
        description=row.description,
    )


def instance_type_domain(row: models.InstanceType) -> InstanceType:
    overhead = row.overhead or {}
    return InstanceType(
        name=row.name,
        capacity=parse_resources(row.capacity),
        offerings=tuple(
            Offering(
                zone=o.zone,
                capacity_type=o.capacity_type,
                price=o.price,
                available=o.available,
                reservation_id=o.reservation_id,
                reservation_capacity=o.reservation_capacity,
                reservation_type=o.reservation_type,
            )
            for o in row.offerings.all()
        ),
        labels=dict(row.labels),
        overhead=Overhead(
            kube_reserved=parse_resources(overhead.get("kubeReserved", {})),
            system_reserved=parse_resources(overhead.get("systemReserved", {})),
            eviction_threshold=parse_resources(overhead.get("evictionThreshold", {})),
        ),
        devices=tuple(row.devices),
    )


def instance_type_manifest(catalog: str, instance_type: InstanceType) -> dict[str, Any]:
    """An instance type as a Kubernetes-shaped object, for `karp get instancetypes -o json`."""
    spec = instance_type_to_spec(instance_type)
    return {
        "apiVersion": INSTANCE_TYPE_API,
        "kind": "InstanceType",
        "metadata": {"name": instance_type.name, "labels": {**spec["labels"], CATALOG_LABEL: catalog}},
        "spec": {
            "catalog": catalog,
            "capacity": spec["capacity"],
            "overhead": spec["overhead"],
            "offerings": spec["offerings"],
            "devices": spec["devices"],
        },
        "status": {"allocatable": format_resources(instance_type.allocatable)},
    }


def instance_type_row_fields(instance_type: InstanceType, position: int) -> dict[str, Any]:
    spec = instance_type_to_spec(instance_type)
    labels = instance_type.labels
    family = (
        labels.get("karpenter.kwok.sh/instance-family")
        or labels.get("karpenter.k8s.aws/instance-family")
        or instance_type.name.split(".")[0].split("-")[0]
    )
    return {
        "labels": spec["labels"],
        "capacity": spec["capacity"],
        "overhead": spec["overhead"],
        "devices": spec["devices"],
        "cpu_millis": instance_type.capacity.get("cpu", 0),
        "memory_bytes": instance_type.capacity.get("memory", 0) // 1000,
        "pods": instance_type.capacity.get("pods", 0) // 1000,
        "arch": labels.get("kubernetes.io/arch", ""),
        "os": labels.get("kubernetes.io/os", ""),
        "family": family,
        "position": position,
    }


def declaration_manifest(row: models.DeviceDeclaration) -> Obj:
    return {
        "apiVersion": DECLARATION_API,
        "kind": "DeviceDeclaration",
        "metadata": {
            "name": row.name,
            "resourceVersion": str(row.resource_version),
            "creationTimestamp": row.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": dict(row.spec or {}),
    }


def device_declarations() -> list[DeviceDeclaration]:
    return [
        parse_declaration(
            {
                "apiVersion": DECLARATION_API,
                "kind": "DeviceDeclaration",
                "metadata": {"name": row.name},
                "spec": row.spec,
            }
        )
        for row in models.DeviceDeclaration.objects.order_by("name")
    ]


def logs_save(cluster: models.Cluster, entries: Iterable[TimedRecord]) -> None:
    """The controllers' log records of a run or an engine step as the cluster's LogEntry rows, in one INSERT. A
    message longer than the indexed column (v0.37's "disrupting via ..." names each node, and kwok's node names are
    long) is kept whole in `full_message`, its start in `message`: PostgreSQL would refuse the whole INSERT."""
    length = models.LogEntry._meta.get_field("message").max_length
    models.LogEntry.objects.bulk_create(
        models.LogEntry(
            cluster=cluster,
            time=datetime.fromtimestamp(entry.time, UTC),
            level=entry.record.level,
            logger=entry.record.logger,
            message=entry.record.message[:length],
            full_message=entry.record.message if len(entry.record.message) > length else "",
            fields=dict(entry.record.fields),
        )
        for entry in entries
    )
