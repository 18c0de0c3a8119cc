"""bench/versus_karpenter.py's comparison (what a provisioner decided, read from its NodeClaims, pods and
"disrupting node(s)" records) and bench/workloads/generate.py's corpus, which must stay replayable: the same seed
writes the committed files."""

from __future__ import annotations

import contextlib
import filecmp
import http.server
import importlib.util
import json
import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "bench"


def module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def versus() -> ModuleType:
    return module(BENCH / "versus_karpenter.py", "versus_karpenter")


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    return module(BENCH / "workloads" / "generate.py", "generate_corpus")


def claim(name: str, pool: str, instance_type: str, capacity: str, zone: str, deleting: bool = False) -> dict:
    metadata: dict = {
        "name": name,
        "labels": {
            "karpenter.sh/nodepool": pool,
            "node.kubernetes.io/instance-type": instance_type,
            "karpenter.sh/capacity-type": capacity,
            "topology.kubernetes.io/zone": zone,
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-05T04:00:00Z"
    return {"metadata": metadata}


def pod(name: str, app: str, node: str | None, phase: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": app}}, "spec": {"nodeName": node}, "status": {"phase": phase}}


# Karpenter v1.15's record of an emptiness decision, as its kwok provider logged it on the real cluster.
KARPENTER_EMPTY = {
    "message": "disrupting node(s)",
    "command": "Empty/028670df-f64d-428c-b99b-f075f417e59e: delete: nodepools=[default]: [kwok-default-8xdcz] "
    "(savings: $0.22)",
    "decision": "delete",
    "disrupted-node-count": 1,
    "replacement-node-count": 0,
    "pod-count": 0,
    "disrupted-nodes": [
        {
            "Node": {"name": "kwok-default-8xdcz"},
            "NodeClaim": {"name": "default-8xdcz"},
            "capacity-type": "on-demand",
            "instance-type": "c-8x-amd64-linux",
        }
    ],
    "replacement-nodes": [],
}


def test_a_snapshot_counts_live_nodeclaims_their_cost_zones_and_pending_pods_per_workload(versus):
    claims = [
        claim("a", "default", "c-8x-amd64-linux", "on-demand", "test-zone-b"),
        claim("b", "default", "c-2x-amd64-linux", "spot", "test-zone-b"),
        claim("c", "default", "c-4x-amd64-linux", "on-demand", "test-zone-a"),
        claim("gone", "default", "c-64x-amd64-linux", "on-demand", "test-zone-c", deleting=True),
    ]
    pods = [
        pod("web-1", "web", "node-a", "Running"),
        pod("web-2", "web", None, "Pending"),
        pod("web-3", "web", None, "Pending"),
        pod("db-1", "db", None, "Pending"),
        pod("db-2", "db", "node-b", "Pending"),  # bound, starting: not left pending
    ]
    taken = versus.snapshot(claims, pods, [KARPENTER_EMPTY])
    assert taken.nodeclaims == (
        ("default", "c-2x-amd64-linux", "spot"),
        ("default", "c-4x-amd64-linux", "on-demand"),
        ("default", "c-8x-amd64-linux", "on-demand"),
    )
    assert taken.zones == (2, 1)
    assert taken.pending == (("db", 1), ("web", 2))
    assert taken.disruptions == ("empty delete [c-8x-amd64-linux/on-demand] +0",)
    # kwok's prices: $0.025 a vCPU and $0.001 a GB an hour; spot at 70 %.
    c2 = 0.025 * 2 + 0.001 * 4 * 2**30 / 1e9
    c4 = 0.025 * 4 + 0.001 * 8 * 2**30 / 1e9
    c8 = 0.025 * 8 + 0.001 * 16 * 2**30 / 1e9
    assert taken.cost == pytest.approx(c8 + c4 + 0.7 * c2, abs=1e-12)


def test_karpuis_record_with_a_reason_field_reads_as_karpenters_command(versus):
    replace = {
        "reason": "Underutilized",
        "decision": "replace",
        "replacement-node-count": 1,
        "disrupted-nodes": [
            {"instance-type": "c-8x-amd64-linux", "capacity-type": "on-demand"},
            {"instance-type": "c-4x-amd64-linux", "capacity-type": "on-demand"},
        ],
    }
    assert versus.decision_line(replace) == (
        "underutilized replace [c-4x-amd64-linux/on-demand c-8x-amd64-linux/on-demand] +1"
    )


def test_differences_name_what_differs_with_karpenters_side(versus):
    theirs = versus.snapshot([claim("a", "default", "c-8x-amd64-linux", "on-demand", "test-zone-a")], [], [])
    mine = versus.snapshot(
        [
            claim("a", "default", "c-4x-amd64-linux", "on-demand", "test-zone-a"),
            claim("b", "default", "c-4x-amd64-linux", "on-demand", "test-zone-b"),
        ],
        [pod("x", "web", None, "Pending")],
        [],
    )
    assert theirs.differences(theirs) == []
    assert theirs.differences(mine) == [
        "nodeclaims: 2× default/c-4x-amd64-linux/on-demand (Karpenter 1× default/c-8x-amd64-linux/on-demand)",
        "zones: 1, 1 (Karpenter 1)",
        "pending: ('web', 1) (Karpenter none)",
    ]
    assert versus.Snapshot.from_json(mine.as_json()) == versus.Snapshot(
        mine.nodeclaims, mine.zones, mine.pending, mine.disruptions, round(mine.cost, 6)
    )


def event(uid, reason, kind, count=1):
    return {"metadata": {"uid": uid}, "reason": reason, "involvedObject": {"kind": kind}, "count": count}


def test_the_event_watch_tells_each_compared_reason_once_as_it_comes_or_recurs(versus):
    watch = versus.EventWatch()
    first = [
        event("1", "ConsolidationCandidate", "Node"),
        event("2", "ConsolidationCandidate", "NodeClaim"),
        event("3", "ConsolidationCandidate", "Node"),  # another node's: the same line
        event("4", "FailedScheduling", "Pod"),  # not compared
    ]
    assert watch.fresh(first) == ("ConsolidationCandidate on Node", "ConsolidationCandidate on NodeClaim")
    assert watch.fresh(first) == ()  # nothing new since
    again = [
        *first[:3],
        event("2", "ConsolidationCandidate", "NodeClaim", count=2),
        event("5", "Unconsolidatable", "Node"),
    ]
    assert watch.fresh(again) == ("ConsolidationCandidate on NodeClaim", "Unconsolidatable on Node")


def test_conditions_seen_name_the_termination_and_disruption_conditions_with_the_disruption_reason(versus):
    def versioned(*conditions):
        return {"status": {"conditions": [dict(zip(("type", "status", "reason"), c, strict=True)) for c in conditions]}}

    versions = [
        versioned(("Launched", "True", "Launched"), ("DisruptionReason", "True", "Underutilized")),
        versioned(("Drained", "Unknown", "Draining"), ("InstanceTerminating", "True", "InstanceTerminating")),
        versioned(("Drained", "True", "Drained"), ("VolumesDetached", "True", "VolumesDetached")),
    ]
    assert sorted(versus.conditions_seen(versions)) == [
        "condition DisruptionReason=True (Underutilized)",
        "condition Drained=True",  # Drained=Unknown is a pass's timing, not compared
        "condition InstanceTerminating=True",
        "condition VolumesDetached=True",
    ]


def test_events_are_compared_apart_from_the_decisions_and_only_where_both_were_recorded(versus):
    claims = [claim("a", "default", "c-8x-amd64-linux", "on-demand", "test-zone-a")]
    theirs = versus.snapshot(claims, [], [], ("ConsolidationCandidate on Node", "condition Drained=True"))
    mine = versus.snapshot(claims, [], [], ("ConsolidationCandidate on Node", "DisruptionBlocked on Node"))
    unrecorded = versus.snapshot(claims, [], [])
    assert theirs.differences(mine) == []  # the decisions are the same
    assert theirs.event_differences(mine) == ["events: without condition Drained=True; with DisruptionBlocked on Node"]
    assert theirs.event_differences(theirs) == []
    assert unrecorded.event_differences(mine) is None
    assert versus.Snapshot.from_json(theirs.as_json()) == versus.Snapshot(
        theirs.nodeclaims, theirs.zones, theirs.pending, theirs.disruptions, round(theirs.cost, 6), theirs.events
    )
    assert "events" not in unrecorded.as_json()
    result = versus.Result(versus.workloads(["corpus"], ["047-consolidation"], None)[0])
    result.snapshots = {"karpenter": {"down": theirs}, "lab": {"down": mine}, "kwok": {"down": unrecorded}}
    assert result.event_differences("lab") == [
        "down: events: without condition Drained=True; with DisruptionBlocked on Node"
    ]
    assert result.event_differences("kwok") is None


def test_plan_improvement_annotates_every_nodepool_of_an_apply_and_nothing_else(versus):
    workload = next(w for w in versus.workloads(["corpus"], ["008-taints"], None))
    stream = list(yaml.safe_load_all(versus.manifests(workload, ["manifests.yaml"], True)))
    annotated = sorted(
        (d["kind"], d["metadata"]["name"])
        for d in stream
        if d["metadata"].get("annotations", {}).get("karpui.dev/plan-improvement") == "enabled"
    )
    assert annotated == [("NodePool", "plain"), ("NodePool", "tainted")]
    assert len(stream) == 5
    plain = list(yaml.safe_load_all(versus.manifests(workload, ["manifests.yaml"], False)))
    assert all("annotations" not in d["metadata"] for d in plain)


def generated_as_committed(generate: ModuleType, seed: int, set_name: str, tmp_path: Path) -> list[str]:
    """Generate `seed` into tmp_path/<set_name> and check it is the committed set, file for file; its names."""
    names: list[str] = generate.generate(seed, tmp_path / set_name)
    committed = BENCH / "workloads" / set_name
    assert names == sorted(p.name for p in committed.iterdir() if p.is_dir())
    for name in names:
        for file in ("manifests.yaml", "scenario.yaml"):
            assert filecmp.cmp(tmp_path / set_name / name / file, committed / name / file, shallow=False), (name, file)
    return names


def test_the_committed_holdout_is_what_seed_2027_generates(generate, versus, tmp_path):
    # The holdout set: the same generator, a seed karpui was never tuned against, compared with Karpenter once.
    names = generated_as_committed(generate, 2027, "holdout", tmp_path)
    assert sorted(versus.recorded("holdout")) == names  # Karpenter's decisions recorded for every one


def test_the_committed_corpus_is_what_its_seed_generates(generate, tmp_path):
    names = generated_as_committed(generate, 24, "corpus", tmp_path)
    committed = BENCH / "workloads" / "corpus"
    assert len(names) == 57
    categories = {name.split("-", 1)[1] for name in names}
    assert categories == {
        "requirements", "taints", "spread", "affinity", "limits-weights", "daemonsets", "capacity-type",
        "minvalues", "consolidation", "dra",
    }  # fmt: skip
    again = generate.generate(24, tmp_path / "again")
    assert again == names
    assert filecmp.cmp(
        tmp_path / "again" / names[0] / "manifests.yaml", tmp_path / "corpus" / names[0] / "manifests.yaml"
    )
    other = generate.generate(25, tmp_path / "other")
    assert any(
        (tmp_path / "other" / n / "scenario.yaml").read_text() != (committed / n / "scenario.yaml").read_text()
        for n in other
    )


def test_every_consolidation_workload_scales_down_and_compares_after(versus):
    for workload in versus.workloads(["corpus"], [], None):
        steps = workload.scenario["steps"]
        compares = [s["compare"] for s in steps if "compare" in s]
        if workload.name.endswith("consolidation"):
            assert compares == ["up", "down"], workload.name
            # the scale-down's disruption is compared once it has settled, at most six minutes after the scale
            assert [list(s) for s in steps[-3:]] == [["scale"], ["settle"], ["compare"]], workload.name
            assert steps[-2] == {"settle": "6m"}, workload.name
        else:
            assert compares == ["up"], workload.name


def test_zones_are_compared_only_where_the_workload_constrains_them(versus):
    by_name = {w.name: w for w in versus.workloads(["corpus"], [], None)}
    assert by_name["013-spread"].zonal is False  # hostname spread: kwok picks each zone at random
    assert by_name["004-requirements"].zonal is True  # a zone by node selector
    assert by_name["008-taints"].zonal is False
    theirs = versus.snapshot([claim("a", "default", "c-8x-amd64-linux", "on-demand", "test-zone-a")], [], [])
    mine = versus.snapshot([claim("a", "default", "c-8x-amd64-linux", "on-demand", "test-zone-c")], [], [])
    spread = versus.snapshot(
        [
            claim("a", "default", "c-4x-amd64-linux", "on-demand", "test-zone-c"),
            claim("b", "default", "c-4x-amd64-linux", "on-demand", "test-zone-c"),
        ],
        [],
        [],
    )
    assert theirs.differences(mine, zonal=True) == []  # names never count, only how many share a zone
    assert theirs.differences(spread, zonal=False) == [
        "nodeclaims: 2× default/c-4x-amd64-linux/on-demand (Karpenter 1× default/c-8x-amd64-linux/on-demand)"
    ]


def test_a_static_nodepools_scale_down_is_compared_by_its_nodeclaims_not_as_a_command(versus):
    static = {"reason": "Overprovisioned", "decision": "delete", "disrupted-nodes": [], "replacement-node-count": 0}
    taken = versus.snapshot([], [], [static, KARPENTER_EMPTY])
    assert taken.disruptions == ("empty delete [c-8x-amd64-linux/on-demand] +0",)


def test_empty_nodes_deleted_compare_as_one_decision_however_many_commands_carried_them(versus):
    two = "empty delete [c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand] +0"
    one = "empty delete [c-2x-amd64-linux/on-demand] +0"
    replace = "underutilized replace [c-4x-amd64-linux/on-demand] +1"
    karpenter = versus.Snapshot((), (), (), tuple(sorted([two, two, one, replace])), 0.0)
    lab = versus.Snapshot((), (), (), tuple(sorted([one, two, one, one, replace])), 0.0)
    assert karpenter.differences(lab) == []
    assert versus.emptiness_as_one((two, one, replace)) == (
        "empty delete [c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand] +0",
        replace,
    )
    # one node fewer, or another command split differently, still differs
    fewer = versus.Snapshot((), (), (), tuple(sorted([two, one, one, replace])), 0.0)
    split = versus.Snapshot((), (), (), tuple(sorted([two, two, one, replace, replace])), 0.0)
    assert karpenter.differences(fewer) == [
        "disruptions: empty delete [c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand"
        " c-2x-amd64-linux/on-demand] +0, underutilized replace [c-4x-amd64-linux/on-demand] +1 (Karpenter empty"
        " delete [c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand"
        " c-2x-amd64-linux/on-demand c-2x-amd64-linux/on-demand] +0, underutilized replace"
        " [c-4x-amd64-linux/on-demand] +1)"
    ]
    assert len(karpenter.differences(split)) == 1


def scripted(versus, changes_at: dict[float, tuple[str, bool]], *, settle: bool = True):
    """A provisioner on a clock of its own whose state (a label and whether it has settled) changes at set moments."""

    class Scripted(versus.Provisioner):
        def __init__(self) -> None:
            self.now = 0.0
            self.looked: list[float] = []
            self.settle = settle

        def clock(self) -> float:
            return self.now

        def pause(self, seconds: float) -> None:
            self.now += seconds

        def state(self):
            self.looked.append(self.now)
            return changes_at[max(t for t in changes_at if t <= self.now)]

    return Scripted()


def test_a_wait_after_an_apply_ends_six_seconds_after_the_last_change_once_settled(versus):
    runner = scripted(versus, {0.0: ("applied", False), 3.0: ("bound", True)})
    runner.wait(25.0, after_scale=False)
    assert runner.now == 9.0  # the binds seen at 3 s, nothing new for 6 s


def test_a_wait_whose_pods_stay_pending_runs_the_step_and_twenty_seconds_more(versus):
    runner = scripted(versus, {0.0: ("applied", False), 3.0: ("a limit reached", False)})
    runner.wait(25.0, after_scale=False)
    assert runner.now == 45.0


def test_a_wait_after_a_scale_or_in_a_workload_without_compares_runs_its_whole_length(versus):
    after_scale = scripted(versus, {0.0: ("bound", True)})
    after_scale.wait(50.0, after_scale=True)
    unsettled = scripted(versus, {0.0: ("bound", True)}, settle=False)
    unsettled.wait(25.0, after_scale=False)
    assert (after_scale.now, after_scale.looked, unsettled.now, unsettled.looked) == (50.0, [], 25.0, [])


def test_a_settle_step_ends_a_minute_after_the_last_change_with_every_pod_bound(versus):
    # a scale at 0 s; emptiness deletes nodes at 19 s and 44 s; a pod rebinds until 50 s
    changes = {0.0: ("scaled", True), 19.0: ("two gone", True), 44.0: ("four gone", False), 50.0: ("bound", True)}
    runner = scripted(versus, changes)
    runner.until_quiet(360.0, versus.DISRUPTION_QUIET_SECONDS)
    assert runner.now == 110.0
    stuck = scripted(versus, {0.0: ("scaled", True), 30.0: ("a pod left unbound", False)})
    stuck.until_quiet(360.0, versus.DISRUPTION_QUIET_SECONDS)
    assert stuck.now == 360.0


def test_settling_looks_at_nodeclaim_names_readiness_and_each_pods_node_and_phase(versus):
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    claims = [{"metadata": {"name": "default-a"}, "status": ready}, {"metadata": {"name": "default-b"}, "status": {}}]
    pods = [pod("p1", "app", "node-a", "Running"), pod("p2", "app", None, "Pending")]
    assert versus.progress(claims, pods) == (
        (("default-a", "default-b"), (("p1", "node-a", "Running"), ("p2", None, "Pending"))),
        False,
    )
    assert versus.progress(claims[:1], pods[:1])[1] is True


def test_every_workload_with_a_resource_claim_runs_karpenter_with_dra_on(versus):
    with_claims = [
        w.key
        for w in versus.workloads(["seeds", "karpenter-1.x", "corpus"], [], None)
        if any("resourceClaims:" in path.read_text() for path in w.folder.glob("*.yaml"))
    ]
    assert with_claims == ["seeds/exp3-dra", "corpus/055-dra", "corpus/056-dra", "corpus/057-dra"]
    for workload in versus.workloads(["seeds", "corpus"], ["exp3-dra", "055-dra", "056-dra", "057-dra"], None):
        assert workload.env == {"IGNORE_DRA_REQUESTS": "false"}, workload.key


def test_dra_on_runs_the_kwok_provider_that_declares_draconfigs_devices(monkeypatch, tmp_path):
    from tests.kube import karpenter

    upstream, patched = tmp_path / "karpenter-kwok", tmp_path / "karpenter-kwok-dra"
    found = {"KARPUI_KARPENTER_BIN": str(upstream), "KARPUI_KARPENTER_DRA_BIN": str(patched)}
    monkeypatch.setattr(karpenter, "paths", lambda: found)
    assert karpenter.binary({}) == str(upstream)
    assert karpenter.binary({"IGNORE_DRA_REQUESTS": "true", "FEATURE_GATES": "NodeOverlay=true"}) == str(upstream)
    with pytest.raises(RuntimeError, match="karpenter-kwok-dra is not built: run hack/kube/build.sh karpenter-dra"):
        karpenter.binary({"IGNORE_DRA_REQUESTS": "false"})
    patched.write_bytes(b"#!/bin/sh\n")
    patched.chmod(0o755)
    assert karpenter.binary({"IGNORE_DRA_REQUESTS": "false"}) == str(patched)


def test_a_decision_karpenter_made_in_another_run_counts_as_the_same_and_says_so(versus):
    plain = versus.snapshot([claim("a", "plain", "c-8x-amd64-linux", "on-demand", "test-zone-a")], [], [])
    both = versus.snapshot(
        [
            claim("a", "plain", "c-8x-amd64-linux", "on-demand", "test-zone-a"),
            claim("b", "tainted", "c-2x-amd64-linux", "on-demand", "test-zone-a"),
        ],
        [],
        [],
    )
    workload = next(w for w in versus.workloads(["corpus"], ["010-taints"], None))
    drawn = versus.Result(workload, {"karpenter": {"up": plain}, "lab": {"up": both}, "kwok": {"up": plain}})
    assert drawn.differences("lab") == [
        "up: nodeclaims: 1× plain/c-8x-amd64-linux/on-demand, 1× tainted/c-2x-amd64-linux/on-demand "
        "(Karpenter 1× plain/c-8x-amd64-linux/on-demand)"
    ]
    drawn.other_outcomes = [{"up": both}]
    assert (drawn.differences("lab"), drawn.as_another_outcome("lab")) == ([], True)
    assert (drawn.differences("kwok"), drawn.as_another_outcome("kwok")) == ([], False)
    assert versus.summary([drawn], ["karpenter", "lab"]) == (
        "lab: the same decisions as Karpenter on 1 of 1 workloads (100.0 %; 1 of them as another of Karpenter's runs "
        "decided)"
    )
    assert (
        "| corpus/010-taints | 1× plain/c-8x-amd64-linux/on-demand | 0.2172 | same as another run of Karpenter's |"
        in (versus.table([drawn], ["karpenter", "lab"]))
    )


def test_recording_outcomes_keeps_the_recorded_run_and_adds_only_a_new_decision(versus, monkeypatch, tmp_path):
    monkeypatch.setattr(versus, "WORKLOADS", tmp_path)
    (tmp_path / "corpus").mkdir()
    plain = versus.snapshot([claim("a", "plain", "c-8x-amd64-linux", "on-demand", "test-zone-a")], [], [])
    tainted = versus.snapshot([claim("b", "tainted", "c-2x-amd64-linux", "on-demand", "test-zone-b")], [], [])
    workload = versus.Workload("corpus", "010-taints", tmp_path, {"steps": []})
    versus.record([versus.Result(workload, {"karpenter": {"up": plain}})])
    for run in (tainted, plain, tainted):
        versus.record([versus.Result(workload, {"karpenter": {"up": run}})], outcomes=True)
    [(name, (run, others))] = versus.recorded("corpus").items()
    assert (name, run["up"].nodeclaims, [o["up"].nodeclaims for o in others]) == (
        "010-taints",
        (("plain", "c-8x-amd64-linux", "on-demand"),),
        [(("tainted", "c-2x-amd64-linux", "on-demand"),)],
    )
    versus.record([versus.Result(workload, {"karpenter": {"up": tainted}})])  # --record: the recorded run replaced
    assert versus.recorded("corpus")["010-taints"][0]["up"].nodeclaims == (
        ("tainted", "c-2x-amd64-linux", "on-demand"),
    )


def evaluations(kind: str, reason: str, within_validation: int, total: int) -> str:
    """One consolidation type's evaluation histogram as Karpenter v1.15 serves it (its 15 s bucket and the rest)."""
    name = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds"
    labels = f'consolidation_type="{kind}",reason="{reason}"'
    return (
        f'{name}_bucket{{{labels},le="15"}} {within_validation}\n{name}_bucket{{{labels},le="+Inf"}} {total}\n'
        f"{name}_sum{{{labels}}} 1.5\n{name}_count{{{labels}}} {total}\n"
    )


# Karpenter's disruption metrics after a scale-down, in the shape its /metrics served them on 2026-12-07: of the
# evaluations past the 15 s validation, three Empty and one single-node decided, and one multi-node and one
# single-node did not.
KARPENTER_METRICS = (
    "# TYPE karpenter_voluntary_disruption_decision_evaluation_duration_seconds histogram\n"
    + evaluations("", "drifted", 18, 18)
    + evaluations("empty", "empty", 9, 12)
    + evaluations("multi", "underutilized", 8, 9)
    + evaluations("single", "underutilized", 7, 9)
    + "# TYPE karpenter_voluntary_disruption_decisions_total counter\n"
    'karpenter_voluntary_disruption_decisions_total{consolidation_type="empty",decision="delete",reason="empty"} 3\n'
    "karpenter_voluntary_disruption_decisions_total"
    '{consolidation_type="single",decision="delete",reason="underutilized"} 1\n'
)


def test_karpenters_commands_are_its_decisions_and_its_evaluations_past_the_validation_that_decided_nothing(
    versus, tmp_path
):
    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = KARPENTER_METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        karpenter = versus.Real(None, tmp_path, "karpenter")
        karpenter.metrics_port = server.server_address[1]
        assert karpenter.commands() == Counter(
            {
                ("empty", "executed"): 3,
                ("single", "executed"): 1,
                ("single", "rejected"): 1,
                ("multi", "rejected"): 1,
            }
        )
    finally:
        server.shutdown()
        server.server_close()


def test_karpuis_commands_are_its_disruption_commands_that_succeeded_or_were_rejected(versus, tmp_path):
    database = tmp_path / "karpui.sqlite3"
    with contextlib.closing(sqlite3.connect(database)) as db:
        db.execute("create table karpui_kubeobject (kind text, body text)")
        rows = [
            ("multi", "Rejected"),
            ("single", "Succeeded"),
            ("empty", "Succeeded"),
            ("empty", "Succeeded"),
            ("single", "Rejected"),
            ("empty", "Validating"),  # not yet ended: neither
            ("single", "Denied"),  # a person's no, not a validation's
        ]
        db.executemany(
            "insert into karpui_kubeobject values ('DisruptionCommand', ?)",
            [(json.dumps({"spec": {"method": method}, "status": {"phase": phase}}),) for method, phase in rows],
        )
        db.execute("insert into karpui_kubeobject values ('Pod', '{}')")
        db.commit()
    karpui = versus.Real(None, tmp_path, "kwok")
    karpui.database = database
    assert karpui.commands() == Counter(
        {("multi", "rejected"): 1, ("single", "executed"): 1, ("single", "rejected"): 1, ("empty", "executed"): 2}
    )


def test_a_race_laps_commands_say_executed_over_rejected_and_the_rejected_ones_kinds(versus):
    race = module(BENCH / "race.py", "race_bench")
    lap = race.Lap(
        "kwok", 1000, 56.0, 88.0, 9, 17.6, 2**27, 50.0, [], {"empty": [3, 0], "multi": [0, 1], "single": [1, 1]}
    )
    assert race.commands(lap) == "4 / 2 (multi 1, single 1)"
    assert race.commands(race.Lap("kwok", 1000, 56.0, 88.0, 9, 17.6, 2**27)) == "–"
