"""The Trends charts' buckets lie on whole multiples of their width (whole minutes for 1-minute buckets, :00, :03,
... for 3-minute ones), each value sits in the bucket its sample's time falls in, and buckets from before the
cluster's first sample are empty (null: Chart.js leaves a gap), not 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from karpui import models
from karpui.history import trend_series
from karpui.history.timeseries import Buckets
from karpui.insight import selectors

CLOCK = datetime(2026, 3, 2, 18, 34, 16, tzinfo=UTC)


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return CLOCK.replace(hour=hour, minute=minute, second=second)


def labels(start: datetime, count: int, width: timedelta = timedelta(minutes=1)) -> list[str]:
    return [f"{start + width * i:%H:%M}" for i in range(count)]


@pytest.fixture
def young_cluster(lab):
    """A cluster first seen at 18:30 with a node and 3 pods pending, which start at 18:31 after 20 s; the clock is
    18:34:16, so "auto" spans the last 10 minutes, from 18:24:16."""
    lab.clock = CLOCK
    lab.save(update_fields=["clock"])
    models.TrendSample.objects.bulk_create(
        models.TrendSample(cluster=lab, time=time, series=series, key=key, value=value)
        for time, series, key, value in [
            (at(18, 30), "nodes", "default", 1.0),
            (at(18, 30), "pending", "", 3.0),
            (at(18, 31), "pending", "", 1.0),  # the 3 pods waited the first 20 s of 18:31
            (at(18, 32), "pending", "", 0.0),
        ]
    )
    models.ActivitySample.objects.create(cluster=lab, time=at(18, 31), started=3, latency={"80": 3})
    return lab


def test_auto_buckets_are_whole_minutes_and_empty_before_the_first_sample(young_cluster):
    """They were 18:24:16-18:25:16 and so on, labelled 18:24: 18:29's bucket held 16 s of 18:30's pods (0.8), and
    the minutes before the cluster's first sample were drawn as 0."""
    overview = selectors.trends_overview(young_cluster, "auto")
    chart = overview["chart"]

    assert chart["labels"] == labels(at(18, 24), 11)  # 18:24 ... 18:34, the minute still going on
    assert chart["pending"] == [None] * 6 + [3.0, 1.0, 0.0, 0.0, 0.0]
    assert chart["nodes"] == [{"name": "default", "values": [None] * 6 + [1.0] * 5}]
    assert chart["latency"] == {"p50": [None] * 7 + [80, None, None, None], "p95": [None] * 7 + [80, None, None, None]}
    assert chart["started"] == [0] * 7 + [3, 0, 0, 0]
    assert chart["disruptions"] == []


def test_a_fixed_window_starts_on_a_whole_bucket_and_ends_at_the_clock(young_cluster):
    chart = selectors.trends_overview(young_cluster, "1h")["chart"]

    assert chart["labels"] == labels(at(17, 34), 61)  # 17:34:16 back from the clock lies in 17:34's bucket
    assert chart["pending"] == [None] * 56 + [3.0, 1.0, 0.0, 0.0, 0.0]


def test_a_disruption_counts_in_its_own_minute_and_no_rate_is_drawn_before_the_first_sample(young_cluster):
    models.ActivitySample.objects.create(cluster=young_cluster, time=at(18, 33), disrupted={"Empty": 2})

    chart = selectors.trends_overview(young_cluster, "auto")["chart"]

    # 2 nodes in the 18:33 bucket; the last bucket's 16 s are known and had none.
    assert chart["disruptions"] == [{"name": "Empty", "values": [None] * 6 + [0, 0, 0, 2, 0]}]


def test_a_bucket_the_first_sample_falls_inside_averages_only_the_time_since_it(young_cluster):
    """3-minute buckets on :00, :03, ...: 18:30's sample opens the bucket from 18:30, which holds 3 pods for its
    first minute, 1 for its second and none for its third; the bucket before it has no data."""
    history = trend_series.history(young_cluster, at(18, 26), at(18, 35), points=3)

    assert history.labels == ["18:24", "18:27", "18:30", "18:33"]
    assert history.pending == [None, None, round((3.0 + 1.0 + 0.0) / 3, 3), 0.0]
    assert history.nodes == {"default": [None, None, 1.0, 1.0]}


def test_a_cluster_with_no_samples_has_only_empty_buckets(lab):
    lab.clock = CLOCK
    lab.save(update_fields=["clock"])

    chart = selectors.trends_overview(lab, "auto")["chart"]

    assert (chart["labels"], chart["pending"], chart["nodes"]) == (labels(at(18, 24), 11), [None] * 11, [])


MINUTE, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)


@pytest.mark.parametrize(
    ("back", "least", "width", "first", "count"),
    [
        (10 * MINUTE, MINUTE, MINUTE, at(18, 24), 11),  # the user's "auto": from 18:24:16, whole minutes from 18:24
        (6 * HOUR, MINUTE, 3 * MINUTE, at(12, 33), 121),  # 3-minute buckets on :00, :03, ...
        (DAY, MINUTE, 12 * MINUTE, at(18, 24) - DAY, 121),  # 12-minute buckets on :00, :12, :24, ...
        (137 * MINUTE, MINUTE, 2 * MINUTE, at(16, 16), 70),  # 1.14 minutes a bucket: 2, the next that divides an hour
        (7 * DAY, HOUR, 2 * HOUR, at(18, 0) - 7 * DAY, 85),  # a week from the hourly rollup: on even hours
        (25 * DAY, HOUR, 6 * HOUR, at(18, 0) - 25 * DAY, 101),  # 5 h a bucket: 6 h, on 00, 06, 12 and 18 UTC
    ],
)
def test_buckets_lie_on_whole_multiples_of_a_round_width(back, least, width, first, count):
    buckets = Buckets.aligned(CLOCK - back, CLOCK, 120, least)

    assert (buckets.width, buckets.start, buckets.count, buckets.end) == (width, first, count, CLOCK)
    assert buckets.edges[:-1] == tuple(first + width * i for i in range(count))
    assert buckets.edges[-2] < CLOCK == buckets.edges[-1]  # the last bucket ends at the clock, cut short


def test_the_savings_chart_has_the_trends_buckets_whole_minutes_and_nothing_before_the_first_sample(young_cluster):
    """The Savings chart cut its buckets from the window's start (18:24:16–18:25:16 labelled 18:24) and drew the
    minutes before the first cost sample as $0: the misalignment the Trends chart had."""
    models.CostSample.objects.create(
        cluster=young_cluster, time=at(18, 30), nodepool="default", cost_per_hour=0.5, saved_per_hour=0.0, nodeclaims=1
    )
    models.CostSample.objects.create(
        cluster=young_cluster,
        time=at(18, 32, 30),
        nodepool="default",
        cost_per_hour=1.0,
        saved_per_hour=0.25,
        nodeclaims=2,
    )

    chart = selectors.savings_overview(young_cluster, "auto")["chart"]

    assert chart["labels"] == labels(at(18, 24), 11)
    # 18:32 holds 30 s at $0.5/h and 30 s at $1/h; the last bucket is 18:34:00–18:34:16 at $1/h.
    assert chart["pools"] == [{"name": "default", "cost": [None] * 6 + [0.5, 0.5, 0.75, 1.0, 1.0]}]
    assert chart["baseline"] == [None] * 6 + [0.5, 0.5, 0.875, 1.25, 1.25]


def test_disruptions_are_counted_per_bucket_and_the_chart_says_the_buckets_width(young_cluster):
    """3 nodes in a 1-minute bucket were drawn as 180 "nodes per hour"."""
    models.ActivitySample.objects.create(cluster=young_cluster, time=at(18, 33), disrupted={"Empty": 3})

    chart = selectors.trends_overview(young_cluster, "auto")["chart"]

    assert chart["disruptions"] == [{"name": "Empty", "values": [None] * 6 + [0, 0, 0, 3, 0]}]
    assert chart["bucket"] == "1 minute"
    assert selectors.trends_overview(young_cluster, "30d")["chart"]["bucket"] == "6 hours"


def test_a_chart_zooms_to_a_span_of_its_buckets(young_cluster):
    from tests.integration.test_dashboard import logged_in, user

    client = logged_in(user())
    whole = client.get("/trends/").context["chart"]
    assert whole["edges"][0] == "2026-03-02T18:24:00Z" and whole["edges"][-1] == "2026-03-02T18:34:16Z"
    zoomed = client.get("/trends/", {"from": "2026-03-02T18:30:00Z", "to": "2026-03-02T18:33:00Z"})
    chart = zoomed.context["chart"]
    assert chart["labels"] == ["18:30", "18:31", "18:32"]
    assert chart["pending"] == [3.0, 1.0, 0.0]
    assert zoomed.context["window"] == "auto"  # kept for the way back out
    body = zoomed.content.decode()
    assert 'hx-get="/trends/?window=auto&amp;from=2026-03-02T18%3A30%3A00Z&amp;to=2026-03-02T18%3A33%3A00Z"' in body
    assert 'id="zoom-out"' in body
    polled = client.get(
        "/trends/?window=auto&from=2026-03-02T18%3A30%3A00Z&to=2026-03-02T18%3A33%3A00Z", HTTP_HX_REQUEST="true"
    )
    assert polled.status_code == 200 and "18:33" not in polled.content.decode().split("trend-series")[1]
    savings = client.get("/savings/", {"from": "2026-03-02T18:30:00Z", "to": "2026-03-02T18:33:00Z"})
    assert savings.context["chart"]["labels"] == ["18:30", "18:31", "18:32"]
    for query, said in (
        (
            {"from": "yesterday", "to": "2026-03-02T18:33:00Z"},
            "from: must be a UTC time such as 2026-12-05T03:00:00Z, got 'yesterday'",
        ),
        ({"from": "2026-03-02T18:30:00Z"}, "to: a zoom needs both from and to"),
        (
            {"from": "2026-03-02T18:30:00Z", "to": "2026-03-02T18:30:30Z"},
            "to: must be from a minute to 31 days after from",
        ),
    ):
        refused = client.get("/trends/", query)
        assert (refused.status_code, refused.content.decode()) == (400, said + "\n")
