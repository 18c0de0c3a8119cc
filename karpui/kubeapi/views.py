"""The API's HTTP endpoints: version, discovery, OpenAPI, and get / list / watch of every kind (writes: writes.py).

Every endpoint answers as kube-apiserver does, errors included (a `Status` body with its code). Authentication is a
bearer token only (no session, no CSRF: these are API calls, not pages); reading needs any active user.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from karpui import health, models
from karpui.clusters import storage
from karpui.kinds.versions import at_version
from karpui.kubeapi import auth, discovery, openapi, tables, watch
from karpui.kubeapi.errors import Status, bad_request, gone, method_not_allowed, no_route, unauthorized
from karpui.kubeapi.reads import must_get, scale_of, selectors
from karpui.kubeapi.requests import Context, Target, target
from karpui.kubeapi.selectors import parse_field_selector
from provisioner.cluster.objects import Obj, key_of

View = Callable[..., HttpResponse]
# How long a list for a resourceVersion newer than the cluster's waits for it, as kube-apiserver's watch cache does.
TOO_LARGE_WAIT_SECONDS = 3.0


def endpoint(*, public: bool = False) -> Callable[[View], View]:
    """An API endpoint: token authentication, the cluster from the path, errors as Status responses."""

    def wrap(view: View) -> View:
        @csrf_exempt
        @login_not_required
        @functools.wraps(view)
        def handle(request: HttpRequest, cluster: str, **kwargs: Any) -> HttpResponse:
            try:
                user = auth.authenticate(request)
                if user is None and not public:
                    raise unauthorized()
                user = auth.impersonated(request, user)  # `kubectl --as`: a superuser may act as another user
                # Lab clusters only: a kwok or observed cluster has an API server of its own.
                row = models.Cluster.objects.filter(name=cluster, mode=models.Cluster.Mode.LAB).first()
                if row is None:
                    raise no_route()
                return view(request, Context(row, user), **kwargs)
            except Status as status:
                return status.response()

        return handle

    return wrap


def _json(body: Any, status: int = 200, content_type: str = "application/json") -> HttpResponse:
    return HttpResponse(json.dumps(body, separators=(",", ":")), status=status, content_type=content_type)


@endpoint(public=True)
def version(request: HttpRequest, ctx: Context) -> HttpResponse:
    return _json(discovery.VERSION)


@endpoint()
def paths(request: HttpRequest, ctx: Context) -> HttpResponse:
    """`/`: the paths the server serves, as kube-apiserver lists them."""
    served = ["/api", "/api/v1", "/apis", "/apis/"]
    for group, versions in discovery.groups():
        if group:
            served += [f"/apis/{group}", *(f"/apis/{group}/{version}" for version in versions)]
    for name in ("healthz", "livez", "readyz"):
        served += [f"/{name}", *(f"/{name}/{check}" for check in HEALTH_CHECKS)]
    served += ["/openapi/v2", "/openapi/v3", "/openapi/v3/", "/version"]
    return _json({"paths": sorted(served)})


@endpoint()
def not_served(request: HttpRequest, ctx: Context) -> HttpResponse:
    raise no_route()


# The checks of /livez, /readyz and /healthz, in the order they are listed: the API server answers, and so does
# the database it keeps the objects in (kube-apiserver's etcd check).
HEALTH_CHECKS: dict[str, Callable[[], bool]] = {"ping": lambda: True, "database": lambda: health.database()["ok"]}


@endpoint(public=True)
def health_check(request: HttpRequest, ctx: Context, endpoint: str, check: str | None = None) -> HttpResponse:
    """/livez, /readyz and /healthz, open to anyone, as kube-apiserver serves them: "ok", or with `?verbose` each
    check as `[+]ping ok` and "readyz check passed"; a failed check is a 500 that lists them all ("[-]database
    failed: reason withheld") and says "readyz check failed". `exclude=NAME` skips a check; /readyz/NAME runs one."""
    if check is not None:
        if check not in HEALTH_CHECKS:
            return HttpResponse("404 page not found\n", status=404, content_type="text/plain; charset=utf-8")
        if HEALTH_CHECKS[check]():
            return _text("ok")
        return _text(f"internal server error: {check} check failed\n", 500)
    excluded = set(request.GET.getlist("exclude"))
    lines, failed = [], False
    for name, passes in HEALTH_CHECKS.items():
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok")
        elif passes():
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld")  # the endpoint is public: no detail
    if excluded:
        names = ", ".join(json.dumps(name) for name in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
    if failed:
        return _text("\n".join([*lines, f"{endpoint} check failed"]) + "\n", 500)
    if "verbose" not in request.GET:
        return _text("ok")
    return _text("\n".join([*lines, f"{endpoint} check passed"]) + "\n")


def _text(body: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type="text/plain; charset=utf-8")


@endpoint()
def core_root(request: HttpRequest, ctx: Context) -> HttpResponse:
    if discovery.wants_aggregated(request.headers.get("Accept", "")):
        return _json(discovery.aggregated(core=True), content_type=discovery.AGGREGATED_TYPE)
    return _json(discovery.api_versions(request.get_host()))


@endpoint()
def groups_root(request: HttpRequest, ctx: Context) -> HttpResponse:
    if discovery.wants_aggregated(request.headers.get("Accept", "")):
        return _json(discovery.aggregated(core=False), content_type=discovery.AGGREGATED_TYPE)
    return _json(discovery.api_group_list())


@endpoint()
def group(request: HttpRequest, ctx: Context, group: str) -> HttpResponse:
    versions = dict(discovery.groups()).get(group)
    if not group or versions is None:
        raise no_route()
    return _json(discovery.api_group(group, versions))


@endpoint()
def group_version(request: HttpRequest, ctx: Context, version: str, group: str = "") -> HttpResponse:
    if version not in dict(discovery.groups()).get(group, []):
        raise no_route()
    return _json(discovery.resource_list(group, version))


@endpoint()
def openapi_v2(request: HttpRequest, ctx: Context) -> HttpResponse:
    accept = request.headers.get("Accept", "")
    if "protobuf" in accept and "json" not in accept:
        return HttpResponse(openapi.V2_PROTOBUF, content_type=openapi.V2_PROTOBUF_TYPE)
    return HttpResponse(openapi.v2_document(), content_type="application/json")


@endpoint()
def openapi_v3_index(request: HttpRequest, ctx: Context) -> HttpResponse:
    return _json(openapi.v3_index())


@endpoint()
def openapi_v3(request: HttpRequest, ctx: Context, path: str) -> HttpResponse:
    document = openapi.v3_document(path.strip("/"))
    if document is None:
        raise no_route()
    response = HttpResponse(document, content_type="application/json")
    if request.GET.get("hash"):
        response["Cache-Control"] = "public, immutable"  # the URL names this exact content
    return response


@endpoint()
def resource(request: HttpRequest, ctx: Context, version: str, rest: str, group: str = "") -> HttpResponse:
    at = target(group, version, rest)
    if request.method == "GET":
        if at.subresource:
            return _get_subresource(request, ctx, at)
        if at.name is None:
            if at.watch_path or _flag(request.GET.get("watch")):
                return _watch(request, ctx, at)
            return _list(request, ctx, at)
        if at.watch_path:
            return _watch(request, ctx, at, name=at.name)
        return _get(request, ctx, at)
    from karpui.kubeapi import writes  # the write half is large; reads never load it

    if request.method in writes.METHODS:
        return writes.handle(request, ctx, at)
    raise method_not_allowed()


# Reads --------------------------------------------------------------------------------------------------------


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def served(at: Target, obj: Obj) -> Obj:
    return at_version(obj, at.group, at.version, namespaced=at.resource.namespaced)


def respond(request: HttpRequest, ctx: Context, at: Target, obj: Obj, status: int = 200) -> HttpResponse:
    """One object, as a Table when kubectl asks for one (`kubectl get KIND NAME`)."""
    body = served(at, obj)
    if tables.wants_table(request.headers.get("Accept", "")):
        metadata = {"resourceVersion": body["metadata"].get("resourceVersion", "")}
        include = request.GET.get("includeObject", "Metadata")
        return _json(
            tables.table(at.resource, at.version, [body], ctx.cluster.clock, include=include, metadata=metadata), status
        )
    if tables.wants_metadata(request.headers.get("Accept", "")):
        return _json(tables.metadata_only(body), status)
    return _json(body, status)


def _get(request: HttpRequest, ctx: Context, at: Target) -> HttpResponse:
    return respond(request, ctx, at, must_get(ctx, at))


def _get_subresource(request: HttpRequest, ctx: Context, at: Target) -> HttpResponse:
    obj = must_get(ctx, at)
    if at.subresource == "status":
        return respond(request, ctx, at, obj)
    if at.subresource == "scale":
        return _json(scale_of(obj))
    if at.subresource == "log":
        from karpui.kubeapi import logs

        return logs.pod_log(request, ctx, obj)
    raise method_not_allowed()


def _version_param(request: HttpRequest) -> int | None:
    text = request.GET.get("resourceVersion", "")
    if text in ("", "0"):
        return None
    try:
        return int(text)
    except ValueError:
        raise bad_request(f'invalid resource version "{text}"') from None


def _encode_continue(version: int, key: tuple[str, str, str]) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": version, "start": f"{key[1]}/{key[2]}\x00"}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode().rstrip("=")


def _decode_continue(text: str) -> tuple[int, tuple[str, str]]:
    try:
        token = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        version, start = token["rv"], token["start"]
        # Go reads rv into an int64 (1e999, 1.5 or a string is an error) and the start key as a string; the key
        # ends with the NUL that makes it "just after" the last name listed, and holds none before.
        if type(version) is not int or not 0 < version < 2**63 or not isinstance(start, str):
            raise ValueError("rv or start")
        namespace, _, name = start.removesuffix("\x00").partition("/")
        if "\x00" in namespace or "\x00" in name:
            raise ValueError("start")
        return version, (namespace, name)
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise bad_request(f"continue key is not valid: {text}") from None


def _wait_for(ctx: Context, wanted: int) -> None:
    """A list for a version the cluster has not reached yet waits a little, then answers 504 as the API does."""
    deadline = time.monotonic() + TOO_LARGE_WAIT_SECONDS
    while (current := storage.current_version(ctx.cluster)) < wanted:
        if time.monotonic() >= deadline:
            raise Status(
                504,
                "Timeout",
                f"Too large resource version: {wanted}, current: {current}",
                causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                retry_after=1,
            )
        time.sleep(0.1)


def _list(request: HttpRequest, ctx: Context, at: Target) -> HttpResponse:
    resource = at.resource
    labels, fields = selectors(request, resource)
    try:
        limit = int(request.GET.get("limit") or 0)
    except ValueError:
        raise bad_request(f'invalid limit "{request.GET.get("limit")}"') from None
    wanted = _version_param(request)
    if wanted is not None:
        _wait_for(ctx, wanted)
    items, version = storage.list_objects(ctx.cluster, resource, at.namespace, fields.equal("spec.nodeName"))
    if wanted is not None and request.GET.get("resourceVersionMatch") == "Exact" and wanted != version:
        # Only the present is kept, not past states: an exact older version is gone, as after compaction.
        raise gone(f"too old resource version: {wanted} ({version})")
    items = [i for i in items if labels.matches(i["metadata"].get("labels") or {}) and fields.matches(i)]
    if request.GET.get("continue"):
        token_version, after = _decode_continue(request.GET["continue"])
        if token_version < storage.compacted_version(ctx.cluster):
            raise gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a "
                "new list without the continue parameter."
            )
        # Later pages show the objects as they are now, after the last key sent, under the first page's version
        # (so a watch from it replays anything that changed meanwhile).
        version = token_version
        items = [i for i in items if key_of(i)[1:] > after]
    page, rest = (items[:limit], items[limit:]) if limit > 0 else (items, [])
    metadata: dict[str, Any] = {"resourceVersion": str(version)}
    if rest:
        metadata["continue"] = _encode_continue(version, key_of(page[-1]))
        if not labels.terms and not fields.requirements:
            metadata["remainingItemCount"] = len(rest)
    shown = [served(at, item) for item in page]
    if tables.wants_table(request.headers.get("Accept", "")):
        include = request.GET.get("includeObject", "Metadata")
        return _json(tables.table(resource, at.version, shown, ctx.cluster.clock, include=include, metadata=metadata))
    if tables.wants_metadata(request.headers.get("Accept", "")):
        items = [tables.metadata_only(item) for item in shown]
        return _json(
            {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "items": items}
        )
    api_version = f"{resource.group}/{at.version}" if resource.group else at.version
    return _json({"kind": f"{resource.kind}List", "apiVersion": api_version, "metadata": metadata, "items": shown})


def _clock(cluster: models.Cluster) -> Callable[[], datetime]:
    """The cluster's time for a watch's table rows (AGE), read again at most once a second."""
    last: list[Any] = [0.0, cluster.clock]

    def now() -> datetime:
        if time.monotonic() - last[0] >= 1.0:
            last[:] = [time.monotonic(), models.Cluster.objects.values_list("clock", flat=True).get(pk=cluster.pk)]
        clock: datetime = last[1]
        return clock

    return now


def _watch(request: HttpRequest, ctx: Context, at: Target, name: str | None = None) -> StreamingHttpResponse:
    labels, fields = selectors(request, at.resource)
    if name is not None:  # /watch/.../NAME: one object
        fields = parse_field_selector(f"metadata.name={name}", at.resource.kind)
    try:
        # 0 or none: the server's default, as kube-apiserver takes it.
        timeout = float(request.GET.get("timeoutSeconds") or 0) or watch.DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        raise bad_request(f'invalid timeoutSeconds "{request.GET.get("timeoutSeconds")}"') from None
    since = _version_param(request)
    send_initial = request.GET.get("sendInitialEvents")
    if _flag(send_initial):
        since = None  # the current state first, whatever version was given (NotOlderThan it, being current)
    elif send_initial is not None and since is None:
        since = storage.current_version(ctx.cluster)  # sendInitialEvents=false: only what happens from now
    stream = watch.Watch(
        watch.WatchRequest(
            cluster=ctx.cluster,
            resource=at.resource,
            version=at.version,
            namespace=at.namespace,
            labels=labels,
            fields=fields,
            since=since,
            bookmarks=_flag(request.GET.get("allowWatchBookmarks")),
            initial_events_end=_flag(send_initial),
            timeout=max(timeout, 0.0),
            table=tables.wants_table(request.headers.get("Accept", "")),
            include=request.GET.get("includeObject", "Metadata"),
            now=_clock(ctx.cluster),
        ),
        watch.client_gone_check(request),
    )
    give_back = watch.SLOTS.take()  # a 429 when this process serves as many watches as it may
    response = StreamingHttpResponse(watch.Stream(iter(stream), give_back), content_type="application/json")
    response["Cache-Control"] = "no-cache, private"
    return response
