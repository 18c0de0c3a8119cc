"""Event rows grouped, ranked and paged in the database: a NodeClaim's events join its node's row by object (under
the node's name once it has one), rows whose newest events tie go by the Event's name, a page holds whole rows with
their first objects by label and how many there are, and the CSV has every object."""

from datetime import timedelta

from karpui import models
from karpui.insight import eventlog, grouping
from karpui.insight.grouping import _fold_id
from tests.integration.test_dashboard import logged_in, user
from tests.integration.test_events import T0

CHEAPER = "Can't replace with a cheaper node"
LAUNCHED = "Status condition transitioned, Type: Launched, Status: Unknown -> True"
NOMINATED = "Pod should schedule on: nodeclaim/default-abc"


def at(seconds: int) -> str:
    return f"{T0 + timedelta(seconds=seconds):%Y-%m-%dT%H:%M:%SZ}"


def event(
    lab,
    name: str,
    involved: str,
    reason: str,
    message: str,
    last: int,
    *,
    first: int | None = None,
    count: int | None = None,
    event_type: str = "Normal",
) -> None:
    """An Event named `name` on `involved` ("Kind/namespace/name", or "Kind/name" for a cluster-scoped object), last
    seen `last` seconds after T0; without `first` or `count` its body has no such field, as a new Event's may not."""
    kind, _, rest = involved.partition("/")
    namespace, _, object_name = rest.rpartition("/")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace or "default", "uid": f"uid-{name}"},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": object_name},
        "type": event_type,
        "reason": reason,
        "message": message,
        "lastTimestamp": at(last),
        **({"firstTimestamp": at(first)} if first is not None else {}),
        **({"count": count} if count is not None else {}),
    }
    models.KubeObject.objects.create(
        cluster=lab, kind="Event", namespace=namespace or "default", name=name, uid=f"uid-{name}", body=body
    )


def nodeclaim(lab, name: str, node: str = "") -> None:
    status = {"nodeName": node} if node else {}
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name}, "status": status}
    models.KubeObject.objects.create(cluster=lab, kind="NodeClaim", namespace="", name=name, uid=name, body=body)


def node_events(lab) -> None:
    """A NodeClaim registered as a node of another name, both telling the same thing; a pod nominated for it at the
    same second; the node blocked from disruption; and a NodeClaim not registered yet."""
    nodeclaim(lab, "default-abc", node="default-abc-x1")
    nodeclaim(lab, "default-new")
    event(
        lab, "default-abc-x1.unconsolidatable", "Node/default-abc-x1", "Unconsolidatable", CHEAPER, 10, first=1, count=2
    )
    event(
        lab, "default-abc.unconsolidatable", "NodeClaim/default-abc", "Unconsolidatable", CHEAPER, 20, first=3, count=3
    )
    event(lab, "inflate-1.nominated", "Pod/default/inflate-1", "Nominated", NOMINATED, 20)
    event(lab, "default-abc-x1.blocked", "Node/default-abc-x1", "DisruptionBlocked", "Node is nominated", 15)
    event(lab, "default-new.launched", "NodeClaim/default-new", "Launched", LAUNCHED, 5, first=5, count=1)


def test_by_object_a_nodeclaims_events_join_its_nodes_row_under_the_nodes_name(lab):
    node_events(lab)
    response = logged_in(user()).get("/events/", {"group": "object"})

    node = [{"label": "Node/default-abc-x1", "url": "/nodes/default-abc-x1/"}]
    assert response.context["events"] == [
        {
            "id": _fold_id(("node", "default-abc-x1", "Unconsolidatable", CHEAPER)),
            "type": "Normal",
            "reason": "Unconsolidatable",
            "message": CHEAPER,
            "last": at(20),
            "first": at(1),
            "count": 5,
            "events": 2,
            "objects": [*node, {"label": "NodeClaim/default-abc", "url": "/nodes/default-abc-x1/"}],
            "more": 0,
            "total_objects": 2,
        },
        {
            # The same second as the row above: rows whose newest events tie go by the Event's name.
            "id": _fold_id(("Pod", "default", "inflate-1", "Nominated", NOMINATED)),
            "type": "Normal",
            "reason": "Nominated",
            "message": NOMINATED,
            "last": at(20),
            "first": "",
            "count": 1,
            "events": 1,
            "objects": [{"label": "Pod/default/inflate-1", "url": "/objects/Pod/default/inflate-1/"}],
            "more": 0,
            "total_objects": 1,
        },
        {
            "id": _fold_id(("node", "default-abc-x1", "DisruptionBlocked", "Node is nominated")),
            "type": "Normal",
            "reason": "DisruptionBlocked",
            "message": "Node is nominated",
            "last": at(15),
            "first": "",
            "count": 1,
            "events": 1,
            "objects": node,
            "more": 0,
            "total_objects": 1,
        },
        {
            # Not registered yet: its own row, under its own name, which leads to its node's page once it has one.
            "id": _fold_id(("node", "default-new", "Launched", LAUNCHED)),
            "type": "Normal",
            "reason": "Launched",
            "message": LAUNCHED,
            "last": at(5),
            "first": at(5),
            "count": 1,
            "events": 1,
            "objects": [{"label": "NodeClaim/default-new", "url": "/nodes/default-new/"}],
            "more": 0,
            "total_objects": 1,
        },
    ]
    assert (response.context["event_count"], response.context["event_rows"]) == (5, 4)
    assert response.context["events_since"] == at(20)


def test_by_reason_a_nodeclaims_object_leads_to_its_nodes_page(lab):
    node_events(lab)
    events = logged_in(user()).get("/events/", {"group": "reason"}).context["events"]

    assert [(e["reason"], e["last"], e["events"], e["count"]) for e in events] == [
        ("Unconsolidatable", at(20), 2, 5),
        ("Nominated", at(20), 1, 1),
        ("DisruptionBlocked", at(15), 1, 1),
        ("Launched", at(5), 1, 1),
    ]
    assert events[0]["objects"] == [
        {"label": "Node/default-abc-x1", "url": "/nodes/default-abc-x1/"},
        {"label": "NodeClaim/default-abc", "url": "/nodes/default-abc-x1/"},
    ]
    assert events[0]["id"] == _fold_id(("Unconsolidatable", "Normal"))


def reasons(lab) -> None:
    """Five rows by reason and type, one of them on three pods (one of which has two events)."""
    event(lab, "pod-b.nominated", "Pod/default/pod-b", "Nominated", "on b", 1, first=-10, count=1)
    event(lab, "pod-a.nominated", "Pod/default/pod-a", "Nominated", "on a", 2, count=2)
    event(lab, "pod-C.nominated", "Pod/default/pod-C", "Nominated", "on C", 3, first=3, count=3)
    event(lab, "pod-a.nominated.2", "Pod/default/pod-a", "Nominated", "on a again", 4, count=4)
    event(lab, "pod-z.nominated", "Pod/default/pod-z", "Nominated", "on z", 4, event_type="Warning")
    event(lab, "pod-f.failed", "Pod/default/pod-f", "FailedScheduling", "no fit", 6, event_type="Warning")
    event(lab, "pod-e.evicted", "Pod/default/pod-e", "Evicted", "evicted", 0)
    event(lab, "pod-p.preempted", "Pod/default/pod-p", "Preempted", "preempted", 2)


def test_pages_hold_whole_rows_with_their_first_objects_by_label(lab, monkeypatch):
    monkeypatch.setattr(eventlog, "EVENTS_PAGE_SIZE", 2)
    monkeypatch.setattr(grouping, "NAMES_SHOWN", 2)
    reasons(lab)
    client = logged_in(user())

    def page(number: int) -> list[tuple[object, ...]]:
        response = client.get("/events/", {"events_page": str(number)})
        assert (response.context["event_count"], response.context["event_rows"]) == (8, 5)
        assert (response.context["events_page"], response.context["events_pages"]) == (number, 3)
        return [
            (e["reason"], e["type"], e["message"], e["first"], e["count"], e["events"], e["more"], e["total_objects"])
            + tuple(o["label"] for o in e["objects"])
            for e in response.context["events"]
        ]

    # Nominated/Normal and Nominated/Warning were last seen the same second: by the Event's name, pod-a's first.
    assert page(1) == [
        ("FailedScheduling", "Warning", "no fit", "", 1, 1, 0, 1, "Pod/default/pod-f"),
        # Three pods (pod-a's two events count it once), the first two by code point: "C" before "a".
        ("Nominated", "Normal", "on a again", at(-10), 10, 4, 1, 3, "Pod/default/pod-C", "Pod/default/pod-a"),
    ]
    assert page(2) == [
        ("Nominated", "Warning", "on z", "", 1, 1, 0, 1, "Pod/default/pod-z"),
        ("Preempted", "Normal", "preempted", "", 1, 1, 0, 1, "Pod/default/pod-p"),
    ]
    assert page(3) == [("Evicted", "Normal", "evicted", "", 1, 1, 0, 1, "Pod/default/pod-e")]
    body = client.get("/events/", {"events_page": "2"}).content.decode()
    assert "events page 2 of 3" in body
    past = client.get("/events/", {"events_page": "4"})
    assert (past.status_code, past.content.decode()) == (400, "events_page: 4 is past the last page, 3\n")
    # Asked directly, a page past the last is the last (a poll of an older page's rows).
    last = eventlog.events_section(cluster=lab, page=9)
    assert (last["events_page"], [e["reason"] for e in last["events"]]) == (3, ["Evicted"])


def test_the_csv_names_every_object_of_a_row(lab, monkeypatch):
    monkeypatch.setattr(grouping, "NAMES_SHOWN", 2)
    reasons(lab)
    lines = logged_in(user()).get("/events/", {"format": "csv", "table": "events"}).content.decode().splitlines()

    assert lines[1:3] == [
        f"{at(6)},,Warning,FailedScheduling,Pod/default/pod-f,no fit,1,1",
        f"{at(4)},{at(-10)},Normal,Nominated,Pod/default/pod-C Pod/default/pod-a Pod/default/pod-b,on a again,10,4",
    ]
    assert len(lines) == 6
