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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from karpui import lab, models, services
from karpui.kubeapi import storage
from karpui.kubeapi.versions import at_version, nodeclaim_v1
from karpui.kubectl.resources import BY_KIND, DECLARATIONS, LAB, NODECLASSES, NODEPOOLS, Resource
from karpui.services import Actor, ApplyResult
from provisioner.apimachinery import fieldmanager
from provisioner.apimachinery.apply import applied, last_applied, with_last_applied
from provisioner.apimachinery.defaults import set_defaults
from provisioner.apimachinery.patch import apply_patch
from provisioner.apimachinery.strategic import UnsupportedPatch, root_type
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import (
    OWNER_KINDS,
    PROPAGATION_FINALIZERS,
    AlreadyExists,
    Conflict,
    NotFound,
    Obj,
)
from provisioner.manifests import Document, ManifestError, load_documents
from provisioner.manifests.cluster import MAX_REPLICAS, VALIDATORS, check_pods_per_apply, validate_cluster_object
from provisioner.manifests.fields import metadata as check_metadata
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool
from provisioner.quantity import canonical_quantities

# kube-apiserver makes these at start (system_namespaces_ensure, here).
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
# Those of them its NamespaceLifecycle admission never lets be deleted (kube-node-lease may be). As they always
# exist, a write into them needs no look-up, even in a cluster whose Namespace rows were never made.
IMMORTAL_NAMESPACES = ("default", "kube-public", "kube-system")
# Kinds whose status a write to the main resource keeps as stored (they have a status subresource).
_STATUS_KEPT = {r.kind for r in BY_KIND.values() if "status" in r.subresources}
# What a create keeps of a given status: a Node's is how it registers (kubelet posts it); others start empty.
_STATUS_ON_CREATE = frozenset({"Node", "Namespace", "DRAConfig", "ResourceSlice"})
_CONFIG = (NODEPOOLS, NODECLASSES, DECLARATIONS)
_MODEL = {LAB: "kubeobject", NODEPOOLS: "nodepool", NODECLASSES: "nodeclass", DECLARATIONS: "devicedeclaration"}
_ACTION = {"create": "add", "update": "change", "patch": "change", "delete": "delete"}


class Forbidden(PermissionDenied):
    """A write the API server refuses whoever asks (its admission, not RBAC); the message is kube-apiserver's
    own: `namespaces "default" is forbidden: this namespace may not be deleted`."""


def resource_of(kind: str) -> Resource:
    resource = BY_KIND.get(kind)
    if resource is None:
        raise ManifestError(f'no matches for kind "{kind}"', field="kind")
    return resource


def authorize(actor: Actor, verb: str, resource: Resource) -> None:
    """Refuse a user the write unless their permissions allow it (the operator, with no user, may do anything)."""
    if verb not in resource.verbs:
        raise PermissionDenied(f"{resource.qualified} cannot be written: {verb} is not served for it")
    user = actor.user
    if user is None:
        return
    permission = f"karpui.{_ACTION[verb]}_{_MODEL[resource.store]}"
    if not user.is_active or not user.has_perm(permission):  # type: ignore[attr-defined]
        raise PermissionDenied(f"{actor.name} may not {verb} {resource.qualified}")


# Validation -----------------------------------------------------------------------------------------------------


def validate(obj: Obj, resource: Resource, *, status: bool = False) -> None:
    """The checks `karp apply` makes of a lab object, on what a write would store: its status too when `status`
    (a Node registers with its status, as kubelet posts it), else status aside (the cluster's to write). Errors
    name the field."""
    body = obj if status else {key: value for key, value in obj.items() if key != "status"}
    if obj.get("kind") in VALIDATORS:
        validate_cluster_object(body)
    else:
        check_metadata(body)
    last_applied(body)  # apply's record must stay readable by the next apply (bounded, a JSON object)
    if obj.get("apiVersion") not in resource_versions(resource):
        raise ManifestError(f'no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}"')


def resource_versions(resource: Resource) -> set[str]:
    return {f"{resource.group}/{v}" if resource.group else v for v in resource.versions}


def _namespace_of(obj: Obj, resource: Resource) -> str:
    return str(obj["metadata"].get("namespace") or "default") if resource.namespaced else ""


def _namespace_exists(api: ClusterAPI, resource: Resource, obj: Obj) -> None:
    if not resource.namespaced:
        return
    namespace = _namespace_of(obj, resource)
    obj["metadata"]["namespace"] = namespace
    if namespace in IMMORTAL_NAMESPACES:
        return
    found = api.get("Namespace", namespace)
    if found is None or found["metadata"].get("deletionTimestamp"):
        raise NotFound(f'namespaces "{namespace}" not found')


def _device_classes_exist(api: ClusterAPI, obj: Obj) -> None:
    """A claim or template must name a DeviceClass that exists."""
    if obj["kind"] not in ("ResourceClaim", "ResourceClaimTemplate"):
        return
    spec, path = (
        ((obj.get("spec") or {}).get("spec") or {}, "spec.spec")
        if obj["kind"] == "ResourceClaimTemplate"
        else (obj.get("spec") or {}, "spec")
    )
    for index, request in enumerate((spec.get("devices") or {}).get("requests") or []):
        exact = request.get("exactly") or (request.get("firstAvailable") or [{}])[0]
        name = exact.get("deviceClassName")
        if api.get("DeviceClass", str(name)) is None:
            raise ManifestError(
                f'DeviceClass "{name}" not found', field=f"{path}.devices.requests[{index}].exactly.deviceClassName"
            )


# The lab's objects ----------------------------------------------------------------------------------------------


@contextmanager
def _lab_write(cluster: models.Cluster) -> Iterator[ClusterAPI]:
    """Where a cluster's objects are written: the lab's store; a kwok cluster's API server itself (its engine's
    informers bring the change back); never an observed cluster, which is Karpenter's."""
    if cluster.mode == models.Cluster.Mode.OBSERVE:
        raise PermissionDenied(
            f"cluster {cluster.name} is observed: karpui writes nothing there but the NodeClaim deletions of approved "
            "commands (write with kubectl, or let Karpenter)"
        )
    if cluster.mode == models.Cluster.Mode.KWOK:
        from karpui import remote
        from provisioner.adapters.direct import UncachedCluster

        with transaction.atomic():
            yield UncachedCluster(remote.transport(cluster))
        return
    with transaction.atomic(), lab.writing(cluster.name) as api:
        yield api


def _stored_version(cluster: models.Cluster, api: ClusterAPI, obj: Obj, resource: Resource) -> Obj:
    """A lab object written at another version it is served at, as stored: a v1beta1 NodeClaim converted to v1
    (what v1beta1 cannot say kept as stored, or for a new one taken from its NodePool, as Karpenter's webhook
    does); other kinds only differ in name between versions."""
    if obj.get("apiVersion") == resource.api_version or obj.get("apiVersion") not in resource_versions(resource):
        return obj  # a version not served is refused by validation, naming it
    if resource.kind != "NodeClaim":
        return {**obj, "apiVersion": resource.api_version}
    meta = obj.get("metadata") or {}
    stored = api.get("NodeClaim", str(meta.get("name", "")))
    nodepool = models.NodePool.objects.filter(
        cluster=cluster, name=(meta.get("labels") or {}).get("karpenter.sh/nodepool", "")
    ).first()
    expire_after = ((nodepool.spec.get("template") or {}).get("spec") or {}).get("expireAfter") if nodepool else None
    return nodeclaim_v1(obj, stored=stored, nodepool_expire_after=expire_after)


def _copy(obj: Obj) -> Obj:
    """What a write answers: the object as written, not as the cluster's components change it right after."""
    return copy.deepcopy(obj)


def _prepared_for_create(obj: Obj) -> Obj:
    obj = canonical_quantities(obj)  # a copy, its quantities as kube-apiserver stores them ("0.5" is "500m")
    meta = obj.setdefault("metadata", {})
    for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
        meta.pop(server_field, None)
    if meta.get("managedFields") == [{}]:
        meta.pop("managedFields")  # the reset sign, on a new object: none
    if obj["kind"] == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif obj["kind"] == "Pod":
        obj["status"] = {"phase": "Pending"}  # as kube-apiserver starts every pod; the kubelet reports the rest
    elif obj["kind"] not in _STATUS_ON_CREATE:
        obj.pop("status", None)
    return set_defaults(obj)  # what kube-apiserver defaults (a Deployment's strategy, a DaemonSet's updateStrategy)


def _create_in(api: ClusterAPI, obj: Obj, resource: Resource) -> Obj:
    obj = _prepared_for_create(obj)
    _namespace_exists(api, resource, obj)
    _device_classes_exist(api, obj)
    return api.create(obj)


def _replace_in(api: ClusterAPI, obj: Obj, resource: Resource, subresource: str, owner: _Owner | None = None) -> Obj:
    """PUT: the stored object becomes `obj`, but for what the server owns; a stale resourceVersion is a Conflict."""
    meta = obj.get("metadata") or {}
    namespace = _namespace_of(obj, resource)
    stored = api.get(resource.kind, str(meta.get("name", "")), namespace)
    if stored is None:
        raise NotFound(f'{resource.qualified} "{meta.get("name")}" not found')
    given = str(meta.get("resourceVersion") or "")
    if given and given != stored["metadata"].get("resourceVersion"):
        raise Conflict(f'{resource.qualified} "{meta.get("name")}": the object has been modified')
    if subresource == "status":
        new = {**copy.deepcopy(stored), "status": copy.deepcopy(obj.get("status") or {})}
        if resource.kind in _STATUS_ON_CREATE:
            validate(new, resource, status=True)  # a Node's allocatable is what the scheduler packs against
    else:
        # Defaulted and canonical as on create, before the comparison with the stored object: "0.5" over "500m"
        # changes nothing, as on kube-apiserver.
        new = set_defaults(canonical_quantities(obj))
        new["metadata"] = {
            **new.get("metadata", {}),
            **{
                key: stored["metadata"][key]
                for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace")
                if key in stored["metadata"]
            },
        }
        if resource.kind in _STATUS_KEPT:
            if "status" in stored:
                new["status"] = copy.deepcopy(stored["status"])
            else:
                new.pop("status", None)
        validate(new, resource)
        _device_classes_exist(api, new)
    new["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    if _given_managed_fields(new["metadata"], stored["metadata"]) and owner is not None:
        owner.track(stored, new, resource, subresource)
    if new == stored:
        return stored  # kube-apiserver writes nothing (and keeps the version) when an update changes nothing
    written = api.update(new, spec_changed=new.get("spec") != stored.get("spec"))
    if written["metadata"].get("deletionTimestamp") and not written["metadata"].get("finalizers"):
        api.delete(resource.kind, written["metadata"]["name"], namespace)  # the last finalizer went
    return written


def _delete_in(api: ClusterAPI, resource: Resource, name: str, namespace: str, propagation: str) -> Obj:
    obj = api.get(resource.kind, name, namespace)
    if obj is None:
        raise NotFound(f'{resource.qualified} "{name}" not found')
    finalizer = PROPAGATION_FINALIZERS.get(propagation)
    meta = obj["metadata"]
    finalizers = meta.get("finalizers") or []
    if finalizer and resource.kind in OWNER_KINDS and not meta.get("deletionTimestamp") and finalizer not in finalizers:
        # As kube-apiserver does: the owner stays, marked, until the garbage collector has orphaned its dependents
        # (Orphan) or deleted them (Foreground), and then removes the finalizer.
        meta["finalizers"] = [*finalizers, finalizer]
        api.update(obj)
    if resource.kind == "Namespace":  # the namespace controller empties it, then the namespace goes
        for kind, other in BY_KIND.items():
            if other.namespaced and other.store == LAB:
                for item in api.list(kind, namespace=name):
                    api.delete(kind, item["metadata"]["name"], name)
    return _copy(api.delete(resource.kind, name, namespace))


# Configuration tables: NodePools, node classes, DeviceDeclarations ---------------------------------------------


def _stored_config(cluster: models.Cluster, resource: Resource, name: str) -> Obj | None:
    return storage.get_object(cluster, resource, name, "")


def _config_store(cluster: models.Cluster, obj: Obj, actor: Actor) -> ApplyResult:
    """Validate a NodePool, node class or DeviceDeclaration manifest and store it (create or replace)."""
    last_applied(obj)  # apply's record must stay readable by the next apply (bounded, a JSON object)
    parse, store_value = services.APPLIERS[obj["kind"]]
    return store_value(cluster, parse(obj), actor)


def _config_replace(
    cluster: models.Cluster, obj: Obj, resource: Resource, subresource: str, actor: Actor, owner: _Owner | None = None
) -> Obj:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    with transaction.atomic():
        _lock_config(cluster, resource, name)
        stored = _stored_config(cluster, resource, name)
        if stored is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        given = str(meta.get("resourceVersion") or "")
        if given and given != stored["metadata"].get("resourceVersion"):
            raise Conflict(f'{resource.qualified} "{name}": the object has been modified')
        if subresource == "status":
            _config_status(cluster, resource, name, obj.get("status") or {})
        else:
            body = copy.deepcopy(obj)
            body.pop("status", None)
            if body.get("apiVersion") not in resource_versions(resource):
                raise ManifestError(f'no matches for kind "{resource.kind}" in version "{body.get("apiVersion")}"')
            _config_store(cluster, body, actor)
            updated = {**body, "metadata": {**(body.get("metadata") or {})}}
            if _given_managed_fields(updated["metadata"], stored["metadata"]) and owner is not None:
                owner.track(stored, updated, resource, subresource)
            managed = updated["metadata"].get("managedFields") or []
            if managed != (stored["metadata"].get("managedFields") or []):
                _store_managed(cluster, resource, name, managed)
        written = _stored_config(cluster, resource, name)
        assert written is not None
        return written


def _lock_config(cluster: models.Cluster, resource: Resource, name: str) -> None:
    if resource.store == NODEPOOLS:
        models.NodePool.objects.select_for_update().filter(cluster=cluster, name=name).first()
    elif resource.store == NODECLASSES:
        models.NodeClass.objects.select_for_update().filter(cluster=cluster, kind=resource.kind, name=name).first()
    else:
        models.DeviceDeclaration.objects.select_for_update().filter(name=name).first()


def _config_status(cluster: models.Cluster, resource: Resource, name: str, status: dict[str, Any]) -> None:
    """The status of a NodePool or node class: written by whoever provisions for it (the lab's run, or an engine
    over the API)."""
    if resource.store == NODEPOOLS:
        row: models.NodePool | models.NodeClass | None = models.NodePool.objects.filter(
            cluster=cluster, name=name
        ).first()
    elif resource.store == NODECLASSES:
        row = models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind, name=name).first()
    else:
        return  # a DeviceDeclaration has no status
    if row is not None and getattr(row, "status", None) != status and hasattr(row, "status"):
        row.status = status  # type: ignore[union-attr]
        row.save(update_fields=["status"])


# The verbs ------------------------------------------------------------------------------------------------------


def object_create(*, cluster: models.Cluster, obj: Obj, actor: Actor) -> Obj:
    """POST: a new object (AlreadyExists if the name is taken)."""
    resource = resource_of(str(obj.get("kind", "")))
    authorize(actor, "create", resource)
    name = str((obj.get("metadata") or {}).get("name", ""))
    if resource.store in _CONFIG:
        with transaction.atomic():
            if _stored_config(cluster, resource, name) is not None:
                raise AlreadyExists(f'{resource.qualified} "{name}" already exists')
            body = copy.deepcopy(obj)
            body.pop("status", None)
            _config_store(cluster, body, actor)
            written = _stored_config(cluster, resource, name)
            assert written is not None
            return written
    # The status a create keeps is checked as `karp apply` checks it: a Node with allocatable cpu "-4" was stored.
    validate(obj, resource, status=resource.kind in _STATUS_ON_CREATE)
    with _lab_write(cluster) as api:
        return _copy(_create_in(api, _stored_version(cluster, api, obj, resource), resource))


def object_replace(*, cluster: models.Cluster, obj: Obj, subresource: str = "", actor: Actor, manager: str = "") -> Obj:
    """PUT of the object or its status; `manager` (the API's fieldManager) takes over the fields it changes of an
    object that has managedFields."""
    resource = resource_of(str(obj.get("kind", "")))
    authorize(actor, "update", resource)
    owner = _Owner(cluster, manager)
    if resource.store in _CONFIG:
        return _config_replace(cluster, obj, resource, subresource, actor, owner)
    with _lab_write(cluster) as api:
        return _copy(_replace_in(api, _stored_version(cluster, api, obj, resource), resource, subresource, owner))


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
) -> Obj:
    """PATCH (merge, json or strategic) of the object or its status: read, patch and write under one lock."""
    resource = resource_of(kind)
    authorize(actor, "patch", resource)
    owner = _Owner(cluster, manager)
    if resource.store in _CONFIG:
        with transaction.atomic():
            _lock_config(cluster, resource, name)
            current = _stored_config(cluster, resource, name)
            if current is None:
                raise NotFound(f'{resource.qualified} "{name}" not found')
            patched = _patched(current, patch, patch_type)
            return _config_replace(cluster, patched, resource, subresource, actor, owner)
    with _lab_write(cluster) as api:
        current = api.get(resource.kind, name, namespace if resource.namespaced else "")
        if current is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        return _copy(_replace_in(api, _patched(current, patch, patch_type), resource, subresource, owner))


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
    if resource.kind in _STATUS_KEPT or resource.store in _CONFIG:
        config = {key: value for key, value in config.items() if key != "status"}

    def applying(current: Obj | None) -> Obj:
        """The object after the apply, with its managedFields."""
        result = fieldmanager.apply(
            current,
            config,
            manager=manager,
            force=force,
            root_type=root_type(resource.api_version, resource.kind),
            time=_Owner(cluster, manager).time,
            normalized=_as_stored if resource.store == NODEPOOLS else canonical_quantities,
            last_applied=_last_applied_or_none(current),
        )
        return _with_managed(result.obj, result.managed)

    if resource.store in _CONFIG:
        with transaction.atomic():
            _lock_config(cluster, resource, name)
            current = _stored_config(cluster, resource, name)
            authorize(actor, "create" if current is None else "patch", resource)
            body = applying(current)
            body.pop("status", None)
            if current is None:
                _config_store(cluster, body, actor)
                _store_managed(cluster, resource, name, body["metadata"]["managedFields"])
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                _config_replace(cluster, body, resource, "", actor)  # stores the managedFields the apply gave
            written = _stored_config(cluster, resource, name)
            assert written is not None
            return written, current is None
    with _lab_write(cluster) as api:
        current = api.get(resource.kind, name, namespace if resource.namespaced else "")
        authorize(actor, "create" if current is None else "patch", resource)
        obj = applying(current)
        if current is None and resource.kind in _STATUS_ON_CREATE and isinstance(status, dict):
            obj["status"] = copy.deepcopy(status)  # how a Node registers: its capacity is not the applier's field
        if current is None:
            validate(obj, resource, status=resource.kind in _STATUS_ON_CREATE)
            return _copy(_create_in(api, _stored_version(cluster, api, obj, resource), resource)), True
        return _copy(_replace_in(api, obj, resource, "")), False


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


class _Owner:
    """Who an update is by (the API's fieldManager; empty for karp and the dashboard, which keep no managedFields)
    and the time its managedFields entry records: the cluster's clock, which a lab's `karp advance` moves."""

    def __init__(self, cluster: models.Cluster, manager: str) -> None:
        self.manager = manager
        self.time = cluster.clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def track(self, stored: Obj, new: Obj, resource: Resource, subresource: str) -> None:
        """Give `new` the managedFields after this update of `stored`, when the object has any and the writer left
        them as they were (a body with other managedFields sets them, as kube-apiserver lets it)."""
        before = (stored.get("metadata") or {}).get("managedFields")
        after = (new.get("metadata") or {}).get("managedFields")
        if not self.manager or not before or (after is not None and after != before):
            return
        entries = fieldmanager.updated(
            stored,
            new,
            manager=self.manager,
            root_type=root_type(resource.api_version, resource.kind),
            time=self.time,
            subresource=subresource,
        )
        new["metadata"]["managedFields"] = [entry.to_json() for entry in entries]


def _given_managed_fields(meta: dict[str, Any], stored: dict[str, Any]) -> bool:
    """managedFields as an update leaves them, as kube-apiserver reads what a writer sent: left out or `[]` keeps
    the stored ones (so a client that knows nothing of them cannot strip them), `[{}]` clears them, other entries
    replace them. True when they are the stored ones, for the update to be recorded in them."""
    given = meta.get("managedFields")
    if given == [{}]:
        meta.pop("managedFields")
        return False
    if not given:
        meta.pop("managedFields", None)
        if stored.get("managedFields"):
            meta["managedFields"] = stored["managedFields"]
        return True
    for index, entry in enumerate(given if isinstance(given, list) else [given]):
        problem = fieldmanager.entry_problem(entry)
        if problem is not None:
            raise ManifestError(problem, field=f"metadata.managedFields[{index}]")
    return bool(given == stored.get("managedFields"))


def _with_managed(obj: Obj, managed: list[fieldmanager.ManagedEntry]) -> Obj:
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {})["managedFields"] = [entry.to_json() for entry in managed]
    return obj


def _store_managed(cluster: models.Cluster, resource: Resource, name: str, managed: list[Any]) -> None:
    """A NodePool's or node class's managedFields, kept beside the fields its parser reads."""
    if resource.store == NODEPOOLS:
        models.NodePool.objects.filter(cluster=cluster, name=name).update(managed_fields=managed)
    else:
        models.NodeClass.objects.filter(cluster=cluster, kind=resource.kind, name=name).update(managed_fields=managed)


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
    if resource.store in _CONFIG:
        with transaction.atomic():
            current = _stored_config(cluster, resource, name)
            if current is None:
                raise NotFound(f'{resource.qualified} "{name}" not found')
            _check_preconditions(resource, name, current, conditions)
            services.object_delete(cluster=cluster, kind=kind, name=name, actor=actor)
            return current
    with _lab_write(cluster) as api:
        current = api.get(resource.kind, name, namespace if resource.namespaced else "")
        if current is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        _check_preconditions(resource, name, current, conditions)
        return _delete_in(api, resource, name, namespace if resource.namespaced else "", propagation)


def _check_preconditions(resource: Resource, name: str, current: Obj, conditions: dict[str, Any]) -> None:
    for field in ("uid", "resourceVersion"):
        wanted = conditions.get(field)
        if wanted and str(wanted) != str(current["metadata"].get(field, "")):
            raise Conflict(f'{resource.qualified} "{name}": precondition failed on {field}')


def workload_scale(
    *, cluster: models.Cluster, kind: str, name: str, namespace: str, replicas: int, actor: Actor, manager: str = ""
) -> Obj:
    """The scale subresource (kubectl scale, karp scale): a Deployment's or ReplicaSet's spec.replicas."""
    resource = resource_of(kind)
    authorize(actor, "update", resource)
    if resource.kind not in ("Deployment", "ReplicaSet"):
        raise ManifestError(f"cannot scale {resource.plural}: only deployments and replicasets", field="kind")
    if replicas < 0 or replicas > MAX_REPLICAS:
        raise ManifestError(
            f"must be between 0 and {MAX_REPLICAS} (karpui's limit per workload), got {replicas}",
            field="spec.replicas",
        )
    with _lab_write(cluster) as api:
        obj = api.get(resource.kind, name, namespace)
        if obj is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        if int(obj["spec"].get("replicas", 1)) != replicas:
            before = copy.deepcopy(obj)
            obj["spec"]["replicas"] = replicas
            _Owner(cluster, manager).track(before, obj, resource, "scale")
            api.update(obj, spec_changed=True)
        return _copy(obj)


def pod_evict(*, cluster: models.Cluster, name: str, namespace: str, actor: Actor) -> None:
    """POST pods/NAME/eviction: the pod goes, unless a PodDisruptionBudget allows no disruption now
    (TooManyRequests, 429)."""
    authorize(actor, "delete", BY_KIND["Pod"])
    with _lab_write(cluster) as api:
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
    if resource.store in _CONFIG:
        with transaction.atomic():
            _lock_config(cluster, resource, name)
            current = _stored_config(cluster, resource, name)
            if current is None:
                raise NotFound(f'{resource.qualified} "{name}" not found')
            new = copy.deepcopy(current)
            edit(new)
            if new == current:
                return current, False
            return _config_replace(cluster, new, resource, "", actor), True
    with _lab_write(cluster) as api:
        current = api.get(resource.kind, name, namespace if resource.namespaced else "")
        if current is None:
            raise NotFound(f'{resource.qualified} "{name}" not found')
        new = copy.deepcopy(current)
        edit(new)
        if new == current:
            return _copy(current), False
        return _copy(_replace_in(api, new, resource, "")), True


# kubectl apply ---------------------------------------------------------------------------------------------------


def manifests_apply(*, cluster: models.Cluster, text: str, actor: Actor) -> list[ApplyResult]:
    """`kubectl apply -f`, all or nothing: every document is validated before anything is written, then each is
    created or three-way merged into what is stored (kubectl's rule: the fields the file last applied are the
    file's; the rest, set by the dashboard, the admin or another client, stay as they are).

    Configuration (NodePools, node classes) is stored in its tables; the lab's objects go into the lab, whose
    controllers then react at the current time (a Deployment gets its pods at once, as on a real cluster).
    """
    documents = load_documents(text)
    for document in documents:
        services.parse_document(document)
    check_pods_per_apply([document.body for document in documents])
    with transaction.atomic():
        results = [
            _located(document, lambda d=document: _apply_config(cluster, d, actor))
            for document in documents
            if resource_of(document.kind).store in _CONFIG
        ]
        lab_documents = [d for d in documents if resource_of(d.kind).store not in _CONFIG]
        if lab_documents:
            for document in lab_documents:
                authorize(actor, "patch", resource_of(document.kind))
            with _lab_write(cluster) as api:
                results += [_located(d, lambda d=d: _apply_lab(api, d)) for d in lab_documents]
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
    stored = _stored_config(cluster, resource, document.name)
    authorize(actor, "create" if stored is None else "patch", resource)
    if stored is None:
        return _config_store(cluster, with_last_applied(manifest), actor)
    # Merged as the file's version serves it (a v1beta1 NodePool), as kubectl patches what it GETs at that version.
    group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
    current = at_version(stored, group, version, namespaced=False)
    merged = applied(current, manifest)
    if merged is None:
        return ApplyResult(services.resource_name(document.kind, document.api_version), document.name, "unchanged")
    merged.pop("status", None)
    return _config_store(cluster, merged, actor)


def _apply_lab(api: ClusterAPI, document: Document) -> ApplyResult:
    resource = resource_of(document.kind)
    manifest = copy.deepcopy(document.body)
    namespace = _namespace_of(manifest, resource)
    label = services.resource_name(document.kind, document.api_version)
    stored = api.get(resource.kind, document.name, namespace)
    if stored is None:
        _create_in(api, with_last_applied(manifest), resource)
        return ApplyResult(label, document.name, "created")
    merged = applied(stored, manifest)
    if merged is None:
        return ApplyResult(label, document.name, "unchanged")
    written = _replace_in(api, merged, resource, "")
    if resource.kind == "Node" and manifest.get("status") and manifest["status"] != written.get("status"):
        # A static node's manifest is how it registers: its status is the node's, as the kubelet would post it.
        written = _replace_in(api, {**written, "status": copy.deepcopy(manifest["status"])}, resource, "status")
    return ApplyResult(label, document.name, "configured" if written is not stored else "unchanged")


def system_namespaces_ensure(cluster: models.Cluster) -> None:
    """Make the namespaces kube-apiserver keeps in every cluster, where missing (a new cluster, an older lab)."""
    present = models.KubeObject.objects.filter(cluster=cluster, kind="Namespace", name__in=SYSTEM_NAMESPACES).count()
    if present == len(SYSTEM_NAMESPACES):
        return
    with _lab_write(cluster) as api:
        for name in SYSTEM_NAMESPACES:
            if api.get("Namespace", name) is None:
                api.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}}
                )
