"""GET pods/NAME/log: `kubectl logs`, with its options (container, follow, previous, sinceSeconds, sinceTime,
timestamps, tailLines, limitBytes) checked as kube-apiserver checks PodLogOptions.

Karpenter's controller pods (karpui.karpenter) log the engine's records. Every other pod runs on a kwok node or a
static one with no kubelet behind it; kube-apiserver then relays the node's refusal, which client-go words as
`the server does not allow this method on the requested resource ( pods/log NAME)`, and so does the lab.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from karpui import models
from karpui.kubeapi import watch
from karpui.kubeapi.errors import Status, bad_request, invalid
from karpui.kubeapi.requests import Context
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.scheduling.logs import line_fields
from provisioner.sim import karpenter as face

FOLLOW_POLL_SECONDS = 0.5
CONTENT_TYPE = "text/plain"


def _int(request: HttpRequest, name: str) -> int | None:
    text = request.GET.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def _bool(request: HttpRequest, name: str) -> bool:
    text = request.GET.get(name, "false")
    if text.lower() in ("true", "1"):
        return True
    if text.lower() in ("false", "0", ""):
        return False
    raise bad_request(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def _invalid(name: str, field: str, message: str) -> Status:
    return invalid("PodLogOptions", "", name, field, message)


def pod_log(request: HttpRequest, ctx: Context, pod: Obj) -> HttpResponse:
    name = pod["metadata"]["name"]
    containers = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]
    container = request.GET.get("container") or ""
    if not container:
        if len(containers) != 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
            )
        container = containers[0]
    elif container not in containers:
        raise bad_request(f"container {container} is not valid for pod {name}")
    since_seconds, tail, limit = _int(request, "sinceSeconds"), _int(request, "tailLines"), _int(request, "limitBytes")
    since_time = request.GET.get("sinceTime")
    if since_seconds is not None and since_time:
        raise _invalid(name, "", "at most one of `sinceTime` or `sinceSeconds` may be specified")
    if since_seconds is not None and since_seconds < 1:
        raise _invalid(name, "sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0")
    if tail is not None and tail < 0:
        raise _invalid(name, "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0")
    if limit is not None and limit < 1:
        raise _invalid(name, "limitBytes", f"Invalid value: {limit}: must be greater than 0")
    follow, previous, timestamps = _bool(request, "follow"), _bool(request, "previous"), _bool(request, "timestamps")
    if previous:
        raise bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
    if not face.is_controller_pod(pod):
        # What kube-apiserver answers when the node's kubelet refuses (kwok's has no logs to give).
        raise Status(
            405,
            "MethodNotAllowed",
            f"the server does not allow this method on the requested resource ( pods/log {name})",
            name=name,
            kind="pods/log",
        )
    if (pod.get("status") or {}).get("phase") != "Running":
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
    since = _since(ctx.cluster, since_seconds, since_time)
    if follow:
        give_back = watch.SLOTS.take()  # a followed log holds a thread as a watch does
        lines = _follow(ctx.cluster, pod, since, tail, timestamps, limit, watch.client_gone_check(request))
        response = StreamingHttpResponse(watch.Stream(lines, give_back), content_type=CONTENT_TYPE)
        response["Cache-Control"] = "no-cache, private"
        return response
    text = "".join(
        f"{line}\n" for _, line in log_lines(ctx.cluster, pod, since=since, tail=tail, timestamps=timestamps)
    )
    body = text.encode()
    return HttpResponse(body[:limit] if limit is not None else body, content_type=CONTENT_TYPE)


def _since(cluster: models.Cluster, seconds: int | None, text: str | None) -> datetime | None:
    """Where `--since` or `--since-time` starts, on the cluster's clock (the lab's time, which its log is on)."""
    if seconds is not None:
        return cluster.clock - timedelta(seconds=seconds)
    if text:
        try:
            return datetime.fromtimestamp(parse_timestamp(text), UTC)
        except ValueError:
            raise bad_request(f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse') from None
    return None


def _follow(
    cluster: models.Cluster,
    pod: Obj,
    since: datetime | None,
    tail: int | None,
    timestamps: bool,
    limit: int | None,
    client_gone: Any,
) -> Iterator[bytes]:
    """`kubectl logs -f`: what is there, then each new record as the engine logs it, until the client goes, the pod
    does (a rollout replaced it: its container stopped), or `limitBytes` is reached."""
    yield b""  # the headers now, as for a watch
    sent, last = 0, 0
    deadline = time.monotonic() + watch.DEFAULT_TIMEOUT_SECONDS
    key = (pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"].get("uid"))
    first = True
    while time.monotonic() < deadline:
        batch = list(
            log_lines(cluster, pod, since=since, tail=tail if first else None, after_id=last, timestamps=timestamps)
        )
        first = False
        for entry_id, line in batch:
            data = f"{line}\n".encode()
            if limit is not None and sent + len(data) >= limit:
                yield data[: limit - sent]
                return
            sent += len(data)
            last = entry_id
            yield data
        if not batch:
            if client_gone() or not _still_running(cluster, key):
                return
            time.sleep(FOLLOW_POLL_SECONDS)


def _still_running(cluster: models.Cluster, key: tuple[str, str, Any]) -> bool:
    row = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", namespace=key[0], name=key[1]).first()
    return (
        row is not None
        and row.body["metadata"].get("uid") == key[2]
        and not row.body["metadata"].get("deletionTimestamp")
    )


def log_lines(
    cluster: models.Cluster,
    pod: Obj,
    *,
    since: datetime | None = None,
    tail: int | None = None,
    after_id: int = 0,
    timestamps: bool = False,
) -> Iterator[tuple[int, str]]:
    """A controller pod's log: the engine's records since the pod started (a rollout's new pod starts a new log),
    each as Karpenter writes it (a JSON object per line, zap's field order), with its id. `since` and `tail` are
    `kubectl logs --since` and `--tail`; `after_id` is where a follow left off."""
    started = (pod.get("status") or {}).get("startTime") or pod["metadata"].get("creationTimestamp")
    entries = models.LogEntry.objects.filter(cluster=cluster, id__gt=after_id)
    if started:
        entries = entries.filter(time__gte=datetime.fromtimestamp(parse_timestamp(started), tz=cluster.clock.tzinfo))
    if since is not None:
        entries = entries.filter(time__gte=since)
    if tail is not None:
        rows = list(reversed(entries.order_by("-time", "-id")[:tail])) if tail > 0 else []
    else:
        rows = entries.order_by("time", "id").iterator(chunk_size=2000)
    for entry in rows:
        yield entry.id, log_line(entry, timestamps=timestamps)


def log_line(entry: models.LogEntry, *, timestamps: bool = False) -> str:
    """One record as Karpenter's JSON logger writes it: level, time (to the millisecond), logger, message, then its
    fields. With `timestamps`, kubelet's RFC 3339 time in front, as `kubectl logs --timestamps` shows."""
    moment = entry.time
    record: dict[str, Any] = {
        "level": entry.level,
        "time": f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z",
        "logger": entry.logger,
        "message": entry.text,
        **line_fields(entry.fields),
    }
    line = json.dumps(record, separators=(",", ":"))
    if timestamps:
        line = f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}000Z {line}"
    return line
