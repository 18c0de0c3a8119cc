"""`kubectl apply -f` for `karp apply`: every document validated before anything is written, then each created or
merged (three-way, as kubectl does), NodePools, node classes and DeviceDeclarations into their tables."""

from __future__ import annotations

import copy
from collections.abc import Callable

from django.db import transaction

from karpui import models
from karpui.kinds.versions import at_version
from karpui.people.audit import Actor
from karpui.writes import configs
from karpui.writes.checks import authorize, namespace_of, resource_of
from karpui.writes.config_rows import CONFIG_STORES, config_store, stored_config
from karpui.writes.configs import ApplyResult
from karpui.writes.lab_objects import create_in, lab_write, replace_in
from karpui.writes.managed import Owner
from provisioner.apimachinery.apply import applied, with_last_applied
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import (
    NotFound,
)
from provisioner.manifests import Document, ManifestError, load_documents
from provisioner.manifests.cluster import check_pods_per_apply


def manifests_apply(*, cluster: models.Cluster, text: str, actor: Actor) -> list[ApplyResult]:
    """`kubectl apply -f`, all or nothing: every document is validated before anything is written, then each is
    created or three-way merged into what is stored (kubectl's rule: the fields the file last applied are the
    file's; the rest, set by the dashboard, the admin or another client, stay as they are).

    Configuration (NodePools, node classes) is stored in its tables; the lab's objects go into the lab, whose
    controllers then react at the current time (a Deployment gets its pods at once, as on a real cluster).
    """
    documents = load_documents(text)
    for document in documents:
        configs.parse_document(document)
    check_pods_per_apply([document.body for document in documents])
    # Its own field manager, as kubectl's client-side apply has (kubectl-client-side-apply): owning the last-applied
    # annotation, it is the one kubectl's first server-side apply takes the fields over from, and only its.
    actor = actor.managing(actor.manager or f"{actor.field_manager}-client-side-apply")
    owner = Owner(cluster, actor.field_manager)
    with transaction.atomic():
        results = [
            _located(document, lambda d=document: _apply_config(cluster, d, actor))
            for document in documents
            if resource_of(document.kind).store in CONFIG_STORES
        ]
        lab_documents = [d for d in documents if resource_of(d.kind).store not in CONFIG_STORES]
        if lab_documents:
            for document in lab_documents:
                authorize(actor, "patch", resource_of(document.kind))
            with lab_write(cluster, actor) as api:
                results += [_located(d, lambda d=d: _apply_lab(api, d, owner)) for d in lab_documents]
        return results


def _located(document: Document, apply: Callable[[], ApplyResult]) -> ApplyResult:
    try:
        return apply()
    except ManifestError as error:  # raised before writing; leaving the transaction undoes earlier documents
        raise error.located(document=document.index, kind=document.kind, name=document.name) from None
    except NotFound as error:
        raise ManifestError(str(error), field="metadata.namespace").located(
            document=document.index, kind=document.kind, name=document.name
        ) from None


def _apply_config(cluster: models.Cluster, document: Document, actor: Actor) -> ApplyResult:
    resource = resource_of(document.kind)
    manifest = document.body
    stored = stored_config(cluster, resource, document.name)
    authorize(actor, "create" if stored is None else "patch", resource)
    if stored is None:
        return config_store(cluster, with_last_applied(manifest), actor)
    # Merged as the file's version serves it (a v1beta1 NodePool), as kubectl patches what it GETs at that version.
    group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
    current = at_version(stored, group, version, namespaced=False)
    merged = applied(current, manifest)
    if merged is None:
        return ApplyResult(configs.resource_name(document.kind, document.api_version), document.name, "unchanged")
    merged.pop("status", None)
    return config_store(cluster, merged, actor)


def _apply_lab(api: ClusterAPI, document: Document, owner: Owner) -> ApplyResult:
    resource = resource_of(document.kind)
    manifest = copy.deepcopy(document.body)
    namespace = namespace_of(manifest, resource)
    label = configs.resource_name(document.kind, document.api_version)
    stored = api.get(resource.kind, document.name, namespace)
    if stored is None:
        create_in(api, with_last_applied(manifest), resource, owner)
        return ApplyResult(label, document.name, "created")
    merged = applied(stored, manifest)
    if merged is None:
        return ApplyResult(label, document.name, "unchanged")
    written = replace_in(api, merged, resource, "", owner)
    if resource.kind == "Node" and manifest.get("status") and manifest["status"] != written.get("status"):
        # A static node's manifest is how it registers: its status is the node's, as the kubelet would post it.
        written = replace_in(api, {**written, "status": copy.deepcopy(manifest["status"])}, resource, "status")
    return ApplyResult(label, document.name, "configured" if written is not stored else "unchanged")
