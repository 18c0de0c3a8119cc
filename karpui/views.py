"""Dashboard views. Each is thin: it reads through selectors and renders a template."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from karpui import selectors


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "karpui/overview/home.html", selectors.overview())
