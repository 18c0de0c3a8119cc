"""The lab's Kubernetes API as an admin's client sees it over HTTP (Django's test client: no server, no kubectl)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

BASE = "/k8s/clusters/lab"


class AdminApi:
    def __init__(self) -> None:
        token = token_for_admin()
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, accept: str = "application/json", **params: Any) -> tuple[int, Any]:
        response = self.client.get(BASE + path, params, headers={**self.headers, "Accept": accept})
        return response.status_code, json.loads(response.content)

    def items(self, path: str) -> list[dict[str, Any]]:
        status, listed = self.get(path)
        assert status == 200
        return list(listed["items"])

    def send(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Any]:
        data = "" if body is None else json.dumps(body)
        response = self.client.generic(method, BASE + path, data, content_type=content_type, headers=self.headers)
        return response.status_code, json.loads(response.content)


def token_for_admin() -> str:
    from karpui.kubeapi.auth import token_create

    return token_create(user=User.objects.create_superuser("admin", "", "admin-pass-1"))
