"""A controller's log record as the cluster's LogEntry row: a message longer than its column is cut to it."""

from karpui import models
from karpui.clusters import store
from provisioner.controllers.context import TimedRecord
from provisioner.scheduling.logs import LogRecord


def test_a_message_longer_than_its_column_is_cut_to_it_and_the_rows_insert_goes_through(lab):
    """Karpenter v0.37's "disrupting via consolidation replace, terminating 1 nodes (1 pods) <node>/<type>/<capacity>
    and replacing with ..." passes 255 characters with one kwok node name; PostgreSQL refuses a longer value."""
    node = "kwok-spot-nz2jw-chopperaquamarine-1-fu1zt0yqoa-2628077981"
    message = f"disrupting via consolidation replace, terminating 1 nodes (1 pods) {node}/c-8x-amd64-linux/spot " + (
        "and replacing with spot node from types c-2x-amd64-linux, c-2x-amd64-windows, c-2x-arm64-linux, "
        "c-2x-arm64-windows, s-2x-amd64-linux and 10 other(s)"
    )
    store.logs_save(
        lab, [TimedRecord(1.0, LogRecord(message, {"command-id": "c1"})), TimedRecord(2.0, LogRecord("ok"))]
    )
    rows = models.LogEntry.objects.filter(cluster=lab, time__lt="1970-01-01T00:00:03Z").order_by("time")
    assert [(row.message, row.fields) for row in rows] == [(message[:255], {"command-id": "c1"}), ("ok", {})]
    assert len(message) == 295
