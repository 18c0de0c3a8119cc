"""A kubeconfig for a cluster's API: its URL, a new bearer token of a user, and a context selected by default."""

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
    *, user: AbstractBaseUser, cluster: str, server: str = DEFAULT_SERVER, certificate_authority: Path | None = None
) -> dict[str, Any]:
    name = f"karpui-{cluster}"
    user_name = f"{user.get_username()}@{name}"
    entry: dict[str, Any] = {"server": server_url(server, cluster)}
    if certificate_authority is not None:
        entry["certificate-authority-data"] = base64.b64encode(certificate_authority.read_bytes()).decode()
    token = token_create(user=user, description=f"kubeconfig for {cluster}")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": entry}],
        "users": [{"name": user_name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user_name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
