"""A kubeconfig for clusters' APIs: their URLs, a new bearer token of a user for each, and a context selected by
default."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from karpui.kubeapi.auth import token_create

DEFAULT_SERVER = "http://127.0.0.1:8000"


def server_url(server: str, cluster: str) -> str:
    """Where kubectl finds the cluster: the karpui URL plus the cluster's path (kubectl keeps a path in `server`)."""
    return f"{server.rstrip('/')}/k8s/clusters/{cluster}"


def kubeconfig(
    *,
    user: AbstractBaseUser,
    cluster: str,
    server: str = DEFAULT_SERVER,
    certificate_authority: Path | None = None,
    kind_names: bool = False,
) -> dict[str, Any]:
    """A kubeconfig whose one context selects `cluster`. Its cluster, user and context are named `karpui-<cluster>`
    (the user `<user>@karpui-<cluster>`), or with `kind_names` `kind-<cluster>` for all three, as `kind create
    cluster` names them, so guides written for kind (`kubectl config use-context kind-karpenter-lab`, `kubectl
    --context kind-taint-lab`) run as written against a lab of that name."""
    name = f"kind-{cluster}" if kind_names else f"karpui-{cluster}"
    user_name = name if kind_names else f"{user.get_username()}@{name}"
    entry: dict[str, Any] = {"server": server_url(server, cluster)}
    if certificate_authority is not None:
        entry["certificate-authority-data"] = base64.b64encode(certificate_authority.read_bytes()).decode()
    token = token_create(user=user, description=f"kubeconfig for {cluster}", cluster=cluster)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": entry}],
        "users": [{"name": user_name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user_name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def merged(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """One kubeconfig holding every given one's clusters, users and contexts; the first's context is current."""
    result = dict(configs[0])
    for key in ("clusters", "users", "contexts"):
        result[key] = [entry for config in configs for entry in config[key]]
    return result
