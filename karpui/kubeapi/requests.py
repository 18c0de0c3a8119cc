"""What an API request is about: the cluster and user, and for resource paths the resource, version, namespace,
name and subresource, parsed from `/api/v1/namespaces/NS/pods/NAME/status` or `/apis/GROUP/VERSION/...`."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from karpui import models
from karpui.kinds.resources import Resource
from karpui.kubeapi import discovery
from karpui.kubeapi.errors import no_route


@dataclass(frozen=True)
class Context:
    cluster: models.Cluster
    user: AbstractBaseUser | None


@dataclass(frozen=True)
class Target:
    resource: Resource
    version: str
    namespace: str | None  # None: every namespace (lists of namespaced kinds), or a cluster-scoped kind
    name: str | None
    subresource: str
    watch_path: bool  # the deprecated /watch/ prefix

    @property
    def group(self) -> str:
        return self.resource.group


def target(group: str, version: str, rest: str) -> Target:
    """Parse the part of a resource path after the group-version; an unknown resource is a 404 as kube-apiserver
    gives it (`the server could not find the requested resource`)."""
    parts = [p for p in rest.split("/") if p]
    watch_path = bool(parts) and parts[0] == "watch"
    if watch_path:
        parts = parts[1:]
    namespace: str | None = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        resource = discovery.find(group, version, parts[2])
        if resource is not None and resource.namespaced:
            namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise no_route()
    resource = discovery.find(group, version, parts[0])
    if resource is None:
        raise no_route()
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else ""
    if subresource and subresource not in resource.subresources_at(version):
        raise no_route()
    if resource.namespaced and name is not None and namespace is None:
        raise no_route()  # a namespaced object is only reached through its namespace
    return Target(resource, version, namespace, name, subresource, watch_path)
