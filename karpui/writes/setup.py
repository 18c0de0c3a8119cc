"""New clusters and a fresh install's defaults: the lab, what kind and Karpenter's chart leave in it (its system
namespaces, its control-plane node, Karpenter's Deployment), the built-in catalogs and the roles."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from karpui import models
from karpui.clusters.registry import cluster_get_or_create, cluster_name_check
from karpui.people.audit import Actor, audit_event_create
from karpui.people.roles import roles_ensure
from karpui.writes import lab_objects
from karpui.writes.catalogs import catalog_import
from provisioner.catalog.aws import aws_catalog
from provisioner.catalog.kwok import kwok_catalog


def cluster_create(
    *,
    name: str,
    actor: Actor,
    mode: str = models.Cluster.Mode.LAB,
    kubeconfig: str = "",
    context: str = "",
    components: str = "",
) -> models.Cluster:
    """Make a cluster (a lab one is then ticked with the others; a kwok or observe one is driven by `manage.py
    engine`, which reaches it through `kubeconfig` and `context`). A lab's `components` say what its ticks run: all
    (default), only its cluster side (`cluster`: a plain cluster, which another karpui drives in kwok mode over the
    lab's API), or nothing. A web or admin user needs karpui.add_cluster; the CLI is the machine's operator."""
    if actor.user is not None and not actor.user.has_perm("karpui.add_cluster"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not create clusters")
    cluster_name_check(name)
    if mode not in models.Cluster.Mode.values:
        raise ValidationError(f"mode: must be one of {', '.join(models.Cluster.Mode.values)}, got {mode!r}")
    if mode == models.Cluster.Mode.LAB and (kubeconfig or context):
        raise ValidationError("kubeconfig: a lab cluster is karpui's own; only kwok and observe clusters are reached")
    if components and mode != models.Cluster.Mode.LAB:
        raise ValidationError("components: only a lab cluster runs components of karpui's; this one is reached")
    if components and components not in models.Cluster.LabComponents.values:
        raise ValidationError(
            f"components: must be one of {', '.join(models.Cluster.LabComponents.values)}, got {components!r}"
        )
    with transaction.atomic():
        if models.Cluster.objects.filter(name=name).exists():
            raise ValidationError(f'cluster "{name}" already exists')
        cluster = models.Cluster.objects.create(
            name=name,
            mode=mode,
            kubeconfig=kubeconfig,
            kube_context=context,
            lab_components=components or models.Cluster.LabComponents.ALL,
        )
        reached = (
            {"kubeconfig": kubeconfig, "context": context}
            if mode != models.Cluster.Mode.LAB
            else ({"components": components} if components else {})
        )
        audit_event_create(actor, "create", "Cluster", name, None, {"mode": mode, **reached}, cluster=cluster)
        if mode == models.Cluster.Mode.LAB:
            lab_objects.lab_install_ensure(cluster)
    return cluster


def defaults_ensure() -> None:
    """First-run state: the lab cluster, the built-in catalogs and the role groups, made only where absent."""
    cluster_get_or_create()
    if (
        settings.KARPUI_MODE != models.Cluster.Mode.LAB
        and not models.Cluster.objects.filter(name=settings.KARPUI_CLUSTER).exists()
    ):
        cluster_create(
            name=settings.KARPUI_CLUSTER,
            mode=settings.KARPUI_MODE,
            kubeconfig=settings.KARPUI_KUBECONFIG,
            context=settings.KARPUI_KUBE_CONTEXT,
            actor=Actor(name="system", via="migrate"),
        )
    for cluster in models.Cluster.objects.filter(mode=models.Cluster.Mode.LAB):
        lab_objects.lab_install_ensure(cluster)
    roles_ensure()
    system = Actor(name="system", via="migrate")
    for build in (kwok_catalog, aws_catalog):
        catalog = build()
        if not models.Catalog.objects.filter(name=catalog.name).exists():
            catalog_import(catalog=catalog, actor=system)
