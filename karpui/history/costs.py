"""Cost history: a sample per NodePool whenever its cost changes, and the stacked series the savings chart draws."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, Min

from karpui import models
from karpui.history import timeseries, trends
from provisioner.disruption.accounting import claim_price, saving_by_nodepool
from provisioner.lab import Lab

# A NodePool whose cost has not changed for a day still gets a sample, so pruning never removes the row that the
# oldest chart window carries forward from.
KEYFRAME = timedelta(days=1)
MAX_POINTS = timeseries.MAX_POINTS


@dataclass(frozen=True)
class PoolCost:
    cost_per_hour: float
    nodeclaims: int
    saved_per_hour: float

    def as_state(self) -> list[float | int]:
        return [round(self.cost_per_hour, 6), self.nodeclaims, round(self.saved_per_hour, 6)]


def by_nodepool(claims: Iterable[dict[str, Any]], commands: Iterable[dict[str, Any]]) -> dict[str, PoolCost]:
    """Each NodePool's cost now and the $/h its executed consolidation commands saved."""
    cost: dict[str, float] = {}
    count: dict[str, int] = {}
    saved: dict[str, float] = {}
    for claim in claims:
        pool = (claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
        cost[pool] = cost.get(pool, 0.0) + claim_price(claim)
        count[pool] = count.get(pool, 0) + 1
    for command in commands:
        for pool, saving in saving_by_nodepool(command).items():
            saved[pool] = saved.get(pool, 0.0) + saving
    return {
        pool: PoolCost(cost.get(pool, 0.0), count.get(pool, 0), saved.get(pool, 0.0))
        for pool in sorted(cost.keys() | saved.keys())
    }


def breakdown(claims: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """NodeClaims counted by NodePool, capacity type and zone (the overview's tables)."""
    by: dict[str, Counter[str]] = {"nodepool": Counter(), "capacity": Counter(), "zone": Counter()}
    for claim in claims:
        labels = claim["metadata"].get("labels") or {}
        by["nodepool"][labels.get("karpenter.sh/nodepool", "?")] += 1
        by["capacity"][labels.get("karpenter.sh/capacity-type", "?")] += 1
        by["zone"][labels.get("topology.kubernetes.io/zone", "?")] += 1
    return {key: dict(sorted(counts.items())) for key, counts in by.items()}


class Moment(tuple):
    """One entry of a Recorder's timeline: the (time, pools) pair `karpui.clusters.saves.save` passes to `record` with
    every other entry, carrying what karpui.history.trends observed at that moment as `seen`."""

    seen: trends.Observation

    def __new__(cls, time: datetime, pools: dict[str, PoolCost], seen: trends.Observation) -> Moment:
        moment = super().__new__(cls, (time, pools))
        moment.seen = seen
        return moment


class Recorder:
    """A lab observer: each NodePool's cost as of every moment the lab settled after NodeClaims or commands
    changed, so a run that advances 30 minutes still dates each change when it happened; and, at the same moments
    and whenever pods or nodes changed, what karpui.history.trends samples (pending pods, nodes, starts, disruptions)."""

    def __init__(self) -> None:
        self.timeline: list[tuple[datetime, dict[str, PoolCost]]] = []
        self._seen: tuple[int, int] | None = None
        self._pools: dict[str, PoolCost] = {}
        self._trends = trends.Observer()
        self._gauges: dict[tuple[str, str], float] | None = None

    def __call__(self, running: Lab) -> None:
        versions = running.store.kind_versions
        seen = (versions.get("NodeClaim", 0), versions.get("DisruptionCommand", 0))
        costs_changed = seen != self._seen
        if costs_changed:
            self._seen = seen
            self._pools = by_nodepool(running.store.list("NodeClaim"), running.store.list("DisruptionCommand"))
        observed = self._trends(running)
        if costs_changed or observed.gauges != self._gauges or observed.latencies or observed.disrupted:
            self._gauges = observed.gauges
            self.timeline.append(Moment(datetime.fromtimestamp(running.now, UTC), self._pools, observed))


def record(
    cluster: models.Cluster, timeline: list[tuple[datetime, dict[str, PoolCost]]], claims: list[dict[str, Any]]
) -> None:
    """Keep `cluster.cost_state` (counts now, last sample per NodePool) and write a sample, dated to its minute,
    for each NodePool whose cost changed in `timeline` (oldest first; the last entry is now). Within a minute the
    last value wins. The caller saves the cluster, in the same transaction."""
    state: dict[str, Any] = dict(cluster.cost_state or {})
    state["by"] = breakdown(claims)
    last: dict[str, Any] = dict(state.get("last") or {})
    rows: dict[tuple[str, datetime], list[float | int]] = {}
    for moment, pools in timeline:
        minute = moment.replace(second=0, microsecond=0)
        current = {pool: cost.as_state() for pool, cost in pools.items()}
        for gone in last.keys() - current.keys():
            # One zero sample ends a deleted NodePool's series; after it, the pool is forgotten.
            if last.pop(gone)["value"] != [0.0, 0, 0.0]:
                rows[gone, minute] = [0.0, 0, 0.0]
        for pool, value in current.items():
            previous = last.get(pool)
            stale = previous is None or datetime.fromisoformat(previous["time"]) + KEYFRAME <= minute
            if previous is None or previous["value"] != value or stale:
                rows[pool, minute] = value
                last[pool] = {"time": minute.isoformat(), "value": value}
    if rows:
        models.CostSample.objects.bulk_create(
            [
                models.CostSample(
                    cluster=cluster,
                    time=minute,
                    nodepool=pool,
                    cost_per_hour=value[0],
                    nodeclaims=int(value[1]),
                    saved_per_hour=value[2],
                )
                for (pool, minute), value in rows.items()
            ],
            update_conflicts=True,
            unique_fields=["cluster", "nodepool", "time"],
            update_fields=["cost_per_hour", "nodeclaims", "saved_per_hour"],
        )
    now = timeline[-1][0].replace(second=0, microsecond=0) if timeline else None
    pruned = state.get("pruned")
    if now is not None and (pruned is None or datetime.fromisoformat(pruned) + timedelta(hours=1) <= now):
        cutoff = now - timedelta(days=settings.KARPUI_COST_HISTORY_DAYS) - KEYFRAME
        models.CostSample.objects.filter(cluster=cluster, time__lt=cutoff).delete()
        state["pruned"] = now.isoformat()
    state["last"] = last
    cluster.cost_state = state
    moments = [(entry[0], entry.seen) for entry in timeline if isinstance(entry, Moment)]
    if moments and timeline[-1][0] > moments[-1][0]:
        # The run ends later than its last change: the gauges hold until then (for their daily keyframe).
        moments.append((timeline[-1][0], replace(moments[-1][1], latencies=(), disrupted={})))
    trends.record(cluster, moments)
    if now is not None and state.get("pruned") == now.isoformat():
        trends.prune(cluster, now)  # with the cost samples, once an hour


@dataclass(frozen=True)
class Series:
    """The chart's data per bucket (`times` are bucket starts): each NodePool's average $/h (stacked), their total,
    and the baseline without consolidation."""

    times: list[datetime]
    pools: dict[str, list[float | None]]  # None (here and below) for a bucket from before the first sample
    baseline: list[float | None]
    cost: list[float | None]
    labels: list[str]
    edges: list[str] = field(default_factory=list)  # the buckets' bounds (UTC), for a zoom to some of them

    def as_chart(self) -> dict[str, Any]:
        """The JSON the page's script hands to Chart.js; times in UTC, with the date only when the span needs it."""
        return {
            "labels": self.labels,
            "edges": self.edges,
            "pools": [{"name": name or "(none)", "cost": values} for name, values in self.pools.items()],
            "baseline": self.baseline,
        }


def series(
    samples: Iterable[tuple[datetime, str, float, float]],
    start: datetime,
    end: datetime,
    points: int = MAX_POINTS,
    first: datetime | None = None,
) -> Series:
    """Average each NodePool's $/h over about `points` buckets on whole multiples of their width (the Trends
    charts' timeseries.Buckets.aligned, so a sample lies in the bucket its label names), so the area under the
    chart is the money spent and a node that lived 40 s still shows. `samples` is (time, nodepool, cost, saved)
    ordered by time, starting with each NodePool's last sample at or before `start` so values carry in; before the
    first sample nothing was known, so a bucket wholly before it is None and one it falls in is averaged over the
    time since (`first`, the first sample's time; the first of `samples` when not given)."""
    samples = list(samples)
    buckets = timeseries.Buckets.aligned(start, end, points)
    sums = timeseries.integrate(
        ((time, pool, (cost, saved)) for time, pool, cost, saved in samples), buckets, dimensions=2
    )
    known = first if first is not None else (samples[0][0] if samples else end)
    seconds = buckets.seconds_since(known)
    count = buckets.count
    cost = {pool: [row[0] for row in rows] for pool, rows in sorted(sums.items())}
    saved = [sum(rows[i][1] for rows in sums.values()) for i in range(count)]

    def average(total: float, i: int) -> float | None:
        return round(total / seconds[i], 6) if seconds[i] else None

    pools = {pool: [average(v, i) for i, v in enumerate(values)] for pool, values in cost.items()}
    totals = [average(sum(values[i] for values in cost.values()), i) for i in range(count)]
    baseline = [average(sum(values[i] for values in cost.values()) + saved[i], i) for i in range(count)]
    return Series(
        times=buckets.times,
        pools=pools,
        baseline=baseline,
        cost=totals,
        labels=buckets.labels(),
        edges=timeseries.edge_texts(buckets),
    )


def history(cluster: models.Cluster, start: datetime, end: datetime, points: int = MAX_POINTS) -> Series:
    """The chart series from the stored samples: each NodePool's last sample at or before `start`, then the window.
    Four queries, whatever the window."""
    start = timeseries.Buckets.aligned(start, end, points).start  # the first bucket's, so values carry into all of it
    samples = models.CostSample.objects.filter(cluster=cluster)
    latest = {
        row["nodepool"]: row["last"]
        for row in samples.filter(time__lte=start).values("nodepool").annotate(last=Max("time"))
    }
    fields = ("time", "nodepool", "cost_per_hour", "saved_per_hour")
    seed = sorted(
        (
            row
            for row in samples.filter(nodepool__in=latest, time__in=set(latest.values())).values_list(*fields)
            if latest[row[1]] == row[0]
        ),
        key=lambda row: row[0],
    )
    window = samples.filter(time__gt=start, time__lte=end).order_by("time", "nodepool").values_list(*fields)
    first = samples.aggregate(first=Min("time"))["first"]
    return series([*seed, *window], start, end, points, first=first or end)
