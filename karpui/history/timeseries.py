"""Buckets for the dashboard's charts: a window cut into equal buckets, and step functions (a value that holds from
one sample to the next) integrated over each, so a chart's bucket is the time-weighted average of what it shows."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MAX_POINTS = 120
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Bucket widths that divide an hour or a day, so aligned buckets start at round times (a 6-hour window's 3-minute
# buckets at :00, :03, ...; a month's 6-hour ones at 00, 06, 12 and 18 UTC). Wider ones are whole days.
ROUND_WIDTHS = (
    *(timedelta(minutes=m) for m in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)),
    *(timedelta(hours=h) for h in (1, 2, 3, 4, 6, 8, 12, 24)),
)


@dataclass(frozen=True)
class Buckets:
    """At most `points` equal buckets from `start` to `end`, each at least a minute (samples are per minute)."""

    start: datetime
    end: datetime
    width: timedelta
    edges: tuple[datetime, ...]  # one more than there are buckets; the last is `end`

    @classmethod
    def over(cls, start: datetime, end: datetime, points: int = MAX_POINTS) -> Buckets:
        width = max((end - start) / max(points, 1), timedelta(minutes=1))
        count = max(math.ceil((end - start) / width), 1)
        return cls(start, end, width, tuple([start + width * i for i in range(count)] + [end]))

    @classmethod
    def on_hours(cls, start: datetime, end: datetime, points: int = MAX_POINTS) -> Buckets:
        """Buckets of whole hours whose inner edges fall on the hour (a 30-day window: 6 h buckets at 00, 06, 12
        and 18 UTC), so every whole hour lies in one bucket and an hourly rollup sums into it exactly; the first
        and last buckets are cut by `start` and `end`. At most `points` + 1 buckets."""
        width = timedelta(hours=max(math.ceil((end - start) / max(points, 1) / HOUR), 1))
        epoch = datetime(1970, 1, 1, tzinfo=start.tzinfo)
        edge = epoch + width * math.ceil((start - epoch) / width)
        inner = []
        while edge < end:
            if edge > start:
                inner.append(edge)
            edge += width
        return cls(start, end, width, (start, *inner, end))

    @classmethod
    def aligned(cls, start: datetime, end: datetime, points: int = MAX_POINTS, least: timedelta = MINUTE) -> Buckets:
        """Buckets of the narrowest round width (ROUND_WIDTHS, at least `least`) that cuts [start, end] into about
        `points`, on whole multiples of it since the epoch: the first starts at or before `start`, the last holds
        `end` and is cut short there. So a sample dated to its minute lies in the bucket its label names, and a
        minute-wide bucket is a whole minute. At most `points` + 2 buckets."""
        wanted = max((end - start) / max(points, 1), least)
        width = next((w for w in ROUND_WIDTHS if w >= wanted), DAY * math.ceil(wanted / DAY))
        epoch = datetime(1970, 1, 1, tzinfo=start.tzinfo)
        first = epoch + width * ((start - epoch) // width)
        count = max(math.ceil((end - first) / width), 1)
        return cls(first, end, width, tuple([first + width * i for i in range(count)] + [end]))

    @property
    def count(self) -> int:
        return len(self.edges) - 1

    @property
    def times(self) -> list[datetime]:
        """Each bucket's start."""
        return list(self.edges[:-1])

    def seconds(self) -> list[float]:
        """Each bucket's length (the last may be shorter), never zero."""
        return [max((self.edges[i + 1] - self.edges[i]).total_seconds(), 1e-9) for i in range(self.count)]

    def seconds_since(self, moment: datetime) -> list[float]:
        """Each bucket's seconds from `moment` on: all of a bucket that starts by then, 0 for one that ends by then."""
        return [max((self.edges[i + 1] - max(self.edges[i], moment)).total_seconds(), 0.0) for i in range(self.count)]

    def index(self, moment: datetime) -> int | None:
        """The bucket a moment falls in, or None outside [start, end]."""
        if moment < self.start or moment > self.end:
            return None
        return min(bisect_right(self.edges, moment) - 1, self.count - 1)

    def labels(self) -> list[str]:
        """Bucket starts as the charts print them (UTC): with the date only when the span needs it."""
        layout = "%H:%M" if self.edges[-2] - self.edges[0] <= timedelta(days=1) else "%m-%d %H:%M"
        return [t.strftime(layout) for t in self.times]


def edge_texts(buckets: Buckets) -> list[str]:
    """The buckets' bounds in UTC, as a chart sends them back for a zoom (`?from=...&to=...`)."""
    return [edge.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for edge in buckets.edges]


def width_text(width: timedelta) -> str:
    """A bucket's width as a chart's axis says it: "1 minute", "3 minutes", "6 hours", "2 days"."""
    minutes = int(width.total_seconds() // 60)
    for size, unit in ((24 * 60, "day"), (60, "hour"), (1, "minute")):
        if minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{minutes} minutes"


def integrate(
    samples: Iterable[tuple[datetime, str, Sequence[float]]], buckets: Buckets, dimensions: int
) -> dict[str, list[list[float]]]:
    """Per key and per bucket, each dimension's value × seconds: a sample's values hold from its time until the
    key's next sample. `samples` are ordered by time and start with each key's last sample at or before the
    window's start, so values carry in. Divide by Buckets.seconds() for the averages."""
    start, end, count, edges = buckets.start, buckets.end, buckets.count, buckets.edges
    sums: dict[str, list[list[float]]] = {}
    value: dict[str, Sequence[float]] = {}

    def spread(since: datetime, until: datetime) -> None:
        first = max(bisect_right(edges, since) - 1, 0)
        for index in range(first, count):
            if edges[index] >= until:
                break
            overlap = (min(until, edges[index + 1]) - max(since, edges[index])).total_seconds()
            for key, values in value.items():
                rows = sums.get(key)
                if rows is None:
                    rows = sums[key] = [[0.0] * dimensions for _ in range(count)]
                row = rows[index]
                for d in range(dimensions):
                    row[d] += values[d] * overlap

    cursor = start
    for time, key, values in samples:
        if time > cursor:
            spread(cursor, min(time, end))
            cursor = min(time, end)
        value[key] = values
    spread(cursor, end)
    return sums
