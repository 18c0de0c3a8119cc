"""Bearer tokens for the Kubernetes API: each acts as a Django user, and only its SHA-256 digest is stored.

Tokens are 256 random bits, so a fast hash is enough: nothing can be guessed from the digest, and a lookup is one
indexed query.
"""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

from karpui import models

PREFIX = "karp_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_create(*, user: AbstractBaseUser, description: str = "") -> str:
    """Make a token for `user`; the token itself is returned once and never stored."""
    token = PREFIX + secrets.token_urlsafe(32)
    models.ApiToken.objects.create(user=user, digest=_digest(token), description=description[:200])
    return token


def authenticate(request: HttpRequest) -> AbstractBaseUser | None:
    """The active user whose token the request carries in `Authorization: Bearer`, or None."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    row = models.ApiToken.objects.select_related("user").filter(digest=_digest(token.strip())).first()
    if row is None or not row.user.is_active:
        return None
    return row.user
