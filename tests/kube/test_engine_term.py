"""Two engines on one cluster and one database: a former leader that wakes mid-step commits nothing over the records
of the engine that led after it. The cluster row's engine_term fences the database as the Lease fences the API."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from karpui import models
from karpui.clusters.engines import Engine
from provisioner.adapters.transport import Transport
from provisioner.leaderelection import ElectionConfig
from tests.kube.harness import LabServer, eventually

pytestmark = pytest.mark.django_db


def engine(row: models.Cluster, kubeconfig: Path, identity: str) -> Engine:
    return Engine.open(
        row,
        transport=Transport.from_kubeconfig(str(kubeconfig)),
        election=ElectionConfig(
            identity=identity, name="karpui-engine", lease_duration=3.0, renew_deadline=2.0, retry_period=0.25
        ),
    )


def stepped(engine: Engine) -> float:
    """Step until the engine has run a whole step as leader (its informers synced first); the time it stepped at."""
    deadline = time.monotonic() + 30
    while True:
        now = time.time()
        if engine.step(now):
            return now
        assert time.monotonic() < deadline, f"{engine.elector.config.identity}: no whole step within 30 s"
        time.sleep(0.2)


def test_a_former_leader_waking_mid_step_commits_nothing_over_its_successor(
    lab_api: LabServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    name = lab_api.new_cluster("term", components="cluster", tick=True)
    kubeconfig = lab_api.kubeconfig(name, tmp_path / "kubeconfig")
    row = models.Cluster.objects.create(name="term", mode=models.Cluster.Mode.KWOK, kubeconfig=str(kubeconfig))
    a = engine(row, kubeconfig, "engine-a")
    b: Engine | None = None
    try:
        eventually(lambda: a.leading, timeout=10)
        b = engine(row, kubeconfig, "engine-b")  # only once engine-a leads: it is the first leader here
        stepped(a)
        assert models.Cluster.objects.values_list("engine_term", flat=True).get(pk=row.pk) == 1
        a.elector.stop()  # it steps down; engine-b takes over and steps
        eventually(lambda: b.leading, timeout=10)
        led = stepped(b)
        successor = models.Cluster.objects.get(pk=row.pk)
        assert successor.engine_term == 2
        # engine-a as a process frozen after its checks passed: it believes it leads, and its Lease fence let it by.
        monkeypatch.setattr(a.elector, "is_leader", lambda: True)
        monkeypatch.setattr(a.elector, "fence", lambda: None)
        with caplog.at_level(logging.WARNING, logger="karpui.clusters.engines"):
            assert not a.step(led + 60)
        after = models.Cluster.objects.get(pk=row.pk)
        assert (after.engine_term, after.clock, after.ticked_at, after.lab_state) == (
            2,
            successor.clock,
            successor.ticked_at,
            successor.lab_state,
        )
        assert [r.getMessage() for r in caplog.records if r.name == "karpui.clusters.engines"] == [
            "engine-a stopped mid-step, writing nothing more: cluster term: another engine has led since this one "
            "began (term 2, this engine's 1): its records are not committed"
        ]
    finally:
        a.stop(release=False)
        if b is not None:
            b.stop()
        lab_api.rest(name)
