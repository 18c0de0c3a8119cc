"""The API's writes: create (POST), replace (PUT), patch (PATCH), delete (DELETE), and the status, scale and
eviction subresources, over the one write path `karp` uses too (karpui.objects): this module only speaks HTTP.

It parses and checks the request as kube-apiserver does before anything is written (the body's kind and version
against the URL, the namespace and name, unknown fields per `fieldValidation`, the patch's media type), calls the
write service as the token's user (the request's fieldManager, or its User-Agent's first word, taking over the
fields it changes of an object with managedFields), and turns what the service raises into the Status kube-apiserver would answer:
NotFound 404, AlreadyExists and Conflict 409, ManifestError 422 Invalid naming the field, PermissionDenied 403 in
RBAC's words, TooManyRequests 429 (an eviction a PodDisruptionBudget forbids). A dry run (`dryRun=All` in the query,
or in a DeleteOptions or an Eviction's deleteOptions, where kubectl and client-go put it) runs the write and rolls
it back, answering what it would have written under the live resourceVersion. DELETE of a collection deletes what
its selectors list, one object at a time, as kube-apiserver does. Server-side apply (`application/apply-patch+yaml`)
merges or creates through karpui.objects.object_apply; a field another manager owns is a 409 naming it
(karpui.apimachinery.fieldmanager).

A body is read once, refused past kube-apiserver's 3 MiB (413), and decoded, JSON or YAML, under the bounds `karp
apply` has (provisioner.manifests.documents: aliases, depth, object size), so no body can cost more than a manifest.
Protobuf, which kubectl's typed clients send (`kubectl create namespace`), is not decoded: 415, naming what is.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from karpui import objects, services
from karpui.kubeapi import discovery, openapi, storage
from karpui.kubeapi.errors import (
    FIELD_VALUE_NOT_SUPPORTED,
    Status,
    bad_request,
    forbidden,
    invalid,
    method_not_allowed,
    not_found,
    unsupported_media_type,
)
from karpui.kubeapi.requests import Context, Target
from karpui.kubeapi.versions import at_version
from karpui.kubectl.resources import Resource
from provisioner.apimachinery.fieldmanager import ApplyConflict, ApplyInvalid, dotted, printed
from provisioner.apimachinery.patch import apply_patch
from provisioner.apimachinery.strategic import PatchError, UnsupportedPatch
from provisioner.cluster.objects import AlreadyExists, Conflict, NotFound, Obj, TooManyRequests
from provisioner.manifests import ManifestError
from provisioner.manifests.documents import RepeatedField, load_document, load_json

METHODS = ("POST", "PUT", "PATCH", "DELETE")
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply (kubectl apply --server-side)
# What a create's, update's, delete's or eviction's body may be in; kube-apiserver takes protobuf too.
OBJECT_TYPES = ("application/json", "application/yaml")
# Which options a verb's query (and a DeleteOptions body) stands for, as their validation errors name them.
_OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
# kube-apiserver's answer to a JSON patch that cannot be applied (a path not there, a failed test): its generic 422,
# which leaves out the library's error and so the object that error quotes.
JSON_PATCH_FAILED = "the server rejected our request due to an error in our request"
# A boolean query parameter as Go's strconv.ParseBool reads it (the Python client sends force=True).
_BOOLEANS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apiserver's generateName alphabet
# kube-apiserver refuses a write whose body is larger (413) before decoding it; Django's own limit (2.5 MB, an HTML
# 400) is for forms, so the API reads its bodies itself.
MAX_BODY_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Body:
    """A write's request body, read once: its bytes and media type."""

    data: bytes
    content_type: str

    @property
    def is_yaml(self) -> bool:
        return "yaml" in self.content_type


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
    needs_name = at.subresource == "eviction" or verb in ("update", "patch", "delete")
    if needs_name != (at.name is not None):
        raise method_not_allowed()
    if at.resource.namespaced and at.namespace is None:
        raise method_not_allowed()  # every namespace at once (/api/v1/pods) is only listed and watched
    assert ctx.user is not None
    actor = services.Actor.for_user(ctx.user, "api")
    warnings: list[str] = []
    try:
        status, body = _dispatch(request, _read_body(request), ctx, at, actor, verb, warnings)
    except objects.Forbidden as error:  # before PermissionDenied, which it is: its own words, not RBAC's
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
    actor: services.Actor,
    verb: str,
    warnings: list[str],
) -> tuple[int, Any]:
    resource, name = at.resource, at.name or ""
    namespace = at.namespace or ""
    if request.method in ("POST", "PUT") or (request.method == "DELETE" and data.data):
        _check_media_type(data)  # a patch's media type says its patch type: checked with it
    dry_run = _dry_run(request.GET.getlist("dryRun"), _OPTIONS.get(verb, "DeleteOptions"))
    options: dict[str, Any] = {}
    if at.subresource == "eviction":
        dry_run = _eviction_body(data, name, namespace) or dry_run
    elif verb in ("delete", "deletecollection"):
        options = _delete_options(request, data)
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
        except ManifestError as error:
            raise invalid(resource.kind, resource.group, name, error.field or "", error.message) from None
        except ApplyInvalid as error:
            raise invalid(resource.kind, resource.group, name, error.field, error.problem) from None
        except ApplyConflict as error:
            raise Status(
                409,
                "Conflict",
                str(error),
                name=name,
                group=resource.group,
                kind=resource.plural,
                causes=[
                    {"reason": "FieldManagerConflict", "message": f"conflict with {printed(e)}", "field": dotted(p)}
                    for e, p in error.conflicts
                ],
            ) from None
        except ValueError as error:  # the patch machinery's PatchError and UnsupportedPatch are ValueErrors
            raise _patch_status(error, resource.kind, resource.group, name, patch_type) from None

    def served(obj: Obj) -> Obj:
        return at_version(obj, resource.group, at.version, namespaced=resource.namespaced)

    manager = field_manager(request)

    if at.subresource == "eviction":
        write(lambda objects: objects.pod_evict(cluster=ctx.cluster, name=name, namespace=namespace, actor=actor))
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    if at.subresource == "scale":
        from karpui.kubeapi.views import must_get, scale_of

        current = scale_of(must_get(ctx, at))
        wanted = _scale_replicas(request, data, current)
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
        body = _object_body(request, data, at, warnings)
        name = body["metadata"]["name"]
        return 201, served(write(lambda objects: objects.object_create(cluster=ctx.cluster, obj=body, actor=actor)))
    if verb == "update":
        body = _object_body(request, data, at, warnings)
        _same_uid(ctx, at, body)
        return 200, served(
            write(
                lambda objects: objects.object_replace(
                    cluster=ctx.cluster, obj=body, subresource=at.subresource, actor=actor, manager=manager
                )
            )
        )
    if verb == "patch" and request.content_type == APPLY_PATCH:
        config = _apply_body(request, data, at, warnings)
        force = _BOOLEANS[request.GET.get("force", "false")]
        obj, created = write(
            lambda objects: objects.object_apply(
                cluster=ctx.cluster, config=config, namespace=namespace, manager=manager, force=force, actor=actor
            )
        )
        return (201 if created else 200), served(obj)
    if verb == "patch":
        from karpui.kubeapi.views import must_get

        patch, patch_type = _patch_body(request, data, at, warnings)
        # Patched here first, as served, for what a patch may not change; a v1beta1 NodePool is then stored from it.
        current = served(must_get(ctx, at))
        try:
            patched = _patched(current, patch, patch_type)
        except ValueError as error:
            raise _patch_status(error, resource.kind, resource.group, name, patch_type) from None
        _patched_identity(at, current, patched)
        if at.version != resource.version:
            return 200, served(
                write(
                    lambda objects: objects.object_replace(
                        cluster=ctx.cluster, obj=patched, subresource=at.subresource, actor=actor, manager=manager
                    )
                )
            )
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
                ),
                patch_type,
            )
        )
    if verb == "deletecollection":
        return 200, _delete_collection(request, ctx, at, actor, options, write, served)
    return 200, served(
        write(
            lambda objects: objects.object_delete(
                cluster=ctx.cluster, kind=resource.kind, name=name, namespace=namespace, actor=actor, **options
            )
        )
    )


def _delete_collection(
    request: HttpRequest,
    ctx: Context,
    at: Target,
    actor: services.Actor,
    options: dict[str, Any],
    write: Callable[[Callable[[Any], Any]], Any],
    served: Callable[[Obj], Obj],
) -> Obj:
    """DELETE of a collection, as kube-apiserver's DeleteCollection: each object its selectors list is deleted as a
    single DELETE with the same options would delete it (one already gone meanwhile is skipped; any other error
    stops there, what went before staying deleted), and the answer is the list as it was listed."""
    from karpui.kubeapi.views import selectors

    resource = at.resource
    objects.authorize(actor, "delete", resource)  # an empty collection is refused to whoever may not delete either
    labels, fields = selectors(request, resource)
    items, version = storage.list_objects(ctx.cluster, resource, at.namespace, fields)
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


def _patched_identity(at: Target, current: Obj, patched: Obj) -> None:
    """What a patch may not change, checked on the patched object as kube-apiserver checks it: its namespace and
    name against the URL (400), its uid (422: immutable). Unchecked, a new name was written as another object."""
    meta = patched.get("metadata") or {}
    if at.resource.namespaced and meta.get("namespace") and meta["namespace"] != at.namespace:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    if meta.get("name") != at.name:
        raise bad_request(
            f"the name of the object ({meta.get('name') or ''}) does not match the name on the URL ({at.name})"
        )
    if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
        resource = at.resource
        problem = f"Invalid value: {json.dumps(meta['uid'])}: field is immutable"
        raise invalid(resource.kind, resource.group, at.name or "", "metadata.uid", problem)


def _patched(current: Obj, patch: Any, patch_type: str) -> Obj:
    """`current` after the patch, by the patch machinery the write path uses; same resourceVersion, so a change
    made meanwhile is a conflict."""
    patched: Obj = apply_patch(current, patch, patch_type)
    patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion")
    return patched


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


# Request bodies -------------------------------------------------------------------------------------------------


def _read_body(request: HttpRequest) -> Body:
    """The body, refused (413, as kube-apiserver words it) past MAX_BODY_BYTES, whatever Content-Length claims."""
    too_large = Status(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY_BYTES}")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise bad_request("invalid Content-Length") from None
    if declared > MAX_BODY_BYTES:
        raise too_large
    data = request.read(MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES:
        raise too_large
    return Body(data, request.content_type or "application/json")


class _Undecodable(Exception):
    """A body that is not a document the loader takes: `problem` says why, for the caller to word as its 400."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _load(body: Body, repeated: list[RepeatedField] | None = None) -> Any:
    """The body's JSON (or YAML) document under the loader's bounds (_Undecodable if it is none). Keys given twice
    go to `repeated` (fieldValidation decides)."""
    try:
        text = body.data.decode()
    except UnicodeDecodeError as error:
        raise _Undecodable(f"not UTF-8 text (byte 0x{body.data[error.start]:02x} at offset {error.start})") from None
    try:
        return load_document(text, repeated) if body.is_yaml else load_json(text, repeated)
    except ManifestError as error:
        raise _Undecodable(f"{error.field}: {error.message}" if error.field else error.message) from None


def _decode(body: Body, kind: str, repeated: list[RepeatedField] | None = None) -> Any:
    """The body's document; a malformed or unbounded one is a 400 as the API server words an object it cannot
    decode."""
    try:
        return _load(body, repeated)
    except _Undecodable as error:
        # YAML is converted to JSON first (sigs.k8s.io/yaml), JSON read for its kind: each fails in its own words.
        step = "error converting YAML to JSON" if body.is_yaml else "couldn't get version/kind; json parse error"
        raise bad_request(
            f"the object provided is unrecognized (must be of type {kind}): {step}: {error.problem} "
            f"({_summary(body.data)})"
        ) from None


def _check_media_type(body: Body) -> None:
    """An object's body must be JSON or YAML: protobuf (kubectl's typed clients send it, unasked: `kubectl create
    namespace`) or anything else is a 415 naming what is decoded, as kube-apiserver answers a type it lacks."""
    if body.content_type.lower() not in OBJECT_TYPES:
        raise unsupported_media_type(OBJECT_TYPES)


def _dry_run(values: list[str], options: str) -> bool:
    """Whether a write's dryRun asks for a dry run. "All" is its only value: any other is refused as kube-apiserver
    refuses it (422 naming the options), never taken for a real write."""
    if any(value != "All" for value in values):
        given = ", ".join(json.dumps(value) for value in values)
        problem = f'Unsupported value: []string{{{given}}}: supported values: "All"'
        raise invalid(options, "meta.k8s.io", "", "dryRun", problem, FIELD_VALUE_NOT_SUPPORTED)
    return bool(values)


def _summary(data: bytes, limit: int = 30) -> str:
    """How kube-apiserver quotes a body it could not decode: a JSON object's start as text, anything else in hex."""
    if not data:
        return "<empty>"
    text = data[:limit].decode(errors="replace") if data.startswith(b"{") else data[:limit].hex()
    return f"{text} ..." if len(data) > limit else text


def _strict(
    request: HttpRequest,
    at: Target,
    obj: Any,
    warnings: list[str],
    *,
    kind: str,
    version: str,
    repeated: list[RepeatedField],
    is_yaml: bool,
) -> None:
    """Keys given twice and unknown fields: a 400 naming them all (fieldValidation=Strict, what kubectl sends),
    else a warning each (Warn, the default), or nothing (Ignore); kube-apiserver's strict decoding errors."""
    mode = request.GET.get("fieldValidation", "Warn")
    if mode not in ("Ignore", "Warn", "Strict"):
        raise bad_request(f"fieldValidation parameter unsupported: {mode}")
    if mode == "Ignore" or not isinstance(obj, dict):
        return
    problems = _repeated_fields(repeated, is_yaml)
    problems += [
        f'unknown field "{field}"'
        for field in openapi.unknown_fields(at.group, version, kind, _without_directives(obj))
    ]
    if not problems:
        return
    if mode == "Strict":
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
            + ", ".join(problems)
        )
    # A Warning header is one line of quoted text.
    warnings.extend(problem.replace("\n", " ").replace('"', '\\"') for problem in problems)


def _repeated_fields(repeated: list[RepeatedField], is_yaml: bool) -> list[str]:
    """Keys given twice as kube-apiserver reports them: YAML's from its strict YAML-to-JSON step (go-yaml's
    words, one error), JSON's from the strict JSON decoder (one each)."""
    if not repeated:
        return []
    if is_yaml:
        lines = "".join(f'\n  line {r.line}: key "{r.key}" already set in map' for r in repeated)
        return [f"yaml: unmarshal errors:{lines}"]
    return [f'duplicate field "{r.field}"' for r in repeated]


def _without_directives(value: Any) -> Any:
    """A strategic merge patch without its `$patch`, `$setElementOrder/...`, `$retainKeys` directives (its depth is
    bounded by the decoder, so recursion is safe)."""
    if isinstance(value, dict):
        return {k: _without_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_without_directives(v) for v in value]
    return value


def _object_body(request: HttpRequest, data: Body, at: Target, warnings: list[str], *, apply: bool = False) -> Obj:
    """A create's or update's object (or an apply's configuration), checked against the URL."""
    resource = at.resource
    expected_version = f"{resource.group}/{at.version}" if resource.group else at.version
    repeated: list[RepeatedField] = []
    body = _decode(data, resource.kind, repeated)
    if not isinstance(body, dict):
        raise bad_request(
            f"the object provided is unrecognized (must be of type {resource.kind}): couldn't get version/kind; "
            "json parse error: Object 'Kind' is missing"
        )
    if apply:
        # Server-side apply takes nothing from the URL: its field manager checks the applied type first.
        if (body.get("apiVersion"), body.get("kind")) != (expected_version, resource.kind):
            group, _, version = str(body.get("apiVersion") or "").rpartition("/")
            raise bad_request(f"invalid object type: {group}/{version}, Kind={body.get('kind') or ''}")
    else:
        # The Python client's models leave them out unless set (V1Namespace(metadata=...)): kube-apiserver's decoder
        # takes what the body does not say from the URL, and checks what it does say below.
        rest = {key: value for key, value in body.items() if key not in ("apiVersion", "kind")}
        body = {
            "apiVersion": body.get("apiVersion") or expected_version,
            "kind": body.get("kind") or resource.kind,
            **rest,
        }
    if body.get("apiVersion") != expected_version:
        raise bad_request(
            f"the API version in the data ({body.get('apiVersion')}) does not match the expected API version "
            f"({expected_version})"
        )
    if body["kind"] != resource.kind:
        raise bad_request(
            f'{body["kind"]} in version "{at.version}" cannot be handled as a {resource.kind}: '
            f'no kind "{body["kind"]}" is registered for version "{expected_version}"'
        )
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request(f"{resource.kind}.metadata: expected an object")
    if resource.namespaced:
        given = meta.get("namespace")
        if given and given != at.namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = at.namespace
    if at.name is not None and meta.get("name") != at.name:
        raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({at.name})")
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = str(meta["generateName"]) + "".join(secrets.choice(_NAME_CHARS) for _ in range(5))
    if not meta.get("name"):
        raise invalid(
            resource.kind, resource.group, "", "metadata.name", "Required value: name or generateName is required"
        )
    _strict(
        request, at, body, warnings, kind=resource.kind, version=at.version, repeated=repeated, is_yaml=data.is_yaml
    )
    return body


def _patch_body(request: HttpRequest, data: Body, at: Target, warnings: list[str]) -> tuple[Any, str]:
    resource = at.resource
    content_type = request.content_type or ""
    accepted = ["application/json-patch+json", "application/merge-patch+json"]
    if openapi.accepts_strategic(resource):
        accepted.append("application/strategic-merge-patch+json")
    if content_type not in accepted:
        listed = [*accepted, APPLY_PATCH]  # apply is answered before this
        raise Status(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: {', '.join(listed)}",
        )
    patch_type = PATCH_TYPES[content_type]
    repeated: list[RepeatedField] = []
    if patch_type == "strategic":
        patch = _decode(data, resource.kind, repeated)
    else:
        try:
            patch = _load(data, repeated)
        except _Undecodable as error:
            raise bad_request(
                _undecodable_patch(patch_type, request.GET.get("fieldValidation"), error.problem)
            ) from None
    if patch_type == "json" and not isinstance(patch, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    if patch_type != "json":
        if not isinstance(patch, dict):
            raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        _strict(request, at, patch, warnings, kind=resource.kind, version=at.version, repeated=repeated, is_yaml=False)
    return patch, patch_type


def _undecodable_patch(patch_type: str, validation: str | None, problem: str) -> str:
    """How kube-apiserver words a merge or JSON patch that is not JSON: read strictly first (`error decoding patch:
    ...`) unless fieldValidation=Ignore, when the patch library's error is all it says."""
    if validation != "Ignore":
        return f"error decoding patch: {problem}"
    return "Invalid JSON Patch" if patch_type == "merge" else problem


def field_manager(request: HttpRequest) -> str:
    """Who a write is by, for managedFields: its fieldManager, else its User-Agent up to the first "/" (kubectl's
    `kubectl/v1.32.0 (linux/amd64) ...` is "kubectl"), as kube-apiserver names it; at most 128 characters."""
    given = request.GET.get("fieldManager") or request.headers.get("User-Agent", "").split("/", 1)[0]
    return given[:128]


def _apply_body(request: HttpRequest, data: Body, at: Target, warnings: list[str]) -> Obj:
    """A server-side apply's configuration: a whole object of the kind at the URL's name, applied by a named field
    manager, to the resource itself at the version it is stored at."""
    if not request.GET.get("fieldManager"):
        raise bad_request("fieldManager is required for apply requests")
    if request.GET.get("force", "false") not in _BOOLEANS:
        raise bad_request(f"force: Invalid value: {json.dumps(request.GET['force'])}: must be true or false")
    resource = at.resource
    if at.subresource or at.version != resource.version:
        where = f"the {at.subresource} subresource" if at.subresource else f"{resource.group}/{at.version}"
        raise Status(
            415,
            "UnsupportedMediaType",
            f"server-side apply of {where} is not served: apply {resource.plural} at {resource.api_version}",
        )
    config = _object_body(request, data, at, warnings, apply=True)
    if config["metadata"].get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    return config


def _scale_replicas(request: HttpRequest, data: Body, current: Obj) -> int:
    """The replicas a PUT or PATCH of the scale subresource asks for (kubectl scale sends a merge patch)."""
    if request.method == "PUT":
        body = _decode(data, "Scale")
    elif request.content_type == "application/json-patch+json":
        try:
            body = apply_patch(current, _decode(data, "Scale"), "json")
        except PatchError:
            raise Status(422, "Invalid", JSON_PATCH_FAILED) from None
    else:
        from provisioner.apimachinery.mergepatch import merge_patch

        body = merge_patch(current, _decode(data, "Scale"))
    replicas = ((body or {}).get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise Status(
            422,
            "Invalid",
            f'Scale.autoscaling "{current["metadata"]["name"]}" is invalid: spec.replicas: Invalid value: '
            f"{json.dumps(replicas)}: must be greater than or equal to 0",
            causes=[
                {
                    "reason": "FieldValueInvalid",
                    "message": "must be greater than or equal to 0",
                    "field": "spec.replicas",
                }
            ],
        )
    return replicas


def _eviction_body(data: Body, name: str, namespace: str) -> bool:
    """Check an Eviction against the URL; whether its deleteOptions ask for a dry run (`kubectl drain
    --dry-run=server` asks there, not in the query)."""
    decoded = _decode(data, "Eviction")
    body = decoded if isinstance(decoded, dict) else {}
    meta = body.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise bad_request(f"name in URL does not match name in Eviction object ({meta['name']} != {name})")
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    options = body.get("deleteOptions")
    return _dry_run(_dry_run_values(options if isinstance(options, dict) else {}), "DeleteOptions")


def _dry_run_values(options: dict[str, Any]) -> list[str]:
    """A DeleteOptions body's dryRun: a list of strings, or the body is refused as Go's decoder refuses it."""
    values = options.get("dryRun") or []
    if isinstance(values, list) and all(isinstance(value, str) for value in values):
        return values
    raise bad_request(f"DeleteOptions.dryRun: must be a list of strings, got {json.dumps(values)}")


def _delete_options(request: HttpRequest, data: Body) -> dict[str, Any]:
    """propagationPolicy, gracePeriodSeconds, preconditions and whether it is a dry run, from the query or a
    DeleteOptions body (where kubectl and client-go put them)."""
    body: dict[str, Any] = {}
    if data.data:
        decoded = _decode(data, "DeleteOptions")
        body = decoded if isinstance(decoded, dict) else {}
    propagation = request.GET.get("propagationPolicy") or body.get("propagationPolicy") or _orphans(request, body)
    if propagation not in ("Orphan", "Background", "Foreground"):
        raise bad_request(
            f'DeleteOptions.propagationPolicy: Unsupported value: "{propagation}": supported values: '
            '"Foreground", "Background", "Orphan"'
        )
    grace = request.GET.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
    try:
        grace_seconds = None if grace in (None, "") else int(grace)
    except (TypeError, ValueError):
        raise bad_request(f'invalid gracePeriodSeconds "{grace}"') from None
    return {
        "propagation": propagation,
        "grace_seconds": grace_seconds,
        "preconditions": body.get("preconditions") or {},
        "dry_run": _dry_run(_dry_run_values(body), "DeleteOptions"),
    }


def _orphans(request: HttpRequest, body: dict[str, Any]) -> str:
    """The propagation the deprecated orphanDependents asks for (the Python client's `orphan_dependents`)."""
    orphan = request.GET.get("orphanDependents", body.get("orphanDependents"))
    return "Orphan" if str(orphan).lower() == "true" else "Background"
