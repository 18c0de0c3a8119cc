"""Trends read back as the Trends page's chart series: gauges in time-weighted buckets (per minute, or from the hourly
rollups for windows past a day), pod start latency percentiles per bucket, and disruptions per hour. The samples are
written by karpui.history.trends as the lab runs."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Min, Q

from karpui import models
from karpui.history import timeseries
from karpui.history.trends import HOUR, NODES, PENDING, PERCENTILES, ROLLED_UP_AFTER, gauges, hour_of


def percentile(counts: Counter[int], share: int) -> int | None:
    """The nearest-rank percentile of a multiset of whole seconds, or None when it is empty."""
    total = sum(counts.values())
    if not total:
        return None
    rank, seen = max(math.ceil(share / 100 * total), 1), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return max(counts)


@dataclass(frozen=True)
class Trends:
    """The four charts' series over one window's buckets."""

    labels: list[str]
    pending: list[float | None]  # None (here and below) for a bucket from before the cluster's first sample
    nodes: dict[str, list[float | None]]
    latency: dict[str, list[int | None]]  # p50, p95 per bucket; None where no pod started
    started: list[int]
    disruptions: dict[str, list[int | None]]  # nodes disrupted in each bucket, by reason
    totals: dict[str, Any]
    bucket: str = ""  # the buckets' width, as the disruptions chart says it: "1 minute", "6 hours"
    edges: list[str] = dataclasses.field(default_factory=list)  # the buckets' bounds (UTC), one more than buckets

    def as_chart(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "edges": self.edges,  # a chart zooms to a span of buckets: from one's start to another's end
            "pending": self.pending,
            "nodes": [{"name": name or "(no NodePool)", "values": values} for name, values in self.nodes.items()],
            "latency": self.latency,
            "started": self.started,
            "disruptions": [{"name": name, "values": values} for name, values in self.disruptions.items()],
            "bucket": self.bucket,
        }


@dataclass(frozen=True, slots=True)
class RolledHour:
    """A TrendHour as the chart reads it (tuples, not model instances: a month is 720 of them)."""

    time: datetime
    gauges: dict[str, float]
    latency: dict[str, int]
    disrupted: dict[str, int]


def _rolled_hours(cluster: models.Cluster, start: datetime, end: datetime) -> list[RolledHour]:
    """The rolled-up whole hours inside [start, end], the run of consecutive ones that ends last (hours before
    rollups began, or a gap, are read by the minute instead). One query."""
    first = hour_of(start) + (HOUR if start > hour_of(start) else timedelta(0))
    rows = models.TrendHour.objects.filter(cluster=cluster, time__gte=first, time__lt=hour_of(end)).order_by("time")
    hours = [RolledHour(*row) for row in rows.values_list("time", "gauges", "latency", "disrupted")]
    run = len(hours)
    while run > 1 and hours[run - 2].time == hours[run - 1].time - HOUR:
        run -= 1
    return hours[run - 1 :] if hours else []


def _gauge_stream(
    cluster: models.Cluster, start: datetime, end: datetime, hours: list[RolledHour]
) -> list[tuple[datetime, str, float]]:
    """The gauges' samples for `integrate`: by the minute before and after the rolled-up hours, and each rolled-up
    hour as its averages held for the hour (every gauge known by then: one absent from the hour was 0 in it)."""
    if not hours:
        return gauges(cluster, start, end)
    first, last = hours[0].time, hours[-1].time + HOUR
    before = gauges(cluster, start, first)
    known = {key for _, key, _ in before}
    rolled = []
    for hour in hours:
        known.update(hour.gauges)
        rolled.extend((hour.time, key, hour.gauges.get(key, 0.0)) for key in sorted(known))
    return [*before, *rolled, *gauges(cluster, last, end)]


def _per_second(total: float, seconds: float) -> float | None:
    """A bucket's average over its known seconds, or None (no data: the chart leaves a gap) when it has none."""
    return round(total / seconds, 3) if seconds else None


def history(cluster: models.Cluster, start: datetime, end: datetime, points: int = timeseries.MAX_POINTS) -> Trends:
    """The chart series for [start, end]: gauges as time-weighted averages per bucket, latency percentiles over the
    pods started in each bucket, disruptions as the nodes each bucket took. Buckets are aligned (timeseries.Buckets.aligned), so
    the first may start before `start`; before the cluster's first sample nothing was seen, so a bucket wholly
    before it is None and one it falls in is averaged over the time since. A window longer than a day has buckets of
    whole hours and reads the hourly rollup for the hours it holds whole, the minutes only for the rest: the same
    figures (a rolled-up hour's latencies are its pods' counts per second, so percentiles stay exact), from at most
    nine queries whatever the window."""
    rolled_up = end - start > ROLLED_UP_AFTER
    buckets = timeseries.Buckets.aligned(start, end, points, least=HOUR if rolled_up else timeseries.MINUTE)
    start = buckets.start
    hours = _rolled_hours(cluster, start, end) if rolled_up else []
    # Gauges come first: a pod starts on a node, and a node is a gauge sample, so activity never precedes them.
    first = models.TrendSample.objects.filter(cluster=cluster).aggregate(first=Min("time"))["first"]
    seconds = buckets.seconds_since(first or end)
    stream = _gauge_stream(cluster, start, end, hours)
    sums = timeseries.integrate(((t, key, (v,)) for t, key, v in stream), buckets, 1)
    averages = {key: [_per_second(row[0], seconds[i]) for i, row in enumerate(rows)] for key, rows in sums.items()}
    pending = averages.pop(f"{PENDING}/", [_per_second(0.0, s) for s in seconds])
    nodes = {key.partition("/")[2]: values for key, values in sorted(averages.items()) if key.startswith(NODES)}
    merged: list[dict[str, int]] = [{} for _ in range(buckets.count)]  # seconds (as stored) -> pods, per bucket
    disrupted: dict[str, list[int]] = {}
    minutes = Q(time__gte=start, time__lte=end)
    if hours:
        minutes &= Q(time__lt=hours[0].time) | Q(time__gte=hours[-1].time + HOUR)
    activity = models.ActivitySample.objects.filter(minutes, cluster=cluster).values_list(
        "time", "latency", "disrupted"
    )
    for time, latency, reasons in [*activity, *((h.time, h.latency, h.disrupted) for h in hours)]:
        index = buckets.index(time)
        if index is None:
            continue
        bucket = merged[index]
        for waited, pods in latency.items():
            bucket[waited] = bucket.get(waited, 0) + pods
        for reason, n in reasons.items():
            if reason not in disrupted:
                disrupted[reason] = [0] * buckets.count
            disrupted[reason][index] += n
    latencies = [Counter({int(s): n for s, n in bucket.items()}) for bucket in merged]
    everything: Counter[int] = Counter()
    for counts in latencies:
        everything.update(counts)
    return Trends(
        edges=timeseries.edge_texts(buckets),
        labels=buckets.labels(),
        pending=pending,
        nodes=nodes,
        latency={f"p{share}": [percentile(c, share) for c in latencies] for share in PERCENTILES},
        started=[sum(c.values()) for c in latencies],
        # Counted per bucket, never scaled to a rate: 3 nodes in a minute were drawn as "180 per hour".
        disruptions={
            reason: [n if seconds[i] else None for i, n in enumerate(counts)]
            for reason, counts in sorted(disrupted.items())
        },
        totals={
            "started": sum(everything.values()),
            **{f"p{share}": percentile(everything, share) for share in PERCENTILES},
            "disrupted": {reason: sum(counts) for reason, counts in sorted(disrupted.items())},
            "disrupted_nodes": sum(sum(counts) for counts in disrupted.values()),
        },
        bucket=timeseries.width_text(buckets.width),
    )


__all__ = ["Trends", "history", "percentile"]
