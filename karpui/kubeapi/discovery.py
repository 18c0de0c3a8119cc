"""Discovery: which groups, versions and resources the API serves, with verbs, short names, categories and
subresources, both as aggregated discovery (apidiscovery.k8s.io/v2, what kubectl 1.32 asks for first) and as the
legacy per group-version documents (what the Python client's dynamic client reads). All of it comes from the kind
registry (karpui.kinds.resources)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from karpui.kinds.resources import ALL, Resource

AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
# The kube-apiserver release the lab's API stands for (its nodes say v1.34.0 too).
VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0+karpui",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "",
    "compiler": "",
    "platform": "linux/amd64",
}

# Subresource: (group, version, kind) of what it answers with, and its verbs.
_SUBRESOURCES = {
    "status": (None, ("get", "patch", "update")),
    "scale": (("autoscaling", "v1", "Scale"), ("get", "patch", "update")),
    "eviction": (("policy", "v1", "Eviction"), ("create",)),
    "log": (None, ("get",)),  # kube-apiserver names the Pod as its kind, though it answers text
}


# Kinds kube-apiserver serves no deletecollection for, and so advertises none: Namespaces (a namespace goes one at a
# time, emptied by the namespace controller first).
_NO_DELETECOLLECTION = frozenset({("", "Namespace")})


def served_verbs(resource: Resource) -> tuple[str, ...]:
    """The verbs the API serves for a resource, as discovery advertises them."""
    if (resource.group, resource.kind) in _NO_DELETECOLLECTION:
        return tuple(verb for verb in resource.verbs if verb != "deletecollection")
    return resource.verbs


def wants_aggregated(accept: str) -> bool:
    return any(
        "g=apidiscovery.k8s.io" in part and "v=v2" in part and "as=APIGroupDiscoveryList" in part.replace(" ", "")
        for part in accept.split(",")
    )


def groups() -> list[tuple[str, list[str]]]:
    """Each API group with its versions, the preferred one first, in the registry's order (core first)."""
    found: dict[str, list[str]] = {}
    for resource in sorted(ALL, key=lambda r: r.group != ""):
        versions = found.setdefault(resource.group, [])
        versions.extend(v for v in resource.versions if v not in versions)
    return list(found.items())


def served(group: str, version: str) -> list[Resource]:
    return [r for r in ALL if r.group == group and version in r.versions]


def find(group: str, version: str, plural: str) -> Resource | None:
    return next((r for r in served(group, version) if r.plural == plural), None)


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _storage_hash(resource: Resource) -> str:
    # kubectl only compares it between documents; derive it from what identifies the stored form.
    return hashlib.sha256(f"{resource.group}/{resource.version}/{resource.kind}".encode()).hexdigest()[:12]


def _names(resource: Resource) -> dict[str, list[str]]:
    """Short names and categories, where the kind has them (both documents leave empty ones out)."""
    names = {"shortNames": list(resource.short_names), "categories": list(resource.categories)}
    return {key: value for key, value in names.items() if value}


def resource_list(group: str, version: str) -> dict[str, Any]:
    """The legacy APIResourceList of one group-version (`/api/v1`, `/apis/apps/v1`)."""
    resources: list[dict[str, Any]] = []
    for resource in served(group, version):
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(served_verbs(resource)),
        }
        entry.update(_names(resource))
        entry["storageVersionHash"] = _storage_hash(resource)
        resources.append(entry)
        for name in resource.subresources_at(version):
            answer, verbs = _SUBRESOURCES[name]
            sub: dict[str, Any] = {
                "name": f"{resource.plural}/{name}",
                "singularName": "",
                "namespaced": resource.namespaced,
            }
            if answer is not None:
                sub.update(group=answer[0], version=answer[1], kind=answer[2])
            else:
                sub["kind"] = resource.kind
            sub["verbs"] = list(verbs)
            resources.append(sub)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": resources,
    }


def _version_entry(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": _group_version(group, version), "version": version}


def api_group(group: str, versions: Sequence[str]) -> dict[str, Any]:
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_version_entry(group, v) for v in versions],
        "preferredVersion": _version_entry(group, versions[0]),
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """`/api`: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_list() -> dict[str, Any]:
    """`/apis`: every named group."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {k: v for k, v in api_group(g, vs).items() if k not in ("kind", "apiVersion")} for g, vs in groups() if g
        ],
    }


def _aggregated_resource(resource: Resource, version: str) -> dict[str, Any]:
    kind = {"group": resource.group, "version": version, "kind": resource.kind}
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": kind,
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": list(served_verbs(resource)),
    }
    entry.update(_names(resource))
    if resource.subresources_at(version):
        entry["subresources"] = [
            {
                "subresource": name,
                "responseKind": (
                    kind
                    if _SUBRESOURCES[name][0] is None
                    else dict(zip(("group", "version", "kind"), _SUBRESOURCES[name][0] or (), strict=True))
                ),
                "verbs": list(_SUBRESOURCES[name][1]),
            }
            for name in resource.subresources_at(version)
        ]
    return entry


def aggregated(core: bool) -> dict[str, Any]:
    """The APIGroupDiscoveryList of `/api` (core: the unnamed group) or `/apis` (every named group)."""
    items = [
        {
            "metadata": {"name": group, "creationTimestamp": None},
            "versions": [
                {
                    "version": version,
                    "resources": [_aggregated_resource(r, version) for r in served(group, version)],
                    "freshness": "Current",
                }
                for version in versions
            ],
        }
        for group, versions in groups()
        if (group == "") == core
    ]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
