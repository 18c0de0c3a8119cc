"""Errors as the API server answers them: a `Status` object with the status code, reason and details kubectl and
the client libraries read (`details.causes[].field` for invalid fields)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.http import HttpResponse

# The causes' reasons of metav1.CauseType that a field error maps to.
FIELD_VALUE_INVALID = "FieldValueInvalid"
FIELD_VALUE_NOT_SUPPORTED = "FieldValueNotSupported"


class Status(Exception):
    """An API error: raise it anywhere below a view and the view answers with its Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str = "",
        group: str | None = None,
        kind: str = "",
        causes: list[dict[str, str]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = {}
        if name:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes
        if retry_after is not None:
            self.details["retryAfterSeconds"] = retry_after
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details or self.reason not in ("Unauthorized",):
            body["details"] = self.details
        body["code"] = self.code
        return body

    def response(self) -> HttpResponse:
        response = HttpResponse(json.dumps(self.body()), status=self.code, content_type="application/json")
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        return response


def not_found(qualified: str, name: str, group: str, plural: str) -> Status:
    return Status(404, "NotFound", f'{qualified} "{name}" not found', name=name, group=group, kind=plural)


def no_route() -> Status:
    return Status(404, "NotFound", "the server could not find the requested resource")


def unauthorized() -> Status:
    return Status(401, "Unauthorized", "Unauthorized")


def bad_request(message: str) -> Status:
    return Status(400, "BadRequest", message)


def method_not_allowed() -> Status:
    return Status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_media_type(accepted: Sequence[str]) -> Status:
    """415 for a body in a media type the server does not decode, naming those it does (apimachinery's
    errUnsupportedMediaType)."""
    return Status(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def gone(message: str) -> Status:
    return Status(410, "Expired", message)


def forbidden(
    user: str, verb: str, plural: str, group: str, name: str, namespace: str, subresource: str = ""
) -> Status:
    """`nodepools.karpenter.sh "x" is forbidden: User "bob" cannot patch resource "nodepools" in API group
    "karpenter.sh" at the cluster scope`, as RBAC words it."""
    qualified = f"{plural}.{group}" if group else plural
    if subresource:
        qualified, resource = f"{qualified}/{subresource}", f'"{plural}/{subresource}"'
    else:
        resource = f'"{plural}"'
    who = f'{qualified} "{name}" is forbidden' if name else f"{qualified} is forbidden"
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return Status(
        403,
        "Forbidden",
        f'{who}: User "{user}" cannot {verb} resource {resource} in API group "{group}" {scope}',
        name=name,
        group=group,
        kind=plural,
    )


def invalid(kind: str, group: str, name: str, field: str, message: str, cause: str = FIELD_VALUE_INVALID) -> Status:
    """422 Invalid with one field cause: `NodePool.karpenter.sh "x" is invalid: spec.weight: ...`."""
    qualified = f"{kind}.{group}" if group else kind
    text = f"{field}: {message}" if field else message
    return Status(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {text}',
        name=name,
        group=group,
        kind=kind,
        causes=[{"reason": cause, "message": message, "field": field}],
    )
