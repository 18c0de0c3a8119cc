"""What a request needs from RBAC: each (method, path) a client sent, as the API server's authorizer sees it — API
group, resource (with its subresource), verb — checked against the rules of deploy/'s rendered roles."""

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


def allowed(roles: Iterable[dict[str, Any]]) -> set[Attributes]:
    """Every (group, resource, verb) the roles' rules grant (no wildcards: deploy/'s roles name each one)."""
    return {
        Attributes(group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def denied(seen: Iterable[tuple[str, str, int]], roles: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The requests (method, path) the roles would have refused with a 403."""
    grants = allowed(roles)
    refused = []
    for method, path, _ in seen:
        needed = attributes(method, path)
        if needed is not None and needed not in grants:
            refused.append((method, path))
    return refused


def roles(overlay: str) -> list[dict[str, Any]]:
    """The ClusterRole and the Role (the engines' Lease) an overlay of deploy/ grants karpui's ServiceAccount."""
    return [o for o in rendered(overlay) if o["kind"] in ("ClusterRole", "Role")]
