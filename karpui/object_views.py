"""Any object's page: its manifest as YAML and the events about it (Headlamp's detail view)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from karpui import drilldown
from karpui.views import _cluster


@require_GET
def object_detail(request: HttpRequest, kind: str, name: str, namespace: str = "") -> HttpResponse:
    cluster = _cluster(request)
    try:
        context = drilldown.object_detail(cluster=cluster, kind=kind, namespace=namespace, name=name)
    except LookupError as error:
        raise Http404(str(error)) from None
    return render(request, "karpui/objects/detail.html", {"cluster": cluster, **context})
