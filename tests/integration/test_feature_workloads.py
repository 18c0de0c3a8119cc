"""Each Karpenter 1.x feature's replayable workload (bench/workloads/karpenter-1.x/*/scenario.yaml) replayed in the lab
through `karp`, as issue 24's harness replays it against Karpenter: what Karpenter does is what the lab must do."""

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from tests.karp import ok

WORKLOADS = Path(__file__).resolve().parent.parent.parent / "bench" / "workloads" / "karpenter-1.x"
NODEPOOL = "karpenter.sh/nodepool"
SCENARIOS = sorted(p.parent.name for p in WORKLOADS.glob("*/scenario.yaml"))


def apply_options(settings, env: dict[str, str]) -> None:
    """The scenario's Karpenter environment as the lab's options (what `set env deploy/karpenter` sets)."""
    from karpui.settings import feature_gates
    from provisioner.options import parse_bool

    if "FEATURE_GATES" in env:
        settings.KARPUI_FEATURE_GATES = feature_gates(env["FEATURE_GATES"])
    if "PREFERENCE_POLICY" in env:
        settings.KARPUI_PREFERENCE_POLICY = env["PREFERENCE_POLICY"]
    if "MIN_VALUES_POLICY" in env:
        settings.KARPUI_MIN_VALUES_POLICY = env["MIN_VALUES_POLICY"]
    if "IGNORE_DRA_REQUESTS" in env:
        settings.KARPUI_IGNORE_DRA_REQUESTS = parse_bool("IGNORE_DRA_REQUESTS", env["IGNORE_DRA_REQUESTS"])
    if "LEGACY_NODE_REPAIR" in env:
        settings.KARPUI_LEGACY_NODE_REPAIR = parse_bool("LEGACY_NODE_REPAIR", env["LEGACY_NODE_REPAIR"])


def set_node_condition(step: dict[str, str]) -> None:
    """The first (by name) Node of the NodePool gets the condition, changed `since` ago, replacing its own (what
    `kubectl patch node --subresource=status` does against a cluster)."""
    from karpui.clusters import lab as labs
    from provisioner.cluster.objects import timestamp
    from provisioner.durations import parse_duration

    def change(running):
        nodes = sorted(
            (n for n in running.store.list("Node") if n["metadata"]["labels"].get(NODEPOOL) == step["nodepool"]),
            key=lambda n: n["metadata"]["name"],
        )
        node = nodes[0]
        since = running.now - (parse_duration(step.get("since", "0s")) or 0)
        node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != step["type"]] + [
            {"type": step["type"], "status": step["status"], "lastTransitionTime": timestamp(since)}
        ]
        running.store.update(node)

    labs.run_rows("lab", change)


def metric_value(step: dict) -> float:
    """The value of the one series of the metric that has the step's labels (others, our `cluster`, aside), from
    /metrics as Prometheus scrapes it (Karpenter's own /metrics, against a cluster)."""
    from django.test import Client
    from prometheus_client.parser import text_string_to_metric_families

    labels = {key: str(value) for key, value in (step.get("labels") or {}).items()}
    text = Client().get("/metrics").content.decode()
    [value] = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == step["name"] and labels.items() <= sample.labels.items()
    ]
    return value


def replay(directory: Path) -> None:
    scenario = yaml.safe_load((directory / "scenario.yaml").read_text())
    for number, step in enumerate(scenario["steps"], start=1):
        if "apply" in step:
            for name in step["apply"]:
                ok("apply", "-f", str(directory / name))
        elif "scale" in step:
            ok("scale", step["scale"]["target"], "--replicas", str(step["scale"]["replicas"]))
        elif "wait" in step or "settle" in step:
            # A settle ends early against a cluster once nothing changes; its whole length in the lab.
            ok("advance", step.get("wait") or step["settle"])
        elif "compare" in step:
            continue  # where bench/versus_karpenter.py records what was decided
        elif "expect" in step:
            expect = step["expect"]
            got = ok("get", expect["get"], "-o", f"jsonpath={expect['jsonpath']}").strip()
            if expect.get("sorted"):
                got = " ".join(sorted(got.split()))
            assert got == str(expect["equals"]), f"step {number}: {expect['get']} {expect['jsonpath']}"
        elif "metric" in step:
            got_value = metric_value(step["metric"])
            assert got_value == pytest.approx(float(step["metric"]["equals"])), f"step {number}: {step['metric']}"
        elif "run" in step:
            ok(*step["run"])
        elif "node-condition" in step:
            set_node_condition(step["node-condition"])
        else:
            raise AssertionError(f"step {number}: unknown step {step}")


def test_every_workload_names_its_feature_and_steps():
    assert SCENARIOS, "no workloads found"
    for name in SCENARIOS:
        scenario = yaml.safe_load((WORKLOADS / name / "scenario.yaml").read_text())
        assert scenario["feature"] and scenario["steps"], name
        assert any("expect" in step or "metric" in step for step in scenario["steps"]), f"{name} checks nothing"


@pytest.mark.parametrize("name", SCENARIOS)
def test_workload_replays_in_the_lab_as_karpenter_behaves(name, lab, settings):
    scenario = yaml.safe_load((WORKLOADS / name / "scenario.yaml").read_text())
    env = (scenario.get("karpenter") or {}).get("env") or {}
    apply_options(settings, env)
    if "INSTANCE_TYPES_FILE_PATH" in env:
        # Karpenter's kwok provider reads the file; karpui takes it as its kwok catalog.
        file = str(WORKLOADS / name / env["INSTANCE_TYPES_FILE_PATH"])
        call_command("catalog", "import", "--overwrite-builtin", file, stdout=io.StringIO())
    replay(WORKLOADS / name)
