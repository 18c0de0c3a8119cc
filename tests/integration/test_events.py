"""The Events & logs page's Logger filter offers each of the cluster's loggers once."""

from datetime import UTC, datetime, timedelta

from karpui import models
from tests.integration.test_dashboard import logged_in, user

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
LOGGERS = ("controller.provisioner", "controller.disruption", "controller.nodeclaim.lifecycle")


def log_records(lab, count: int) -> None:
    """`count` log records, one a second from T0, the loggers taking turns (so each logger has many records)."""
    models.LogEntry.objects.bulk_create(
        models.LogEntry(
            cluster=lab,
            time=T0 + timedelta(seconds=i),
            level="INFO",
            logger=LOGGERS[i % 3],
            message=f"record {i:03d}",
            fields={},
        )
        for i in range(count)
    )


def test_the_logger_filter_offers_each_logger_once_in_order(lab):
    """The options came from values_list("logger").distinct() under LogEntry's Meta.ordering (time, id), which put
    time and id in the DISTINCT: one option per record, 3,602 of them for 3 loggers at 2,000 pending pods."""
    log_records(lab, 30)
    response = logged_in(user()).get("/events/")

    assert response.context["loggers"] == [
        "controller.disruption",
        "controller.nodeclaim.lifecycle",
        "controller.provisioner",
    ]
    form = response.content.decode().split('<select name="logger">')[1].split("</select>")[0]
    assert form == (
        '<option value="">any</option><option>controller.disruption</option>'
        "<option>controller.nodeclaim.lifecycle</option><option>controller.provisioner</option>"
    )


def test_the_logger_filter_lists_only_this_clusters_loggers(lab):
    log_records(lab, 3)
    other = models.Cluster.objects.create(name="b")
    models.LogEntry.objects.create(cluster=other, time=T0, level="INFO", logger="controller.other", message="m")

    assert logged_in(user()).get("/events/").context["loggers"] == [
        "controller.disruption",
        "controller.nodeclaim.lifecycle",
        "controller.provisioner",
    ]
