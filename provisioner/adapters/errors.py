"""The API errors a real API server answers beyond those the cluster port names (objects.APIError and its kinds),
and the mapping from an HTTP status and `Status` body to the one to raise."""

from __future__ import annotations

import json
from typing import Any

from provisioner.cluster.objects import AlreadyExists, APIError, Conflict, NotFound, TooManyRequests


class Expired(APIError):
    """410 Gone: a watch or a list continuation from a resourceVersion the server no longer keeps; list again."""

    code = 410
    reason = "Expired"


class Invalid(APIError):
    code = 422
    reason = "Invalid"


class BadRequest(APIError):
    code = 400
    reason = "BadRequest"


class Unauthorized(APIError):
    code = 401
    reason = "Unauthorized"


class Forbidden(APIError):
    code = 403
    reason = "Forbidden"


class MethodNotAllowed(APIError):
    code = 405
    reason = "MethodNotAllowed"


class ServerError(APIError):
    """A 5xx: the server failed; whether a write took effect is unknown until the cache shows it."""

    code = 500
    reason = "InternalError"


class Unreachable(APIError):
    """No answer at all: refused, reset, or timed out."""

    code = 0
    reason = "Unreachable"


_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    410: Expired,
    422: Invalid,
    429: TooManyRequests,
}


def status_message(body: Any) -> tuple[str, str]:
    """The (reason, message) of a `Status` body, or ("", the text) when it is not one."""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return "", body.strip()[:500]
    if isinstance(body, dict):
        return str(body.get("reason") or ""), str(body.get("message") or "")
    return "", ""


def error_for(code: int, body: Any) -> APIError:
    """The exception for an HTTP error answer: 409 is AlreadyExists or Conflict as the Status's reason says."""
    reason, message = status_message(body)
    message = message or f"the server answered {code}"
    if code == 409:
        return AlreadyExists(message) if reason == "AlreadyExists" else Conflict(message)
    if code in _BY_CODE:
        return _BY_CODE[code](message)
    error = ServerError(message) if code >= 500 else APIError(message)
    error.code = code
    return error
