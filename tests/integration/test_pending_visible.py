"""Pending is visible while a worker ticks the lab: a scale-up's pods exist Pending (PodScheduled False, reason
Unschedulable, once the scheduler has tried them) until a node takes them, because the provisioning batch, the
NodeClaim's launch and the node's registration happen over lab time, in later ticks, not in the tick that made
the pods. A watch (kubectl get pods -w) replays the change log, so the pods' first state logged must be Pending."""

from datetime import timedelta

from django.utils import timezone

from karpui import models
from karpui.clusters import ticks
from tests.karp import EXAMPLES, ok, rows


def pods() -> list[dict]:
    return [row.body for row in models.KubeObject.objects.filter(kind="Pod", namespace="default").order_by("name")]


def scheduled(pod: dict) -> dict:
    return next(c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled")


def test_a_scale_up_under_a_ticking_worker_shows_its_pods_pending_then_running(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    start = timezone.now()
    ticks.clusters_tick(now=start)  # a worker is ticking the lab: writes are stored, the tick reacts
    ok("scale", "deploy/inflate", "--replicas", "5")
    written = models.Cluster.objects.get(name="lab").resource_version
    assert pods() == []  # nothing reacts inside the write

    ticks.clusters_tick(now=start + timedelta(seconds=1))
    assert [p["status"]["phase"] for p in pods()] == ["Pending"] * 5
    assert {(scheduled(p)["status"], scheduled(p)["reason"]) for p in pods()} == {("False", "Unschedulable")}
    assert rows("get", "nodeclaims") == []  # the provisioning batch is still open (1 s after its last pod)

    ticks.clusters_tick(now=start + timedelta(seconds=2))
    ticks.clusters_tick(now=start + timedelta(seconds=3))
    assert [p["status"]["phase"] for p in pods()] == ["Running"] * 5
    [claim] = rows("get", "nodeclaims")
    assert claim[1] == "c-8x-amd64-linux"

    # What a watch from before the scale replays, pod by pod: ADDED Pending, later Running.
    seen: dict[str, list[tuple[str, str]]] = {}
    for entry in models.ChangeLogEntry.objects.filter(kind="Pod", resource_version__gt=written).order_by(
        "resource_version"
    ):
        seen.setdefault(entry.name, []).append((entry.type, entry.body["status"].get("phase", "")))
    assert len(seen) == 5
    for history in seen.values():
        assert history[0] == ("ADDED", "Pending")
        assert history[-1] == ("MODIFIED", "Running")


def test_a_write_to_a_ticked_lab_asks_the_worker_for_a_tick_at_once_and_a_burst_asks_once(
    lab, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from karpui.celery import app

    settings.KARPUI_TICK_ON_WRITE = True
    asked: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **_: asked.append((name, args)))
    ok("apply", "-f", str(EXAMPLES / "provisioning"))  # no worker yet: the lab reacted within the write
    assert asked == []
    ticks.clusters_tick(now=timezone.now())  # a worker ticks the lab from now on
    with django_capture_on_commit_callbacks(execute=True):
        ok("scale", "deploy/inflate", "--replicas", "5")
    with django_capture_on_commit_callbacks(execute=True):
        ok("scale", "deploy/inflate", "--replicas", "6")
    assert asked == [("karpui.tasks.cluster_tick", [lab.pk])]  # once for both: the second came within a second
    ticks.cluster_tick(cluster_id=lab.pk)  # what the worker runs: the pods are made, Pending
    assert [p["status"]["phase"] for p in pods()] == ["Pending"] * 6
