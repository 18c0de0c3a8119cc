"""A tick runs its engine without the cluster's row lock (karpui.clusters.lab.run_detached): writes meanwhile commit at once,
come first, and win over the tick's own change of the same object, as the API server answers a stale write 409."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from karpui import models
from karpui.clusters import lab, warm
from provisioner.lab import Lab
from tests.karp import EXAMPLES, ok

pytestmark = pytest.mark.django_db(transaction=True)  # the write runs on a second connection


def on_another_connection(write: Callable[[], Any]) -> bool:
    """Run `write` in a thread with its own connection; whether it finished (a write waiting for the tick's lock
    would not have: the tick is the thread waiting for it)."""
    done: list[bool] = []

    def target() -> None:
        try:
            write()
            done.append(True)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=30)
    return done == [True]


def tick_with_a_write(monkeypatch: pytest.MonkeyPatch, write: Callable[[], Any], seconds: int) -> list[bool]:
    """A worker's tick at `seconds` after the lab's clock that, in the middle of its run, lets `write` commit."""
    finished: list[bool] = []
    original = Lab.advance

    def advance(self: Lab, *args: Any, **options: Any) -> float:
        moved = original(self, *args, **options)
        if not finished:  # the tick's run, not a run the write makes
            finished.append(False)
            finished[0] = on_another_connection(write)
        return moved

    monkeypatch.setattr(Lab, "advance", advance)
    cluster = models.Cluster.objects.get(name="lab")
    assert lab.tick(cluster, now=cluster.clock + timedelta(seconds=seconds))
    monkeypatch.setattr(Lab, "advance", original)
    return finished


def body(kind: str, name: str) -> dict[str, Any]:
    return models.KubeObject.objects.get(kind=kind, name=name).body


def worker_running() -> int:
    """examples/provisioning with inflate scaled to 3 while a worker ticks, and the tick after the scale (its
    pods made, Pending, their provisioning batch open: the next tick provisions them); the cluster's
    resourceVersion after it."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    now = timezone.now()
    models.Cluster.objects.filter(name="lab").update(clock=now, ticked_at=now)
    ok("scale", "deploy/inflate", "--replicas", "3")
    assert lab.tick(models.Cluster.objects.get(name="lab"), now=now + timedelta(seconds=1))
    assert sorted(row.phase for row in models.KubeObject.objects.filter(kind="Pod")) == ["Pending"] * 3
    return models.Cluster.objects.get(name="lab").resource_version


def test_a_write_during_a_ticks_run_commits_at_once_and_wins_over_the_ticks_change_of_the_same_object(monkeypatch):
    before = worker_running()
    status = body("Deployment", "inflate")["status"]  # 3 replicas, none ready yet
    finished = tick_with_a_write(monkeypatch, lambda: ok("label", "deploy", "inflate", "team=a"), 1)
    assert finished == [True]  # committed while the tick's engine ran, not after its commit

    # The tick's work is stored after the write, at versions past it.
    log = list(
        models.ChangeLogEntry.objects.filter(resource_version__gt=before)
        .order_by("resource_version")
        .values_list("resource_version", "type", "kind")
    )
    assert log[0] == (before + 1, "MODIFIED", "Deployment")  # the label
    assert sorted(kind for _, _, kind in log[1:]) == [
        *["Event"] * 4,
        "Node",
        "NodeClaim",
        "NodePool",
        *["Pod"] * 3,
        "ReplicaSet",
    ]
    assert min(version for version, _, _ in log[1:]) > before + 1
    assert len({version for version, _, _ in log}) == len(log)
    for row in models.KubeObject.objects.exclude(kind="Namespace"):  # each row at its latest logged version
        latest = models.ChangeLogEntry.objects.filter(kind=row.kind, namespace=row.namespace, name=row.name)
        assert row.resource_version == int(row.body["metadata"]["resourceVersion"])
        assert row.resource_version == max(latest.values_list("resource_version", flat=True))

    # Theirs stands: the tick's status update of the same Deployment (made from the unlabelled one) is dropped.
    deployment = body("Deployment", "inflate")
    assert deployment["metadata"]["labels"] == {"team": "a"}
    assert deployment["metadata"]["resourceVersion"] == str(before + 1)
    assert deployment["status"] == status and status["readyReplicas"] == 0
    assert sorted(body("ReplicaSet", name)["status"]["readyReplicas"] for name in names("ReplicaSet")) == [3]

    # The next tick (from memory: the write is in the lab it kept) sees the labelled Deployment and updates it.
    kept = warm._warm[models.Cluster.objects.get(name="lab").pk].lab
    assert kept.store.must_get("Deployment", "inflate", "default")["metadata"]["labels"] == {"team": "a"}
    cluster = models.Cluster.objects.get(name="lab")
    assert lab.tick(cluster, now=cluster.clock + timedelta(seconds=1))
    assert warm._warm[cluster.pk].lab is kept
    deployment = body("Deployment", "inflate")
    assert deployment["metadata"]["labels"] == {"team": "a"}
    assert deployment["status"]["readyReplicas"] == 3


def names(kind: str) -> list[str]:
    return list(models.KubeObject.objects.filter(kind=kind).values_list("name", flat=True))


def test_a_tick_whose_cluster_ran_elsewhere_meanwhile_stores_nothing(monkeypatch):
    """`karp advance` runs the whole lab under the row lock, as another engine would: the tick's run, made from the
    state before it, is dropped whole (its warm lab with it), not merged."""
    worker_running()
    clock = models.Cluster.objects.get(name="lab").clock
    finished = tick_with_a_write(monkeypatch, lambda: ok("advance", "0s"), 5)
    assert finished == [True]
    cluster = models.Cluster.objects.get(name="lab")
    # The advance made the pods at the clock as it was; the tick's 5 s (a NodeClaim, the pods bound) are gone.
    assert cluster.clock == clock
    assert sorted(row.phase for row in models.KubeObject.objects.filter(kind="Pod")) == ["Pending"] * 3
    assert names("NodeClaim") == []
    assert warm._warm[cluster.pk].token == cluster.engine_token  # the advance's lab is kept, not the tick's
    assert lab.tick(cluster, now=clock + timedelta(seconds=5))  # the next tick goes on from the advance's lab
    assert names("NodeClaim") == ["default-vgmg7"]


def test_a_scale_during_a_ticks_run_of_the_same_deployment_is_acted_on_by_the_next_tick(monkeypatch):
    """The scale wins over the run's status update of the Deployment, and whatever the engine derived from the
    run's version of it is dropped with it (the store's cache epoch moves on), so the next tick sees 5 replicas."""
    worker_running()
    finished = tick_with_a_write(monkeypatch, lambda: ok("scale", "deploy/inflate", "--replicas", "5"), 1)
    assert finished == [True]
    cluster = models.Cluster.objects.get(name="lab")
    kept = warm._warm[cluster.pk].lab
    assert kept.store.cache_epoch == 1
    assert body("Deployment", "inflate")["spec"]["replicas"] == 5
    assert models.KubeObject.objects.filter(kind="Pod").count() == 3  # the run's, made from 3 replicas
    assert lab.tick(cluster, now=cluster.clock + timedelta(seconds=1))
    assert warm._warm[cluster.pk].lab is kept
    assert models.KubeObject.objects.filter(kind="Pod").count() == 5


def test_a_pause_during_a_ticks_run_drops_the_run(monkeypatch):
    """What the run decided before the pause may be a disruption the pause forbids: a configuration change under
    the run (a pause, a NodePool edit) drops it whole, and the next tick runs under the new configuration."""
    from django.contrib.auth.models import Permission, User

    alice = User.objects.create_user("alice")
    alice.user_permissions.add(Permission.objects.get(codename="pause_disruption"))
    worker_running()
    pause = ("pause", "--as", "alice", "--for", "2m", "--reason", "incident 4711")
    finished = tick_with_a_write(monkeypatch, lambda: ok(*pause), 1)
    assert finished == [True]
    cluster = models.Cluster.objects.get(name="lab")
    assert cluster.paused_until is not None
    assert names("NodeClaim") == [] and cluster.pk not in warm._warm  # dropped whole, its lab with it
    assert lab.tick(cluster, now=cluster.clock + timedelta(seconds=1))  # provisioning is not paused
    assert names("NodeClaim") == ["default-vgmg7"]


def test_a_tick_with_a_nodepool_left_out_stores_its_event_at_a_version_of_its_own(monkeypatch):
    """A NodePool that no longer parses is reported when the lab is loaded (an Event and a log record): that write
    comes after the version the lab was read at, so the run's versions stay past every stored one."""
    worker_running()
    models.NodePool.objects.filter(name="default").update(annotations={"karpui.dev/approval-threshold": "lots"})
    lab.forget()
    before = models.Cluster.objects.get(name="lab").resource_version
    for second in (1, 2):
        cluster = models.Cluster.objects.get(name="lab")
        assert lab.tick(cluster, now=cluster.clock + timedelta(seconds=second))
    versions = list(
        models.ChangeLogEntry.objects.filter(resource_version__gt=before).values_list("resource_version", flat=True)
    )
    assert len(versions) == len(set(versions)) and min(versions) == before + 1
    assert models.Cluster.objects.get(name="lab").resource_version == max(versions)
    warning = models.KubeObject.objects.get(kind="Event", body__reason="ReconcileError")
    assert warning.body["involvedObject"]["name"] == "default"
    errors = models.LogEntry.objects.filter(message="Reconciler error").values_list("fields", flat=True)
    assert [e["controller"] for e in errors] == ["nodepool"]
