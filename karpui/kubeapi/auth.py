"""Bearer tokens for the Kubernetes API: each acts as a Django user, and only its SHA-256 digest is stored; and
impersonation (`kubectl --as=USER`), as kube-apiserver's impersonation filter does it.

Tokens are 256 random bits, so a fast hash is enough: nothing can be guessed from the digest, and a lookup is one
indexed query.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from django.utils import timezone

from karpui import models
from karpui.kubeapi.errors import Status, forbidden

logger = logging.getLogger(__name__)

PREFIX = "karp_"
ANONYMOUS = "system:anonymous"
# Where the view keeps who impersonated, for whatever records the request (the audit of a write).
IMPERSONATOR = "karpui.impersonator"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_create(*, user: AbstractBaseUser, description: str = "", cluster: str = "") -> str:
    """Make a token for `user`, expiring after KARPUI_API_TOKEN_DAYS (0: never); the token itself is returned once
    and never stored. `cluster` is the one its kubeconfig names: requests at the server's root reach it."""
    token = PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    days = settings.KARPUI_API_TOKEN_DAYS
    models.ApiToken.objects.create(
        user=user,
        digest=_digest(token),
        description=description[:200],
        cluster=cluster,
        created_at=now,
        expires_at=now + timedelta(days=days) if days > 0 else None,
    )
    return token


def authenticate(request: HttpRequest) -> AbstractBaseUser | None:
    """The active user whose unexpired token the request carries in `Authorization: Bearer`, or None. A token of
    an inactive user is deleted on sight: reactivating the user never brings it back (a deactivation saved through
    the model deletes them at once; this catches one made by a bulk update)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    row = models.ApiToken.objects.select_related("user").filter(digest=_digest(token.strip())).first()
    if row is None:
        return None
    now = timezone.now()
    if not row.user.is_active:
        models.ApiToken.objects.filter(user=row.user).delete()
        return None
    if row.expires_at is not None and row.expires_at <= now:
        return None
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_EVERY:
        models.ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def token_cluster(request: HttpRequest) -> str:
    """The cluster the request's bearer token was made for, or "" (no token, an unknown one, one made for no
    cluster). Whether the token is still valid is the endpoint's to decide, as for any request."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return ""
    found = models.ApiToken.objects.filter(digest=_digest(token.strip())).values_list("cluster", flat=True).first()
    return found or ""


# How often a token's last use is written: to the minute, not one UPDATE per request of a watch-heavy client.
LAST_USED_EVERY = timedelta(minutes=1)


def tokens_revoke_on_credential_change(sender: Any, instance: Any, **kwargs: Any) -> None:
    """pre_save of the user model: a new password, or a deactivation, deletes every token of the user (after the
    save commits with it). Tokens carry the user's authority; whoever changed the password because it leaked, or
    deactivated the account, means that authority to end, and reactivating the account must not revive them."""
    if instance.pk is None:
        return
    stored = type(instance).objects.filter(pk=instance.pk).values("password", "is_active").first()
    if stored is None:
        return
    if stored["password"] != instance.password or (stored["is_active"] and not instance.is_active):
        models.ApiToken.objects.filter(user_id=instance.pk).delete()  # in the save's transaction, if it has one


def impersonated(request: HttpRequest, user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    """The user the request acts as: `user` itself, or the user its Impersonate-User header names.

    Only a superuser may impersonate, and only an active user (whose permissions the request then has); anyone
    else is refused 403 as RBAC words it, `users "admin" is forbidden: User "vera" cannot impersonate resource
    "users" in API group "" at the cluster scope`, without saying whether the user exists. Groups, a UID and
    extras (Impersonate-Group, -Uid, -Extra-*) are refused alike, in the order kube-apiserver checks them: a
    karpui user's permissions are not those of a group, so karpui cannot act as one without acting as more (or
    less) than someone is."""
    headers = request.headers
    wanted = headers.get("Impersonate-User")
    # What else is asked, as (resource, API group, name, subresource) of the `impersonate` verb.
    others = [("groups", "", group.strip(), "") for group in headers.get("Impersonate-Group", "").split(",") if group]
    others += [
        ("userextras", "authentication.k8s.io", headers[h].split(",")[0].strip(), h[len(_EXTRA) :].lower())
        for h in sorted(h for h in headers if h.lower().startswith(_EXTRA))
    ]
    if "Impersonate-Uid" in headers:
        others.append(("uids", "authentication.k8s.io", headers["Impersonate-Uid"], ""))
    if wanted is None and not others:
        return user
    caller = user.get_username() if user is not None else ANONYMOUS
    superuser = user is not None and bool(getattr(user, "is_superuser", False))
    target = None
    if wanted is not None:
        if not superuser:
            raise _forbidden(caller, "users", "", wanted)
        users = get_user_model()
        target = users.objects.filter(**{users.USERNAME_FIELD: wanted}).first()
        if target is None or not target.is_active:
            raise _forbidden(caller, "users", "", wanted, reason=f'no active user "{wanted}"')
    if others:
        resource, group, name, subresource = others[0]
        reason = "karpui impersonates users only" if superuser else ""
        raise _forbidden(caller, resource, group, name, subresource, reason=reason)
    request.META[IMPERSONATOR] = caller
    logger.info("%s impersonates %s: %s %s", caller, wanted, request.method, request.path)
    return target


_EXTRA = "impersonate-extra-"


def _forbidden(caller: str, resource: str, group: str, name: str, subresource: str = "", *, reason: str = "") -> Status:
    """kube-apiserver's 403 for an impersonation it does not allow, with its reason after the message if any."""
    status = forbidden(caller, "impersonate", resource, group, name, "", subresource)
    if not reason:
        return status
    details = status.details
    return Status(
        403,
        "Forbidden",
        f"{status.message}: {reason}",
        name=details.get("name", ""),
        group=details.get("group"),
        kind=details.get("kind", ""),
    )
