"""The catalog page's actions: import a catalog file from the browser, download a stored one, delete one."""

from __future__ import annotations

import json

import yaml
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from karpui.clusters import store
from karpui.links import cluster_redirect
from karpui.people.audit import Actor
from karpui.web import permissions, views
from karpui.writes import catalogs
from provisioner.catalog.files import catalog_to_manifest
from provisioner.catalog.kwok_file import read_catalog
from provisioner.manifests import ManifestError


@require_POST
def catalog_import(request: HttpRequest) -> HttpResponse:
    """Replace (or add) a catalog from an uploaded or pasted file: all of it in one transaction, or nothing."""
    permissions.require(request.user, "karpui.change_catalog", "import instance catalogs")
    upload = request.FILES.get("file")
    if upload is not None and upload.size is not None and upload.size > settings.KARPUI_CATALOG_MAX_BYTES:
        return _refused(request, f"file: {upload.size} bytes is over the {settings.KARPUI_CATALOG_MAX_BYTES} limit")
    try:
        text = upload.read().decode() if upload is not None else request.POST.get("text", "")
    except UnicodeDecodeError:
        return _refused(request, "file: not UTF-8 text (expected a YAML or JSON catalog)")
    if not text.strip():
        return _refused(request, "file: choose a catalog file or paste one")
    try:
        catalog = read_catalog(text)
    except ManifestError as error:
        return _refused(request, str(error))
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        catalogs.catalog_import(
            catalog=catalog, actor=actor, overwrite_builtin=request.POST.get("overwrite_builtin") == "on"
        )
    except catalogs.BuiltInCatalog as error:
        return _refused(request, f"overwrite_builtin: {error}")
    messages.success(request, f"catalog {catalog.name}: {len(catalog.instance_types)} instance types imported")
    return cluster_redirect(request, "catalog")


def _refused(request: HttpRequest, message: str) -> HttpResponse:
    """A refused action changes nothing: the catalog page again, with why, as a 400."""
    messages.error(request, message)
    return views.catalog_page(request, status=400)


@require_POST
def catalog_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Delete a catalog once its name is typed back (audited); its instance types go with it."""
    permissions.require(request.user, "karpui.delete_catalog", "delete instance catalogs")
    if request.POST.get("confirm", "").strip() != name:
        return _refused(request, f"confirm: type the catalog's name, {name}, to delete it")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        catalogs.catalog_delete(name=name, actor=actor)
    except LookupError as error:
        raise Http404(str(error)) from None
    messages.success(request, f"catalog {name} deleted")
    return cluster_redirect(request, "catalog")


@require_GET
def catalog_export(request: HttpRequest, name: str) -> HttpResponse:
    """A stored catalog as the file `catalog import` reads (YAML, or JSON with ?format=json)."""
    row = next((c for c in store.catalogs_with_types() if c.name == name), None)
    if row is None:
        raise Http404(f'catalog "{name}" not found')
    manifest = catalog_to_manifest(store.catalog_domain(row))
    wanted = request.GET.get("format", "yaml")
    if wanted not in ("yaml", "json"):
        raise BadRequest(f"format: must be yaml or json, got {wanted[:40]!r}")
    if wanted == "json":
        body, kind, suffix = json.dumps(manifest, indent=2), "application/json", "json"
    else:
        body, kind, suffix = yaml.safe_dump(manifest, sort_keys=False), "application/yaml", "yaml"
    response = HttpResponse(body, content_type=f"{kind}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{suffix}"'
    return response
