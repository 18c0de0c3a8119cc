"""The dashboard's roles as Django groups, made once and then left as an admin edits them."""

from __future__ import annotations

# The dashboard's roles as Django groups. Viewers only need a login; editors write NodePools, node classes,
# catalogs, device declarations and the lab's objects (workloads, nodes: "kubeobject"), wherever they write them
# (dashboard, admin, Kubernetes API). A group that exists is left as an admin made it, so removing a permission
# from it sticks.
ROLES = {
    "viewers": (),
    "editors": tuple(
        f"{action}_{model}"
        for model in ("nodepool", "nodeclass", "catalog", "devicedeclaration", "kubeobject")
        for action in ("add", "change", "delete")
    ),
    "approvers": ("approve_disruption", "pause_disruption", "request_disruption"),
}


def roles_ensure() -> None:
    from django.contrib.auth.models import Group, Permission

    for name, codenames in ROLES.items():
        group, created = Group.objects.get_or_create(name=name)
        if created:
            group.permissions.set(Permission.objects.filter(content_type__app_label="karpui", codename__in=codenames))
