"""Write operations: each owns its transaction and writes its audit row. Views, commands and tasks call these."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from karpui import lab, models, store
from provisioner.catalog import Catalog
from provisioner.catalog.aws import aws_catalog
from provisioner.catalog.kwok import kwok_catalog
from provisioner.dra.declarations import API_VERSION as DECLARATION_API
from provisioner.dra.declarations import DeviceDeclaration, parse_declaration
from provisioner.manifests import Document, ManifestError
from provisioner.manifests.cluster import VALIDATORS, validate_cluster_object
from provisioner.manifests.nodeclass import NODE_CLASS_KINDS, nodeclass_to_manifest, parse_nodeclass
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from provisioner.objects import NodeClass, NodePool
from provisioner.scheduling.satisfiable import unsatisfiable

DEFAULT_CLUSTER = "lab"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """Who is acting and through what: a user (admin, web) or a named CLI operator."""

    name: str
    via: str
    user: AbstractBaseUser | None = None

    @classmethod
    def for_user(cls, user: AbstractBaseUser, via: str) -> Actor:
        return cls(name=user.get_username(), via=via, user=user)


@dataclass(frozen=True)
class ApplyResult:
    """One line of `karp apply` output: `nodepool.karpenter.sh/default configured`."""

    resource: str
    name: str
    outcome: str  # created, configured, unchanged

    def __str__(self) -> str:
        return f"{self.resource}/{self.name} {self.outcome}"


def cluster_get_or_create(name: str = DEFAULT_CLUSTER) -> models.Cluster:
    """First-run state only (the default lab cluster); everything else reads clusters and never makes one."""
    cluster, _ = models.Cluster.objects.get_or_create(name=name)
    return cluster


def cluster_name_check(name: str) -> None:
    """Refuse a name no cluster can have (the model's slug and length rules), naming the field."""
    if not name:
        raise ValidationError("cluster: a name is required")
    try:
        models.Cluster._meta.get_field("name").run_validators(name)
    except ValidationError as error:
        raise ValidationError(f"cluster: {'; '.join(error.messages)}") from None


def cluster_create(
    *, name: str, actor: Actor, mode: str = models.Cluster.Mode.LAB, kubeconfig: str = "", context: str = ""
) -> models.Cluster:
    """Make a cluster (a lab one is then ticked with the others; a kwok or observe one is driven by `manage.py
    engine`, which reaches it through `kubeconfig` and `context`). A web or admin user needs karpui.add_cluster;
    the CLI is the machine's operator."""
    if actor.user is not None and not actor.user.has_perm("karpui.add_cluster"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not create clusters")
    cluster_name_check(name)
    if mode not in models.Cluster.Mode.values:
        raise ValidationError(f"mode: must be one of {', '.join(models.Cluster.Mode.values)}, got {mode!r}")
    if mode == models.Cluster.Mode.LAB and (kubeconfig or context):
        raise ValidationError("kubeconfig: a lab cluster is karpui's own; only kwok and observe clusters are reached")
    with transaction.atomic():
        if models.Cluster.objects.filter(name=name).exists():
            raise ValidationError(f'cluster "{name}" already exists')
        cluster = models.Cluster.objects.create(name=name, mode=mode, kubeconfig=kubeconfig, kube_context=context)
        reached = {"kubeconfig": kubeconfig, "context": context} if mode != models.Cluster.Mode.LAB else {}
        _audit(actor, "create", "Cluster", name, None, {"mode": mode, **reached})
        if mode == models.Cluster.Mode.LAB:
            from karpui import objects  # the write path builds on these services

            objects.system_namespaces_ensure(cluster)
    return cluster


def _audit(actor: Actor, action: str, kind: str, name: str, before: Any, after: Any, reason: str = "") -> None:
    models.AuditEvent.objects.create(
        actor=actor.user if actor.user is not None and actor.user.pk else None,
        actor_name=actor.name,
        via=actor.via,
        action=action,
        target_kind=kind,
        target_name=name,
        reason=reason,
        before=before,
        after=after,
    )


def in_cluster(cluster: models.Cluster, manifest: dict[str, Any]) -> None:
    """A kwok cluster's NodePools and node classes are its own objects: write there first (the row is the mirror
    the engine keeps). An observed cluster's are Karpenter's, which karpui never writes."""
    if cluster.mode == models.Cluster.Mode.OBSERVE:
        raise PermissionDenied(f"cluster {cluster.name} is observed: its {manifest['kind']}s are Karpenter's to write")
    if cluster.mode == models.Cluster.Mode.KWOK:
        from karpui import remote

        remote.apply_object(cluster, manifest)


def nodepool_check(*, cluster: models.Cluster, nodepool: NodePool) -> None:
    """Refuse a NodePool that no instance type of its node class's catalog can satisfy, naming the requirement."""
    types = lab.lab_config(cluster).catalogs.get(nodepool.node_class_ref.kind, [])
    problem = unsatisfiable(nodepool, types)
    if problem is not None:
        raise ManifestError(problem.message, field=problem.field)


class Conflict(Exception):
    """The object changed since the version the writer read: nothing was written (Kubernetes' 409 Conflict)."""


@transaction.atomic
def nodepool_apply(
    *, cluster: models.Cluster, nodepool: NodePool, actor: Actor, resource_version: int | None = None
) -> ApplyResult:
    """Create or update a NodePool from its validated domain value (refused, writing nothing, if unsatisfiable).
    With `resource_version` (the version an editor was opened at), a NodePool changed since is a Conflict, as an
    update carrying metadata.resourceVersion is on a Kubernetes API server: nobody's change is lost unseen."""
    nodepool_check(cluster=cluster, nodepool=nodepool)
    manifest = nodepool_to_manifest(nodepool)
    if resource_version is not None:
        now = (
            models.NodePool.objects.select_for_update()
            .filter(cluster=cluster, name=nodepool.name)
            .values_list("resource_version", flat=True)
            .first()
        )
        if now != resource_version:
            raise Conflict(
                f'Operation cannot be fulfilled on nodepools.karpenter.sh "{nodepool.name}": the object has been '
                f"modified (resourceVersion {resource_version} when opened, {now if now is not None else 'deleted'} "
                "now); nothing was saved"
            )
    in_cluster(cluster, manifest)
    fields = {
        "labels": manifest["metadata"].get("labels", {}),
        "annotations": manifest["metadata"].get("annotations", {}),
        "spec": manifest["spec"],
        "weight": nodepool.weight,
    }
    row = models.NodePool.objects.select_for_update().filter(cluster=cluster, name=nodepool.name).first()
    if row is None:
        row = models.NodePool.objects.create(cluster=cluster, name=nodepool.name, **fields)
        _audit(actor, "create", "NodePool", row.name, None, store.nodepool_manifest(row))
        return ApplyResult("nodepool.karpenter.sh", row.name, "created")
    return _update(row, fields, actor, "NodePool", "nodepool.karpenter.sh", store.nodepool_manifest)


def _update(
    row: Any, fields: dict[str, Any], actor: Actor, kind: str, resource: str, manifest: Callable[[Any], dict[str, Any]]
) -> ApplyResult:
    """Write changed fields as the API server would: resourceVersion always, generation when the spec changed."""
    if all(getattr(row, key) == value for key, value in fields.items() if key != "weight"):
        return ApplyResult(resource, row.name, "unchanged")
    before = manifest(row)
    if row.spec != fields["spec"]:
        row.generation += 1
    for key, value in fields.items():
        setattr(row, key, value)
    row.resource_version += 1
    row.save()
    _audit(actor, "update", kind, row.name, before, manifest(row))
    return ApplyResult(resource, row.name, "configured")


@transaction.atomic
def nodeclass_apply(*, cluster: models.Cluster, nodeclass: NodeClass, actor: Actor) -> ApplyResult:
    resource = f"{nodeclass.kind.lower()}.{nodeclass.group}"
    in_cluster(cluster, nodeclass_to_manifest(nodeclass))
    row = (
        models.NodeClass.objects.select_for_update()
        .filter(cluster=cluster, kind=nodeclass.kind, name=nodeclass.name)
        .first()
    )
    fields = {
        "api_version": nodeclass.api_version,
        "labels": nodeclass.labels,
        "annotations": nodeclass.annotations,
        "spec": nodeclass.spec,
    }
    if row is None:
        row = models.NodeClass.objects.create(cluster=cluster, kind=nodeclass.kind, name=nodeclass.name, **fields)
        _audit(actor, "create", nodeclass.kind, row.name, None, store.nodeclass_manifest(row))
        return ApplyResult(resource, row.name, "created")
    return _update(row, fields, actor, nodeclass.kind, resource, store.nodeclass_manifest)


@transaction.atomic
def device_declaration_apply(*, declaration: DeviceDeclaration, actor: Actor) -> ApplyResult:
    row = models.DeviceDeclaration.objects.select_for_update().filter(name=declaration.name).first()
    spec = dict(declaration.spec or {})
    if row is None:
        models.DeviceDeclaration.objects.create(name=declaration.name, spec=spec)
        _audit(actor, "create", "DeviceDeclaration", declaration.name, None, spec)
        return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "created")
    if row.spec == spec:
        return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "unchanged")
    before, row.spec = row.spec, spec
    row.save()
    _audit(actor, "update", "DeviceDeclaration", declaration.name, before, spec)
    return ApplyResult("devicedeclaration.karpui.dev", declaration.name, "configured")


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


# kind -> (parse a document into a domain value, store it). Later kinds register here.
Applier = Callable[[models.Cluster, Any, Actor], ApplyResult]
APPLIERS: dict[str, tuple[Callable[[dict[str, Any]], Any], Applier]] = {
    "NodePool": (parse_nodepool, lambda c, v, a: nodepool_apply(cluster=c, nodepool=v, actor=a)),
    "DeviceDeclaration": (parse_declaration, lambda c, v, a: device_declaration_apply(declaration=v, actor=a)),
    **{
        kind: (parse_nodeclass, lambda c, v, a: nodeclass_apply(cluster=c, nodeclass=v, actor=a))
        for kind in NODE_CLASS_KINDS
    },
}


def parse_document(document: Document) -> Any:
    """Validate one document into its domain value; errors carry the document's position and identity."""
    entry = APPLIERS.get(document.kind)
    try:
        if entry is not None:
            return entry[0](document.body)
        if document.kind in VALIDATORS:
            return validate_cluster_object(document.body)
        raise ManifestError(f'no matches for kind "{document.kind}" in version "{document.api_version}"', field="kind")
    except ManifestError as error:
        raise error.located(document=document.index, kind=document.kind, name=document.name) from None


def resource_name(kind: str, api_version: str) -> str:
    """kubectl's `deployment.apps` style: lowercase kind, then the API group if there is one."""
    group = api_version.split("/")[0] if "/" in api_version else ""
    return f"{kind.lower()}.{group}" if group else kind.lower()


def object_delete(*, cluster: models.Cluster, kind: str, name: str, actor: Actor) -> str:
    """Delete a NodePool or node class by kind and name; raises LookupError when it does not exist."""
    with transaction.atomic():
        if kind == "DeviceDeclaration":
            declaration = models.DeviceDeclaration.objects.filter(name=name).first()
            if declaration is None:
                raise LookupError(f'devicedeclaration.karpui.dev "{name}" not found')
            _audit(actor, "delete", kind, name, declaration.spec, None)
            declaration.delete()
            return f'devicedeclaration.karpui.dev "{name}" deleted'
        if kind == "NodePool":
            row: models.NodePool | models.NodeClass | None = models.NodePool.objects.filter(
                cluster=cluster, name=name
            ).first()
            before = store.nodepool_manifest(row) if row else None
            resource = "nodepool.karpenter.sh"
        else:
            row = models.NodeClass.objects.filter(cluster=cluster, kind=kind, name=name).first()
            before = store.nodeclass_manifest(row) if row else None
            resource = f"{kind.lower()}.{row.api_version.split('/')[0]}" if row else kind.lower()
        if row is None:
            raise LookupError(f'{resource} "{name}" not found')
        if cluster.mode == models.Cluster.Mode.OBSERVE:
            raise PermissionDenied(f"cluster {cluster.name} is observed: its {kind}s are Karpenter's to delete")
        if cluster.mode == models.Cluster.Mode.KWOK:
            from karpui import remote

            remote.delete_object(cluster, kind, name)
        row.delete()
        _audit(actor, "delete", kind, name, before, None)
    return f'{resource} "{name}" deleted'


def catalog_import(*, catalog: Catalog, actor: Actor) -> models.Catalog:
    """Replace a catalog's instance types and offerings with `catalog`'s, atomically. A web or admin user needs
    karpui.change_catalog; the CLI is the machine's operator."""
    if actor.user is not None and not actor.user.has_perm("karpui.change_catalog"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not change instance catalogs")
    with transaction.atomic():
        row, created = models.Catalog.objects.select_for_update().get_or_create(name=catalog.name)
        before_count = row.instance_types.count()
        row.description = catalog.description
        row.node_class_kinds = list(catalog.node_class_kinds)
        row.save()
        row.instance_types.all().delete()
        _catalog_rows_create(row, catalog)
        _audit(
            actor,
            "import",
            "InstanceCatalog",
            catalog.name,
            None if created else {"instanceTypes": before_count},
            {"instanceTypes": len(catalog.instance_types)},
        )
    return row


def catalog_delete(*, name: str, actor: Actor) -> None:
    """Remove a catalog with its instance types and offerings, audited like an import; LookupError if there is
    none. NodePools whose node class it served then have no instance types until another catalog lists the kind."""
    if actor.user is not None and not actor.user.has_perm("karpui.delete_catalog"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not delete instance catalogs")
    with transaction.atomic():
        row = models.Catalog.objects.select_for_update().filter(name=name).first()
        if row is None:
            raise LookupError(f'catalog "{name}" not found')
        before = {"instanceTypes": row.instance_types.count(), "nodeClassKinds": list(row.node_class_kinds)}
        row.delete()
        _audit(actor, "delete", "InstanceCatalog", name, before, None)


def _catalog_rows_create(row: models.Catalog, catalog: Catalog) -> None:
    type_rows = models.InstanceType.objects.bulk_create(
        models.InstanceType(catalog=row, name=it.name, **store.instance_type_row_fields(it, position))
        for position, it in enumerate(catalog.instance_types)
    )
    models.Offering.objects.bulk_create(
        models.Offering(
            instance_type=type_row,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            price=offering.price,
            available=offering.available,
        )
        for type_row, it in zip(type_rows, catalog.instance_types, strict=True)
        for offering in it.offerings
    )


def clusters_tick(*, now: datetime | None = None) -> None:
    """Move each lab cluster toward wall time under its lease. A cluster whose tick fails is logged (and shown on
    the dashboard from its log) and the others still tick: one bad cluster never stops the rest."""
    now = now or timezone.now()
    for cluster in models.Cluster.objects.filter(mode=models.Cluster.Mode.LAB):
        try:
            lab.tick(cluster, now=now)
        except Exception as error:
            logger.exception("tick failed", extra={"cluster": cluster.name})
            models.LogEntry.objects.create(
                cluster=cluster,
                time=cluster.clock,
                level="ERROR",
                logger="karpui.tick",
                message="Reconciler error",
                fields={"controller": "tick", "error": f"{type(error).__name__}: {error}"},
            )


# The dashboard's roles as Django groups. Viewers only need a login; editors write NodePools, node classes,
# catalogs, device declarations and the lab's objects (workloads, nodes: "kubeobject"), wherever they write them
# (dashboard, admin, Kubernetes API). A group that exists is left as an admin made it, so removing a permission
# from it sticks.
ROLES = {
    "viewers": (),
    "editors": tuple(
        f"{action}_{model}"
        for model in ("nodepool", "nodeclass", "catalog", "devicedeclaration", "kubeobject")
        for action in ("add", "change", "delete")
    ),
    "approvers": ("approve_disruption", "pause_disruption", "request_disruption"),
}


def roles_ensure() -> None:
    from django.contrib.auth.models import Group, Permission

    for name, codenames in ROLES.items():
        group, created = Group.objects.get_or_create(name=name)
        if created:
            group.permissions.set(Permission.objects.filter(content_type__app_label="karpui", codename__in=codenames))


def defaults_ensure() -> None:
    """First-run state: the lab cluster, the built-in catalogs and the role groups, made only where absent."""
    from karpui import objects  # the write path builds on these services

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
        objects.system_namespaces_ensure(cluster)
    roles_ensure()
    system = Actor(name="system", via="migrate")
    for build in (kwok_catalog, aws_catalog):
        catalog = build()
        if not models.Catalog.objects.filter(name=catalog.name).exists():
            catalog_import(catalog=catalog, actor=system)
