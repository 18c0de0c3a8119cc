"""The savings chart's series: step sampling of change-only cost samples, stacked per NodePool, with the baseline."""

from datetime import UTC, datetime, timedelta

from karpui.history.costs import PoolCost, by_nodepool, series

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def minutes(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def test_each_bucket_holds_the_values_carried_forward_from_the_last_sample() -> None:
    samples = [
        (minutes(0), "default", 0.2, 0.0),
        (minutes(0), "gpu", 1.0, 0.0),
        (minutes(2), "default", 0.1, 0.1),  # a consolidation saved $0.1/h
        (minutes(3), "gpu", 0.0, 0.0),  # the gpu pool scaled to nothing
    ]
    result = series(samples, minutes(0), minutes(4), points=4)

    assert result.times == [minutes(i) for i in range(4)]
    assert result.pools == {"default": [0.2, 0.2, 0.1, 0.1], "gpu": [1.0, 1.0, 1.0, 0.0]}
    assert result.cost == [1.2, 1.2, 1.1, 0.1]
    assert result.baseline == [1.2, 1.2, 1.2, 0.2]


def test_a_bucket_averages_over_time_so_a_short_lived_node_still_shows() -> None:
    samples = [(minutes(0), "default", 0.0, 0.0), (minutes(0) + timedelta(seconds=15), "default", 0.6, 0.0)]
    samples.append((minutes(0) + timedelta(seconds=45), "default", 0.0, 0.6))

    result = series(samples, minutes(0), minutes(60), points=1)

    assert result.pools == {"default": [0.005]}  # $0.6/h for 30 s of an hour
    assert result.baseline == [0.5975]  # that, plus $0.6/h saved for the last 3,555 s


def test_values_from_before_the_window_carry_in_and_new_pools_start_at_zero() -> None:
    samples = [(minutes(-30), "default", 0.3, 0.0), (minutes(2), "spot", 0.5, 0.0)]

    result = series(samples, minutes(0), minutes(4), points=2)

    assert result.times == [minutes(0), minutes(2)]
    assert result.pools == {"default": [0.3, 0.3], "spot": [0.0, 0.5]}


def test_buckets_are_at_least_a_minute_wide_and_the_last_may_be_shorter() -> None:
    result = series([(minutes(0), "default", 0.1, 0.0)], minutes(0), minutes(2) + timedelta(seconds=30), points=120)

    assert result.times == [minutes(0), minutes(1), minutes(2)]
    assert result.cost == [0.1, 0.1, 0.1]


def test_the_chart_labels_carry_the_date_only_for_windows_over_a_day() -> None:
    short = series([(minutes(0), "default", 0.25, 0.0)], minutes(0), minutes(60), points=2).as_chart()
    long = series([], minutes(0), minutes(3 * 24 * 60), points=2).as_chart()

    assert short == {
        "labels": ["12:00", "12:30"],
        "pools": [{"name": "default", "cost": [0.25, 0.25]}],
        "baseline": [0.25, 0.25],
        # The buckets' own UTC bounds, which a zoom sends back as ?from=&to=.
        "edges": ["2026-11-30T12:00:00Z", "2026-11-30T12:30:00Z", "2026-11-30T13:00:00Z"],
    }
    assert long["labels"] == ["11-29 00:00", "12-01 00:00", "12-03 00:00"]  # 2-day buckets on whole days


def claim(pool: str, price: str) -> dict:
    labels = {"karpenter.sh/nodepool": pool}
    return {"metadata": {"name": f"{pool}-{price}", "labels": labels, "annotations": {"karpui.dev/price": price}}}


def command(reason: str, phase: str, savings: float, pool: str = "default") -> dict:
    """A delete of one node priced `savings`, which completed if it Succeeded."""
    candidates = [{"node": f"{pool}-node", "nodepool": pool, "price": savings}]
    status = {"phase": phase, **({"completedAt": "2026-12-01T12:00:00Z"} if phase == "Succeeded" else {})}
    return {
        "spec": {"reason": reason, "nodepools": [pool], "savings": savings, "candidates": candidates},
        "status": status,
    }


def test_only_executed_consolidation_counts_towards_the_baseline() -> None:
    claims = [claim("default", "0.1"), claim("default", "0.05"), claim("gpu", "2.5")]
    commands = [
        command("Underutilized", "Succeeded", 0.04),
        command("Empty", "Succeeded", 0.01),
        command("Drifted", "Succeeded", 0.5),  # drift replaces for correctness: not a saving
        command("Empty", "Denied", 0.2),  # forgone, not saved
        command("Empty", "Succeeded", 0.3, pool="retired"),  # its NodePool has no claims left
    ]

    assert by_nodepool(claims, commands) == {
        "default": PoolCost(cost_per_hour=0.15000000000000002, nodeclaims=2, saved_per_hour=0.05),
        "gpu": PoolCost(cost_per_hour=2.5, nodeclaims=1, saved_per_hour=0.0),
        "retired": PoolCost(cost_per_hour=0.0, nodeclaims=0, saved_per_hour=0.3),
    }
