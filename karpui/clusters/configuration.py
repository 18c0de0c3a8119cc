"""What a lab's controllers work from (its NodePools, node classes, catalogs and options), and the key that says
when that changed."""

from __future__ import annotations

from typing import Any

from karpui import models
from karpui.clusters import store
from karpui.clusters.karpenter_options import cluster_options
from provisioner.catalog import InstanceType
from provisioner.dra.declarations import declare
from provisioner.lab import LabConfig
from provisioner.manifests import ManifestError
from provisioner.objects import NodeClass


def catalogs_by_node_class() -> dict[str, list[InstanceType]]:
    """Every catalog's instance types, with the devices DeviceDeclarations give them, by the node class kind that
    launches them: what any cluster's engine picks instance types from."""
    catalogs: dict[str, list[InstanceType]] = {}
    declarations = store.device_declarations()
    for row in store.catalogs_with_types():
        types = declare(row.name, store.catalog_domain(row).instance_types, declarations)
        for kind in row.node_class_kinds:
            catalogs.setdefault(kind, []).extend(types)
    return catalogs


def catalogs_key() -> tuple[Any, ...]:
    """What `catalogs_by_node_class` is built from, in two small queries: equal keys, equal catalogs (every write of
    a catalog or a declaration saves its row, which moves `updated_at`)."""
    return (
        tuple(models.Catalog.objects.order_by("name").values_list("name", "updated_at")),
        tuple(models.DeviceDeclaration.objects.order_by("name").values_list("name", "resource_version", "updated_at")),
    )


def lab_config(cluster: models.Cluster, problems: list[tuple[dict[str, Any], str]] | None = None) -> LabConfig:
    """What the cluster's controllers work from. A stored NodePool that no longer parses (written before a rule
    existed, or by hand) is left out, with its error in `problems`: one bad NodePool never stops the others."""
    nodepools = list(models.NodePool.objects.filter(cluster=cluster))
    domains = []
    for row in nodepools:
        try:
            domains.append(store.nodepool_domain(row))
        except ManifestError as error:
            if problems is not None:
                problems.append((store.nodepool_manifest(row), f"{error.field}: {error.message}"))
    nodeclasses = {
        (row.kind, row.name): NodeClass(row.api_version, row.kind, row.name, row.spec, generation=row.generation)
        for row in models.NodeClass.objects.filter(cluster=cluster)
    }
    catalogs = catalogs_by_node_class()
    return LabConfig(
        nodepools=domains,
        # Every row's uid, parsed or not: the garbage collector must not take a bad NodePool's nodes for orphans.
        nodepool_uids={row.name: str(row.uid) for row in nodepools},
        nodeclasses=nodeclasses,
        catalogs=catalogs,
        options=cluster_options(cluster),
        paused_until=cluster.paused_until.timestamp() if cluster.paused_until else 0.0,
        components=cluster.lab_components,
    )


def config_key(cluster: models.Cluster) -> tuple[Any, ...]:
    """What the lab's configuration is built from, in a few small queries: equal keys, equal configuration."""
    return (
        tuple(
            models.NodePool.objects.filter(cluster=cluster)
            .order_by("name")
            .values_list("name", "uid", "generation", "labels", "annotations")
        ),
        tuple(
            models.NodeClass.objects.filter(cluster=cluster)
            .order_by("kind", "name")
            .values_list("kind", "name", "generation")
        ),
        *catalogs_key(),
        cluster.paused_until,
        cluster.lab_components,
    )
