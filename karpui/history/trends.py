"""Trends beyond cost: pending pods, nodes per NodePool, pod start latency and disruptions, sampled as the lab runs
and read back as chart series (karpui.history.trend_series). The shape is karpui.history.costs': a lab observer sees the cluster each time it settles,
gauges are written (dated to their minute) only when they change, and buckets are time-weighted averages.

Gauges are kept per minute as cost is, so a month of a busy cluster stays a bounded read, but unlike cost's "the
minute's last value" a minute the gauge changed in holds its time-weighted average (pods wait for seconds; the last
value of a minute would hide every one of them), and the next minute the value it went on at. Each hour, once the
recorder has moved past it, is rolled up into a TrendHour (its gauges' averages, latency counts and disruptions),
which windows longer than a day read for the whole hours they hold.

What is counted:

* pending pods: pods waiting for a node, the overview's figure (unbound, PodScheduled=False with reason
  Unschedulable);
* nodes per NodePool: Node objects by their `karpenter.sh/nodepool` label ("" for nodes of no NodePool);
* pod start latency: for each pod seen Running for the first time, the whole seconds from its
  `metadata.creationTimestamp` to the `lastTransitionTime` of its Ready=True condition (Karpenter's
  `karpenter_pods_startup_duration_seconds`: creation to running). It spans the whole wait: the provisioning batch,
  the NodeClaim's launch, registration and initialization, binding. Kubernetes timestamps are whole seconds, so
  the latencies are too; a chart bucket's p50 and p95 are exact (nearest rank) over the pods started in it;
* disruptions: nodes taken by each "disrupting node(s)" record the controllers log (the disruption queue's commands
  when they start, expiration's forced deletes), by reason (the command's first word: Empty, Underutilized,
  Drifted, Manual, Expired).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, Min

from karpui import models
from karpui.history import timeseries
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.lab import Lab

PENDING, NODES = "pending", "nodes"
# As karpui.history.costs: a gauge that has not changed for a day still gets a sample, so pruning never removes the row the
# oldest chart window carries forward from.
KEYFRAME = timedelta(days=1)
STATE_KEY = "karpui.trends"  # the observer's place in the lab's state: where the last observation left off
DISRUPTING = "disrupting node(s)"
PERCENTILES = (50, 95)
HOUR = timeseries.HOUR
# Windows longer than this are charted in buckets of whole hours, read from the hourly rollup (TrendHour): a 30-day
# window then reads ~720 rows instead of ~21,600 per-minute samples. Shorter windows read the minutes.
ROLLED_UP_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class Observation:
    """What the observer saw at one settled moment: the gauges then, and what happened since the last one."""

    pending: int
    nodes: dict[str, int]
    latencies: tuple[int, ...] = ()  # one per pod first seen Running, in seconds
    disrupted: dict[str, int] = field(default_factory=dict)  # nodes, by reason

    @property
    def gauges(self) -> dict[tuple[str, str], float]:
        return {(PENDING, ""): float(self.pending), **{(NODES, pool): float(n) for pool, n in self.nodes.items()}}


def _ready_since(pod: Obj) -> str | None:
    """When a Running pod's Ready condition last turned True, or None."""
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("lastTransitionTime") if condition.get("status") == "True" else None
    return None


def _waiting(pod: Obj) -> bool:
    """Unbound and marked Unschedulable: the pods the overview calls pending."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _reason(fields: dict[str, Any]) -> str:
    """The disruption reason of a "disrupting node(s)" record: its command's first word ("Underutilized/abc: ...",
    "Expired: delete: [...]")."""
    command = str(fields.get("command") or "")
    return command.split("/", 1)[0].split(":", 1)[0].strip() or "Unknown"


class Observer:
    """Called by karpui.history.costs.Recorder each time the lab settles: what it sees then (the Recorder keeps the moments
    at which a gauge changed or something happened).

    A pod is counted as started once: its Ready transition is later than the second of the last observation, or
    in that same second but not counted then. The last observation's second and the pods counted in it are kept in
    the lab's state, so runs (each tick, each `karp advance`) and writes between them (a pod can start on a static
    node inside a `karp apply`) never count a pod twice or miss one. Only pods written since the last observation
    (a resourceVersion above the one it saw) are looked at.
    """

    def __init__(self) -> None:
        self._versions: tuple[int, int] | None = None
        self._gauges: tuple[int, dict[str, int]] | None = None
        self._logs_seen = 0

    def __call__(self, running: Lab) -> Observation:
        store = running.store
        versions = (store.kind_versions.get("Pod", 0), store.kind_versions.get("Node", 0))
        if versions != self._versions or self._gauges is None:
            pending = sum(
                1
                for phase in ("", "Pending")
                for pod in store.list("Pod", fields={"status.phase": phase})
                if _waiting(pod)
            )
            nodes = Counter(
                (node["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "") for node in store.list("Node")
            )
            self._gauges = (pending, dict(sorted(nodes.items())))
        latencies = self._started(running) if versions[0] != (self._versions or (None,))[0] else ()
        self._versions = versions
        disrupted: Counter[str] = Counter()
        for entry in running.logs[self._logs_seen :]:
            if entry.record.message == DISRUPTING:
                fields = dict(entry.record.fields)
                disrupted[_reason(fields)] += int(fields.get("disrupted-node-count") or 1)
        self._logs_seen = len(running.logs)
        return Observation(self._gauges[0], self._gauges[1], latencies, dict(sorted(disrupted.items())))

    def _started(self, running: Lab) -> tuple[int, ...]:
        now = math.floor(running.now)
        mark = running.state.get(STATE_KEY) or {"version": 0, "second": now, "counted": []}
        counted = set(mark["counted"])
        found, this_second = [], set(counted) if mark["second"] == now else set()
        # All pods in the store's kept order (the phase index would sort its keys on every call), oldest check first.
        for pod in running.store.list("Pod") if running.store.resource_version > mark["version"] else ():
            meta = pod["metadata"]
            if int(meta.get("resourceVersion") or 0) <= mark["version"]:
                continue  # unchanged since the last observation, which saw it as it is
            since = _ready_since(pod)
            if since is None:
                continue
            second = int(parse_timestamp(since))
            if second < mark["second"] or (second == mark["second"] and meta.get("uid") in counted):
                continue
            found.append(max(second - int(parse_timestamp(meta["creationTimestamp"])), 0))
            if second == now:
                this_second.add(meta.get("uid"))
        running.state[STATE_KEY] = {
            "version": running.store.resource_version,
            "second": now,
            "counted": sorted(uid for uid in this_second if uid),
        }
        return tuple(sorted(found))


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


MINUTE = timedelta(minutes=1)


class _Gauges:
    """Turns the observed values of each gauge into its samples: per minute in which it changed, the minute's
    time-weighted average (a sample at the minute) and the value it ends the minute at (a sample at the next
    minute, replaced by that minute's own average if it changes again). So samples are at most one a minute per
    gauge, as cost's are, and a chart bucket's average is still exact: five pods pending for 6 s of a minute make
    that minute's sample 0.5. A gauge's state (its value, the minute being filled) lives in `cluster.cost_state`."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = {name: dict(gauge) for name, gauge in state.items()}
        self.rows: dict[tuple[str, datetime], float] = {}

    def _write(self, name: str, time: datetime, value: float) -> None:
        self.rows[name, time] = round(value, 6)
        self.state[name]["written"] = time.isoformat()

    def _close(self, name: str, gauge: dict[str, Any]) -> None:
        """End the minute the gauge changed in: its average, and the value it carries on with."""
        minute = datetime.fromisoformat(gauge["minute"])
        since = datetime.fromisoformat(gauge["since"])
        integral = gauge["integral"] + gauge["value"] * (minute + MINUTE - since).total_seconds()
        self._write(name, minute, integral / 60)
        self._write(name, minute + MINUTE, gauge["value"])
        gauge["minute"] = None

    def observe(self, moment: datetime, values: dict[str, float]) -> None:
        minute = _minute(moment)
        for name in values.keys() | self.state.keys():
            # A gauge not seen is 0 (a NodePool with no nodes); a new one starts from 0.
            gauge = self.state.setdefault(name, {"value": 0.0, "minute": None, "written": None})
            if gauge["minute"] is not None and datetime.fromisoformat(gauge["minute"]) < minute:
                self._close(name, gauge)
            value = values.get(name, 0.0)
            if value != gauge["value"]:
                if gauge["minute"] is None:
                    gauge.update(minute=minute.isoformat(), since=minute.isoformat(), integral=0.0)
                since = datetime.fromisoformat(gauge["since"])
                gauge["integral"] += gauge["value"] * (moment - since).total_seconds()
                gauge.update(since=moment.isoformat(), value=value)
            elif (
                gauge["minute"] is None
                and gauge["value"]
                and gauge["written"]
                and datetime.fromisoformat(gauge["written"]) + KEYFRAME <= minute
            ):
                # Unchanged for a day: a keyframe, so pruning never removes the sample a window carries in from.
                self._write(name, minute, gauge["value"])

    def finish(self, moment: datetime) -> dict[str, Any]:
        """Write the minute still being filled as its average so far (the next run completes it), forget gauges
        that are 0 with nothing pending, and return the state to keep."""
        for name, gauge in self.state.items():
            if gauge["minute"] is not None:
                minute = datetime.fromisoformat(gauge["minute"])
                since = datetime.fromisoformat(gauge["since"])
                elapsed = (moment - minute).total_seconds()
                integral = gauge["integral"] + gauge["value"] * (moment - since).total_seconds()
                if elapsed > 0:
                    self.rows[name, minute] = round(integral / elapsed, 6)
        return {n: g for n, g in self.state.items() if g["value"] or g["minute"] is not None}


def record(cluster: models.Cluster, moments: Sequence[tuple[datetime, Observation]]) -> None:
    """Write what `moments` (oldest first) saw: each gauge's samples (_Gauges: per minute it changed in, its
    average and the value it goes on at), and per minute the pods started and nodes disrupted, added to what the
    minute already holds. Keeps its state (each gauge's value and open minute, the activity minute being filled)
    in `cluster.cost_state`; the caller saves the cluster in the same transaction. Samples older than the history
    are pruned with the cost's."""
    state: dict[str, Any] = dict((cluster.cost_state or {}).get("trends") or {})
    gauges = _Gauges(state.get("gauges") or {})
    minutes: dict[datetime, dict[str, Any]] = {}
    open_minute = state.get("minute")
    if open_minute:
        minutes[datetime.fromisoformat(open_minute["time"])] = {
            "started": open_minute["started"],
            "latency": Counter(open_minute["latency"]),
            "disrupted": Counter(open_minute["disrupted"]),
        }
    touched: set[datetime] = set()
    for moment, seen in moments:
        minute = _minute(moment)
        gauges.observe(moment, {f"{series}/{key}": value for (series, key), value in seen.gauges.items()})
        if seen.latencies or seen.disrupted:
            bucket = minutes.setdefault(minute, {"started": 0, "latency": Counter(), "disrupted": Counter()})
            bucket["started"] += len(seen.latencies)
            bucket["latency"].update(str(s) for s in seen.latencies)
            bucket["disrupted"].update(seen.disrupted)
            touched.add(minute)
    state["gauges"] = gauges.finish(moments[-1][0]) if moments else gauges.state
    if gauges.rows:
        models.TrendSample.objects.bulk_create(
            [
                models.TrendSample(
                    cluster=cluster, time=time, series=name.partition("/")[0], key=name.partition("/")[2], value=value
                )
                for (name, time), value in gauges.rows.items()
            ],
            update_conflicts=True,
            unique_fields=["cluster", "series", "key", "time"],
            update_fields=["value"],
        )
    if touched:
        models.ActivitySample.objects.bulk_create(
            [
                models.ActivitySample(
                    cluster=cluster,
                    time=minute,
                    started=minutes[minute]["started"],
                    latency=dict(sorted(minutes[minute]["latency"].items(), key=lambda kv: int(kv[0]))),
                    disrupted=dict(sorted(minutes[minute]["disrupted"].items())),
                )
                for minute in sorted(touched)
            ],
            update_conflicts=True,
            unique_fields=["cluster", "time"],
            update_fields=["started", "latency", "disrupted"],
        )
    newest = max(minutes) if minutes else None
    if moments and (newest is None or newest < _minute(moments[-1][0])):
        newest = None  # the run moved past the open minute: the next activity starts a new one
    state["minute"] = (
        {
            "time": newest.isoformat(),
            "started": minutes[newest]["started"],
            "latency": dict(minutes[newest]["latency"]),
            "disrupted": dict(minutes[newest]["disrupted"]),
        }
        if newest is not None
        else None
    )
    state.pop("last", None)  # the state's shape before gauges were kept per minute
    if moments:
        # Every minute before the last moment's is final now (the open minute is that one): its hours can be rolled.
        until = hour_of(_minute(moments[-1][0]))
        if state.get("rolled") != until.isoformat():
            roll_up(cluster, until)
            state["rolled"] = until.isoformat()
    cluster.cost_state = {**(cluster.cost_state or {}), "trends": state}


def gauges(cluster: models.Cluster, start: datetime, end: datetime) -> list[tuple[datetime, str, float]]:
    """(time, "series/key", value) ordered by time: each gauge's last sample at or before `start` (dated `start`,
    the value it carries in with), then the window. Three queries."""
    samples = models.TrendSample.objects.filter(cluster=cluster)
    latest = {
        (row["series"], row["key"]): row["last"]
        for row in samples.filter(time__lte=start).values("series", "key").annotate(last=Max("time"))
    }
    fields = ("time", "series", "key", "value")
    seed = sorted(
        (
            row
            for row in samples.filter(time__in=set(latest.values())).values_list(*fields)
            if latest.get((row[1], row[2])) == row[0]
        ),
        key=lambda row: row[0],
    )
    window = samples.filter(time__gt=start, time__lte=end).order_by("time", "series", "key").values_list(*fields)
    return [
        *((start, f"{series}/{key}", value) for _, series, key, value in seed),
        *((time, f"{series}/{key}", value) for time, series, key, value in window),
    ]


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def roll_up(cluster: models.Cluster, until: datetime) -> None:
    """Write a TrendHour for each whole hour before `until` (on the hour) that has none yet, from the hour after the
    last one written, or for a history recorded before rollups existed, from its first sample's hour. Only hours
    whose samples are final may be rolled up: the recorder calls this with the hour its open minute is in."""
    last = models.TrendHour.objects.filter(cluster=cluster).aggregate(last=Max("time"))["last"]
    if last is not None:
        since = last + HOUR
    else:
        firsts = [
            samples.objects.filter(cluster=cluster).aggregate(first=Min("time"))["first"]
            for samples in (models.TrendSample, models.ActivitySample)
        ]
        if not any(firsts):
            return
        since = hour_of(min(first for first in firsts if first is not None))
    if since >= until:
        return
    hours = timeseries.Buckets.on_hours(since, until, int((until - since) / HOUR))
    seconds = hours.seconds()
    sums = timeseries.integrate(((t, key, (v,)) for t, key, v in gauges(cluster, since, until)), hours, 1)
    rows = [
        models.TrendHour(
            cluster=cluster, time=time, gauges={key: hourly[i][0] / seconds[i] for key, hourly in sums.items()}
        )
        for i, time in enumerate(hours.times)
    ]
    latency: list[Counter[str]] = [Counter() for _ in rows]
    disrupted: list[Counter[str]] = [Counter() for _ in rows]
    activity = models.ActivitySample.objects.filter(cluster=cluster, time__gte=since, time__lt=until)
    for time, started, waited, reasons in activity.values_list("time", "started", "latency", "disrupted"):
        index = hours.index(time)
        if index is not None:
            rows[index].started += started
            latency[index].update(waited)
            disrupted[index].update(reasons)
    for row, waited, reasons in zip(rows, latency, disrupted, strict=True):
        row.latency = dict(sorted(waited.items(), key=lambda kv: int(kv[0])))
        row.disrupted = dict(sorted(reasons.items()))
    models.TrendHour.objects.bulk_create(rows, batch_size=1000)


def prune(cluster: models.Cluster, now: datetime) -> None:
    """Drop samples older than the history kept (KARPUI_COST_HISTORY_DAYS, plus a keyframe's day)."""
    cutoff = now - timedelta(days=settings.KARPUI_COST_HISTORY_DAYS) - KEYFRAME
    models.TrendSample.objects.filter(cluster=cluster, time__lt=cutoff).delete()
    models.ActivitySample.objects.filter(cluster=cluster, time__lt=cutoff).delete()
    models.TrendHour.objects.filter(cluster=cluster, time__lt=cutoff).delete()


__all__ = ["Observation", "Observer", "prune", "record", "roll_up"]
