"""Who acts, and the audit row every human decision writes (in the decision's transaction)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from karpui import models


@dataclass(frozen=True)
class Actor:
    """Who is acting and through what: a user (admin, web) or a named CLI operator."""

    name: str
    via: str
    user: AbstractBaseUser | None = None
    impersonator: str = ""  # who acts as `user` (kubectl --as): the audit row names both
    # The field manager the write is recorded under in metadata.managedFields (the API's fieldManager, a karp verb's
    # own, ...); empty: the one of `via` (FIELD_MANAGERS).
    manager: str = ""

    @classmethod
    def for_user(cls, user: AbstractBaseUser, via: str, *, impersonator: str = "", manager: str = "") -> Actor:
        return cls(name=user.get_username(), via=via, user=user, impersonator=impersonator, manager=manager)

    @property
    def field_manager(self) -> str:
        return self.manager or FIELD_MANAGERS.get(self.via, f"karpui-{self.via}")

    def managing(self, manager: str) -> Actor:
        """The same actor, writing as `manager` (a karp verb's own: karp-label, karp-client-side-apply, ...)."""
        return dataclasses.replace(self, manager=manager) if manager else self


# Who a write is recorded as in managedFields when the writer names no field manager: kube-apiserver takes the
# client's name (kubectl's verbs each have theirs); each of karpui's writers has its own, so that kubectl's
# migration from client-side to server-side apply takes over only what the client-side applier set.
FIELD_MANAGERS = {"web": "karpui-dashboard", "admin": "karpui-admin", "cli": "karp", "migrate": "karpui"}


def audit_event_create(
    actor: Actor,
    action: str,
    kind: str,
    name: str,
    before: Any,
    after: Any,
    reason: str = "",
    *,
    cluster: models.Cluster | None,
) -> None:
    """One audit row, in the caller's transaction. `cluster` is the cluster it is about (None only for what every
    cluster shares: catalogs, device declarations), so each cluster's pages and API show their own trail."""
    models.AuditEvent.objects.create(
        cluster=cluster,
        cluster_name=cluster.name if cluster is not None else "",
        actor=actor.user if actor.user is not None and actor.user.pk else None,
        actor_name=actor.name,
        impersonator=actor.impersonator,
        via=actor.via,
        action=action,
        target_kind=kind,
        target_name=name,
        reason=reason,
        before=before,
        after=after,
    )
