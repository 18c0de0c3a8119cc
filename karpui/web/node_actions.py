"""The node page's actions: cordon, uncordon, and ask for the node to be disrupted. POSTs only (CSRF), each
permission-checked and audited by its service; asking to disrupt follows the CLI's four-eyes rule (another person
approves on the Disruption page)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from karpui.gate import disruption
from karpui.links import cluster_redirect
from karpui.people.audit import Actor
from karpui.web import permissions
from karpui.web.views import _cluster
from karpui.writes import nodes


def _cordon(request: HttpRequest, name: str, cordoned: bool) -> HttpResponse:
    permissions.require(request.user, nodes.PERMISSION, "cordon or uncordon nodes")
    cluster = _cluster(request)
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        changed = nodes.node_cordon(cluster=cluster, name=name, actor=actor, cordoned=cordoned)
    except LookupError as error:
        raise Http404(str(error)) from None
    verb = "cordoned" if cordoned else "uncordoned"
    messages.success(request, f"node {name} {verb}" if changed else f"node {name} was already {verb}")
    return cluster_redirect(request, "node-detail", name)


@require_POST
def node_cordon(request: HttpRequest, name: str) -> HttpResponse:
    return _cordon(request, name, True)


@require_POST
def node_uncordon(request: HttpRequest, name: str) -> HttpResponse:
    return _cordon(request, name, False)


@require_POST
def node_disrupt(request: HttpRequest, name: str) -> HttpResponse:
    """`karp disrupt node NAME --reason`: a DisruptionCommand in manual mode that another person must approve."""
    permissions.require(request.user, "karpui.request_disruption", "ask for a node's disruption")
    reason = request.POST.get("reason", "").strip()
    if not reason:
        messages.error(request, "reason: say why this node should go (it is kept in the audit trail)")
        return cluster_redirect(request, "node-detail", name)
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        command = disruption.node_disruption_request(cluster=_cluster(request), node=name, actor=actor, reason=reason)
    except ValidationError as error:
        messages.error(request, "; ".join(error.messages))
    else:
        messages.success(
            request,
            f"disruption command {command['metadata']['name']} created: another person approves it on the Disruption page",
        )
    return cluster_redirect(request, "node-detail", name)
