"""OpenAPI v2 and v3 documents of the served kinds, built at first use from vendored schemas (NOTICE.md): the
Kubernetes 1.34 definitions of the built-in kinds, the CRD schemas of Karpenter's kinds, and karpui's own.

kubectl reads them to `explain`, to decide how `apply` patches (a strategic merge patch for the built-in kinds,
whose PATCH operations accept one; a JSON merge patch for custom resources) and whether the server validates fields
itself (every write operation takes `fieldValidation`, so kubectl leaves validation to us: see `unknown_fields`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karpui.kinds.resources import ALL, Resource
from karpui.kubeapi.discovery import served_verbs

HERE = Path(__file__).resolve().parent
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META, LIST_META = f"{META}.ObjectMeta", f"{META}.ListMeta"
TITLE = {"title": "Kubernetes", "version": "v1.34.0"}
# The built-in groups' package names in the definitions' names (io.k8s.api.<package>.<version>.<Kind>).
_PACKAGES = {
    "": "core",
    "apps": "apps",
    "policy": "policy",
    "resource.k8s.io": "resource",
    "autoscaling": "autoscaling",
    "rbac.authorization.k8s.io": "rbac",
    "storage.k8s.io": "storage",
}
_SMP = "application/strategic-merge-patch+json"
# Server-side apply (application/apply-patch+yaml) is not served, so not offered.
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")
# Keys a Swagger 2.0 schema may have (the rest, such as anyOf or nullable, only OpenAPI 3 knows).
_V2_SCHEMA_KEYS = frozenset(
    [
        "$ref",
        "format",
        "title",
        "description",
        "default",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "required",
        "enum",
        "additionalProperties",
        "type",
        "items",
        "allOf",
        "properties",
        "readOnly",
        "example",
    ]
)
_OWN = {
    "DisruptionCommand": "A disruption decision karpui's controllers made (Karpenter's command), with its approval.",
    "DeviceDeclaration": "DRA devices a driver publishes on nodes of the instance types the selector picks.",
    "InstanceType": "An instance type of a karpui catalog, with its offerings (zones, capacity types, prices).",
}


@functools.cache
def _builtin() -> dict[str, Any]:
    definitions: dict[str, Any] = json.loads((HERE / "kubernetes.json").read_text())["definitions"]
    return definitions


@functools.cache
def _crds() -> dict[str, Any]:
    crds: dict[str, Any] = json.loads((HERE / "crds.json").read_text())
    return crds


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def definition_name(group: str, version: str, kind: str) -> str:
    """The schema's name, as kube-apiserver names it: io.k8s.api.apps.v1.Deployment, or for a custom resource its
    group reversed (sh.karpenter.v1.NodePool)."""
    if group in _PACKAGES:
        return f"io.k8s.api.{_PACKAGES[group]}.{version}.{kind}"
    return ".".join([*reversed(group.split(".")), version, kind])


def _is_builtin(resource: Resource) -> bool:
    return definition_name(resource.group, resource.version, resource.kind) in _builtin()


def accepts_strategic(resource: Resource) -> bool:
    """Built-in kinds take strategic merge patches; custom resources refuse them (415), as on a real server."""
    return _is_builtin(resource)


def _object_meta() -> dict[str, str]:
    return {"$ref": f"#/definitions/{OBJECT_META}"}


def _custom_schema(resource: Resource, version: str) -> dict[str, Any]:
    crd = _crds().get(resource.kind)
    served = next((v for v in crd["versions"] if v["name"] == version), None) if crd else None
    if served is not None:
        schema = copy.deepcopy(served["schema"])
    else:
        schema = {
            "description": _OWN.get(resource.kind, resource.kind),
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    schema["properties"]["metadata"] = _object_meta()  # as the API server publishes every custom resource's
    schema["x-kubernetes-group-version-kind"] = [_gvk(resource.group, version, resource.kind)]
    return schema


def _list_schema(item: str, group: str, version: str, kind: str) -> dict[str, Any]:
    return {
        "description": f"{kind}List is a list of {kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": f"#/definitions/{item}"}},
            "kind": {"type": "string"},
            "metadata": {"$ref": f"#/definitions/{LIST_META}"},
        },
        "x-kubernetes-group-version-kind": [_gvk(group, version, f"{kind}List")],
    }


@functools.cache
def definitions() -> dict[str, Any]:
    """Every schema, Swagger-2.0-style references (#/definitions/...): built-in, then custom resources'."""
    pool = dict(_builtin())
    for resource in ALL:
        for version in resource.versions:
            name = definition_name(resource.group, version, resource.kind)
            if name not in pool:
                pool[name] = _custom_schema(resource, version)
                pool[f"{name}List"] = _list_schema(name, resource.group, version, resource.kind)
    return pool


_REF = re.compile(r'"\$ref":\s*"#/definitions/([^"]+)"')


def _closure(names: list[str]) -> dict[str, Any]:
    pool = definitions()
    kept: dict[str, Any] = {}
    while names:
        name = names.pop()
        if name in kept or name not in pool:
            continue
        kept[name] = pool[name]
        names.extend(_REF.findall(json.dumps(pool[name])))
    return dict(sorted(kept.items()))


# Paths ----------------------------------------------------------------------------------------------------------


_QUERY = {
    "pretty": "If 'true', then the output is pretty printed.",
    "dryRun": "When present, indicates that modifications should not be persisted.",
    "fieldManager": "A name associated with the actor or entity that is making these changes.",
    "fieldValidation": "How the server handles unknown or duplicate fields in the request: Ignore, Warn (the "
    "default) or Strict (a BadRequest naming every unknown field).",
    "force": 'Force is going to "force" Apply requests.',
    "allowWatchBookmarks": 'Requests watch events with type "BOOKMARK".',
    "continue": "The continue option should be set when retrieving more results from the server.",
    "fieldSelector": "A selector to restrict the list of returned objects by their fields.",
    "labelSelector": "A selector to restrict the list of returned objects by their labels.",
    "limit": "The maximum number of responses to return for a list call.",
    "resourceVersion": "Sets a constraint on what resource versions a request may be served from.",
    "resourceVersionMatch": "Determines how resourceVersion is applied to list calls.",
    "sendInitialEvents": "Whether a watch starts with the current state as synthetic ADDED events.",
    "timeoutSeconds": "Timeout for the list/watch call.",
    "watch": "Watch for changes to the described resources and return them as a stream of add, update, and remove "
    "notifications.",
    "gracePeriodSeconds": "The duration in seconds before the object should be deleted.",
    "propagationPolicy": "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
    "orphanDependents": "Deprecated: please use the PropagationPolicy.",
    "container": "The container for which to stream logs. Defaults to only container if there is one container in "
    "the pod.",
    "follow": "Follow the log stream of the pod. Defaults to false.",
    "limitBytes": "If set, the number of bytes to read from the server before terminating the log output.",
    "previous": "Return previous terminated container logs. Defaults to false.",
    "sinceSeconds": "A relative time in seconds before the current time from which to show logs.",
    "sinceTime": "An RFC3339 timestamp from which to show logs.",
    "tailLines": "If set, the number of lines from the end of the logs to show.",
    "timestamps": "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output.",
}
_LIST = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion")
_LIST += ("resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE = ("dryRun", "fieldManager", "fieldValidation")
_LOG = ("container", "follow", "limitBytes", "pretty", "previous", "sinceSeconds", "sinceTime", "tailLines")
_LOG += ("timestamps",)
STRING = "string"  # an operation's response that is text (a pod's log), not an object
_DELETE = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")


@dataclass(frozen=True)
class Operation:
    method: str
    action: str
    verb: str  # the resource verb that must be served for the operation to exist
    gvk: dict[str, str]
    query: tuple[str, ...]
    body: str | None  # definition name of the request body
    response: str
    patch_types: tuple[str, ...] = ()

    def operation_id(self, path: str) -> str:
        words = re.sub(r"[{}]", "", path).replace(".", "/").replace("-", "/").split("/")
        return self.action + "".join(w[:1].upper() + w[1:] for w in words if w)


def _operations(resource: Resource, version: str) -> Iterator[tuple[str, Operation]]:
    group, kind = resource.group, resource.kind
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    scope = f"{base}/namespaces/{{namespace}}" if resource.namespaced else base
    collection, item = f"{scope}/{resource.plural}", f"{scope}/{resource.plural}/{{name}}"
    name = definition_name(group, version, kind)
    gvk = _gvk(group, version, kind)
    patches = ((_SMP,) if _is_builtin(resource) else ()) + _PATCH_TYPES
    status = f"{META}.Status"
    yield collection, Operation("get", "list", "list", gvk, _LIST, None, f"{name}List")
    yield collection, Operation("post", "post", "create", gvk, ("pretty", *_WRITE), name, name)
    yield collection, Operation("delete", "deletecollection", "deletecollection", gvk, _LIST + _DELETE, None, status)
    if resource.namespaced:
        yield f"{base}/{resource.plural}", Operation("get", "list", "list", gvk, _LIST, None, f"{name}List")
    yield item, Operation("get", "get", "get", gvk, ("pretty",), None, name)
    yield item, Operation("put", "put", "update", gvk, ("pretty", *_WRITE), name, name)
    yield item, Operation("patch", "patch", "patch", gvk, ("pretty", *_WRITE, "force"), f"{META}.Patch", name, patches)
    yield item, Operation("delete", "delete", "delete", gvk, ("pretty", *_DELETE), None, status)
    for sub in resource.subresources_at(version):
        path = f"{item}/{sub}"
        if sub == "log":  # read only, answered as text
            yield path, Operation("get", "get", "get", gvk, _LOG, None, STRING)
            continue
        if sub == "eviction":
            eviction = _gvk("policy", "v1", "Eviction")
            yield path, Operation("post", "post", "create", eviction, _WRITE, "io.k8s.api.policy.v1.Eviction", status)
            continue
        target = (
            ("io.k8s.api.autoscaling.v1.Scale", _gvk("autoscaling", "v1", "Scale")) if sub == "scale" else (name, gvk)
        )
        yield path, Operation("get", "get", "get", target[1], ("pretty",), None, target[0])
        yield path, Operation("put", "put", "update", target[1], ("pretty", *_WRITE), target[0], target[0])
        yield (
            path,
            Operation(
                "patch", "patch", "patch", target[1], ("pretty", *_WRITE, "force"), f"{META}.Patch", target[0], patches
            ),
        )


def _paths(resources: list[tuple[Resource, str]], v3: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for resource, version in resources:
        for path, op in _operations(resource, version):
            if op.verb not in served_verbs(resource):
                continue
            entry = paths.setdefault(path, {"parameters": _path_parameters(path, resource, v3)})
            entry[op.method] = _render(op, path, v3)
    return paths


def _path_parameters(path: str, resource: Resource, v3: bool) -> list[dict[str, Any]]:
    params = []
    for name in ("name", "namespace"):
        if f"{{{name}}}" in path:
            text = f"name of the {resource.kind}" if name == "name" else "object name and auth scope"
            params.append(_param(name, "path", text, v3, required=True))
    return params


def _param(name: str, where: str, description: str, v3: bool, required: bool = False) -> dict[str, Any]:
    kind = (
        "boolean"
        if name
        in ("allowWatchBookmarks", "watch", "force", "sendInitialEvents", "orphanDependents", "follow", "previous")
        or name == "timestamps"
        else "string"
    )
    if name in ("limit", "timeoutSeconds", "gracePeriodSeconds", "limitBytes", "sinceSeconds", "tailLines"):
        kind = "integer"
    param: dict[str, Any] = {"name": name, "in": where, "description": description, "uniqueItems": True}
    if required:
        param["required"] = True
    if v3:
        param["schema"] = {"type": kind, "uniqueItems": True}
    else:
        param["type"] = kind
    return param


def _ref(name: str, v3: bool) -> dict[str, str]:
    if name == STRING:
        return {"type": "string"}
    return {"$ref": f"#/components/schemas/{name}" if v3 else f"#/definitions/{name}"}


def _render(op: Operation, path: str, v3: bool) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "description": f"{op.action} {op.gvk['kind']}",
        "operationId": op.operation_id(path),
        "parameters": [_param(name, "query", _QUERY[name], v3) for name in op.query],
        "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
        "tags": [path.split("/")[2] if path.startswith("/apis/") else "core"],
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    }
    content_types = op.patch_types or ("application/json", "application/yaml")
    if v3:
        if op.body is not None:
            rendered["requestBody"] = {
                "content": {t: {"schema": _ref(op.body, v3)} for t in content_types},
                "required": True,
            }
        rendered["responses"]["200"]["content"] = {"application/json": {"schema": _ref(op.response, v3)}}
    else:
        if op.body is not None:
            rendered["parameters"].insert(
                0, {"name": "body", "in": "body", "required": True, "schema": _ref(op.body, v3)}
            )
            rendered["consumes"] = list(content_types)
        rendered["produces"] = ["application/json", "application/yaml"]
        rendered["responses"]["200"]["schema"] = _ref(op.response, v3)
    return rendered


# Documents ------------------------------------------------------------------------------------------------------


def _group_versions() -> dict[str, list[tuple[Resource, str]]]:
    """Resources by OpenAPI v3 path: `api/v1`, `apis/apps/v1`, ..."""
    found: dict[str, list[tuple[Resource, str]]] = {}
    for resource in ALL:
        for version in resource.versions:
            key = f"api/{version}" if not resource.group else f"apis/{resource.group}/{version}"
            found.setdefault(key, []).append((resource, version))
    return found


def _to_v3(value: Any) -> Any:
    return json.loads(json.dumps(value).replace('"#/definitions/', '"#/components/schemas/'))


def _v2_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema trimmed to what Swagger 2.0 allows (nested schemas too, but not property names)."""
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if not (key in _V2_SCHEMA_KEYS or key.startswith("x-")):
            continue
        if key == "properties":
            result[key] = {name: _v2_schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = _v2_schema(value)
        elif key == "allOf":
            result[key] = [_v2_schema(item) for item in value]
        else:
            result[key] = value
    return result


@functools.cache
def _v3_documents() -> dict[str, bytes]:
    documents = {}
    for key, resources in _group_versions().items():
        roots = [f"{META}.Status", f"{META}.DeleteOptions", f"{META}.WatchEvent", f"{META}.Patch"]
        paths = _paths(resources, v3=True)
        roots += _REF.findall(json.dumps(_paths(resources, v3=False)))
        document = {
            "openapi": "3.0.0",
            "info": TITLE,
            "paths": paths,
            "components": {
                "schemas": _to_v3(_closure(roots)),
                "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
            },
        }
        documents[key] = json.dumps(document, separators=(",", ":")).encode()
    return documents


def _hash(document: bytes) -> str:
    return hashlib.sha512(document).hexdigest().upper()


def v3_index() -> dict[str, Any]:
    """`/openapi/v3`: where each group-version's document is (rooted at /openapi/v3, so clients keep the cluster's
    path prefix in front of it)."""
    return {
        "paths": {
            key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={_hash(document)}"}
            for key, document in sorted(_v3_documents().items())
        }
    }


def v3_document(path: str) -> bytes | None:
    return _v3_documents().get(path)


@functools.cache
def v2_document() -> bytes:
    resources = [(r, v) for rs in _group_versions().values() for r, v in rs]
    document = {
        "swagger": "2.0",
        "info": TITLE,
        "paths": _paths(resources, v3=False),
        "definitions": {name: _v2_schema(schema) for name, schema in definitions().items()},
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    }
    return json.dumps(document, separators=(",", ":")).encode()


# client-go asks for the v2 document only as protobuf (gnostic's openapi_v2.Document) and fails on anything else.
# kubectl reads it for one thing: checking a kind the v3 documents do not describe (a CRD that is not installed).
# This is that message with only `swagger: "2.0"` (field 1, a string): a document without definitions, so kubectl
# skips its client-side check and the server's own answer ("no matches for kind ...") reaches the user.
V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # as kube-openapi answers
V2_PROTOBUF = b"\x0a\x032.0"


# Field validation -----------------------------------------------------------------------------------------------


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    pool = definitions()
    for _ in range(20):
        if "$ref" in schema:
            schema = pool.get(schema["$ref"].rsplit("/", 1)[-1], {})
        elif len(schema.get("allOf") or []) == 1 and not schema.get("properties"):
            schema = schema["allOf"][0]
        else:
            break
    return schema


def _unknown(schema: dict[str, Any], value: Any, path: str, found: list[str]) -> None:
    schema = _resolve(schema)
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                _unknown(properties[key], item, where, found)
            elif isinstance(extra, dict):
                _unknown(extra, item, where, found)
            elif properties is not None and not preserve and extra is not True:
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _unknown(schema["items"], item, f"{path}[{index}]", found)


def unknown_fields(group: str, version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """The fields of `obj` its schema does not declare (`spec.template.spec.containers[0].foo`), in order."""
    schema = definitions().get(definition_name(group, version, kind))
    found: list[str] = []
    if schema is not None:
        _unknown(schema, obj, "", found)
    return found


def crd_manifests(
    kinds: tuple[str, ...] = ("NodePool", "NodeClaim", "KWOKNodeClass", "EC2NodeClass"),
) -> list[dict[str, Any]]:
    """CustomResourceDefinitions a kwok cluster needs before karpui drives it (`karp crds | kubectl apply -f -`;
    EC2NodeClass too, as kwok mode launches a NodePool of one from the aws-sample catalog, seed 004's):
    Karpenter's vendored schemas at their storage version (an older served version would need Karpenter's
    conversion webhook), with the printer columns, short names and categories karpui serves."""
    from karpui.kinds.resources import BY_KIND

    manifests = []
    for kind in kinds:
        crd, resource = _crds()[kind], BY_KIND[kind]
        version = crd["versions"][0]
        names: dict[str, Any] = {
            "kind": kind,
            "listKind": f"{kind}List",
            "plural": crd["plural"],
            "singular": kind.lower(),
        }
        if resource.short_names:
            names["shortNames"] = list(resource.short_names)
        if resource.categories:
            names["categories"] = list(resource.categories)
        manifests.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{crd['plural']}.{crd['group']}"},
                "spec": {
                    "group": crd["group"],
                    "names": names,
                    "scope": "Namespaced" if resource.namespaced else "Cluster",
                    "versions": [
                        {
                            "name": version["name"],
                            "served": True,
                            "storage": True,
                            "schema": {"openAPIV3Schema": version["schema"]},
                            "subresources": {"status": {}},
                            "additionalPrinterColumns": version.get("printerColumns") or [],
                        }
                    ],
                },
            }
        )
    return manifests
