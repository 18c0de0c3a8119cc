"""Dashboard views: thin, reading through selectors and writing through services. Every page needs a login
(LoginRequiredMiddleware); every action is a POST with CSRF, and services check the permission and audit it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest, PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from karpui import health
from karpui.clusters import registry
from karpui.gate import disruption
from karpui.insight import capacity, device_selectors, grouping, selectors
from karpui.insight.buffers import capacity_buffers
from karpui.insight.pending import GROUPINGS, pending_pods
from karpui.kinds import display
from karpui.links import cluster_query, cluster_redirect
from karpui.models import Cluster
from karpui.people.audit import Actor
from karpui.web import permissions
from karpui.web.csv_export import FORMATS, csv_response
from provisioner.durations import DurationError, parse_duration


def _cluster(request: HttpRequest) -> Cluster:
    """The cluster `?cluster=` names (the default lab cluster without it). Reads never create one: a name no
    cluster can have is a 400, an unknown one a 404."""
    try:
        return selectors.cluster_get(name=request.GET.get("cluster") or registry.DEFAULT_CLUSTER)
    except ValidationError as error:
        raise BadRequest("; ".join(error.messages)) from None
    except LookupError as error:
        raise Http404(str(error)) from None


# ASCII digits, at most nine: str.isdigit() also admits "²" (which int() refuses), and a 20-digit page number
# overflows the database's OFFSET.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")


def _page_number(request: HttpRequest, key: str = "page") -> int:
    """The page asked for (the first when none is); anything but a whole number from 1 is a 400 naming `key`."""
    page = _whole_number(request, key)
    if key in request.GET and page < 1:
        raise BadRequest(f"{key}: must be a page number from 1, got {_shown(request.GET[key])}")
    return page or 1


def _csv(request: HttpRequest) -> bool:
    """`?format=csv`: the list's every row its filters keep, as a download; any other format is a 400."""
    return _choice(request, "format", FORMATS, "html") == "csv"


def _within(request: HttpRequest, pages: int, key: str = "page") -> None:
    """A page past the last is a 400 naming it (page 8 of 7 shows nothing the person asked for). A live region's
    poll keeps its page while the list shrinks under it, so htmx's requests get the last page instead."""
    asked = _whole_number(request, key)
    if asked > pages and not request.htmx:  # type: ignore[attr-defined]
        raise BadRequest(f"{key}: {asked} is past the last page, {pages}")


def _choice(request: HttpRequest, key: str, choices: Iterable[str], default: str) -> str:
    """One of a parameter's values (its default when absent); anything else is a 400 naming the choices."""
    value = _query_text(request, key, default)
    choices = tuple(choices)
    if value not in choices:
        raise BadRequest(f"{key}: must be one of {', '.join(choices)}, got {_shown(value)}")
    return value


def _whole_number(request: HttpRequest, key: str) -> int:
    """A filter's whole number (0: no filter); text, "²", a sign or ten digits and more are a 400 naming it."""
    text = _query_text(request, key)
    if not text:
        return 0
    if not _WHOLE_NUMBER.fullmatch(text):
        raise BadRequest(f"{key}: must be a whole number of at most nine digits, got {_shown(text)}")
    return int(text)


def _query_text(request: HttpRequest, key: str, default: str = "") -> str:
    """A text filter; one holding a NUL character is a 400 (PostgreSQL can neither store nor compare NUL)."""
    text = request.GET.get(key, default)
    if "\x00" in text:
        raise BadRequest(f"{key}: must not contain a NUL character")
    return text


def _window(request: HttpRequest) -> str:
    """A chart's window: auto (the default) or one of the savings and trends charts' own."""
    window = _query_text(request, "window", "auto")
    if window != "auto" and window not in selectors.SAVINGS_WINDOWS:
        raise BadRequest(f"window: must be one of auto, {', '.join(selectors.SAVINGS_WINDOWS)}, got {_shown(window)}")
    return window


ZOOM_LEAST = timedelta(minutes=1)
ZOOM_MOST = timedelta(days=31)  # the history kept (KARPUI_COST_HISTORY_DAYS)


def _span(request: HttpRequest) -> tuple[datetime, datetime] | None:
    """A chart's zoom: `from` and `to`, UTC times (2026-12-05T03:00:00Z), both or neither; from before to, at least
    a minute and at most 31 days apart. Anything else is a 400 naming the parameter."""
    given = {key: _query_text(request, key) for key in ("from", "to")}
    if not any(given.values()):
        return None
    times = {}
    for key, text in given.items():
        if not text:
            raise BadRequest(f"{key}: a zoom needs both from and to")
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise BadRequest(f"{key}: must be a UTC time such as 2026-12-05T03:00:00Z, got {_shown(text)}") from None
        times[key] = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    start, end = times["from"], times["to"]
    if not ZOOM_LEAST <= end - start <= ZOOM_MOST:
        raise BadRequest("to: must be from a minute to 31 days after from")
    return start, end


def _zoom(request: HttpRequest) -> dict[str, str]:
    """The zoom's times as the request gave them, for the form and the live region's poll (checked by _span)."""
    return {"from": request.GET.get("from", ""), "to": request.GET.get("to", "")}


def _shown(text: str) -> str:
    """What the client sent, quoted and cut short: an error must not echo a megabyte back."""
    return repr(text[:40] + ("…" if len(text) > 40 else ""))


def _page(request: HttpRequest, template: str, partial: str, context: dict[str, object]) -> HttpResponse:
    """The whole page for a plain request; just the live region for htmx's polling."""
    name = f"{template}#{partial}" if request.htmx else template  # type: ignore[attr-defined]
    return render(request, name, context)


FAVICON = settings.BASE_DIR / "static" / "karpui" / "favicon.ico"


@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for on every page whatever the page links (the pages link the SVG)."""
    response = HttpResponse(FAVICON.read_bytes(), content_type="image/vnd.microsoft.icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: the web process answers (it checks nothing else, so a restart is never the answer to Redis)."""
    return JsonResponse({"status": "ok"})


@login_not_required
@require_GET
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: 200 when the database, the broker and every cluster's tick are fine, else 503; each named."""
    ready, body = health.readiness(timezone.now())
    return JsonResponse(body, status=200 if ready else 503)


@require_GET
def banners(request: HttpRequest) -> HttpResponse:
    """The base template's live region alone (the page's clock, the pause and reconcile-error banners): every page
    polls it, so a pause's banner goes when its TTL passes, without a reload."""
    return render(request, "karpui/base.html#banners")


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    context = {"cluster": cluster, **selectors.overview(cluster), **capacity.capacity_summary(cluster=cluster)}
    return _page(request, "karpui/overview/home.html", "summary", context)


@require_GET
def pending(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    filters = {key: _query_text(request, key) for key in ("namespace", "nodepool", "q", "owner", "reason")}
    listing = pending_pods(
        cluster=cluster,
        namespace=filters["namespace"],
        nodepool=filters["nodepool"],
        search=filters["q"],
        owner=filters["owner"],
        reason=filters["reason"],
        group="none" if _csv(request) else _choice(request, "group", GROUPINGS, "owner"),
        page=_page_number(request),
        everything=_csv(request),
    )
    if _csv(request):
        return csv_response(
            f"{cluster.name}-pending-pods",
            ("namespace", "name", "owner_kind", "owner", "waiting_s", "blocked_by", "verdicts", "scheduler"),
            (
                (
                    p["namespace"],
                    p["name"],
                    p["owner"].kind,
                    p["owner"].name,
                    int(p["waiting"]),
                    f"{p['verdicts'][0]['label']}: {p['verdicts'][0]['kind']}" if p["verdicts"] else "",
                    " | ".join(f"{v['label']}: {v['message']}" for v in p["verdicts"]),
                    p["scheduler"],
                )
                for p in listing["pods"]
            ),
        )
    _within(request, listing["pages"])
    context = {"cluster": cluster, **filters, **listing, **capacity_buffers(cluster)}
    return _page(request, "karpui/pods/pending.html", "pending-table", context)


def _percent(request: HttpRequest, key: str) -> int | None:
    """A whole-number filter where 0 means something (0 %): None when absent or empty (the form sends its empty
    fields); anything but a whole number is a 400 naming it, as _whole_number's filters are."""
    if not _query_text(request, key):
        return None
    return _whole_number(request, key)


NODE_FILTERS = ("nodepool", "instance_type", "zone", "capacity_type", "q", "min_util", "max_util")


@require_GET
def nodes(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    filters = capacity.NodeFilters(
        nodepool=_query_text(request, "nodepool"),
        instance_type=_query_text(request, "instance_type"),
        zone=_query_text(request, "zone"),
        capacity_type=_query_text(request, "capacity_type"),
        search=_query_text(request, "q"),
        min_utilisation=_percent(request, "min_util"),
        max_utilisation=_percent(request, "max_util"),
    )
    listing = capacity.nodes_page(
        cluster=cluster,
        filters=filters,
        sort=_query_text(request, "sort", "name"),
        page=_page_number(request),
        everything=_csv(request),
    )
    if _csv(request):
        return csv_response(
            f"{cluster.name}-nodes",
            (
                "name",
                "nodepool",
                "instance_type",
                "capacity_type",
                "zone",
                "price_per_hour",
                "pods",
                "cpu_requested",
                "cpu_allocatable",
                "memory_requested",
                "memory_allocatable",
                "state",
                "age_s",
            ),
            (
                (
                    n.name,
                    n.nodepool,
                    n.instance_type,
                    n.capacity_type,
                    n.zone,
                    f"{n.price:.4f}",
                    n.pods,
                    display.quantity("cpu", n.usage.cpu_requested),
                    display.quantity("cpu", n.usage.cpu_allocatable),
                    display.quantity("memory", n.usage.memory_requested * 1000),
                    display.quantity("memory", n.usage.memory_allocatable * 1000),
                    row["state"],
                    int(row["age"]),
                )
                for row in listing["nodes"]
                for n in (row["node"],)
            ),
        )
    _within(request, listing["pages"])
    # Links keep the filters and the cluster: sorting keeps them and starts at page 1; paging keeps them and the sort.
    narrowed = cluster_query(cluster, {key: _query_text(request, key) for key in NODE_FILTERS})
    # Which of the nodes kept this page lists, counted from 1, for the count above the table.
    shown_from = (listing["page"] - 1) * capacity.NODES_PAGE_SIZE + 1
    context = {
        "cluster": cluster,
        "filters": filters,
        "narrowed": narrowed,
        "shown_from": shown_from,
        "shown_to": shown_from + len(listing["nodes"]) - 1,
        **listing,
    }
    return _page(request, "karpui/nodes/list.html", "nodes-table", context)


@require_GET
def disruption_queue(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    context = {
        "cluster": cluster,
        "can_decide": request.user.has_perm("karpui.approve_disruption"),
        "can_pause": request.user.has_perm("karpui.pause_disruption"),
        # An observed cluster's NodePools are Karpenter's: their approval mode is annotated there, with kubectl.
        "can_edit": (
            request.user.has_perm("karpui.change_nodepool") or request.user.has_perm("karpui.approve_disruption")
        )
        and cluster.mode != Cluster.Mode.OBSERVE,
        "approval_modes": disruption.APPROVAL_MODES,
        "four_eyes": settings.KARPUI_FOUR_EYES,
        **selectors.disruption_queue(cluster, request.user),
    }
    context["evictions"] = grouping.evictions(cluster, context["live"])  # type: ignore[arg-type]
    return _page(request, "karpui/disruption/queue.html", "queue", context)


@require_GET
def savings(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    overview = selectors.savings_overview(
        cluster, _window(request), _page_number(request), everything=_csv(request), span=_span(request)
    )
    if _csv(request):
        return csv_response(
            f"{cluster.name}-savings",
            (
                "command",
                "reason",
                "decision",
                "nodepool",
                "phase",
                "finished",
                "decided_by",
                "nodes",
                "savings_per_hour",
                "realised",
                "forgone_per_hour",
            ),
            (
                (
                    c["name"],
                    c["reason"],
                    c["decision"],
                    c["nodepool"],
                    c["phase"],
                    c["finished"],
                    c["by"],
                    " ".join(c["nodes"]),
                    f"{c['savings']:.4f}",
                    f"{c['realised']:.4f}",
                    f"{c['forgone']:.4f}",
                )
                for c in overview["commands"]
            ),
        )
    context = {"cluster": cluster, "zoom": _zoom(request), **overview}
    return _page(request, "karpui/savings/overview.html", "savings", context)


@require_GET
def trends(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    context = {
        "cluster": cluster,
        "zoom": _zoom(request),
        **selectors.trends_overview(cluster, _window(request), span=_span(request)),
    }
    return _page(request, "karpui/trends/overview.html", "trends", context)


def _decided(request: HttpRequest, action: str, name: str) -> HttpResponse:
    cluster = _cluster(request)
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    reason = request.POST.get("reason", "")
    try:
        if action == "approve":
            disruption.command_approve(
                cluster=cluster, name=name, actor=actor, reason=reason, confirmed=request.POST.get("confirm") == "yes"
            )
        else:
            disruption.command_deny(cluster=cluster, name=name, actor=actor, reason=reason)
    except ValidationError as error:
        messages.error(request, "; ".join(error.messages))
    except PermissionDenied as error:
        # An approver refused for this one command (four eyes) gets a message on the queue, not an error page.
        messages.error(request, str(error))
    else:
        messages.success(request, f"{name} approved" if action == "approve" else f"{name} denied")
    return cluster_redirect(request, "disruption")


@require_POST
def command_approve(request: HttpRequest, name: str) -> HttpResponse:
    permissions.require(request.user, "karpui.approve_disruption", "approve or deny disruption")
    return _decided(request, "approve", name)


@require_POST
def commands_approve(request: HttpRequest) -> HttpResponse:
    """Bulk approval of the ticked commands; each is audited on its own, and those that cannot be approved are
    named with the reason."""
    permissions.require(request.user, "karpui.approve_disruption", "approve or deny disruption")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    cluster = _cluster(request)
    names = request.POST.getlist("commands")
    try:
        approved, refused = disruption.commands_approve(
            cluster=cluster,
            names=names,
            actor=actor,
            reason=request.POST.get("reason", ""),
            confirmed=request.POST.get("confirm") == "yes",
            plan=request.POST.get("plan") or None,
        )
    except disruption.PlanNeedsConfirmation as refusal:
        # Nothing was approved: the combined plan is shown, with a form that confirms exactly this plan.
        context = {
            "cluster": cluster,
            **selectors.plan_view(refusal.plan, refusal.names),
            "refused": "; ".join(refusal.messages),
            "reason": request.POST.get("reason", ""),
            "confirm": request.POST.get("confirm") == "yes",
        }
        return render(request, "karpui/disruption/plan.html", context, status=409)
    except ValidationError as error:
        messages.error(request, "; ".join(error.messages))
        return cluster_redirect(request, "disruption")
    if approved:
        messages.success(request, f"{len(approved)} approved: {', '.join(approved)}")
    for name, why in refused.items():
        messages.error(request, f"{name} not approved: {why}")
    return cluster_redirect(request, "disruption")


@require_POST
def command_deny(request: HttpRequest, name: str) -> HttpResponse:
    permissions.require(request.user, "karpui.approve_disruption", "approve or deny disruption")
    return _decided(request, "deny", name)


@require_POST
def pause(request: HttpRequest) -> HttpResponse:
    permissions.require(request.user, "karpui.pause_disruption", "pause or resume disruption")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    try:
        seconds = parse_duration(request.POST.get("duration", "")) or 0
        disruption.disruption_pause(
            cluster=_cluster(request), actor=actor, reason=request.POST.get("reason", ""), seconds=seconds
        )
    except (ValidationError, DurationError) as error:
        messages.error(request, "; ".join(getattr(error, "messages", [str(error)])))
    return cluster_redirect(request, "disruption")


@require_POST
def resume(request: HttpRequest) -> HttpResponse:
    permissions.require(request.user, "karpui.pause_disruption", "pause or resume disruption")
    actor = Actor.for_user(request.user, "web")  # type: ignore[arg-type]
    if disruption.disruption_resume(cluster=_cluster(request), actor=actor):
        messages.success(request, "voluntary disruption resumed")
    else:
        messages.info(request, "nothing was paused")
    return cluster_redirect(request, "disruption")


@require_POST
def nodepool_approval_mode(request: HttpRequest, name: str) -> HttpResponse:
    """Change a NodePool's approval mode; from manual to an unattended mode this asks an approver (a request)."""
    if not (request.user.has_perm("karpui.change_nodepool") or request.user.has_perm("karpui.approve_disruption")):
        permissions.require(request.user, "karpui.change_nodepool", "edit NodePools")
    text = request.POST.get("threshold", "").strip().lstrip("$")
    try:
        threshold = float(text) if text else None
    except ValueError:
        messages.error(request, f"threshold: not a number of $/h: {text!r}")
        return cluster_redirect(request, "disruption")
    mode = request.POST.get("mode", "")
    try:
        asked = disruption.approval_mode_request(
            cluster=_cluster(request),
            nodepool=name,
            mode=mode,
            actor=Actor.for_user(request.user, "web"),  # type: ignore[arg-type]
            reason=request.POST.get("reason", ""),
            threshold=threshold if mode == "auto-below" else None,
        )
    except (ValidationError, PermissionDenied) as error:
        messages.error(request, "; ".join(getattr(error, "messages", None) or [str(error)]))
    except LookupError as error:
        raise Http404(str(error)) from None
    else:
        if asked is None or asked.decision:
            messages.success(request, f"NodePool {name}: approval mode {mode}")
        else:
            messages.success(request, f"NodePool {name}: asked for approval mode {mode}; an approver decides")
    return cluster_redirect(request, "disruption")


@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    return catalog_page(request)


def catalog_page(request: HttpRequest, status: int = 200) -> HttpResponse:
    """The catalog page, also rendered (with the error's message) when an import or delete is refused."""
    params = {k: _query_text(request, k) for k in ("family", "arch", "os", "capacity_type", "zone")}
    min_cpu, min_memory = _whole_number(request, "min_cpu"), _whole_number(request, "min_memory")
    listing = selectors.catalog_list(
        min_cpu=min_cpu,
        min_memory_gib=min_memory,
        page=_page_number(request),
        sort=_query_text(request, "sort", "cheapest"),
        everything=_csv(request),
        **params,
    )
    if _csv(request):
        return csv_response(
            "catalog",
            (
                "catalog",
                "name",
                "family",
                "arch",
                "os",
                "cpu",
                "memory",
                "pods",
                "allocatable_cpu",
                "allocatable_memory",
                "allocatable_pods",
                "cheapest_per_hour",
            ),
            (
                (
                    t.catalog.name,
                    t.name,
                    t.family,
                    t.arch,
                    t.os,
                    display.quantity("cpu", t.cpu_millis),
                    display.quantity("memory", t.memory_bytes * 1000),
                    t.pods,
                    display.quantity("cpu", t.allocatable_cpu),
                    display.quantity("memory", t.allocatable_memory * 1000),
                    t.allocatable_pods,
                    f"{t.cheapest:.4f}",
                )
                for t in listing["types"]
            ),
        )
    filters = request.GET.copy()
    filters.pop("page", None)
    narrowed = filters.copy()  # what a sortable heading keeps: the filters, not the order or the page
    narrowed.pop("sort", None)
    context = {
        **params,
        "min_cpu": min_cpu,
        "min_memory": min_memory,
        "filters": filters.urlencode(),
        "narrowed": narrowed.urlencode(),
        "can_import": request.user.has_perm("karpui.change_catalog"),
        "catalogs": selectors.catalogs(),
        "declared": device_selectors.declared_devices(_cluster(request)),
        **listing,
    }
    return render(request, "karpui/catalog/list.html", context, status=status)


@require_GET
def devices(request: HttpRequest) -> HttpResponse:
    cluster = _cluster(request)
    context: dict[str, object] = {"cluster": cluster, **device_selectors.devices_overview(cluster)}
    if not request.htmx:  # type: ignore[attr-defined]
        # Not in the live region: classes and declarations change only when someone applies them.
        context["classes"] = device_selectors.device_classes(cluster)
        context["declarations"] = device_selectors.declarations(cluster)
    return _page(request, "karpui/devices/overview.html", "devices", context)
