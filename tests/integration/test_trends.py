"""Trends beyond cost: pending pods and nodes per NodePool sampled to the second when they change, pod start latency
and disruptions per minute, read back as time-weighted buckets, percentiles and rates on the Trends page."""

import json
from collections import Counter
from datetime import timedelta

import pytest
from django.test import override_settings

from karpui import models
from karpui.clusters import lab as karplab
from karpui.history import trend_series, trends
from karpui.history.timeseries import HOUR
from tests.integration.test_dashboard import logged_in, user
from tests.karp import EXAMPLES, ok

SLOW_NODES = """\
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
spec:
  nodeRegistrationDelay: 20s
"""


@pytest.fixture
def busy_two_minutes(lab):
    """From the start of a minute M: 5 pods wait 21 s for a node that takes 20 s to register; at M+40s 7 more come,
    2 fit at once and 5 wait 21 s for a second node. The lab runs on to M+2min. Returns M."""
    lab.refresh_from_db()
    karplab.advance("lab", 60 - lab.clock.second - lab.clock.microsecond / 1e6)  # to the very start of a minute
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("apply", "-f", "-", stdin=SLOW_NODES)
    ok("scale", "deploy/inflate", "--replicas", "5")
    lab.refresh_from_db()
    start = lab.clock.replace(second=0, microsecond=0)
    ok("advance", "40s")
    ok("scale", "deploy/inflate", "--replicas", "12")
    ok("advance", "80s")
    return start


def gauges(lab, since):
    rows = models.TrendSample.objects.filter(cluster=lab, time__gte=since).order_by("time", "series", "key")
    return [(int((r.time - since).total_seconds()), r.series, r.key, r.value) for r in rows]


def test_pending_pods_and_nodes_are_sampled_as_each_minutes_average_and_the_value_it_ends_on(lab, busy_two_minutes):
    m = busy_two_minutes
    assert gauges(lab, m) == [
        # minute M: the first node from M+21s; 5 pods pending for 21 s, 0 for 19 s, 5 again for 20 s
        (0, "nodes", "default", 0.65),
        (0, "pending", "", round((5 * 21 + 5 * 20) / 60, 6)),
        # minute M+1: the second node at M+61s, so 1 node for 1 s and 2 for 59 s; the 5 pods wait 1 s more
        (60, "nodes", "default", round((1 + 2 * 59) / 60, 6)),
        (60, "pending", "", round(5 / 60, 6)),
        # what each goes on at
        (120, "nodes", "default", 2.0),
        (120, "pending", "", 0.0),
    ]
    ok("advance", "10m")  # nothing changes: nothing is written
    assert len(gauges(lab, m)) == 6


def test_each_started_pod_is_counted_in_its_minute_with_its_seconds_from_creation_to_running(lab, busy_two_minutes):
    m = busy_two_minutes
    rows = models.ActivitySample.objects.filter(cluster=lab, time__gte=m).order_by("time")
    assert [((r.time - m).seconds // 60, r.started, r.latency, r.disrupted) for r in rows] == [
        (0, 7, {"0": 2, "21": 5}, {}),  # the two that fit on the first node started at once
        (1, 5, {"21": 5}, {}),
    ]


def test_each_disrupted_node_is_counted_by_reason_in_the_minute_its_command_started(lab):
    from tests.integration.test_savings import consolidated_lab

    name = consolidated_lab()  # one node, removed by emptiness
    command = models.KubeObject.objects.get(kind="DisruptionCommand", name=name).body
    started = command["status"]["startedAt"]
    [row] = models.ActivitySample.objects.exclude(disrupted={})
    assert (f"{row.time:%Y-%m-%dT%H:%M}", row.disrupted) == (started[:16], {"Empty": 1})
    ok("advance", "60s")  # past the minute the node went in
    nodes = [row[3] for row in gauges(lab, lab.created_at - timedelta(days=1)) if row[1] == "nodes"]
    assert nodes[-1] == 0.0 and all(0 < value <= 1 for value in nodes[:-1])  # the node's minutes, then none
    lab.refresh_from_db()
    assert "nodes/default" not in lab.cost_state["trends"]["gauges"]  # a series at 0 is forgotten


def test_the_history_averages_gauges_over_each_bucket_and_takes_percentiles_and_rates(
    lab, busy_two_minutes, django_assert_num_queries
):
    m = busy_two_minutes
    with django_assert_num_queries(5):
        history = trend_series.history(lab, m, m + timedelta(minutes=3), points=3)

    assert history.labels == [f"{m + timedelta(minutes=i):%H:%M}" for i in range(3)]
    # pod-seconds waiting / bucket seconds: 5 pods for 21 s and 5 for 20 s, then 5 for the first second of M+1
    assert history.pending == [round((5 * 21 + 5 * 20) / 60, 3), round(5 / 60, 3), 0.0]
    assert history.nodes == {"default": [round(39 / 60, 3), round((1 + 2 * 59) / 60, 3), 2.0]}
    assert history.latency == {"p50": [21, 21, None], "p95": [21, 21, None]}
    assert history.started == [7, 5, 0]
    assert history.disruptions == {}


def test_disruptions_are_the_nodes_each_bucket_took(lab):
    from tests.integration.test_savings import consolidated_lab

    consolidated_lab()
    lab.refresh_from_db()
    minute = lab.clock.replace(second=0, microsecond=0)
    history = trend_series.history(lab, minute - timedelta(minutes=3), minute + timedelta(minutes=1), points=4)
    # One node in the last one-minute bucket (not "60 an hour"). The cluster's first sample is 2 minutes back.
    assert history.disruptions == {"Empty": [None, None, 0, 1]}


def test_pods_that_start_inside_a_write_are_counted_once_and_a_rollouts_new_pods_again(lab):
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "nodes.yaml"))
    ok("apply", "-f", str(EXAMPLES / "static-nodes" / "web.yaml"))  # bound and started inside the apply
    ok("advance", "1s")
    ok("advance", "1s")
    assert sum(models.ActivitySample.objects.values_list("started", flat=True)) == 4
    ok("rollout", "restart", "deploy/web")
    ok("advance", "60s")
    latency = Counter()
    for row in models.ActivitySample.objects.all():
        latency.update(row.latency)
    assert latency == {"0": 8}
    nodes = [row[1:] for row in gauges(lab, lab.created_at - timedelta(days=1)) if row[1] == "nodes"]
    assert nodes[-1] == ("nodes", "", 3.0)  # static nodes belong to no NodePool


def test_percentiles_are_exact_nearest_ranks():
    seconds = Counter({1: 50, 10: 45, 30: 5})
    assert [trend_series.percentile(seconds, p) for p in (50, 95, 96, 100)] == [1, 10, 30, 30]
    assert trend_series.percentile(Counter(), 50) is None


def test_the_trends_page_draws_four_charts_and_refreshes_its_live_section(lab, busy_two_minutes):
    client = logged_in(user())
    response = client.get("/trends/?window=1h")
    page = response.content.decode()
    chart = response.context["chart"]

    assert len(chart["labels"]) == 60 and [s["name"] for s in chart["nodes"]] == ["default"]
    assert chart["disruptions"] == [] and sum(chart["started"]) == 12
    assert json.loads(page.split('id="trend-series" type="application/json">')[1].split("</script>")[0]) == chart
    assert 'id="pending-now">0<' in page and 'id="nodes-now">2<' in page and "nodes now: default 2" in page
    assert 'id="latency-window">21s / 21s<' in page and "12 pods started in the window" in page
    assert 'id="disrupted-window">0<' in page
    for trend in ("pending", "nodes", "latency", "disruptions"):
        assert f'data-trend="{trend}"' in page
    assert "vendor/chartjs/chart.umd.min.js" in page and "karpui/trends.js" in page
    live = client.get("/trends/?window=1h", HTTP_HX_REQUEST="true").content.decode()
    assert live.lstrip().startswith('<section id="trends" hx-get="/trends/?window=1h" hx-trigger="every 10s"')
    refused = client.get("/trends/?window=bogus")
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "window: must be one of auto, 1h, 6h, 24h, 7d, 30d, got 'bogus'\n",
    )


def test_gauges_get_a_daily_sample_and_old_samples_are_pruned_with_the_cost_history(lab, busy_two_minutes):
    # A 1-day history over 3 lab days (each simulated day costs seconds): the same boundary as 2 days over 4.
    with override_settings(KARPUI_COST_HISTORY_DAYS=1):
        for _ in range(3):
            ok("advance", "24h")
    lab.refresh_from_db()
    kept = lab.clock.replace(second=0, microsecond=0) - timedelta(days=2)  # the history, plus a keyframe's day
    assert models.TrendSample.objects.filter(time__lt=kept).count() == 0
    assert models.ActivitySample.objects.count() == 0  # the busy minutes were three days ago
    assert not models.TrendSample.objects.filter(series="pending").exists()  # none pending since: no samples needed
    nodes = list(models.TrendSample.objects.filter(series="nodes").values_list("value", flat=True))
    assert len(nodes) >= 3 and set(nodes) == {2.0}  # a keyframe a day carries the two nodes on


def _three_days_of_history(lab):
    """Samples as a busy cluster writes them, over three days to the lab's clock: pending pods changing every 7
    minutes, a NodePool's nodes every 11, a second NodePool for a day only, and a minute of pod starts (several
    latencies each) and disruptions every 5 minutes. Returns the clock."""
    lab.refresh_from_db()
    end = lab.clock
    minute = end.replace(second=0, microsecond=0)
    gauges, activity = [], []
    for step in range(3 * 24 * 60 + 30):
        time = minute - timedelta(minutes=step)
        if step % 7 == 0:
            gauges.append(("pending", "", round((step * 13 % 17) + (step % 3) / 3, 6), time))
        if step % 11 == 0:
            gauges.append(("nodes", "general", float(20 + step % 9), time))
        if 24 * 60 <= step < 48 * 60 and step % 13 == 0:
            gauges.append(("nodes", "gpu", float(step % 4 if step < 47 * 60 else 0), time))
        if step % 5 == 0:
            latency = {str(s): 1 + (step + s) % 4 for s in (1, 2, 5 + step % 20, 30 + step % 50)}
            disrupted = {"Underutilized": step % 3, "Empty": 1} if step % 15 == 0 else {}
            activity.append((time, sum(latency.values()), latency, disrupted))
    models.TrendSample.objects.bulk_create(
        models.TrendSample(cluster=lab, series=s, key=k, value=v, time=t) for s, k, v, t in gauges
    )
    models.ActivitySample.objects.bulk_create(
        models.ActivitySample(cluster=lab, time=t, started=n, latency=latency, disrupted=d)
        for t, n, latency, d in activity
    )
    return end


def test_a_long_window_read_from_the_hourly_rollup_equals_the_same_window_read_by_the_minute(
    lab, django_assert_max_num_queries
):
    """Issue 15: /trends/ over 30 days read every minute's samples (250-300 ms at 21,600 rows). Windows longer than
    a day now read whole hours from TrendHour: the series, p50/p95 latencies included (a rolled-up hour keeps its
    pods' counts per second), must be the ones the minutes give."""
    end = _three_days_of_history(lab)
    trends.roll_up(lab, end.replace(minute=0, second=0, microsecond=0))
    for start in (end - timedelta(days=3), end - timedelta(days=2, hours=5, minutes=17)):
        first_whole_hour = start.replace(minute=0, second=0, microsecond=0) + HOUR  # start is never on the hour
        whole_hours = (end.replace(minute=0, second=0, microsecond=0) - first_whole_hour) / HOUR
        assert len(trend_series._rolled_hours(lab, start, end)) == whole_hours  # every whole hour from the rollup
        # Nine, or eight when the buckets start (on the hour before `start`) before the first sample: with no value
        # to carry in, Django skips that read. Which it is depends on the minute the test runs at.
        with django_assert_max_num_queries(9):
            rolled = trend_series.history(lab, start, end)
        hours = list(models.TrendHour.objects.all())
        models.TrendHour.objects.all().delete()
        by_minute = trend_series.history(lab, start, end)
        models.TrendHour.objects.bulk_create(hours)

        assert rolled == by_minute
        assert len(rolled.labels) == len(rolled.pending) <= 121
        assert rolled.totals["started"] > 0 and rolled.latency["p95"][1] is not None


def test_the_recorder_rolls_up_each_hour_once_it_is_over(lab, busy_two_minutes):
    m = busy_two_minutes
    lab.refresh_from_db()
    now = lab.clock.replace(minute=0, second=0, microsecond=0)
    assert set(models.TrendHour.objects.values_list("time", flat=True)) <= {now - HOUR}  # only hours that are over
    ok("advance", "3h")
    lab.refresh_from_db()
    now = lab.clock.replace(minute=0, second=0, microsecond=0)
    first = m.replace(minute=0)
    hours = list(models.TrendHour.objects.values_list("time", "started", "latency"))
    assert [time for time, _, _ in hours] == [first + timedelta(hours=i) for i in range(int((now - first) / HOUR))]
    latency = Counter()
    for _, _, waited in hours:
        latency.update(waited)
    assert sum(started for _, started, _ in hours) == 12 and latency == {"0": 2, "21": 10}
