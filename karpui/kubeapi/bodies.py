"""Request bodies as kube-apiserver reads them before a write: the object of a create or update, a patch and its
media type, a server-side apply's configuration, a Scale, an Eviction, DeleteOptions, and the query's options.

A body is read once, refused past kube-apiserver's 3 MiB (413), and decoded, JSON or YAML, under the bounds `karp
apply` has (provisioner.manifests.documents: aliases, depth, object size), so no body can cost more than a manifest.
Protobuf, which kubectl's typed clients send (`kubectl create namespace`), is not decoded: 415, naming what is.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from karpui.kubeapi import openapi
from karpui.kubeapi.errors import (
    FIELD_VALUE_NOT_SUPPORTED,
    Status,
    bad_request,
    invalid,
    unsupported_media_type,
)
from karpui.kubeapi.requests import Target
from provisioner.apimachinery.patch import apply_patch
from provisioner.apimachinery.strategic import PatchError
from provisioner.cluster.objects import Obj
from provisioner.manifests import ManifestError
from provisioner.manifests.apivalidation import go_quote
from provisioner.manifests.documents import RepeatedField, load_document, load_json

PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}


APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply (kubectl apply --server-side)


# What a create's, update's, delete's or eviction's body may be in; kube-apiserver takes protobuf too.
OBJECT_TYPES = ("application/json", "application/yaml")


# Which options a verb's query (and a DeleteOptions body) stands for, as their validation errors name them.
OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


# kube-apiserver's answer to a JSON patch that cannot be applied (a path not there, a failed test): its generic 422,
# which leaves out the library's error and so the object that error quotes.
JSON_PATCH_FAILED = "the server rejected our request due to an error in our request"


# A boolean query parameter as Go's strconv.ParseBool reads it (the Python client sends force=True).
BOOLEANS = {
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


def read_body(request: HttpRequest) -> Body:
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


def check_media_type(body: Body) -> None:
    """An object's body must be JSON or YAML: protobuf (kubectl's typed clients send it, unasked: `kubectl create
    namespace`) or anything else is a 415 naming what is decoded, as kube-apiserver answers a type it lacks."""
    if body.content_type.lower() not in OBJECT_TYPES:
        raise unsupported_media_type(OBJECT_TYPES)


def wants_dry_run(values: list[str], options: str) -> bool:
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


def object_body(request: HttpRequest, data: Body, at: Target, warnings: list[str], *, apply: bool = False) -> Obj:
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


# kube-apiserver's maxJSONPatchOperations: applying more, each copying the object, was a denial of service.
MAX_JSON_PATCH_OPERATIONS = 10000


def patch_body(request: HttpRequest, data: Body, at: Target, warnings: list[str]) -> tuple[Any, str]:
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
    if patch_type == "json" and len(patch) > MAX_JSON_PATCH_OPERATIONS:
        raise Status(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(patch)}",
        )
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


# kube-apiserver's FieldManagerMaxLength.
FIELD_MANAGER_MAX = 128


def field_manager(request: HttpRequest, options: str = "CreateOptions") -> str:
    """Who a write is by, for managedFields: its fieldManager, else its User-Agent up to the first "/" (kubectl's
    `kubectl/v1.32.0 (linux/amd64) ...` is "kubectl", cut to 128 characters), as kube-apiserver names it. A
    fieldManager longer than 128 bytes or with a character that is not printable is a 422 naming the write's
    options, as kube-apiserver's ValidateFieldManager words it."""
    given = request.GET.get("fieldManager")
    if not given:
        return request.headers.get("User-Agent", "").split("/", 1)[0][:FIELD_MANAGER_MAX]
    problems = []
    if len(given.encode()) > FIELD_MANAGER_MAX:
        problems.append(f"fieldManager: Too long: may not be more than {FIELD_MANAGER_MAX} bytes")
    problems += [
        f"fieldManager: Invalid value: {go_quote(given)}: invalid character U+{ord(c):04X} (at position {i})"
        for i, c in zip(_byte_offsets(given), given, strict=True)
        if not c.isprintable()
    ]
    if problems:
        text = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise Status(422, "Invalid", f'{options}.meta.k8s.io "" is invalid: {text}', group="meta.k8s.io", kind=options)
    return given


def _byte_offsets(text: str) -> list[int]:
    """Each character's offset in bytes, as Go's range over a string counts positions."""
    offsets, at = [], 0
    for char in text:
        offsets.append(at)
        at += len(char.encode("utf-8", "surrogatepass"))
    return offsets


def apply_body(request: HttpRequest, data: Body, at: Target, warnings: list[str]) -> Obj:
    """A server-side apply's configuration: a whole object of the kind at the URL's name, applied by a named field
    manager, to the resource itself at the version it is stored at."""
    if not request.GET.get("fieldManager"):
        raise bad_request("fieldManager is required for apply requests")
    if request.GET.get("force", "false") not in BOOLEANS:
        raise bad_request(f"force: Invalid value: {json.dumps(request.GET['force'])}: must be true or false")
    resource = at.resource
    if at.subresource or at.version != resource.version:
        where = f"the {at.subresource} subresource" if at.subresource else f"{resource.group}/{at.version}"
        raise Status(
            415,
            "UnsupportedMediaType",
            f"server-side apply of {where} is not served: apply {resource.plural} at {resource.api_version}",
        )
    config = object_body(request, data, at, warnings, apply=True)
    if config["metadata"].get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    return config


def scale_replicas(request: HttpRequest, data: Body, current: Obj) -> int:
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


def eviction_body(data: Body, name: str, namespace: str) -> bool:
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
    return wants_dry_run(_dry_run_values(options if isinstance(options, dict) else {}), "DeleteOptions")


def _dry_run_values(options: dict[str, Any]) -> list[str]:
    """A DeleteOptions body's dryRun: a list of strings, or the body is refused as Go's decoder refuses it."""
    values = options.get("dryRun") or []
    if isinstance(values, list) and all(isinstance(value, str) for value in values):
        return values
    raise bad_request(f"DeleteOptions.dryRun: must be a list of strings, got {json.dumps(values)}")


def delete_options(request: HttpRequest, data: Body) -> dict[str, Any]:
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
    orphan = request.GET.get("orphanDependents", body.get("orphanDependents"))
    return {
        "propagation": propagation,
        "grace_seconds": grace_seconds,
        "preconditions": _preconditions(body.get("preconditions")),
        "dry_run": wants_dry_run(_dry_run_values(body), "DeleteOptions"),
        # orphanDependents=false given: kube-apiserver answers a deletion it could not finish at once with 202
        "cascading": orphan is not None and str(orphan).lower() == "false",
    }


def _go_json_type(value: Any) -> str:
    """What Go's decoder calls a JSON value it cannot put in a field."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _preconditions(value: Any) -> dict[str, Any]:
    """A DeleteOptions' preconditions: an object of uid and resourceVersion strings, or the body is a 400 as Go's
    decoder words the field it cannot fill."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(
            f"json: cannot unmarshal {_go_json_type(value)} into Go struct field DeleteOptions.preconditions of type "
            "v1.Preconditions"
        )
    for field, go_type in (("uid", "types.UID"), ("resourceVersion", "string")):
        given = value.get(field)
        if given is not None and not isinstance(given, str):
            raise bad_request(
                f"json: cannot unmarshal {_go_json_type(given)} into Go struct field "
                f"Preconditions.preconditions.{field} of type {go_type}"
            )
    return value


def _orphans(request: HttpRequest, body: dict[str, Any]) -> str:
    """The propagation the deprecated orphanDependents asks for (the Python client's `orphan_dependents`)."""
    orphan = request.GET.get("orphanDependents", body.get("orphanDependents"))
    return "Orphan" if str(orphan).lower() == "true" else "Background"
