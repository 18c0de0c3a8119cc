"""The Events & logs page pages through everything its filters keep, 200 event rows and log records a page, with a
pager that keeps the filters; a page past the end is the last, as on the other lists."""

from datetime import timedelta

from karpui import models
from tests.integration.test_dashboard import logged_in, user
from tests.integration.test_events import T0, log_records


def pod_events(lab, count: int) -> None:
    """`count` Normal events, each on a pod of its own and one a second from T0: one event row each."""
    bodies = [
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"pod-{i:03d}.1", "namespace": "default", "uid": f"event-{i}"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": f"pod-{i:03d}"},
            "type": "Normal",
            "reason": "Nominated",
            "message": f"nominated {i:03d}",
            "count": 1,
            "lastTimestamp": f"{T0 + timedelta(seconds=i):%Y-%m-%dT%H:%M:%SZ}",
        }
        for i in range(count)
    ]
    models.KubeObject.objects.bulk_create(
        models.KubeObject(
            cluster=lab, kind="Event", namespace="default", name=b["metadata"]["name"], uid=b["metadata"]["uid"], body=b
        )
        for b in bodies
    )


def test_events_and_logs_page_through_everything_200_at_a_time(lab):
    """?page= was read by nothing: every page was the first, and rows past the 200th could not be reached."""
    pod_events(lab, 230)
    log_records(lab, 450)
    client = logged_in(user())

    first, second, third = (client.get("/events/", {"page": str(n)}) for n in (1, 2, 3))

    assert [(r.context["page"], r.context["pages"]) for r in (first, second, third)] == [(1, 3), (2, 3), (3, 3)]
    # Newest first: event 229 is the latest, so page 2 holds events 29 down to 0.
    assert [len(r.context["events"]) for r in (first, second, third)] == [200, 30, 0]
    assert [e["message"] for e in second.context["events"]] == [f"nominated {i:03d}" for i in range(29, -1, -1)]
    assert [len(r.context["logs"]) for r in (first, second, third)] == [200, 200, 50]
    assert [entry["message"] for entry in third.context["logs"]] == [f"record {i:03d}" for i in range(49, -1, -1)]
    assert (first.context["event_count"], first.context["log_count"]) == (230, 450)
    body = second.content.decode()
    assert '<p class="pager"><a href="?page=1">← previous</a> page 2 of 3 <a href="?page=3">next →</a></p>' in body
    assert '<h2>Controller logs <small class="muted">450 records, newest first</small></h2>' in body
    assert '<tr><td colspan="6">No more events.</td></tr>' in third.content.decode()


def test_the_events_pager_keeps_the_filters_and_the_poll_keeps_the_page(lab):
    log_records(lab, 450)  # 150 records a logger
    client = logged_in(user())
    query = {"q": "record", "logger": "controller.provisioner", "group": "reason", "page": "1"}

    response = client.get("/events/", query)

    assert (response.context["pages"], len(response.context["logs"])) == (1, 150)
    assert "pager" not in response.content.decode()  # one page: no pager
    response = client.get("/events/", {"q": "record", "logger": "controller.disruption", "page": "2"})
    assert (response.context["page"], response.context["pages"]) == (1, 1)  # past the end: the last page
    body = client.get("/events/", {"q": "record", "page": "2"}).content.decode()
    assert '<a href="?q=record&amp;page=1">← previous</a> page 2 of 3 <a href="?q=record&amp;page=3">next →</a>' in (
        body
    )
    assert 'hx-get="/events/?q=record&amp;page=2"' in body


def test_a_page_past_the_end_of_the_events_is_the_last_and_a_bad_page_is_a_400(lab):
    log_records(lab, 201)
    client = logged_in(user())

    last = client.get("/events/", {"page": "99"})

    assert (last.status_code, last.context["page"], [e["message"] for e in last.context["logs"]]) == (
        200,
        2,
        ["record 000"],
    )
    refused = client.get("/events/", {"page": "²"})
    assert (refused.status_code, refused.content.decode()) == (
        400,
        "page: must be a whole number of at most nine digits, got '²'\n",
    )
