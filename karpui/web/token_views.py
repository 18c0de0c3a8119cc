"""The API tokens page: a user's own tokens (a superuser's: everyone's), and revoking one."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from karpui import models
from karpui.links import cluster_redirect
from karpui.people import api_tokens
from karpui.people.audit import Actor


@require_GET
def tokens(request: HttpRequest) -> HttpResponse:
    rows = models.ApiToken.objects.select_related("user").order_by("-created_at")
    everyone = bool(getattr(request.user, "is_superuser", False))
    if not everyone:
        rows = rows.filter(user_id=request.user.pk)
    context = {"tokens": rows, "everyone": everyone, "now": timezone.now()}
    return render(request, "karpui/tokens/list.html", context)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        api_tokens.token_revoke(token_id=token_id, actor=actor)
    except LookupError as error:
        raise Http404(str(error)) from None
    messages.success(request, "token revoked: a client using it is refused from now on")
    return cluster_redirect(request, "tokens")
