"""One throttle for every login form (karpui's own page and the admin's): failed logins counted per account.

Django has no throttle. Failures are counted, not attempts: an attempt takes a place among the account's checks
before its password is checked (atomic add + incr in the cache, Redis when REDIS_URL is set), failures plus checks
under way never pass the limit, so concurrent guesses cannot all slip in under it, while concurrent right passwords
wait their turn and all log in; a right password clears the count. The key is the username as Django compares it (NFKC, as its UsernameField normalises) and case-folded,
so full-width or upper-case variants of a locked username count against the same lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
import unicodedata
from collections.abc import Callable, Iterator
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


def _checking_key(key: str) -> str:
    return f"{key}:checking"


def _incr(key: str, timeout: int) -> int:
    """Add one to a count in the cache (made at 0 with `timeout` if missing); add and incr are each atomic."""
    for _ in range(3):
        cache.add(key, 0, timeout)
        try:
            return cache.incr(key)
        except ValueError:  # the count lapsed between add and incr: start it again
            continue
    raise RuntimeError(f"could not count a login attempt in the cache ({key})")


def _decr(key: str) -> None:
    with contextlib.suppress(ValueError):  # lapsed meanwhile: nothing left to take back
        cache.decr(key)


class _Locked(Exception):
    """The account has its limit of failures: refused without checking the password."""


@contextlib.contextmanager
def _checking(key: str) -> Iterator[Callable[[], None]]:
    """Hold one of the account's checks: failures so far plus checks under way never pass the limit, so however
    many attempts arrive at once no more guesses are checked than the limit allows. An attempt finding no room
    waits for a check under way to end (a right password frees its place; a wrong one keeps it as a failure),
    and is refused as locked only once the failures alone reach the limit. Yields `failed`, to count this check
    as a failure."""
    limit = settings.KARPUI_LOGIN_MAX_FAILURES
    checking = _checking_key(key)
    deadline = time.monotonic() + CHECK_WAIT_SECONDS
    while True:
        under_way = _incr(checking, CHECK_WAIT_SECONDS * 4)
        failures = int(cache.get(key) or 0)
        if failures + under_way <= limit:
            break
        _decr(checking)
        if failures >= limit or time.monotonic() > deadline:
            raise _Locked
        time.sleep(0.02)
    failed = False

    def fail() -> None:
        nonlocal failed
        if not failed:
            failed = True
            _incr(key, settings.KARPUI_LOGIN_LOCKOUT_SECONDS)  # before the check ends: the sum never dips
            cache.touch(key, settings.KARPUI_LOGIN_LOCKOUT_SECONDS)  # the lockout runs from the last failure

    try:
        yield fail
    finally:
        _decr(checking)


# How long an attempt waits for the account's checks under way to end (a check is one password hash).
CHECK_WAIT_SECONDS = 10


class ThrottledLogin(AuthenticationForm):
    """Refuses an account's attempts once it has KARPUI_LOGIN_MAX_FAILURES failures (even with the right password,
    and without checking it) until KARPUI_LOGIN_LOCKOUT_SECONDS pass after the last failure. Only failures count:
    any number of right passwords at once all log in."""

    def clean(self) -> dict[str, Any]:
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()  # a required field is missing: nothing is checked, nothing counted
        key = account_key(username)
        try:
            with _checking(key) as fail:
                try:
                    cleaned = super().clean()
                except ValidationError:
                    if self.user_cache is None:  # a wrong password: a failure, and the lockout runs from now
                        fail()
                        logger.warning("login failed", extra={"username": username})
                    else:  # the right password for an account this form does not admit (the admin's needs is_staff)
                        cache.delete(key)
                    raise
                cache.delete(key)  # a right password clears the failures
                return cleaned
        except _Locked:
            logger.warning("login refused: too many failures", extra={"username": username})
            minutes = math.ceil(settings.KARPUI_LOGIN_LOCKOUT_SECONDS / 60)
            raise ValidationError(
                f"Too many failed logins for this account; try again in {minutes} minutes.", code=THROTTLED
            ) from None


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
