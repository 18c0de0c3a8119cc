"""Instance catalogs written as a whole: imported (the built-in ones only on purpose) and deleted, audited."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import models
from karpui.clusters import store
from karpui.people.audit import Actor, audit_event_create
from provisioner.catalog import Catalog

# The catalogs karpui ships (made by migrate): every cluster's NodePools of their node classes launch from them.
BUILT_IN_CATALOGS = ("kwok", "aws-sample")


class BuiltInCatalog(ValueError):
    """An import over a built-in catalog that did not say it means to replace it."""


def catalog_import(*, catalog: Catalog, actor: Actor, overwrite_builtin: bool = False) -> models.Catalog:
    """Replace a catalog's instance types and offerings with `catalog`'s, atomically. A web or admin user needs
    karpui.change_catalog; the CLI is the machine's operator. Replacing a built-in catalog (kwok, aws-sample: every
    cluster's NodePools of its node class launch from it) needs `overwrite_builtin`, else BuiltInCatalog; the audit
    row says it was one."""
    if actor.user is not None and not actor.user.has_perm("karpui.change_catalog"):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not change instance catalogs")
    with transaction.atomic():
        built_in = catalog.name in BUILT_IN_CATALOGS and models.Catalog.objects.filter(name=catalog.name).exists()
        if built_in and not overwrite_builtin:
            raise BuiltInCatalog(
                f'catalog "{catalog.name}" is built in: replacing it changes the instance types of every cluster\'s '
                f"NodePools of {', '.join(catalog.node_class_kinds) or 'its node classes'}; import it under another "
                "name, or say that you mean to replace it (--overwrite-builtin, or the dashboard's box)"
            )
        row, created = models.Catalog.objects.select_for_update().get_or_create(name=catalog.name)
        before_count = row.instance_types.count()
        row.description = catalog.description
        row.node_class_kinds = list(catalog.node_class_kinds)
        row.save()
        row.instance_types.all().delete()
        _catalog_rows_create(row, catalog)
        audit_event_create(
            actor,
            "import",
            "InstanceCatalog",
            catalog.name,
            None if created else {"instanceTypes": before_count},
            {"instanceTypes": len(catalog.instance_types)},
            reason="overwrote the built-in catalog" if built_in else "",
            cluster=None,
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
        audit_event_create(actor, "delete", "InstanceCatalog", name, before, None, cluster=None)


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
            reservation_id=offering.reservation_id,
            reservation_type=offering.reservation_type,
            reservation_capacity=offering.reservation_capacity,
        )
        for type_row, it in zip(type_rows, catalog.instance_types, strict=True)
        for offering in it.offerings
    )
