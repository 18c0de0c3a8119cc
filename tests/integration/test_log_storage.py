"""A controller's log record as the cluster's LogEntry row: a message longer than its indexed column is kept whole."""

from karpui import models
from karpui.clusters import store
from karpui.insight.eventlog import logs_all
from provisioner.controllers.context import TimedRecord
from provisioner.scheduling.logs import LogRecord

NODE = "kwok-spot-nz2jw-chopperaquamarine-1-fu1zt0yqoa-2628077981"
# Karpenter v0.37's line: 295 characters with one kwok node name; PostgreSQL refuses more than 255 in the column.
MESSAGE = f"disrupting via consolidation replace, terminating 1 nodes (1 pods) {NODE}/c-8x-amd64-linux/spot " + (
    "and replacing with spot node from types c-2x-amd64-linux, c-2x-amd64-windows, c-2x-arm64-linux, "
    "c-2x-arm64-windows, s-2x-amd64-linux and 10 other(s)"
)


def test_a_message_longer_than_its_column_is_kept_whole_and_the_rows_insert_goes_through(lab):
    store.logs_save(
        lab, [TimedRecord(1.0, LogRecord(MESSAGE, {"command-id": "c1"})), TimedRecord(2.0, LogRecord("ok"))]
    )
    rows = models.LogEntry.objects.filter(cluster=lab, time__lt="1970-01-01T00:00:03Z").order_by("time")
    assert [(row.message, row.full_message, row.fields) for row in rows] == [
        (MESSAGE[:255], MESSAGE, {"command-id": "c1"}),
        ("ok", "", {}),
    ]
    assert len(MESSAGE) == 295
    assert [row.as_dict()["message"] for row in rows] == [MESSAGE, "ok"]


def test_the_dashboards_search_finds_words_past_the_255th_character(lab):
    store.logs_save(lab, [TimedRecord(1.0, LogRecord(MESSAGE))])
    found = list(logs_all(cluster=lab, search="10 other(s)"))
    assert [record["message"] for record in found] == [MESSAGE]
