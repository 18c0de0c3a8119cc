"""API tokens a person revokes (a user's own, or anyone's for a superuser), audited."""

from __future__ import annotations

from django.db import transaction

from karpui import models
from karpui.people.audit import Actor, audit_event_create


def token_revoke(*, token_id: int, actor: Actor) -> None:
    """Delete an API token, audited: a user's own, or anyone's for a superuser (LookupError otherwise, as if there
    were none: whose tokens exist is not said)."""
    user = actor.user
    with transaction.atomic():
        row = models.ApiToken.objects.select_related("user").filter(pk=token_id).first()
        if row is None or user is None or not (row.user_id == user.pk or getattr(user, "is_superuser", False)):
            raise LookupError(f"no token {token_id}")
        owner = row.user.get_username()
        row.delete()
        audit_event_create(
            actor,
            "revoke",
            "ApiToken",
            f"{owner}/{row.digest[:8]}",
            {"user": owner, "description": row.description},
            None,
            cluster=None,
        )
