"""Any object's page: what a platform engineer reads first (karpui.insight.summaries: status, conditions, requests,
owners, pods and their nodes, a pending pod's verdicts, events, commands), live; its YAML folded below."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from karpui.insight import drilldown, summaries
from karpui.links import cluster_url
from karpui.web.views import _cluster

TEMPLATE = "karpui/objects/detail.html"


@require_GET
def object_detail(request: HttpRequest, kind: str, name: str, namespace: str = "") -> HttpResponse:
    cluster = _cluster(request)
    if kind.lower() in ("disruptioncommand", "disruptioncommands", "dc"):
        # A command has a page of its own (its plan, risks, decisions, re-checks and steps).
        return HttpResponseRedirect(cluster_url(cluster, "command-detail", name))
    try:
        context = drilldown.object_detail(cluster=cluster, kind=kind, namespace=namespace, name=name)
    except LookupError as error:
        if request.htmx and request.GET.get("part") == "summary":  # type: ignore[attr-defined]
            return render(request, f"{TEMPLATE}#summary", {"cluster": cluster, "gone": str(error)})
        raise Http404(str(error)) from None
    context["summary"] = summaries.summary(cluster, context["kind"], context["manifest"])
    if request.htmx and request.GET.get("part") == "summary":  # type: ignore[attr-defined]
        return render(request, f"{TEMPLATE}#summary", {"cluster": cluster, **context})
    return render(request, TEMPLATE, {"cluster": cluster, **context})
