"""A disruption command's own page, a person withdrawing their request, several commands seen as one plan before
anyone approves them together, and an approver's decision on taking a NodePool's approval mode away from manual."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from karpui.gate import disruption
from karpui.insight import selectors
from karpui.links import cluster_redirect
from karpui.people.audit import Actor
from karpui.web import permissions
from karpui.web.views import _cluster


@require_GET
def command_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster(request)
    try:
        context = selectors.command_detail(cluster, name, request.user)
    except LookupError as error:
        raise Http404(str(error)) from None
    return render(request, "karpui/disruption/command.html", {"cluster": cluster, **context})


@require_POST
def command_withdraw(request: HttpRequest, name: str) -> HttpResponse:
    """The requester takes their request back (the service checks it is theirs)."""
    permissions.require(request.user, "karpui.request_disruption", "ask for (or withdraw) a node's disruption")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        disruption.command_withdraw(
            cluster=_cluster(request), name=name, actor=actor, reason=request.POST.get("reason", "").strip()
        )
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, "; ".join(getattr(error, "messages", None) or [str(error)]))
    else:
        messages.success(request, f"{name} withdrawn")
    return cluster_redirect(request, "command-detail", name)


@require_GET
def commands_plan(request: HttpRequest) -> HttpResponse:
    """The ticked commands simulated as one plan (GET: it writes nothing), with what approving them together does."""
    cluster = _cluster(request)
    names = request.GET.getlist("commands")
    try:
        plan = disruption.commands_plan(cluster=cluster, names=names)
    except ValidationError as error:
        return render(
            request, "karpui/disruption/plan.html", {"cluster": cluster, "error": "; ".join(error.messages)}, status=400
        )
    return render(request, "karpui/disruption/plan.html", {"cluster": cluster, **selectors.plan_view(plan, names)})


@require_POST
def approval_mode_decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ("approve", "deny"):
        raise Http404(f"no such decision: {action}")
    permissions.require(request.user, "karpui.approve_disruption", "decide a change of approval mode")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        decided = disruption.approval_mode_decide(
            cluster=_cluster(request),
            request=pk,
            actor=actor,
            approve=action == "approve",
            note=request.POST.get("reason", ""),
        )
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, "; ".join(getattr(error, "messages", None) or [str(error)]))
    else:
        messages.success(request, f"NodePool {decided.nodepool}: {decided.get_decision_display()}")
    return cluster_redirect(request, "disruption")
