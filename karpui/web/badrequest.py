"""Bad input in a request (a page number that is not one, a NUL in a filter, a cluster name no cluster can have)
is the client's error: a 400 whose text says which parameter and why, whatever DEBUG says (Django's DEBUG page
would answer it with a traceback)."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest


class BadRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, BadRequest):
            # Plain text: the message may quote what the client sent, and text/plain is never rendered as HTML.
            return HttpResponseBadRequest(f"{exception}\n", content_type="text/plain; charset=utf-8")
        return None
