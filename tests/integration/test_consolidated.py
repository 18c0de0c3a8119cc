"""Karpenter's "already consolidated" short-circuit: a disruption pass that found nothing is not repeated until
something it reads changes (or five minutes pass), and Consolidatable is a NodeClaim condition."""

import json

from provisioner.controllers import disruption
from tests.karp import EXAMPLES, ok, rows


def test_an_unchanged_cluster_is_not_passed_over_again_until_five_minutes_or_a_change(lab, monkeypatch):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "5")
    ok("advance", "60s")
    passes = []
    original = disruption.disruption_pass

    def counting(view, nodepools, **options):
        passes.append(view.now)
        return original(view, nodepools, **options)

    monkeypatch.setattr(disruption, "disruption_pass", counting)
    ok("advance", "4m")
    assert len(passes) <= 1  # one pass after the cold load, then nothing changed
    ok("advance", "2m")
    assert len(passes) == 2  # the five-minute expiry forces one more
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "40s")
    assert len(passes) > 2 and rows("get", "nodes") == []  # a change is seen at the next poll


def test_consolidatable_is_a_condition_set_when_consolidate_after_has_passed(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "5s")
    [claim] = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    assert "Consolidatable" not in [c["type"] for c in claim["status"]["conditions"]]
    ok("advance", "10s")  # the example NodePool's consolidateAfter is 10s
    [claim] = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    consolidatable = next(c for c in claim["status"]["conditions"] if c["type"] == "Consolidatable")
    assert consolidatable["status"] == "True"
