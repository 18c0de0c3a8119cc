"""`manage.py engine`'s own output: who leads each cluster, said as soon as the Lease changes hands."""

from __future__ import annotations

from dataclasses import dataclass, field
from io import StringIO

import pytest
from django.core.management import call_command

from karpui import models
from karpui.clusters import engines

pytestmark = pytest.mark.django_db


@dataclass
class Config:
    identity: str


@dataclass
class Elector:
    config: Config
    holder: str


@dataclass
class LeadingEngine:
    """An engine that holds the Lease and whose step notes what the command had printed when the step began."""

    cluster_id: int
    cluster_name: str
    out: StringIO
    elector: Elector = field(default_factory=lambda: Elector(Config("host_1a2b"), "host_1a2b"))
    leading: bool = True
    echo: object = None
    printed_before_step: list[str] = field(default_factory=list)

    def step(self, now: float) -> bool:
        self.printed_before_step.extend(self.out.getvalue().splitlines())
        return True

    def stop(self, release: bool = True) -> None:
        pass


def test_the_engine_says_it_leads_before_its_first_step_as_leader(monkeypatch):
    # A first step as leader can wait long (on SQLite, behind the write lock a frozen former leader holds): the
    # line saying who leads comes from the Lease and does not wait for it.
    row = models.Cluster.objects.create(name="real", mode=models.Cluster.Mode.KWOK)
    out = StringIO()
    opened: list[LeadingEngine] = []

    def open_engine(cluster: models.Cluster, lease_namespace: str) -> LeadingEngine:
        opened.append(LeadingEngine(cluster.pk, cluster.name, out))
        return opened[0]

    monkeypatch.setattr(engines.Engine, "open", staticmethod(open_engine))

    call_command("engine", "--once", stdout=out)

    assert [engine.cluster_id for engine in opened] == [row.pk]
    assert opened[0].printed_before_step == [
        "engine for cluster real (kwok) started",
        "cluster real: this engine (host_1a2b) leads",
    ]
    assert out.getvalue().splitlines() == opened[0].printed_before_step  # said once, not again after the step
