"""The Events & logs page: two tables with a pager each (a page number past either's last is a 400 naming it),
events grouped by reason unless asked otherwise, and live polls that fetch only what is newer than the page: a 204
when nothing is, the new log records alone to put above the others, all under 50 KB."""

from datetime import timedelta

from karpui import models
from karpui.insight import eventlog
from tests.integration.test_dashboard import logged_in, user
from tests.integration.test_events import T0, log_records


def pod_events(lab, count: int, reason: str = "Nominated", start: int = 0) -> None:
    """`count` events, each on a pod of its own and one a second from T0 (+`start` s)."""
    bodies = [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"pod-{i:03d}.{reason.lower()}", "namespace": "default", "uid": f"event-{reason}-{i}"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": f"pod-{i:03d}"},
            "type": "Normal",
            "reason": reason,
            "message": f"{reason.lower()} {i:03d}",
            "count": 1,
            "lastTimestamp": f"{T0 + timedelta(seconds=i):%Y-%m-%dT%H:%M:%SZ}",
        }
        for i in range(start, start + count)
    ]
    models.KubeObject.objects.bulk_create(
        models.KubeObject(
            cluster=lab, kind="Event", namespace="default", name=b["metadata"]["name"], uid=b["metadata"]["uid"], body=b
        )
        for b in bodies
    )


def test_events_group_by_reason_by_default_and_each_table_pages_on_its_own(lab):
    pod_events(lab, 60)
    pod_events(lab, 3, reason="FailedScheduling", start=100)
    log_records(lab, 120)
    client = logged_in(user())

    first = client.get("/events/")
    assert first.context["group"] == "reason"
    assert [(e["reason"], e["events"], e["total_objects"]) for e in first.context["events"]] == [
        ("FailedScheduling", 3, 3),
        ("Nominated", 60, 60),
    ]
    assert (first.context["logs_page"], first.context["logs_pages"], len(first.context["logs"])) == (1, 3, 50)
    every = client.get("/events/", {"group": "none", "events_page": "2", "logs_page": "3"})
    # 63 events one a row, newest first: the second page holds the 13 oldest; the logs' third page its 20 oldest.
    assert [e["message"] for e in every.context["events"]] == [f"nominated {i:03d}" for i in range(12, -1, -1)]
    assert [entry["message"] for entry in every.context["logs"]] == [f"record {i:03d}" for i in range(19, -1, -1)]
    body = every.content.decode()
    assert (
        '<p class="pager" id="events-pager"><a href="?group=none&amp;events_page=1&amp;logs_page=3">← newer</a> '
        "events page 2 of 2 </p>"
    ) in body
    assert (
        '<p class="pager" id="logs-pager"><a href="?group=none&amp;logs_page=2&amp;events_page=2">← newer</a> '
        "logs page 3 of 3 </p>"
    ) in body
    assert 'id="events-poll"' not in body and 'id="logs-poll"' not in body  # older pages do not move
    past = client.get("/events/", {"logs_page": "4"})
    assert (past.status_code, past.content.decode()) == (400, "logs_page: 4 is past the last page, 3\n")
    assert client.get("/events/", {"group": "namespace"}).status_code == 400


def test_an_events_poll_is_a_204_until_something_newer_is_seen(lab):
    pod_events(lab, 5)
    client = logged_in(user())
    page = client.get("/events/")
    since = page.context["events_since"]
    assert since == f"{T0 + timedelta(seconds=4):%Y-%m-%dT%H:%M:%SZ}"
    poll = {"part": "events", "since": since}
    assert client.get("/events/", poll, HTTP_HX_REQUEST="true").status_code == 204
    pod_events(lab, 1, reason="FailedScheduling", start=10)
    fresh = client.get("/events/", poll, HTTP_HX_REQUEST="true")
    assert fresh.status_code == 200 and fresh.content.decode().lstrip().startswith('<section id="events-section">')
    text = fresh.content.decode()
    assert text.index("<td>FailedScheduling</td>") < text.index("<td>Nominated</td>")
    assert len(fresh.content) < 50 * 1024


def test_a_logs_poll_brings_only_the_records_newer_than_the_page(lab):
    log_records(lab, 60)
    client = logged_in(user())
    page = client.get("/events/")
    after = page.context["logs_after"]
    assert after == models.LogEntry.objects.order_by("-id").first().pk
    body = page.content.decode()
    assert f'hx-get="/events/?group=reason&amp;part=logs&amp;after={after}" hx-trigger="every 2s"' in body
    poll = {"part": "logs", "after": str(after)}
    assert client.get("/events/", poll, HTTP_HX_REQUEST="true").status_code == 204
    models.LogEntry.objects.create(
        cluster=lab,
        time=T0 + timedelta(hours=1),
        level="INFO",
        logger="controller.provisioner",
        message="found provisionable pod(s)",
        fields={"NodeClaim": {"name": "default-abc"}, "duration": "1.2ms"},
    )
    newer = client.get("/events/", poll, HTTP_HX_REQUEST="true")
    text = newer.content.decode()
    newest = models.LogEntry.objects.order_by("-id").first().pk
    assert f'part=logs&amp;after={newest}"' in text and 'hx-swap-oob="true"' in text
    assert text.count('<tr id="log-') == 1 and "found provisionable pod(s)" in text
    # Fields as Karpenter's JSON logs write them, never a Python repr.
    assert "NodeClaim={&quot;name&quot;:&quot;default-abc&quot;}</span> <span>duration=1.2ms</span>" in text
    assert '<span id="logs-count" hx-swap-oob="true">61 records</span>' in text
    log_records(lab, 51)  # more than a page at once: the first page again, in place of the section
    flood = client.get("/events/", {"part": "logs", "after": str(newest)}, HTTP_HX_REQUEST="true")
    assert (flood["HX-Retarget"], flood["HX-Reswap"]) == ("#logs-section", "outerHTML")
    assert flood.content.decode().count('<tr id="log-') == eventlog.LOGS_PAGE_SIZE


def test_events_and_logs_download_as_csv(lab):
    pod_events(lab, 3)
    log_records(lab, 2)
    client = logged_in(user())
    events = client.get("/events/", {"format": "csv", "table": "events"}).content.decode().splitlines()
    assert events[0] == "last_seen,first_seen,type,reason,objects,message,count,events"
    assert events[1].startswith(f"{T0 + timedelta(seconds=2):%Y-%m-%dT%H:%M:%SZ},,Normal,Nominated,")
    assert client.get("/events/", {"format": "csv", "table": "logs"}).content.decode().splitlines()[1:] == [
        f"{T0 + timedelta(seconds=1):%Y-%m-%dT%H:%M:%SZ},INFO,controller.disruption,record 001,",
        f"{T0:%Y-%m-%dT%H:%M:%SZ},INFO,controller.provisioner,record 000,",
    ]
