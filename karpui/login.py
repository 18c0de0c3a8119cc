"""One throttle for every login form (karpui's own page and the admin's): failed logins counted per account.

Django has no throttle. Each attempt is counted before its password is checked (an atomic add + incr in the cache,
Redis when REDIS_URL is set), so concurrent attempts cannot all slip in under the limit; a right password clears
the count. The key is the username as Django compares it (NFKC, as its UsernameField normalises) and case-folded,
so full-width or upper-case variants of a locked username count against the same lock.
"""

from __future__ import annotations

import hashlib
import logging
import math
import unicodedata
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

logger = logging.getLogger(__name__)

THROTTLED = "throttled"


def account_key(username: str) -> str:
    """The cache key counting one account's failed logins."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", username).casefold())
    return f"karpui:login-failures:{hashlib.sha256(folded.encode()).hexdigest()}"


def _count_attempt(key: str) -> int:
    """Count one attempt and return the count including it; add + incr are each atomic in the cache."""
    for _ in range(3):
        cache.add(key, 0, settings.KARPUI_LOGIN_LOCKOUT_SECONDS)
        try:
            return cache.incr(key)
        except ValueError:  # the count lapsed between add and incr: start it again
            continue
    raise RuntimeError(f"could not count a login attempt in the cache ({key})")


class ThrottledLogin(AuthenticationForm):
    """Refuses an account's attempts past KARPUI_LOGIN_MAX_FAILURES failures (even with the right password, and
    without checking it) until KARPUI_LOGIN_LOCKOUT_SECONDS pass after the last failure checked."""

    def clean(self) -> dict[str, Any]:
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()  # a required field is missing: nothing is checked, nothing counted
        key = account_key(username)
        if _count_attempt(key) > settings.KARPUI_LOGIN_MAX_FAILURES:
            logger.warning("login refused: too many failures", extra={"username": username})
            minutes = math.ceil(settings.KARPUI_LOGIN_LOCKOUT_SECONDS / 60)
            raise ValidationError(
                f"Too many failed logins for this account; try again in {minutes} minutes.", code=THROTTLED
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            if self.user_cache is None:  # a wrong password: it stays counted, and the lockout runs from now
                cache.touch(key, settings.KARPUI_LOGIN_LOCKOUT_SECONDS)
                logger.warning("login failed", extra={"username": username})
            else:  # the right password for an account this form does not admit (the admin's needs is_staff)
                cache.delete(key)
            raise
        cache.delete(key)
        return cleaned


class AuthenticationFormThrottled(ThrottledLogin):
    """karpui's login form."""


class AdminAuthenticationFormThrottled(ThrottledLogin, AdminAuthenticationForm):
    """The admin's login form (staff only), under the same throttle."""


def _refused_status(response: HttpResponse) -> HttpResponse:
    """A login refused by the throttle answers 429 Too Many Requests, on either form."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    if isinstance(form, ThrottledLogin) and form.has_error("__all__", THROTTLED):
        response.status_code = 429
    return response


class LoginView(auth_views.LoginView):
    """karpui's login page: Django's LoginView with the throttled form."""

    authentication_form = AuthenticationFormThrottled

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        return _refused_status(super().form_invalid(form))


class AdminSite(admin.AdminSite):
    """The admin (`karpui.apps.AdminConfig` makes it the default site), logging in through the same throttle."""

    login_form = AdminAuthenticationFormThrottled

    @method_decorator(never_cache)
    @login_not_required
    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return _refused_status(super().login(request, extra_context))
