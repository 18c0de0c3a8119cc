"""What a request needs from RBAC: each (method, path) a client sent, as the API server's authorizer sees it — API
group, resource (with its subresource), verb, and the namespace it is in — checked against deploy/'s rendered roles
as RBAC checks them: a ClusterRole bound by a ClusterRoleBinding grants in every namespace (and for requests across
all of them or of cluster-scoped objects); a Role, or a ClusterRole bound by a RoleBinding, only inside the
binding's namespace."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from tests.deploy.test_manifests import rendered

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


class Attributes(NamedTuple):
    group: str
    resource: str  # with its subresource: pods/eviction, nodeclaims/status
    verb: str


def attributes(method: str, path: str) -> Attributes | None:
    """The request's resource attributes, or None for a non-resource path (discovery, /version), which the
    default `system:discovery` role lets every authenticated client read."""
    parts = urlsplit(path)
    match = re.search(r"/(api/v1|apis/([^/]+)/[^/]+)(/.*)?$", parts.path)
    if match is None or not match.group(3):
        return None
    group = match.group(2) or ""
    segments = match.group(3).strip("/").split("/")
    if segments[0] == "namespaces" and len(segments) > 2:
        segments = segments[2:]  # namespaces/<ns>/<resource>...: namespaced; namespaces/<ns> is the Namespace
    resource, name, sub = segments[0], segments[1] if len(segments) > 1 else "", segments[2:]
    if sub:
        resource = f"{resource}/{sub[0]}"
    if method == "GET":
        watching = parse_qs(parts.query).get("watch", [""])[0] in ("true", "1")
        verb = "watch" if watching else "get" if name else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = VERBS[method]
    return Attributes(group, resource, verb)


class Grant(NamedTuple):
    attributes: Attributes
    namespace: str | None  # None: in every namespace, and cluster-wide


def namespace_of(path: str) -> str | None:
    """The namespace a request is in; None for a cluster-scoped object or a request across every namespace."""
    match = re.search(r"/(?:api/v1|apis/[^/]+/[^/]+)/namespaces/([^/?]+)/[^/?]+", urlsplit(path).path)
    return match.group(1) if match else None


def _rules(role: dict[str, Any]) -> set[Attributes]:
    """The (group, resource, verb) a role's rules grant (no wildcards: deploy/'s roles name each one)."""
    return {
        Attributes(group, resource, verb)
        for rule in role.get("rules") or []
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def allowed(objects: Iterable[dict[str, Any]], subject: tuple[str, str] = ("karpui", "karpui")) -> set[Grant]:
    """What the RBAC objects grant the ServiceAccount `subject` (namespace, name), and where: each grant is in one
    namespace, or in every one (None)."""
    objects = list(objects)
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    grants: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        if not any(
            (s.get("kind"), s.get("namespace") or namespace, s.get("name")) == ("ServiceAccount", *subject)
            for s in binding.get("subjects") or []
        ):
            continue
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        grants |= {Grant(a, namespace) for a in _rules(role or {})}
    return grants


def denied(seen: Iterable[tuple[str, str, int]], objects: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The requests (method, path) the RBAC objects would have refused with a 403."""
    grants = allowed(objects)
    refused = []
    for method, path, _ in seen:
        needed = attributes(method, path)
        if needed is None or Grant(needed, None) in grants:
            continue
        namespace = namespace_of(path)
        if namespace is None or Grant(needed, namespace) not in grants:
            refused.append((method, path))
    return refused


def roles(overlay: str) -> list[dict[str, Any]]:
    """The RBAC objects an overlay of deploy/ renders: Roles, ClusterRoles and the bindings that give them to
    karpui's ServiceAccount."""
    return [o for o in rendered(overlay) if o["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")]
