"""The dashboard's refusals: a person who may not do something is told which permission (and role) it needs."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied

from karpui.people.roles import ROLES


def require(user: AbstractBaseUser | AnonymousUser, permission: str, doing: str) -> None:
    """Refuse the request unless `user` has `permission` ("karpui.approve_disruption"): the 403 page shows what
    this says, so the person knows whom to ask for what."""
    if user.has_perm(permission):
        return
    codename = permission.split(".", 1)[-1]
    roles = [name for name, codenames in ROLES.items() if codename in codenames]
    given = ""
    if roles:
        given = f", which the {' and '.join(roles)} " + ("groups give" if len(roles) > 1 else "group gives")
    raise PermissionDenied(f"{user.get_username()} may not {doing}: that needs the {permission} permission{given}")
