"""The one write path for a cluster's objects, kube-apiserver's write half: `karp`, the dashboard and the Kubernetes
API all create, replace, patch, delete, apply, scale and evict through these functions, so an object is authorised,
validated and stored the same way whoever writes it.

Where objects live: the lab's objects (Pods, workloads, Nodes, NodeClaims, DRA kinds, ...) in its store, written
through `lab.writing`, after which the cluster's own components react at once, as a real cluster's would; NodePools,
node classes and DeviceDeclarations in their own tables, through the services that audit them. The API server's
rules are kept: a stale resourceVersion is a Conflict, a main-resource write never changes status and a status
write changes nothing else, a namespaced object needs its namespace, a delete with finalizers only marks the object.

Who may write: the machine's operator (`karp` without a user) may do anything; a user needs the model permission
of what is written (karpui.add_/change_/delete_ nodepool, nodeclass, devicedeclaration, and kubeobject for the
lab's objects), which the editors group has. A refusal raises PermissionDenied, which the API answers in RBAC's
words.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import models
from karpui.clusters import storage, store
from karpui.kinds.resources import BY_KIND, DECLARATIONS, NODEPOOLS, Resource
from karpui.kinds.versions import at_version
from karpui.people.audit import Actor
from karpui.writes import configs
from karpui.writes.checks import IMMORTAL_NAMESPACES, authorize, resource_of, validate
from karpui.writes.config_rows import (
    CONFIG_STORES,
    config_replace,
    config_store,
    lock_config,
    locked_config,
    stored_config,
)
from karpui.writes.lab_objects import (
    STATUS_KEPT,
    STATUS_ON_CREATE,
    copied,
    create_in,
    delete_in,
    lab_write,
    replace_in,
    stored_in,
    stored_version,
)
from karpui.writes.managed import Owner, store_managed, with_managed
from provisioner.apimachinery import fieldmanager
from provisioner.apimachinery.apply import LAST_APPLIED, last_applied, with_last_applied
from provisioner.apimachinery.patch import apply_patch
from provisioner.apimachinery.strategic import UnsupportedPatch, root_type
from provisioner.cluster.objects import (
    AlreadyExists,
    Conflict,
    NotFound,
    Obj,
)
from provisioner.manifests import ManifestError
from provisioner.manifests.cluster import MAX_REPLICAS
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from provisioner.quantity import canonical_quantities


class Renamed(Exception):
    """A patch that would change its object's name, or move it to another namespace: kube-apiserver checks the
    patched object against the URL and answers 400, writing nothing (unchecked, the new name was written as another
    object)."""


class Forbidden(PermissionDenied):
    """A write the API server refuses whoever asks (its admission, not RBAC); the message is kube-apiserver's
    own: `namespaces "default" is forbidden: this namespace may not be deleted`."""


def object_create(*, cluster: models.Cluster, obj: Obj, actor: Actor, manager: str = "") -> Obj:
    """POST: a new object (AlreadyExists if the name is taken)."""
    resource = resource_of(str(obj.get("kind", "")))
    authorize(actor, "create", resource)
    actor = actor.managing(manager)
    name = str((obj.get("metadata") or {}).get("name", ""))
    if resource.store in CONFIG_STORES:
        with transaction.atomic():
            if stored_config(cluster, resource, name) is not None:
                raise AlreadyExists(f'{resource.qualified} "{name}" already exists')
            body = copy.deepcopy(obj)
            body.pop("status", None)
            config_store(cluster, body, actor)
            written = stored_config(cluster, resource, name)
            assert written is not None
            return written
    # The status a create keeps is checked as `karp apply` checks it: a Node with allocatable cpu "-4" was stored.
    validate(obj, resource, status=resource.kind in STATUS_ON_CREATE)
    with lab_write(cluster, actor) as api:
        owner = Owner(cluster, actor.field_manager)
        return copied(create_in(api, stored_version(cluster, api, obj, resource), resource, owner))


def object_replace(*, cluster: models.Cluster, obj: Obj, subresource: str = "", actor: Actor, manager: str = "") -> Obj:
    """PUT of the object or its status; `manager` (the API's fieldManager) takes over the fields it changes of an
    object that has managedFields."""
    resource = resource_of(str(obj.get("kind", "")))
    authorize(actor, "update", resource)
    actor = actor.managing(manager)
    owner = Owner(cluster, actor.field_manager)
    if resource.store in CONFIG_STORES:
        return config_replace(cluster, obj, resource, subresource, actor, owner)
    with lab_write(cluster, actor) as api:
        return copied(replace_in(api, stored_version(cluster, api, obj, resource), resource, subresource, owner))


def object_patch(
    *,
    cluster: models.Cluster,
    kind: str,
    name: str,
    namespace: str,
    patch: Any,
    patch_type: str,
    subresource: str = "",
    actor: Actor,
    manager: str = "",
    version: str = "",
) -> Obj:
    """PATCH (merge, json or strategic) of the object or its status: read, patch and write under one lock. The
    patch is written against `version` (a served version, the stored one by default: a v1beta1 NodePool is patched
    as v1beta1 and stored as v1); the patched object keeps its name, namespace and uid or nothing is written."""
    resource = resource_of(kind)
    authorize(actor, "patch", resource)
    actor = actor.managing(manager)
    owner = Owner(cluster, actor.field_manager)
    version = version or resource.version
    if resource.store in CONFIG_STORES:
        with transaction.atomic():
            current = locked_config(cluster, resource, name)
            patched = _patched_at(current, resource, version, name, namespace, patch, patch_type)
            return config_replace(cluster, patched, resource, subresource, actor, owner)
    with lab_write(cluster, actor) as api:
        current = stored_in(api, resource, name, namespace)
        patched = _patched_at(current, resource, version, name, namespace, patch, patch_type)
        if version != resource.version:
            patched = stored_version(cluster, api, patched, resource)
        return copied(replace_in(api, patched, resource, subresource, owner))


def object_apply(
    *,
    cluster: models.Cluster,
    config: Obj,
    namespace: str,
    manager: str,
    force: bool,
    actor: Actor,
) -> tuple[Obj, bool]:
    """Server-side apply (PATCH as application/apply-patch+yaml): `config` merged into the object as `manager`'s
    fields, or the object created from it; the object as written and whether it was created. A field another
    manager owns that the apply would change is an ApplyConflict unless `force`. Status is not applied: it is the
    status subresource's."""
    resource = resource_of(str(config.get("kind", "")))
    if resource.store == DECLARATIONS:
        raise UnsupportedPatch("server-side apply is not supported for DeviceDeclarations: use kubectl apply")
    name = str((config.get("metadata") or {}).get("name", ""))
    status = fieldmanager.without_nulls(config.get("status"))
    if resource.kind in STATUS_KEPT or resource.store in CONFIG_STORES:
        config = {key: value for key, value in config.items() if key != "status"}

    def applying(current: Obj | None) -> Obj:
        """The object after the apply, with its managedFields."""
        result = fieldmanager.apply(
            current,
            config,
            manager=manager,
            force=force,
            root_type=root_type(resource.api_version, resource.kind),
            time=Owner(cluster, manager).time,
            normalized=_as_stored if resource.store == NODEPOOLS else canonical_quantities,
            last_applied=_last_applied_or_none(current),
        )
        obj = with_managed(result.obj, result.managed)
        annotations = obj["metadata"].get("annotations") or {}
        if manager == "kubectl" and annotations.get(LAST_APPLIED):
            # kube-apiserver's last-applied updater: kubectl's server-side apply keeps an object's client-side
            # record (if it has one) the applied file, so that a client-side apply after it merges from there.
            annotations[LAST_APPLIED] = with_last_applied(config)["metadata"]["annotations"][LAST_APPLIED]
        return obj

    if resource.store in CONFIG_STORES:
        with transaction.atomic():
            lock_config(cluster, resource, name)
            current = stored_config(cluster, resource, name)
            authorize(actor, "create" if current is None else "patch", resource)
            body = applying(current)
            body.pop("status", None)
            if current is None:
                config_store(cluster, body, actor)
                store_managed(cluster, resource, name, body["metadata"]["managedFields"])
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                config_replace(cluster, body, resource, "", actor)  # stores the managedFields the apply gave
            written = stored_config(cluster, resource, name)
            assert written is not None
            return written, current is None
    with lab_write(cluster, actor) as api:
        current = api.get(resource.kind, name, namespace if resource.namespaced else "")
        authorize(actor, "create" if current is None else "patch", resource)
        obj = applying(current)
        if current is None and resource.kind in STATUS_ON_CREATE and isinstance(status, dict):
            obj["status"] = copy.deepcopy(status)  # how a Node registers: its capacity is not the applier's field
        if current is None:
            validate(obj, resource, status=resource.kind in STATUS_ON_CREATE)
            return copied(create_in(api, stored_version(cluster, api, obj, resource), resource)), True
        return copied(replace_in(api, obj, resource, "")), False


def _last_applied_or_none(obj: Obj | None) -> Obj | None:
    """The object's last client-side applied configuration, if it has one that can be read."""
    try:
        return last_applied(obj) if obj is not None else None
    except ManifestError:
        return None


def _as_stored(nodepool: Obj) -> Obj:
    """A NodePool as its table would keep it (quantities and durations as the parser writes them), to compare an
    applied value with the stored one; a ManifestError naming the field when it cannot be stored."""
    body = {key: value for key, value in nodepool.items() if key != "status"}
    return {**nodepool, "spec": nodepool_to_manifest(parse_nodepool(body))["spec"]}


def _patched_at(
    current: Obj, resource: Resource, version: str, name: str, namespace: str, patch: Any, patch_type: str
) -> Obj:
    """The stored `current` served at `version`, patched, and checked for what a patch may not change, as
    kube-apiserver checks it: its namespace and name against the request's (Renamed), its uid (immutable)."""
    if version != resource.version:
        current = at_version(current, resource.group, version, namespaced=resource.namespaced)
    patched = _patched(current, patch, patch_type)
    meta = patched.get("metadata") or {}
    if resource.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
        raise Renamed("the namespace of the provided object does not match the namespace sent on the request")
    if meta.get("name") != name:
        raise Renamed(f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({name})")
    if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
        raise ManifestError(f"Invalid value: {json.dumps(meta['uid'])}: field is immutable", field="metadata.uid")
    return patched


def _patched(current: Obj, patch: Any, patch_type: str) -> Obj:
    """`current` after the patch, keeping its resourceVersion unless the patch names one (a precondition)."""
    patched = apply_patch(current, patch, patch_type)
    wanted = ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get("resourceVersion")
    patched.setdefault("metadata", {})["resourceVersion"] = wanted or current["metadata"].get("resourceVersion")
    return patched


def object_delete(
    *,
    cluster: models.Cluster,
    kind: str,
    name: str,
    namespace: str,
    actor: Actor,
    propagation: str = "Background",
    grace_seconds: int | None = None,
    preconditions: dict[str, Any] | None = None,
) -> Obj:
    """DELETE: the object as it was (marked with deletionTimestamp while finalizers remain). Background propagation
    leaves the dependents to the garbage collector; Foreground and Orphan mark the owner with the collector's
    finalizer, and it goes once the collector has deleted its dependents (Foreground) or removed their owner
    references (Orphan). Pods in the lab stop at once, so the grace period changes nothing."""
    resource = resource_of(kind)
    authorize(actor, "delete", resource)
    if resource.kind == "Namespace" and name in IMMORTAL_NAMESPACES:
        # Deleting one would delete everything in it, and kube-apiserver refuses it before looking the namespace up.
        raise Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
    conditions = preconditions or {}
    if resource.store in CONFIG_STORES:
        with transaction.atomic():
            current = stored_config(cluster, resource, name)
            if current is None:
                raise NotFound(f'{resource.qualified} "{name}" not found')
            _check_preconditions(resource, name, current, conditions)
            configs.config_delete(cluster=cluster, kind=kind, name=name, actor=actor)
            return current
    with lab_write(cluster, actor) as api:
        current = stored_in(api, resource, name, namespace)
        _check_preconditions(resource, name, current, conditions)
        return delete_in(api, resource, name, namespace if resource.namespaced else "", propagation)


def _check_preconditions(resource: Resource, name: str, current: Obj, conditions: dict[str, Any]) -> None:
    for field in ("uid", "resourceVersion"):
        wanted = conditions.get(field)
        if wanted and str(wanted) != str(current["metadata"].get(field, "")):
            raise Conflict(f'{resource.qualified} "{name}": precondition failed on {field}')


def workload_scale(
    *, cluster: models.Cluster, kind: str, name: str, namespace: str, replicas: int, actor: Actor, manager: str = ""
) -> Obj:
    """The scale subresource (kubectl scale, karp scale): a Deployment's or ReplicaSet's spec.replicas, or a static
    NodePool's (Karpenter's NodePool CRD has the scale subresource: .spec.replicas, .status.nodes)."""
    resource = resource_of(kind)
    authorize(actor, "update", resource)
    if resource.kind == "NodePool":
        return _nodepool_scale(cluster, name, replicas, actor)
    if resource.kind not in ("Deployment", "ReplicaSet"):
        raise ManifestError(f"cannot scale {resource.plural}: only deployments and replicasets", field="kind")
    if replicas < 0 or replicas > MAX_REPLICAS:
        raise ManifestError(
            f"must be between 0 and {MAX_REPLICAS} (karpui's limit per workload), got {replicas}",
            field="spec.replicas",
        )
    with lab_write(cluster, actor) as api:
        obj = api.get(resource.kind, name, namespace)
        if obj is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        if int(obj["spec"].get("replicas", 1)) != replicas:
            before = copy.deepcopy(obj)
            obj["spec"]["replicas"] = replicas
            Owner(cluster, manager or actor.field_manager).track(before, obj, resource, "scale")
            api.update(obj, spec_changed=True)
        return copied(obj)


def _nodepool_scale(cluster: models.Cluster, name: str, replicas: int, actor: Actor) -> Obj:
    """A NodePool's spec.replicas through the same validation and audit as any NodePool write: a dynamic NodePool
    is refused as Karpenter's CRD refuses it (a NodePool cannot become static)."""
    with transaction.atomic():
        row = models.NodePool.objects.select_for_update().filter(cluster=cluster, name=name).first()
        if row is None:
            raise NotFound(f'nodepools.karpenter.sh "{name}" not found')
        manifest = store.nodepool_manifest(row)
        manifest.pop("status", None)
        if manifest["spec"].get("replicas") != replicas:
            manifest["spec"]["replicas"] = replicas
            configs.nodepool_apply(cluster=cluster, nodepool=parse_nodepool(manifest), actor=actor)
        written = storage.get_object(cluster, BY_KIND["NodePool"], name, "")
        assert written is not None
        return written


def pod_evict(*, cluster: models.Cluster, name: str, namespace: str, actor: Actor) -> None:
    """POST pods/NAME/eviction: the pod goes, unless a PodDisruptionBudget allows no disruption now
    (TooManyRequests, 429)."""
    authorize(actor, "delete", BY_KIND["Pod"])
    with lab_write(cluster, actor) as api:
        pod = api.get("Pod", name, namespace)
        if pod is None:
            raise NotFound(f'pods "{name}" not found')
        api.evict(pod)


def object_edit(
    *,
    cluster: models.Cluster,
    kind: str,
    name: str,
    namespace: str,
    edit: Callable[[Obj], None],
    actor: Actor,
) -> tuple[Obj, bool]:
    """Change an object in place as kubectl's verbs do (label, annotate, taint, cordon, rollout restart): read it,
    let `edit` change the copy (raising to refuse), and write it if anything changed. The object, and whether it
    changed."""
    resource = resource_of(kind)
    authorize(actor, "patch", resource)
    if resource.store in CONFIG_STORES:
        with transaction.atomic():
            current = locked_config(cluster, resource, name)
            new = copy.deepcopy(current)
            edit(new)
            if new == current:
                return current, False
            return config_replace(cluster, new, resource, "", actor), True
    with lab_write(cluster, actor) as api:
        current = stored_in(api, resource, name, namespace)
        new = copy.deepcopy(current)
        edit(new)
        if new == current:
            return copied(current), False
        return copied(replace_in(api, new, resource, "", Owner(cluster, actor.field_manager))), True
