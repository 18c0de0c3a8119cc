"""The karpui Django app; after migrations it makes sure the lab cluster and built-in catalogs exist."""

from typing import Any

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_migrate


def _ensure_defaults(sender: AppConfig, **kwargs: Any) -> None:
    from karpui.writes import setup

    setup.defaults_ensure()


class KarpuiConfig(AppConfig):
    name = "karpui"
    verbose_name = "karpui"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_ensure_defaults, sender=self)
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        from karpui.clusters import changelog
        from karpui.kubeapi import auth

        changelog.connect()
        pre_save.connect(auth.tokens_revoke_on_credential_change, sender=get_user_model())


class AdminConfig(admin_apps.AdminConfig):
    """Django's admin with karpui's site, whose login form is throttled like karpui's own."""

    default = False  # "karpui" in INSTALLED_APPS still means KarpuiConfig
    default_site = "karpui.web.login.AdminSite"
