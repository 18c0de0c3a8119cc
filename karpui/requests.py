"""Every request gets an id (the client's X-Request-ID if it is a sane one, else a new one), answered back in
X-Request-ID and carried by every log record made while it is served; a request that fails inside karpui (an
unhandled exception: a bug, never the client's fault) is logged as one JSON line naming that id, counted for
/metrics (`karpui_http_internal_errors_total`), and answered 500 with the id, so a user can quote it and an
operator find the traceback. Before any of that, a path holding a NUL character is a 400 (no name karpui serves
has one, and PostgreSQL cannot even be asked about it), as is a NUL in any other value that reaches a query."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Callable

from django.core.cache import cache
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError

logger = logging.getLogger("karpui.requests")

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("karpui_request_id", default="")
HEADER = "X-Request-ID"
_SANE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# The cache key counting internal errors: Redis when REDIS_URL is set, so every web process adds to one count.
ERRORS_KEY = "karpui:http-internal-errors"
API_PREFIX = "/k8s/"


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every log record made while a request is served (empty outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = REQUEST_ID.get()
        return True


def internal_errors() -> int:
    """Internal errors counted so far (by every process sharing the cache)."""
    return int(cache.get(ERRORS_KEY) or 0)


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get(HEADER, "")
        request_id = given if _SANE.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        try:
            if "\x00" in request.path:
                response = _bad_request(request, "the request's path holds a NUL character")
            else:
                response = self.get_response(request)
            response[HEADER] = request_id
            return response
        finally:
            REQUEST_ID.reset(token)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, _ANSWERED_BY_DJANGO):
            return None  # a 404, 403 or 400 Django answers as such: the client's, not karpui's
        if _nul_in_a_query(exception):
            return _bad_request(request, "a value holds a NUL character")
        from karpui.writes.configs import Conflict

        if isinstance(exception, Conflict):  # a kwok cluster that did not take a write, wherever it was made
            return HttpResponse(f"{exception}\n", status=409, content_type="text/plain; charset=utf-8")
        request_id = REQUEST_ID.get()
        _count()
        logger.error(
            "internal server error",
            exc_info=exception,
            extra={
                "request_id": request_id,
                "method": request.method,
                "path": request.path[:1000],
                "error": type(exception).__name__,
            },
        )
        message = f"Internal error occurred: an unexpected error (request id {request_id})"
        if request.path.startswith(API_PREFIX):
            return _status(500, "InternalError", message, {"causes": [{"message": f"request id {request_id}"}]})
        return HttpResponse(
            f"500 Internal Server Error: karpui failed to answer this request (request id {request_id}).\n",
            status=500,
            content_type="text/plain; charset=utf-8",
        )


_ANSWERED_BY_DJANGO = (Http404, PermissionDenied, BadRequest, SuspiciousOperation, MultiPartParserError)


def _nul_in_a_query(exception: Exception) -> bool:
    """A NUL that reached a query (PostgreSQL's driver refuses one in a string) is the client's bad input."""
    return isinstance(exception, (ValueError, DataError)) and "NUL" in str(exception) and "0x00" in str(exception)


def _bad_request(request: HttpRequest, message: str) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _status(400, "BadRequest", message)
    return HttpResponseBadRequest(f"{message}\n", content_type="text/plain; charset=utf-8")


def _status(code: int, reason: str, message: str, details: dict[str, object] | None = None) -> JsonResponse:
    """A failure as the Kubernetes API answers one (a Status), for requests under /k8s/."""
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body.update({"message": message, "reason": reason, **({"details": details} if details else {}), "code": code})
    return JsonResponse(body, status=code)


def _count() -> None:
    try:
        cache.add(ERRORS_KEY, 0, None)
        cache.incr(ERRORS_KEY)
    except Exception:
        logger.warning("could not count an internal error in the cache")
