"""The login page, with failed attempts throttled per account and client address (Django has no throttle)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpResponse

logger = logging.getLogger(__name__)


def _key(form: AuthenticationForm) -> str:
    username = (form.data.get("username") or "").strip().lower()
    address = form.request.META.get("REMOTE_ADDR", "") if form.request else ""
    return f"karpui:login-failures:{username}:{address}"


class LoginView(auth_views.LoginView):
    """Django's LoginView; after KARPUI_LOGIN_MAX_FAILURES failures for one username from one address, further
    attempts are refused (even with the right password) until KARPUI_LOGIN_LOCKOUT_SECONDS pass."""

    def post(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        form = self.get_form()
        if cache.get(_key(form), 0) >= settings.KARPUI_LOGIN_MAX_FAILURES:
            minutes = settings.KARPUI_LOGIN_LOCKOUT_SECONDS // 60
            form.add_error(
                None, f"Too many failed logins for this account from your address; try again in {minutes} minutes."
            )
            logger.warning("login refused: too many failures", extra={"username": form.data.get("username")})
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        key = _key(form)
        failures = cache.get(key, 0) + 1
        cache.set(key, failures, settings.KARPUI_LOGIN_LOCKOUT_SECONDS)
        logger.warning("login failed", extra={"username": form.data.get("username"), "failures": failures})
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        cache.delete(_key(form))
        return super().form_valid(form)
