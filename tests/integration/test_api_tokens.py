"""API tokens (issue 27, points 6 and 7): a password change and a deactivation revoke a user's tokens for good, tokens
expire (KARPUI_API_TOKEN_DAYS), a page lists a user's own tokens (an admin's, everyone's) and revokes them, audited;
and a write made by impersonation is audited naming both users."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from karpui import models
from karpui.kubeapi.auth import token_create
from tests.karp import EXAMPLES, ok

NODES = "/k8s/clusters/lab/api/v1/nodes"


def answer(token: str) -> int:
    return Client().get(NODES, headers={"Authorization": f"Bearer {token}"}).status_code


@pytest.fixture
def vera(lab):
    return User.objects.create_user("vera", password="vera-pass-1")


def test_a_password_change_revokes_every_token_of_the_user(vera):
    token = token_create(user=vera, description="laptop")
    other = token_create(user=User.objects.create_user("ed", password="ed-pass-1"))
    assert answer(token) == 200
    vera.set_password("a-new-pass-2")
    vera.save()
    assert (answer(token), answer(other)) == (401, 200)
    assert not models.ApiToken.objects.filter(user=vera).exists()


def test_a_password_changed_on_the_admins_form_revokes_them_too(vera, admin_client):
    token = token_create(user=vera)
    response = admin_client.post(
        f"/admin/auth/user/{vera.pk}/password/",
        {"password1": "a-new-pass-2-long", "password2": "a-new-pass-2-long", "usable_password": "true"},
    )
    assert response.status_code == 302, response.content
    assert answer(token) == 401


def test_deactivating_a_user_revokes_their_tokens_and_reactivating_does_not_bring_them_back(vera):
    token = token_create(user=vera)
    vera.is_active = False
    vera.save()
    assert answer(token) == 401
    vera.is_active = True
    vera.save()
    assert answer(token) == 401
    assert not models.ApiToken.objects.filter(user=vera).exists()


def test_a_deactivation_by_queryset_update_cannot_bring_tokens_back_either(vera):
    """An update() skips save() and its signals; the token is refused while the user is inactive, and deleted at
    the first request that sees it so, so reactivation finds nothing."""
    token = token_create(user=vera)
    User.objects.filter(pk=vera.pk).update(is_active=False)
    assert answer(token) == 401
    User.objects.filter(pk=vera.pk).update(is_active=True)
    assert answer(token) == 401


def test_tokens_expire_after_the_configured_days(vera, settings):
    settings.KARPUI_API_TOKEN_DAYS = 30
    token = token_create(user=vera)
    row = models.ApiToken.objects.get(user=vera)
    assert row.expires_at == row.created_at + timedelta(days=30)
    assert answer(token) == 200
    models.ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert answer(token) == 401
    settings.KARPUI_API_TOKEN_DAYS = 0  # never
    token_create(user=vera)
    assert models.ApiToken.objects.filter(user=vera, expires_at__isnull=True).count() == 1


def test_a_token_records_when_it_was_last_used(vera):
    token = token_create(user=vera)
    assert models.ApiToken.objects.get(user=vera).last_used_at is None
    answer(token)
    assert models.ApiToken.objects.get(user=vera).last_used_at is not None


def test_a_user_sees_and_revokes_their_own_tokens_only_and_each_revocation_is_audited(vera):
    mine = token_create(user=vera, description="kubeconfig for lab")
    theirs = token_create(user=User.objects.create_user("ed", password="ed-pass-1"), description="ed's laptop")
    client = Client()
    client.force_login(vera)
    page = client.get("/tokens/").content.decode()
    assert "kubeconfig for lab" in page and "ed&#x27;s laptop" not in page
    own, other = models.ApiToken.objects.get(user__username="vera"), models.ApiToken.objects.get(user__username="ed")
    assert client.post(f"/tokens/{other.pk}/revoke").status_code == 404
    assert answer(theirs) == 200
    response = client.post(f"/tokens/{own.pk}/revoke")
    assert response.status_code == 302
    assert answer(mine) == 401
    event = models.AuditEvent.objects.get(action="revoke", target_kind="ApiToken")
    assert (event.actor_name, event.via, event.target_name) == ("vera", "web", f"vera/{own.digest[:8]}")
    assert event.before == {"user": "vera", "description": "kubeconfig for lab"}


def test_an_admin_sees_every_users_tokens_and_revokes_any(vera, admin_client):
    token = token_create(user=vera, description="vera's ci")
    page = admin_client.get("/tokens/").content.decode()
    assert "vera&#x27;s ci" in page and "<td>vera</td>" in page
    row = models.ApiToken.objects.get(user=vera)
    assert admin_client.post(f"/tokens/{row.pk}/revoke").status_code == 302
    assert answer(token) == 401


def test_the_tokens_page_needs_a_login_and_revoking_needs_a_post(vera):
    assert Client().get("/tokens/").status_code == 302
    row = models.ApiToken.objects.get(pk=models.ApiToken.objects.create(user=vera, digest="d" * 64).pk)
    client = Client()
    client.force_login(vera)
    assert client.get(f"/tokens/{row.pk}/revoke").status_code == 405
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(vera)
    assert csrf.post(f"/tokens/{row.pk}/revoke").status_code == 403
    assert models.ApiToken.objects.filter(pk=row.pk).exists()


def test_an_impersonated_write_is_audited_naming_both_users(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    admin = User.objects.create_superuser("admin", "", "admin-pass-1")
    ed = User.objects.create_user("ed", password="ed-pass-1")
    ed.groups.add(Group.objects.get(name="editors"))
    response = Client().patch(
        "/k8s/clusters/lab/apis/karpenter.sh/v1/nodepools/default",
        json.dumps({"spec": {"weight": 7}}),
        content_type="application/merge-patch+json",
        headers={"Authorization": f"Bearer {token_create(user=admin)}", "Impersonate-User": "ed"},
    )
    assert response.status_code == 200, response.content
    event = models.AuditEvent.objects.filter(target_kind="NodePool", action="update").latest("id")
    assert (event.actor_name, event.actor.username, event.impersonator, event.via) == ("ed", "ed", "admin", "api")
    assert str(event).endswith(" ed (impersonated by admin) update NodePool/default")
