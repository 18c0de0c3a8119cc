"""The warm engine (karpui.clusters.lab): a process goes on from the lab it kept in memory, catching up from the change log,
and ends exactly where a cold load would have; writes made while a worker ticks are stored from a few rows and
reacted to at the next tick."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from karpui import models
from karpui.clusters import lab, leases
from karpui.clusters import warm as warm_labs
from karpui.writes import lab_objects
from tests.karp import EXAMPLES, ok

pytestmark = pytest.mark.django_db(transaction=True)  # the warm lab is kept only when a run commits


START = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


def state(name: str) -> dict[str, Any]:
    cluster = models.Cluster.objects.get(name=name)
    pool = str(models.NodePool.objects.get(cluster=cluster).uid)  # a row's uuid4: the one thing two labs never share
    objects = {
        (kind, namespace, name): json.loads(json.dumps(body).replace(pool, "the-nodepool-uid"))
        for kind, namespace, name, body in models.KubeObject.objects.filter(cluster=cluster).values_list(
            "kind", "namespace", "name", "body"
        )
    }
    logs = [
        (message, {key: value for key, value in fields.items() if key != "duration"})  # wall time, never equal
        for message, fields in models.LogEntry.objects.filter(cluster=cluster)
        .order_by("id")
        .values_list("message", "fields")
    ]
    return {"objects": objects, "logs": logs, "clock": cluster.clock, "version": cluster.resource_version}


def scenario(name: str, *, cold: bool) -> dict[str, Any]:
    lab_objects.system_namespaces_ensure(models.Cluster.objects.create(name=name, clock=START))

    def step(*args: str) -> None:
        if cold:
            lab.forget()
        ok(*args, "--cluster", name)

    step("apply", "-f", str(EXAMPLES / "provisioning"))
    step("scale", "deploy/inflate", "--replicas", "5")
    step("advance", "5s")
    step("scale", "deploy/inflate", "--replicas", "2")
    step("advance", "90s")
    step("label", "deploy", "inflate", "team=a")
    step("advance", "10s")
    return state(name)


def test_a_warm_run_ends_where_a_cold_load_would_have():
    warm = scenario("warm", cold=False)
    assert models.Cluster.objects.get(name="warm").pk in warm_labs._warm  # the runs above went on from memory
    cold = scenario("cold", cold=True)
    assert warm == cold  # every object with its body, every log record, the clock and the resourceVersion
    # The replacement (its name drawn after the first node's kwok name, from the same seeded RNG).
    assert [key[2] for key in warm["objects"] if key[0] == "NodeClaim"] == ["default-vlc8w"]


def test_while_a_worker_ticks_a_write_reads_only_its_rows_and_the_next_tick_reacts():
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    cluster = models.Cluster.objects.get(name="lab")
    now = timezone.now()
    models.Cluster.objects.filter(pk=cluster.pk).update(clock=now, ticked_at=now)
    assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=1))
    assert cluster.pk in warm_labs._warm
    warm = warm_labs._warm[cluster.pk].lab
    ok("scale", "deploy/inflate", "--replicas", "3")  # an engine is alive: stored, not reacted to here
    deployment = models.KubeObject.objects.get(kind="Deployment", name="inflate")
    assert deployment.body["spec"]["replicas"] == 3
    assert not models.KubeObject.objects.filter(kind="Pod").exists()
    assert warm_labs._warm[cluster.pk].lab is warm  # the write left the worker's lab alone
    assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=3))
    assert warm_labs._warm[cluster.pk].lab is warm  # caught up from the change log, not reloaded
    assert models.KubeObject.objects.filter(kind="Pod").count() == 3


def test_a_log_compacted_past_the_warm_lab_while_it_catches_up_makes_the_tick_load_it_again(monkeypatch):
    """engine() checks the compacted version, then reads the log, without the row lock: a prune committed in
    between removes changes the warm lab never saw, so the lab must be loaded again, not run without them."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    cluster = models.Cluster.objects.get(name="lab")
    now = timezone.now()
    models.Cluster.objects.filter(pk=cluster.pk).update(clock=now, ticked_at=now)
    assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=1))
    warm = warm_labs._warm[cluster.pk].lab
    ok("scale", "deploy/inflate", "--replicas", "3")  # stored from its rows: the warm lab catches up with it
    read = warm_labs._log_after

    def pruned_meanwhile(cluster: models.Cluster, since: int) -> list[warm_labs.LogRow]:
        models.ChangeLogEntry.objects.filter(cluster=cluster).delete()
        models.Cluster.objects.filter(pk=cluster.pk).update(compacted_resource_version=F("resource_version"))
        return read(cluster, since)

    monkeypatch.setattr(warm_labs, "_log_after", pruned_meanwhile)
    assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=3))
    assert warm_labs._warm[cluster.pk].lab is not warm  # loaded again
    assert models.KubeObject.objects.filter(kind="Pod").count() == 3  # and the scale was acted on


def test_a_run_elsewhere_makes_the_next_one_load_again():
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("advance", "1s")
    cluster = models.Cluster.objects.get(name="lab")
    kept = warm_labs._warm[cluster.pk].lab
    models.Cluster.objects.filter(pk=cluster.pk).update(engine_token="another-process")
    ok("advance", "1s")
    assert warm_labs._warm[cluster.pk].lab is not kept


def test_a_failed_run_drops_the_warm_lab():
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    cluster = models.Cluster.objects.get(name="lab")
    assert cluster.pk in warm_labs._warm

    def fail(running: Any) -> None:
        running.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "half-made"}})
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError):
        lab.run("lab", fail)
    assert cluster.pk not in warm_labs._warm
    ok("advance", "1s")
    assert not models.KubeObject.objects.filter(kind="Namespace", name="half-made").exists()


def test_a_write_while_a_worker_holds_the_lease_is_stored_from_its_rows_however_long_its_tick_runs():
    """A tick longer than the few periods `engine_alive` looks back still holds the lease: a write meanwhile is
    stored from its rows for that worker to react to, instead of loading and running the whole lab a second time
    (at 20,000 pods the write did that while the tick waited for it, and the tick failed: 'database is locked')."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    cluster = models.Cluster.objects.get(name="lab")
    models.Cluster.objects.filter(pk=cluster.pk).update(ticked_at=timezone.now() - timedelta(minutes=1))
    held = leases.try_acquire(cluster.pk, "worker-a")
    ok("scale", "deploy/inflate", "--replicas", "3")
    leases.release(held)
    assert models.KubeObject.objects.get(kind="Deployment", name="inflate").body["spec"]["replicas"] == 3
    assert not models.KubeObject.objects.filter(kind="Pod").exists()


def test_a_warm_lab_that_cannot_go_on_is_freed_before_its_successor_is_loaded(monkeypatch):
    """Another process ran the cluster (a new token), so this process's lab is stale: it is collected before the
    cluster is loaded again, not held beside the new one until the cycle collector happens to run."""
    import gc
    import weakref

    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    cluster = models.Cluster.objects.get(name="lab")
    now = timezone.now()
    models.Cluster.objects.filter(pk=cluster.pk).update(clock=now, ticked_at=now)
    assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=1))
    stale = weakref.ref(warm_labs._warm[cluster.pk].lab)
    models.Cluster.objects.filter(pk=cluster.pk).update(engine_token="another-process")
    alive_at_load = []
    load = warm_labs.loaded
    monkeypatch.setattr(
        warm_labs, "loaded", lambda *args, **kwargs: alive_at_load.append(stale() is not None) or load(*args, **kwargs)
    )
    gc.disable()  # only an explicit collection may free it
    try:
        assert lab.tick(models.Cluster.objects.get(pk=cluster.pk), now=now + timedelta(seconds=2))
    finally:
        gc.enable()
    assert alive_at_load == [False]


def ticked(name: str, max_changes: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A worker ticking a scale-up of 7 pods, a step making, binding and starting at most 2 of them, each tick
    stopping once it changed `max_changes` objects: what the cluster holds after 40 ticks a second apart."""
    from provisioner.sim import cluster as simulated

    monkeypatch.setattr(simulated, "POD_WRITES_PER_STEP", 2)
    monkeypatch.setattr(lab, "TICK_MAX_CHANGES", max_changes)
    cluster = models.Cluster.objects.create(name=name, clock=START, ticked_at=START)
    lab_objects.system_namespaces_ensure(cluster)
    ok("apply", "-f", str(EXAMPLES / "provisioning"), "--cluster", name)
    ok("scale", "deploy/inflate", "--replicas", "7", "--cluster", name)  # stored: the worker reacts
    for second in range(1, 41):
        lab.tick(models.Cluster.objects.get(name=name), now=START + timedelta(seconds=second), budget=60.0)
    rows = models.KubeObject.objects.filter(cluster__name=name)
    return {
        "clock": models.Cluster.objects.get(name=name).clock,
        "pods": sorted((row.name, row.phase, row.node_name) for row in rows.filter(kind="Pod")),
        "nodeclaims": sorted(
            (row.name, row.body["metadata"]["labels"]["node.kubernetes.io/instance-type"])
            for row in rows.filter(kind="NodeClaim")
        ),
        "logs": list(models.LogEntry.objects.filter(cluster__name=name).order_by("id").values_list("time", "message")),
    }


def test_ticks_stopped_between_steps_end_where_uninterrupted_ticks_would_have(monkeypatch):
    """The same pods on the same nodes, the same log at the same lab times. (Resource versions, and the uids made
    from them, differ: each tick writes the NodePool's status as it then is, taking a version, as runs always did.)"""
    stopped = ticked("stopped", 4, monkeypatch)
    assert stopped == ticked("uninterrupted", 1_000_000, monkeypatch)
    assert stopped["clock"] == START + timedelta(seconds=40)
    kwok_node = "kwok-default-twfpr-banetwilight-1-9jec3hqdz6-2356645542"  # kwok-<nodeclaim>-<RandomName()>-<Uint32>
    assert {(phase, node) for _, phase, node in stopped["pods"]} == {("Running", kwok_node)}
    assert len(stopped["pods"]) == 7 and stopped["nodeclaims"] == [("default-twfpr", "c-8x-amd64-linux")]


def test_a_large_warm_lab_is_frozen_out_of_full_collections_and_handed_back_when_dropped(monkeypatch):
    """gc.freeze once a large lab is kept warm (its objects skip every full collection while it is), again only
    when it has doubled; a frozen object is never collected, so forgetting the lab, or a failed run dropping it,
    unfreezes first."""
    import gc

    monkeypatch.setattr(warm_labs, "FREEZE_AT_OBJECTS", 1)  # examples/provisioning's few objects count as large
    gc.unfreeze()
    try:
        ok("apply", "-f", str(EXAMPLES / "provisioning"))
        lab.forget()
        assert gc.get_freeze_count() == 0
        ok("advance", "1s")  # no worker: the CLI loads the lab and keeps it warm
        assert gc.get_freeze_count() > 0
        lab.forget()
        assert gc.get_freeze_count() == 0
        ok("advance", "1s")  # loaded again
        assert gc.get_freeze_count() > 0
        ok("advance", "1s")  # warm, and no larger: nothing is frozen again
        frozen = gc.get_freeze_count()
        objects = warm_labs._warm[models.Cluster.objects.get(name="lab").pk].lab.store.size()
        ok("scale", "deploy/inflate", "--replicas", str(objects))  # pods, their events: more than twice the objects
        assert gc.get_freeze_count() > frozen
        frozen = gc.get_freeze_count()

        def fail(running: Any) -> None:
            raise RuntimeError("the run failed")

        with pytest.raises(RuntimeError):
            lab.run("lab", fail)
        assert frozen > 0 and gc.get_freeze_count() == 0
        monkeypatch.setattr(warm_labs, "FREEZE_AT_OBJECTS", 10**9)
        ok("advance", "1s")  # a small lab is left to the collector
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
