"""The API's writes: create (POST), replace (PUT), patch (PATCH), delete (DELETE), and the status, scale and
eviction subresources, over the one write path `karp` uses too (karpui.writes.objects): this module only speaks HTTP.

It parses and checks the request as kube-apiserver does before anything is written (the body's kind and version
against the URL, the namespace and name, unknown fields per `fieldValidation`, the patch's media type), calls the
write service as the token's user (the request's fieldManager, or its User-Agent's first word, taking over the
fields it changes of an object with managedFields), and turns what the service raises into the Status kube-apiserver would answer:
NotFound 404, AlreadyExists and Conflict 409, ManifestError 422 Invalid naming the field, PermissionDenied 403 in
RBAC's words, TooManyRequests 429 (an eviction a PodDisruptionBudget forbids). A dry run (`dryRun=All` in the query,
or in a DeleteOptions or an Eviction's deleteOptions, where kubectl and client-go put it) runs the write and rolls
it back, answering what it would have written under the live resourceVersion. DELETE of a collection deletes what
its selectors list, one object at a time, as kube-apiserver does. Server-side apply (`application/apply-patch+yaml`)
merges or creates through karpui.writes.objects.object_apply; a field another manager owns is a 409 naming it
(karpui.apimachinery.fieldmanager).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from karpui.clusters import storage
from karpui.kinds.resources import Resource
from karpui.kinds.versions import at_version
from karpui.kubeapi import auth, discovery
from karpui.kubeapi.bodies import (
    APPLY_PATCH,
    BOOLEANS,
    JSON_PATCH_FAILED,
    OPTIONS,
    Body,
    apply_body,
    check_media_type,
    delete_options,
    eviction_body,
    field_manager,
    object_body,
    patch_body,
    read_body,
    scale_replicas,
    wants_dry_run,
)
from karpui.kubeapi.errors import (
    Status,
    bad_request,
    forbidden,
    invalid,
    method_not_allowed,
    not_found,
)
from karpui.kubeapi.reads import must_get, scale_of, selectors
from karpui.kubeapi.requests import Context, Target
from karpui.people.audit import Actor
from karpui.writes import checks, configs, objects
from provisioner.apimachinery.fieldmanager import ApplyConflict, ApplyInvalid, dotted, printed
from provisioner.apimachinery.strategic import PatchError, UnsupportedPatch
from provisioner.cluster.objects import AlreadyExists, Conflict, NotFound, Obj, TooManyRequests, timestamp
from provisioner.manifests import ManifestError
from provisioner.manifests.errors import DecodeError

METHODS = ("POST", "PUT", "PATCH", "DELETE")


class _DryRun(Exception):
    """Raised inside the transaction of a dry run to undo the write while keeping its result."""

    def __init__(self, result: Any) -> None:
        super().__init__("dry run")
        self.result = result


def _verb(request: HttpRequest, at: Target) -> str:
    if request.method == "POST":
        return "create"
    if request.method == "PUT":
        return "update"
    if request.method == "PATCH":
        return "patch"
    return "delete" if at.name is not None else "deletecollection"


def handle(request: HttpRequest, ctx: Context, at: Target) -> HttpResponse:
    verb = _verb(request, at)
    if verb not in discovery.served_verbs(at.resource) and not (at.subresource == "eviction" and verb == "create"):
        raise method_not_allowed()
    if at.subresource == "log":
        raise method_not_allowed()  # a log is only read
    needs_name = at.subresource == "eviction" or verb in ("update", "patch", "delete")
    if needs_name != (at.name is not None):
        raise method_not_allowed()
    if at.resource.namespaced and at.namespace is None:
        raise method_not_allowed()  # every namespace at once (/api/v1/pods) is only listed and watched
    assert ctx.user is not None
    actor = Actor.for_user(ctx.user, "api", impersonator=request.META.get(auth.IMPERSONATOR, ""))
    warnings: list[str] = []
    try:
        status, body = _dispatch(request, read_body(request), ctx, at, actor, verb, warnings)
    except (objects.Forbidden, configs.ApprovalModeDecision) as error:  # before PermissionDenied: its own words
        raise Status(
            403, "Forbidden", str(error), name=at.name or "", group=at.group, kind=at.resource.plural
        ) from None
    except PermissionDenied:
        raise forbidden(
            ctx.user.get_username(),
            verb,
            at.resource.plural,
            at.group,
            at.name or "",
            at.namespace or "",
            at.subresource,
        ) from None
    response = HttpResponse(json.dumps(body, separators=(",", ":")), status=status, content_type="application/json")
    if warnings:
        response["Warning"] = ", ".join(f'299 - "{w}"' for w in warnings)
    return response


def _dispatch(
    request: HttpRequest,
    data: Body,
    ctx: Context,
    at: Target,
    actor: Actor,
    verb: str,
    warnings: list[str],
) -> tuple[int, Any]:
    resource, name = at.resource, at.name or ""
    namespace = at.namespace or ""
    if request.method in ("POST", "PUT") or (request.method == "DELETE" and data.data):
        check_media_type(data)  # a patch's media type says its patch type: checked with it
    dry_run = wants_dry_run(request.GET.getlist("dryRun"), OPTIONS.get(verb, "DeleteOptions"))
    options: dict[str, Any] = {}
    if at.subresource == "eviction":
        dry_run = eviction_body(data, name, namespace) or dry_run
    elif verb in ("delete", "deletecollection"):
        options = delete_options(request, data)
        dry_run = options.pop("dry_run") or dry_run

    def write(call: Callable[[Any], Any], patch_type: str = "") -> Any:
        try:
            with transaction.atomic():
                result = call(objects)
                if dry_run:
                    raise _DryRun(result)
                return result
        except _DryRun as done:
            return _as_dry_run(ctx, resource, done.result)
        except NotFound as error:
            if namespace and str(error) == f'namespaces "{namespace}" not found':  # written into no namespace
                raise not_found("namespaces", namespace, "", "namespaces") from error
            raise not_found(resource.qualified, name, resource.group, resource.plural) from error
        except AlreadyExists:
            raise Status(
                409,
                "AlreadyExists",
                f'{resource.qualified} "{name}" already exists',
                name=name,
                group=resource.group,
                kind=resource.plural,
            ) from None
        except Conflict:
            raise _conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ) from None
        except TooManyRequests as error:
            raise Status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                causes=[{"reason": "DisruptionBudget", "message": str(error)}],
            ) from None
        except objects.Renamed as error:
            raise bad_request(str(error)) from None
        except DecodeError as error:  # Go's decoder could not even read it into its type: a 400, not a 422
            raise bad_request(
                f'{resource.kind} in version "{at.version}" cannot be handled as a {resource.kind}: {error.message}'
            ) from None
        except ManifestError as error:
            raise invalid(resource.kind, resource.group, name, error.field or "", error.message) from None
        except ApplyInvalid as error:
            raise invalid(resource.kind, resource.group, name, error.field, error.problem) from None
        except ApplyConflict as error:
            # kube-apiserver's apply conflict names no object in its details (only the causes), unlike its other 409s.
            raise Status(
                409,
                "Conflict",
                str(error),
                causes=[
                    {"reason": "FieldManagerConflict", "message": f"conflict with {printed(e)}", "field": dotted(p)}
                    for e, p in error.conflicts
                ],
            ) from None
        except ValueError as error:  # the patch machinery's PatchError and UnsupportedPatch are ValueErrors
            raise _patch_status(error, resource.kind, resource.group, name, patch_type) from None

    def served(obj: Obj) -> Obj:
        return at_version(obj, resource.group, at.version, namespaced=resource.namespaced)

    manager = field_manager(request, OPTIONS.get(verb, "PatchOptions"))

    if at.subresource == "eviction":
        write(lambda objects: objects.pod_evict(cluster=ctx.cluster, name=name, namespace=namespace, actor=actor))
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    if at.subresource == "scale":
        current = scale_of(must_get(ctx, at))
        wanted = scale_replicas(request, data, current)
        obj = write(
            lambda objects: objects.workload_scale(
                cluster=ctx.cluster,
                kind=resource.kind,
                name=name,
                namespace=namespace,
                replicas=wanted,
                actor=actor,
                manager=manager,
            )
        )
        return 200, scale_of(obj)
    if verb == "create":
        body = object_body(request, data, at, warnings)
        name = body["metadata"]["name"]
        return 201, served(
            write(lambda objects: objects.object_create(cluster=ctx.cluster, obj=body, actor=actor, manager=manager))
        )
    if verb == "update":
        body = object_body(request, data, at, warnings)
        _same_uid(ctx, at, body)
        return 200, served(
            write(
                lambda objects: objects.object_replace(
                    cluster=ctx.cluster, obj=body, subresource=at.subresource, actor=actor, manager=manager
                )
            )
        )
    if verb == "patch" and request.content_type == APPLY_PATCH:
        config = apply_body(request, data, at, warnings)
        force = BOOLEANS[request.GET.get("force", "false")]
        obj, created = write(
            lambda objects: objects.object_apply(
                cluster=ctx.cluster, config=config, namespace=namespace, manager=manager, force=force, actor=actor
            )
        )
        return (201 if created else 200), served(obj)
    if verb == "patch":
        patch, patch_type = patch_body(request, data, at, warnings)
        return 200, served(
            write(
                lambda objects: objects.object_patch(
                    cluster=ctx.cluster,
                    kind=resource.kind,
                    name=name,
                    namespace=namespace,
                    patch=patch,
                    patch_type=patch_type,
                    subresource=at.subresource,
                    actor=actor,
                    manager=manager,
                    version=at.version,
                ),
                patch_type,
            )
        )
    cascading = options.pop("cascading", False)
    if verb == "deletecollection":
        return 200, _delete_collection(request, ctx, at, actor, options, write, served)
    deleted = write(
        lambda objects: objects.object_delete(
            cluster=ctx.cluster, kind=resource.kind, name=name, namespace=namespace, actor=actor, **options
        )
    )
    return _delete_answer(resource, served(deleted), cascading, ctx.cluster.clock)


# The kinds whose storage answers a DELETE with the object (kube-apiserver's ReturnDeletedObject); the others answer
# a Status once the object is gone, and the object while finalizers keep it.
RETURNS_DELETED_OBJECT = frozenset(
    {
        "Pod",
        "Namespace",
        "ServiceAccount",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
    }
)


def _delete_answer(resource: Resource, deleted: Obj, cascading: bool, now: datetime) -> tuple[int, Any]:
    """What kube-apiserver's DELETE answers (generic registry Store.Delete and finalizeDelete): while finalizers
    keep the object, the object marked for deletion (202 Accepted when the client asked for cascading deletion with
    orphanDependents=false, else 200); once it is gone, the object for the kinds that return it, else a Status
    naming it (details.kind is the resource, as kube-apiserver sets it), which the official Python client's
    `delete_namespaced_deployment` reads as a V1Status."""
    meta = deleted.get("metadata") or {}
    if meta.get("deletionTimestamp") and meta.get("finalizers"):
        return (202 if cascading else 200), deleted
    if resource.kind in RETURNS_DELETED_OBJECT:
        return 200, _marked_deleted(deleted, now)
    details: dict[str, Any] = {"name": meta.get("name", "")}
    if resource.group:
        details["group"] = resource.group
    details.update(kind=resource.plural, uid=meta.get("uid", ""))
    return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _delete_collection(
    request: HttpRequest,
    ctx: Context,
    at: Target,
    actor: Actor,
    options: dict[str, Any],
    write: Callable[[Callable[[Any], Any]], Any],
    served: Callable[[Obj], Obj],
) -> Obj:
    """DELETE of a collection, as kube-apiserver's DeleteCollection: each object its selectors list is deleted as a
    single DELETE with the same options would delete it (one already gone meanwhile is skipped; any other error
    stops there, what went before staying deleted), and the answer is the list as it was listed."""
    resource = at.resource
    checks.authorize(actor, "delete", resource)  # an empty collection is refused to whoever may not delete either
    labels, fields = selectors(request, resource)
    items, version = storage.list_objects(ctx.cluster, resource, at.namespace, fields.equal("spec.nodeName"))
    listed = [i for i in items if labels.matches(i["metadata"].get("labels") or {}) and fields.matches(i)]
    for item in listed:
        meta = item["metadata"]
        try:
            write(
                lambda objects, meta=meta: objects.object_delete(
                    cluster=ctx.cluster,
                    kind=resource.kind,
                    name=meta["name"],
                    namespace=meta.get("namespace", ""),
                    actor=actor,
                    **options,
                )
            )
        except Status as status:
            if status.code != 404:
                raise
    api_version = f"{resource.group}/{at.version}" if resource.group else at.version
    return {
        "kind": f"{resource.kind}List",
        "apiVersion": api_version,
        "metadata": {"resourceVersion": str(version)},
        "items": [served(item) for item in listed],
    }


def _as_dry_run(ctx: Context, resource: Resource, result: Any) -> Any:
    """What a dry run answers: the object as the write would have left it, but under the live object's
    resourceVersion (none for an object only a dry-run create made), since nothing was stored; kube-apiserver
    answers so, and `kubectl diff` shows no change of version."""
    if isinstance(result, tuple):  # an apply's (object, created)
        return _as_dry_run(ctx, resource, result[0]), result[1]
    if not isinstance(result, dict) or not isinstance(result.get("metadata"), dict):
        return result
    meta = result["metadata"]
    live = storage.get_object(ctx.cluster, resource, str(meta.get("name", "")), str(meta.get("namespace") or ""))
    version = (live or {}).get("metadata", {}).get("resourceVersion")
    if version:
        meta["resourceVersion"] = version
    else:
        meta.pop("resourceVersion", None)
    return result


def _conflict(resource: Resource, name: str, problem: str) -> Status:
    return Status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified} "{name}": {problem}',
        name=name,
        group=resource.group,
        kind=resource.plural,
    )


def _same_uid(ctx: Context, at: Target, body: Obj) -> None:
    """A PUT whose body names a uid writes only the object of that uid (kube-apiserver's UID precondition, 409)."""
    given = body["metadata"].get("uid")
    if not given:
        return
    live = storage.get_object(ctx.cluster, at.resource, at.name or "", at.namespace or "")
    uid = (live or {}).get("metadata", {}).get("uid")
    if live is not None and given != uid:
        raise _conflict(
            at.resource, at.name or "", f"Precondition failed: UID in precondition: {given}, UID in object meta: {uid}"
        )


def _patch_status(error: ValueError, kind: str, group: str, name: str, patch_type: str = "") -> Status:
    """A patch the kind does not take (415), or one that cannot be applied (422, as kube-apiserver answers)."""
    if isinstance(error, UnsupportedPatch):
        return Status(415, "UnsupportedMediaType", str(error))
    if isinstance(error, PatchError) and patch_type == "json":
        return Status(422, "Invalid", JSON_PATCH_FAILED)
    if isinstance(error, PatchError):  # an ApplyInvalid too
        qualified = f"{kind}.{group}" if group else kind
        return Status(422, "Invalid", f'{qualified} "{name}" is invalid: {error}', name=name, group=group, kind=kind)
    raise error


def _marked_deleted(deleted: Obj, now: datetime) -> Obj:
    """A Pod or Namespace the lab removed at once, answered as kube-apiserver answers it: marked for deletion, as
    its graceful deletion marks a pod (deleted with a grace period of 0: a lab's pods stop at once) and a namespace
    (Terminating until its controller has emptied it; the lab empties it at once)."""
    stored = deleted.get("metadata") or {}
    if stored:
        if stored.get("deletionTimestamp"):
            return deleted
        meta = {**stored, "deletionTimestamp": timestamp(now.timestamp())}
        if deleted.get("kind") == "Pod":
            meta["deletionGracePeriodSeconds"] = 0
            return {**deleted, "metadata": meta}
        if deleted.get("kind") == "Namespace":
            return {**deleted, "metadata": meta, "status": {**(deleted.get("status") or {}), "phase": "Terminating"}}
    return deleted
