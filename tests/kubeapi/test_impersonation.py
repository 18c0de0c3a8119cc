"""Impersonation (`kubectl --as=USER`), as kube-apiserver does it: a superuser's request runs as the active user it
names, with that user's permissions and in the audit as that user; anyone else, an unknown user, and groups, UIDs
and extras are 403s in RBAC's words."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from karpui import models
from karpui.kubeapi.auth import token_create
from tests.karp import EXAMPLES, ok
from tests.kubeapi.conftest import Certificate, write_kubeconfig
from tests.kubeapi.test_bad_writes import status

BASE = "/k8s/clusters/lab"
VERA_CANNOT = 'User "vera" cannot impersonate resource "users" in API group "" at the cluster scope'


@pytest.fixture
def people(admin: Any) -> None:
    """vera may only read; ed is an editor."""
    User.objects.create_user("vera", password="vera-pass-1")
    ed = User.objects.create_user("ed", password="ed-pass-1")
    ed.groups.add(Group.objects.get(name="editors"))


def get(token: str, path: str, **headers: str) -> tuple[int, Any]:
    response = Client().get(BASE + path, headers={"Authorization": f"Bearer {token}", **headers})
    return response.status_code, json.loads(response.content)


def forbidden(message: str, name: str, kind: str, group: str = "") -> dict[str, Any]:
    details = {"name": name, "group": group, "kind": kind} if group else {"name": name, "kind": kind}
    return status(403, "Forbidden", message, details)


def test_kubectl_as_a_viewer_scales_nothing_and_as_an_editor_scales(kubectl: Any, people: None) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    refused = kubectl.run("scale", "deploy", "inflate", "--replicas", "2", "--as=vera")
    assert refused.returncode == 1
    assert 'User "vera" cannot patch resource "deployments/scale" in API group "apps"' in refused.stderr
    assert kubectl.ok("get", "deploy", "inflate", "-o", "jsonpath={.spec.replicas}") == "0"
    assert kubectl.ok("scale", "deploy", "inflate", "--replicas", "2", "--as=ed") == "deployment.apps/inflate scaled\n"
    assert kubectl.ok("get", "deploy", "inflate", "-o", "jsonpath={.spec.replicas}") == "2"


def test_kubectl_as_another_user_without_being_a_superuser_is_forbidden(
    kubectl: Any, people: None, tls_server: str, certificate: Certificate, tmp_path: Path
) -> None:
    vera = dataclasses.replace(kubectl, kubeconfig=write_kubeconfig(tmp_path / "vera", tls_server, certificate, "vera"))
    # vera's own reads are hers (and fill kubectl's discovery cache: discovery as someone else is refused too, which
    # kubectl reports first, as "couldn't get current server API group list").
    assert vera.ok("get", "nodes") == ""
    for user in ("admin", "ghost", "vera"):  # whether the user exists is not said
        refused = vera.run("get", "nodes", f"--as={user}")
        assert (refused.returncode, refused.stderr) == (
            1,
            f'Error from server (Forbidden): users "{user}" is forbidden: {VERA_CANNOT}\n',
        )
    assert kubectl.ok("get", "nodes", "--as=vera") == ""


def test_a_superuser_may_not_impersonate_an_unknown_or_inactive_user(lab: Any, people: None) -> None:
    token = token_create(user=User.objects.get(username="admin"))
    User.objects.filter(username="ed").update(is_active=False)
    for name in ("ghost", "ed"):
        assert get(token, "/api/v1/nodes", **{"Impersonate-User": name}) == (
            403,
            forbidden(
                f'users "{name}" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at '
                f'the cluster scope: no active user "{name}"',
                name,
                "users",
            ),
        )


@pytest.mark.parametrize(
    ("headers", "message", "name", "kind", "group"),
    [
        (
            {"Impersonate-User": "vera", "Impersonate-Group": "system:masters"},
            'groups "system:masters" is forbidden: User "admin" cannot impersonate resource "groups" in API group "" '
            "at the cluster scope: karpui impersonates users only",
            "system:masters",
            "groups",
            "",
        ),
        (
            {"Impersonate-Group": "editors"},
            'groups "editors" is forbidden: User "admin" cannot impersonate resource "groups" in API group "" at the '
            "cluster scope: karpui impersonates users only",
            "editors",
            "groups",
            "",
        ),
        (
            {"Impersonate-User": "vera", "Impersonate-Uid": "1234"},
            'uids.authentication.k8s.io "1234" is forbidden: User "admin" cannot impersonate resource "uids" in API '
            'group "authentication.k8s.io" at the cluster scope: karpui impersonates users only',
            "1234",
            "uids",
            "authentication.k8s.io",
        ),
        (
            {"Impersonate-User": "vera", "Impersonate-Extra-Scopes": "view"},
            'userextras.authentication.k8s.io/scopes "view" is forbidden: User "admin" cannot impersonate resource '
            '"userextras/scopes" in API group "authentication.k8s.io" at the cluster scope: karpui impersonates '
            "users only",
            "view",
            "userextras",
            "authentication.k8s.io",
        ),
    ],
)
def test_groups_uids_and_extras_are_not_impersonated(
    lab: Any, people: None, headers: dict[str, str], message: str, name: str, kind: str, group: str
) -> None:
    token = token_create(user=User.objects.get(username="admin"))
    assert get(token, "/api/v1/nodes", **headers) == (403, forbidden(message, name, kind, group))


def test_without_a_token_impersonation_is_the_anonymous_users_and_forbidden(lab: Any, people: None) -> None:
    response = Client().get(f"{BASE}/version", headers={"Impersonate-User": "admin"})
    assert response.status_code == 403
    assert json.loads(response.content)["message"] == (
        'users "admin" is forbidden: User "system:anonymous" cannot impersonate resource "users" in API group "" at '
        "the cluster scope"
    )
    assert Client().get(f"{BASE}/api/v1/nodes", headers={"Impersonate-User": "admin"}).status_code == 401


def test_an_impersonated_write_is_audited_as_the_impersonated_user(lab: Any, people: None) -> None:
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    token = token_create(user=User.objects.get(username="admin"))
    response = Client().patch(
        f"{BASE}/apis/karpenter.sh/v1/nodepools/default",
        json.dumps({"spec": {"weight": 7}}),
        content_type="application/merge-patch+json",
        headers={"Authorization": f"Bearer {token}", "Impersonate-User": "ed"},
    )
    assert response.status_code == 200, response.content
    event = models.AuditEvent.objects.filter(target_kind="NodePool", action="update").latest("id")
    assert (event.actor_name, event.actor.username, event.via) == ("ed", "ed", "api")
