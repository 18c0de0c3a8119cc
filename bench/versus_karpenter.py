"""Karpenter itself beside karpui: the same workloads through each, compared decision by decision. Asserts nothing.

Usage:
    python bench/versus_karpenter.py [--set corpus,seeds,karpenter-1.x] [--only NAME,...] [--limit N]
                                     [--provisioners karpenter,lab,kwok] [--record] [--record-events] [--readme]
                                     [--kubeconfig FILE] [--plan-improvement]

Each workload (bench/workloads/<set>/<name>/scenario.yaml, format in bench/workloads/karpenter-1.x/README.md) runs
through each provisioner in turn, one at a time from the same empty state:
* karpenter: Karpenter's kwok provider v1.15 (hack/kube/build.sh's binary) on a real control plane
  (hack/kube/cluster.py, started here unless --kubeconfig names one), run by this script as a process of its own
  with the scenario's environment; a scenario with IGNORE_DRA_REQUESTS=false runs the build whose instance types
  declare the devices of the cluster's DRAConfigs (`hack/kube/build.sh karpenter-dra`, seed 000's experiment 3);
* kwok: karpui's engine (`manage.py engine`, a process of its own with its own database) in kwok mode on the same
  cluster;
* lab: karpui's lab in this process (a throwaway SQLite database), `wait` steps advancing its clock.
At each `compare: NAME` step (or at the end of a workload that has none) it records what the provisioner decided:
the NodeClaims (NodePool, instance type, capacity type; and how many per zone where the workload constrains zones:
elsewhere Karpenter's kwok provider picks a zone at random among equal prices), their cost per hour (the kwok
catalog's prices), the pods left pending per workload, and the disruption decisions logged since the last compare
("disrupting node(s)": reason, decision, the disrupted nodes' types, the count of replacements). A workload is the
same when every compare is. Beside the decisions, and reported apart from them, it records which disruption and
consolidation events came since the last compare (`COMPARED_EVENTS`, as "<reason> on <kind>": ConsolidationCandidate,
ConsolidationRejected, ConsolidationApproved, DisruptionBlocked, Unconsolidatable, ...).

A `wait` after an apply in a workload with compare steps ends once nothing has changed for 6 s with every NodeClaim
ready and every pod bound (at most the wait plus 20 s); any other `wait` runs its whole length. A `settle: LONGEST`
step (the corpus's scale-downs) ends once nothing has changed for 60 s with every pod bound (at most LONGEST): the
disruption a scale-down starts is compared once it has run its course, not part-way through a budget's pacing. The
lab follows the same rules on its own clock, advanced a second at a time, so a scale-down comes as long after the
binds as it does on a real cluster. The empty nodes deleted are compared as one decision however many commands
carried them (the budget and the passes' timing split them). Each provisioner's log of each workload is kept in
var/versus/<provisioner>/<set>-<name>.log.

--record writes Karpenter's results to bench/workloads/<set>/karpenter.json, so a later change is compared with
Karpenter's recorded decisions without running it (`--provisioners lab` reads them). Where Karpenter breaks a tie at
random (the order of equal pods is their UIDs'), --record-outcomes keeps the recorded run and adds each run that
decided otherwise as another outcome; a provisioner that decided as one of those is counted the same, and said so.
--record-events adds a Karpenter run's events to its recorded run where it decided the same, keeping the decisions. --plan-improvement also runs
the lab with `karpui.dev/plan-improvement: "enabled"` on every NodePool and reports its cost against Karpenter's.
--readme writes the table into bench/README.md between the markers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "bench" / "workloads"
sys.path.insert(0, str(ROOT))

NODEPOOL = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
HOLD_CONDITIONS = "karpui.dev/kwok-hold-conditions"  # hack/kube/cluster.py's kwok leaves such a node's conditions
PLAN_IMPROVEMENT = "karpui.dev/plan-improvement"
# A settling wait (Provisioner.wait) ends once nothing has changed for QUIET_SECONDS with every NodeClaim ready and
# every pod bound, or SETTLE_GRACE_SECONDS past the step's length; it looks every POLL_SECONDS.
QUIET_SECONDS = 6.0
SETTLE_GRACE_SECONDS = 20.0
POLL_SECONDS = 1.0
# A `settle` step (after a scale-down) ends once the NodeClaims and pods have not changed for DISRUPTION_QUIET_SECONDS
# with every pod bound, or at the step's length. Karpenter's disruption acts in commands its budget sizes, 10-25 s
# apart (its 10 s pass, the 15 s it validates a command), so a minute without one means it has nothing left to do.
DISRUPTION_QUIET_SECONDS = 60.0
# The events compared beside the decisions, as "<reason> on <kind>": Karpenter's disruption and consolidation events
# (pkg/events/reason.go), those issue 25's features add among them (ConsolidationCandidate and ConsolidationRejected
# with their savings, v1.9; ConsolidationApproved with a Balanced score, v1.14; NodeRepairBlocked).
COMPARED_EVENTS = frozenset(
    {
        "ConsolidationApproved",
        "ConsolidationCandidate",
        "ConsolidationRejected",
        "DisruptionBlocked",
        "DisruptionLaunching",
        "DisruptionTerminating",
        "DisruptionWaitingReadiness",
        "NodeRepairBlocked",
        "Unconsolidatable",
    }
)
# The NodeClaim conditions compared with the events, as "<type>=True" (with the reason of DisruptionReason): each
# seen true on any NodeClaim since the last compare, by a watch on the real cluster and from the lab's change log.
# Karpenter's termination conditions (Drained, VolumesDetached, InstanceTerminating; v1.2) and the disruption reason
# its candidates carry (DisruptionReason; v1.6). Only True is compared: Drained is Unknown ("Draining") only at a
# pass that found a pod still to evict, which is timing in Karpenter itself, and the lab's change log holds one
# version per step.
COMPARED_CONDITIONS = frozenset({"Drained", "DisruptionReason", "InstanceTerminating", "VolumesDetached"})
README_START = "<!-- versus_karpenter: start -->"
README_END = "<!-- versus_karpenter: end -->"


# What a provisioner decided ----------------------------------------------------------------------------------------


_PRICES: dict[tuple[str, str], float] = {}


def use_prices(workload: Workload | None) -> None:
    """Price NodeClaims from the workload's catalog: its instance-types file, or the kwok provider's own."""
    from provisioner.catalog.kwok import kwok_catalog
    from provisioner.catalog.kwok_file import load_kwok_instance_types

    path = workload.instance_types if workload else None
    catalog = load_kwok_instance_types(path.read_text()) if path else kwok_catalog()
    _PRICES.clear()
    _PRICES.update({(t.name, o.capacity_type): o.price for t in catalog.instance_types for o in t.offerings})


def price_of(instance_type: str, capacity_type: str) -> float:
    """The price per hour of an offering in the workload's catalog (every zone's is the same); the kwok
    provider's own until a workload says otherwise."""
    if not _PRICES:
        use_prices(None)
    return _PRICES.get((instance_type, capacity_type), 0.0)


@dataclass(frozen=True)
class Snapshot:
    """What a provisioner had decided at one compare step."""

    nodeclaims: tuple[tuple[str, str, str], ...]  # (nodepool, instance type, capacity type), sorted
    zones: tuple[int, ...]  # NodeClaims per zone, largest first
    pending: tuple[tuple[str, int], ...]  # (app label, pods pending), sorted
    disruptions: tuple[str, ...]  # one line per "disrupting node(s)" decision, sorted
    cost: float
    # The compared events that came or recurred since the last compare ("<reason> on <kind>", sorted, each once),
    # and the compared NodeClaim conditions seen since ("condition <type>=<status>"); None where they were not
    # recorded (Karpenter's runs before they were).
    events: tuple[str, ...] | None = None

    def differences(self, other: Snapshot, zonal: bool = True) -> list[str]:
        """What differs, said as `other` (Karpenter's in brackets); zones only where the workload constrains them."""
        said = []
        for name in ("nodeclaims", "zones", "pending", "disruptions"):
            if name == "zones" and not zonal:
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "disruptions":
                mine, theirs = emptiness_as_one(mine), emptiness_as_one(theirs)
            if mine != theirs:
                said.append(f"{name}: {_short(theirs)} (Karpenter {_short(mine)})")
        return said

    def event_differences(self, other: Snapshot) -> list[str] | None:
        """The events `other` saw that this did not, and the other way round; None if either did not record them."""
        if self.events is None or other.events is None:
            return None
        if self.events == other.events:
            return []
        missing = [e for e in self.events if e not in other.events]
        extra = [e for e in other.events if e not in self.events]
        said = ([f"without {', '.join(missing)}"] if missing else []) + ([f"with {', '.join(extra)}"] if extra else [])
        return [f"events: {'; '.join(said)}"]

    def as_json(self) -> dict[str, Any]:
        return {
            "nodeclaims": [list(c) for c in self.nodeclaims],
            "zones": list(self.zones),
            "pending": [list(p) for p in self.pending],
            "disruptions": list(self.disruptions),
            "cost": round(self.cost, 6),
            **({"events": list(self.events)} if self.events is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Snapshot:
        return cls(
            tuple(tuple(c) for c in data["nodeclaims"]),  # type: ignore[misc]
            tuple(data["zones"]),
            tuple((p[0], p[1]) for p in data["pending"]),
            tuple(data["disruptions"]),
            data["cost"],
            tuple(data["events"]) if "events" in data else None,
        )


def _short(value: tuple[Any, ...]) -> str:
    if value and isinstance(value[0], tuple) and len(value[0]) == 3:
        counted = Counter(value)
        return ", ".join(f"{n}× {pool}/{t}/{c}" for (pool, t, c), n in sorted(counted.items())) or "none"
    return ", ".join(str(v) for v in value) or "none"


def conditions_seen(nodeclaims: list[dict[str, Any]]) -> set[str]:
    """The compared conditions true on these NodeClaim versions, as "condition <type>=True"."""
    seen = set()
    for claim in nodeclaims:
        for condition in (claim.get("status") or {}).get("conditions") or []:
            kind = condition.get("type")
            if kind not in COMPARED_CONDITIONS or condition.get("status") != "True":
                continue
            reason = f" ({condition.get('reason')})" if kind == "DisruptionReason" else ""
            seen.add(f"condition {kind}={condition.get('status')}{reason}")
    return seen


class NodeClaimWatch:
    """Every version of the NodeClaims a `kubectl get nodeclaims --watch -o json` printed, read as it goes."""

    def __init__(self, kubeconfig: str, out: Path) -> None:
        self.out = out
        self.offset = 0
        self.decoder = json.JSONDecoder()
        with open(out, "wb") as sink:
            self.process = subprocess.Popen(
                ["kubectl", "--kubeconfig", kubeconfig, "get", "nodeclaims", "--watch", "-o", "json"],
                stdout=sink,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def versions(self) -> list[dict[str, Any]]:
        """The versions printed since the last call (a version still being printed waits for the next)."""
        text = self.out.read_text(errors="replace")
        found = []
        while True:
            start = text.find("{", self.offset)
            if start < 0:
                break
            try:
                obj, end = self.decoder.raw_decode(text, start)
            except ValueError:
                break
            found.append(obj)
            self.offset = end
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait()


class EventWatch:
    """Which compared events came, or recurred (an event's count went up), since the last look."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def fresh(self, events: list[dict[str, Any]]) -> tuple[str, ...]:
        found = set()
        for event in events:
            reason = event.get("reason")
            if reason not in COMPARED_EVENTS:
                continue
            meta = event.get("metadata") or {}
            key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
            count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
            if self.counts.get(key, 0) < count:
                self.counts[key] = count
                found.add(f"{reason} on {(event.get('involvedObject') or {}).get('kind', '?')}")
        return tuple(sorted(found))


def snapshot(
    nodeclaims: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    decisions: list[dict[str, Any]],
    events: tuple[str, ...] | None = None,
) -> Snapshot:
    claims = []
    zones: Counter[str] = Counter()
    cost = 0.0
    for claim in nodeclaims:
        if claim["metadata"].get("deletionTimestamp"):
            continue
        labels = claim["metadata"].get("labels") or {}
        instance_type, capacity = labels.get(INSTANCE_TYPE, "?"), labels.get(CAPACITY_TYPE, "?")
        claims.append((labels.get(NODEPOOL, "?"), instance_type, capacity))
        zones[labels.get(ZONE, "?")] += 1
        cost += price_of(instance_type, capacity)
    pending: Counter[str] = Counter()
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or pod["spec"].get("nodeName"):
            continue
        if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            pending[(pod["metadata"].get("labels") or {}).get("app", pod["metadata"]["name"])] += 1
    return Snapshot(
        tuple(sorted(claims)),
        tuple(sorted(zones.values(), reverse=True)),
        tuple(sorted(pending.items())),
        # A static NodePool's scale-down is logged by Karpenter as "deprovisioning nodeclaims to satisfy replica
        # count", not as a disruption command; karpui records it as one (reason Overprovisioned). Its NodeClaims say
        # what was decided.
        tuple(sorted(line for line in map(decision_line, decisions) if not line.startswith("overprovisioned "))),
        cost,
        events,
    )


def emptiness_as_one(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The empty nodes deleted, as one decision: Emptiness deletes every empty, Consolidatable node its budget allows
    at each pass, so how many commands carry them is the budget and when the passes came (two Karpenter runs of one
    workload took 1, 1, 1 and 2, 2 nodes). Every other command is compared as it was."""
    taken = [line[len("empty delete [") : -len("] +0")] for line in lines if line.startswith("empty delete [")]
    if len(taken) < 2:
        return lines
    merged = " ".join(sorted(" ".join(taken).split()))
    return tuple(
        sorted([line for line in lines if not line.startswith("empty delete [")] + [f"empty delete [{merged}] +0"])
    )


def decision_line(fields: dict[str, Any]) -> str:
    """A "disrupting node(s)" record as what was decided: reason, decision, the nodes taken, how many replace them."""
    taken = sorted(f"{n.get('instance-type')}/{n.get('capacity-type')}" for n in fields.get("disrupted-nodes") or [])
    replacements = fields.get("replacement-node-count", 0)
    # Karpenter logs the reason as the command's first word ("Empty/<id>: delete: ..."); karpui's as Karpenter does.
    reason = str(fields.get("reason") or str(fields.get("command", "")).split("/", 1)[0]).lower()
    return f"{reason} {fields.get('decision')} [{' '.join(taken)}] +{replacements}"


# The workloads -------------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    set: str
    name: str
    folder: Path
    scenario: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return dict((self.scenario.get("karpenter") or {}).get("env") or {})

    @property
    def key(self) -> str:
        return f"{self.set}/{self.name}"

    @property
    def instance_types(self) -> Path | None:
        """The kwok provider's instance-types file the workload runs with (INSTANCE_TYPES_FILE_PATH, relative to its
        folder): Karpenter reads it, karpui imports it as its kwok catalog."""
        name = self.env.get("INSTANCE_TYPES_FILE_PATH")
        return self.folder / name if name else None

    @property
    def zonal(self) -> bool:
        """Whether the workload constrains zones (a zone selector, requirement, affinity or spread). Where it does
        not, Karpenter's kwok provider picks each NodeClaim's zone at random among equal prices, and so does the
        lab's order of offerings: zones are then not compared."""
        return any(ZONE in path.read_text() for path in self.folder.glob("*.yaml") if path.name != "scenario.yaml")


def workloads(sets: list[str], only: list[str], limit: int | None) -> list[Workload]:
    found = []
    for name in sets:
        for scenario in sorted((WORKLOADS / name).glob("*/scenario.yaml")):
            if only and scenario.parent.name not in only:
                continue
            found.append(Workload(name, scenario.parent.name, scenario.parent, yaml.safe_load(scenario.read_text())))
    return found[:limit] if limit else found


def manifests(workload: Workload, files: list[str], plan_improvement: bool) -> str:
    """The files of an apply step as one stream; with plan improvement each NodePool annotated to use it."""
    documents = []
    for name in files:
        for document in yaml.safe_load_all((workload.folder / name).read_text()):
            if document is None:
                continue
            if plan_improvement and document.get("kind") == "NodePool":
                document.setdefault("metadata", {}).setdefault("annotations", {})[PLAN_IMPROVEMENT] = "enabled"
            documents.append(document)
    return yaml.safe_dump_all(documents, sort_keys=False)


def waits(workload: Workload) -> float:
    """The longest its steps may wait in all."""
    return sum(
        seconds(step.get("wait") or step["settle"])
        for step in workload.scenario["steps"]
        if {"wait", "settle"} & set(step)
    )


def seconds(duration: str) -> float:
    from provisioner.durations import parse_duration

    parsed = parse_duration(duration)
    assert parsed is not None, duration
    return float(parsed)


# Provisioners ------------------------------------------------------------------------------------------------------


class Provisioner:
    """Runs a workload's steps and says what it decided at each compare."""

    name = ""

    def run(self, workload: Workload) -> dict[str, Snapshot]:
        use_prices(workload)
        self.begin(workload)
        # A workload with compare steps waits for its provisioner to settle; one without (issue 25's, whose
        # expectations hold at set moments) waits each step's whole length, as the lab's clock does.
        self.settle = any("compare" in step for step in workload.scenario["steps"])
        taken: dict[str, Snapshot] = {}
        after_scale = False
        try:
            for step in workload.scenario["steps"]:
                if "apply" in step:
                    self.apply(manifests(workload, step["apply"], self.plan_improvement))
                    after_scale = False
                elif "scale" in step:
                    self.scale(step["scale"]["target"], int(step["scale"]["replicas"]))
                    after_scale = True
                elif "wait" in step:
                    self.wait(seconds(step["wait"]), after_scale)
                elif "settle" in step:
                    self.until_quiet(self.clock() + seconds(step["settle"]), DISRUPTION_QUIET_SECONDS)
                elif "compare" in step:
                    taken[step["compare"]] = self.snapshot()
                elif "node-condition" in step:
                    self.node_condition(step["node-condition"])
                elif "expect" in step or "run" in step or "metric" in step:
                    continue  # the lab's own checks (tests/integration/test_feature_workloads.py)
                else:
                    raise SystemExit(f"{workload.key}: unknown step {step}")
            if not taken:
                taken["end"] = self.snapshot()
        finally:
            self.end()
        return taken

    plan_improvement = False
    settle = True

    def wait(self, duration: float, after_scale: bool) -> None:
        """A `wait` step, by one rule for every provisioner, each on its own clock (wall time or the lab's)."""
        if after_scale or not self.settle:
            self.pause(duration)
            return
        # Settled: every pod bound, every NodeClaim ready, nothing changed for a while. Pods that stay pending (a
        # limit, say) wait out the step and 20 s more (a loaded control plane is slower than the step expects). The
        # lab follows the rule too, a second of its clock at a time: a real cluster's settled wait ends a few
        # seconds after the binds, and what comes next (a scale-down, say) must come as soon in the lab.
        self.until_quiet(self.clock() + duration + SETTLE_GRACE_SECONDS, QUIET_SECONDS)

    def until_quiet(self, deadline: float, quiet: float) -> None:
        """Looks each second until nothing has changed for `quiet` seconds with every NodeClaim ready and every pod
        bound, or until the deadline."""
        last, since = None, self.clock()
        while self.clock() < deadline:
            state = self.state()
            if state != last:
                last, since = state, self.clock()
            elif self.clock() - since >= quiet and state[1]:
                return
            self.pause(min(POLL_SECONDS, deadline - self.clock()))

    def begin(self, workload: Workload) -> None: ...
    def end(self) -> None: ...
    def apply(self, stream: str) -> None: ...
    def scale(self, target: str, replicas: int) -> None: ...
    def clock(self) -> float: ...
    def pause(self, seconds: float) -> None: ...
    def state(self) -> tuple[Any, bool]: ...
    def node_condition(self, step: dict[str, str]) -> None: ...
    def snapshot(self) -> Snapshot: ...


def progress(nodeclaims: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[Any, bool]:
    """What changes while a provisioner works (the NodeClaims' names, each pod's node and phase), and whether it has
    settled: every NodeClaim ready, no pod left unbound."""
    ready = all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])
        for n in nodeclaims
    ) and not any(not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp") for p in pods)
    signature = (
        tuple(sorted(n["metadata"]["name"] for n in nodeclaims)),
        tuple(
            sorted(
                (p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase")) for p in pods
            )
        ),
    )
    return signature, ready


class Lab(Provisioner):
    """karpui's lab in this process, a fresh database for each workload."""

    name = "lab"

    def __init__(self, folder: Path, plan_improvement: bool = False) -> None:
        self.folder = folder
        self.plan_improvement = plan_improvement
        if plan_improvement:
            self.name = "lab+improve"
        self.database = folder / "lab.sqlite3"
        self.template = folder / "lab-template.sqlite3"
        self.seen_log = 0
        self.seen_change = 0  # the lab's change log, read up to this resourceVersion
        self.lab_seconds = 0.0  # how far `wait` steps have moved the lab's clock
        self.events = EventWatch()

    def setup(self) -> None:
        os.environ["DJANGO_SETTINGS_MODULE"] = "karpui.settings"
        os.environ["DATABASE_URL"] = f"sqlite:///{self.database}"
        os.environ.setdefault("KARPUI_VAR_DIR", str(self.folder / "var"))
        import django

        django.setup()
        from django.core.management import call_command

        if not self.template.exists():
            call_command("migrate", verbosity=0)
            from django.db import connections

            connections.close_all()
            shutil.copyfile(self.database, self.template)

    def karp(self, *args: str, stdin: str | None = None) -> str:
        import io

        from django.core.management import call_command

        out, err, old = io.StringIO(), io.StringIO(), sys.stdin
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            call_command("karp", *args, stdout=out, stderr=err)
        except SystemExit as exit:
            if exit.code:
                raise RuntimeError(f"karp {' '.join(args)}: {err.getvalue()}") from None
        finally:
            sys.stdin = old
        return out.getvalue()

    def begin(self, workload: Workload) -> None:
        import io

        from django.conf import settings
        from django.core.management import call_command
        from django.db import connections

        from karpui.clusters import lab as labs

        connections.close_all()
        shutil.copyfile(self.template, self.database)
        labs.forget()
        env = workload.env
        from karpui.settings import feature_gates
        from provisioner.options import parse_bool

        self.saved = {
            n: getattr(settings, n)
            for n in (
                "KARPUI_FEATURE_GATES",
                "KARPUI_IGNORE_DRA_REQUESTS",
                "KARPUI_LEGACY_NODE_REPAIR",
                "KARPUI_MIN_VALUES_POLICY",
                "KARPUI_PREFERENCE_POLICY",
            )
        }
        settings.KARPUI_FEATURE_GATES = feature_gates(env.get("FEATURE_GATES", ""))
        # Karpenter ignores DRA requests unless told otherwise (IGNORE_DRA_REQUESTS defaults to true).
        settings.KARPUI_IGNORE_DRA_REQUESTS = parse_bool("IGNORE_DRA_REQUESTS", env.get("IGNORE_DRA_REQUESTS", "true"))
        settings.KARPUI_LEGACY_NODE_REPAIR = parse_bool("LEGACY_NODE_REPAIR", env.get("LEGACY_NODE_REPAIR", "false"))
        settings.KARPUI_MIN_VALUES_POLICY = env.get("MIN_VALUES_POLICY", "Strict")
        settings.KARPUI_PREFERENCE_POLICY = env.get("PREFERENCE_POLICY", "Respect")
        self.set_karpenter_env(env)
        if workload.instance_types:
            call_command("catalog", "import", "--overwrite-builtin", str(workload.instance_types), stdout=io.StringIO())
        self.seen_log = 0
        self.seen_change = 0
        self.lab_seconds = 0.0
        self.events = EventWatch()

    def set_karpenter_env(self, env: dict[str, str]) -> None:
        """The workload's options on the lab's Karpenter Deployments (`kubectl set env deploy/karpenter`): the lab
        decides with their environment over the settings, and the chart's sets PREFERENCE_POLICY and
        MIN_VALUES_POLICY."""
        from provisioner.options import OPTION_VARIABLES

        wanted = {name: value for name, value in env.items() if name in OPTION_VARIABLES}
        if not wanted:
            return
        # One release's: the lab makes the change on both alike.
        deployment = json.loads(self.karp("get", "deployment", "karpenter", "-n", "kube-system", "-o", "json"))
        deployment["metadata"].pop("resourceVersion", None)
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            kept = [e for e in container.get("env") or [] if e["name"] not in wanted]
            container["env"] = kept + [{"name": n, "value": v} for n, v in wanted.items()]
        self.karp("apply", "-f", "-", stdin=json.dumps(deployment))

    def end(self) -> None:
        from django.conf import settings

        for name, value in self.saved.items():
            setattr(settings, name, value)

    def apply(self, stream: str) -> None:
        self.karp("apply", "-f", "-", stdin=stream)

    def scale(self, target: str, replicas: int) -> None:
        self.karp("scale", target, "--replicas", str(replicas))

    def clock(self) -> float:
        return self.lab_seconds

    def pause(self, seconds: float) -> None:
        from karpui.clusters import lab as labs

        labs.advance("lab", seconds)  # the whole span: nothing bounds its work
        self.lab_seconds += seconds

    def state(self) -> tuple[Any, bool]:
        claims = json.loads(self.karp("get", "nodeclaims", "-o", "json"))["items"]
        pods = json.loads(self.karp("get", "pods", "-A", "-o", "json"))["items"]
        return progress(claims, pods)

    def node_condition(self, step: dict[str, str]) -> None:
        from tests.integration.test_feature_workloads import set_node_condition

        set_node_condition(step)

    def snapshot(self) -> Snapshot:
        from karpui import models

        claims = json.loads(self.karp("get", "nodeclaims", "-o", "json"))["items"]
        pods = json.loads(self.karp("get", "pods", "-A", "-o", "json"))["items"]
        entries = models.LogEntry.objects.filter(
            cluster__name="lab", message="disrupting node(s)", id__gt=self.seen_log
        ).order_by("id")
        decisions = []
        for entry in entries:
            self.seen_log = max(self.seen_log, entry.id)
            decisions.append(dict(entry.fields))
        events = json.loads(self.karp("get", "events", "-A", "-o", "json"))["items"]
        versions = models.ChangeLogEntry.objects.filter(
            cluster__name="lab", kind="NodeClaim", resource_version__gt=self.seen_change
        ).order_by("resource_version")
        seen = set()
        for change in versions:
            self.seen_change = max(self.seen_change, change.resource_version)
            seen |= conditions_seen([change.body])
        return snapshot(claims, pods, decisions, (*self.events.fresh(events), *sorted(seen)))


class Real(Provisioner):
    """A provisioner on the real control plane: Karpenter's kwok provider, or karpui's engine in kwok mode."""

    def __init__(self, cluster: Any, folder: Path, kind: str) -> None:
        self.cluster = cluster
        self.folder = folder
        self.name = kind
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / f"{kind}.log"
        self.log_offset = 0
        self.usage: list[tuple[float, float, int]] = []
        self.profile: Path | None = None  # karpui's engine: run under cProfile, its stats written here at the end
        self.made_unhealthy: dict[str, dict[str, Any]] = {}  # Node name -> its type, as a node-condition step found it
        self.events = EventWatch()
        self.nodeclaims: NodeClaimWatch | None = None
        self.metrics_port: int | None = None  # Karpenter's, while it runs
        self.database: Path | None = None  # karpui's engine's, while it runs

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return str(self.cluster.kubectl(*args, input=input).stdout)

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(json.loads(self.kubectl("get", *args, "-o", "json"))["items"])

    def begin(self, workload: Workload) -> None:
        self.cluster.reset()
        self.events = EventWatch()
        self.events.fresh(self.items("events", "-A"))  # what an earlier workload left is not this one's
        self.nodeclaims = NodeClaimWatch(str(self.cluster.kubeconfig), self.folder / f"{self.name}-nodeclaims.json")
        env = workload.env
        if workload.instance_types:
            env["INSTANCE_TYPES_FILE_PATH"] = str(workload.instance_types)
        self.start(env, f"{workload.set}-{workload.name}")

    def start(self, env: dict[str, str], label: str) -> None:
        self.log = ROOT / "var" / "versus" / self.name / f"{label}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_bytes(b"")
        self.log_offset = 0
        from tests.kube.karpenter import binary

        # Karpenter's build for the workload: the DRA-declaring one with IGNORE_DRA_REQUESTS=false (raises, before the
        # log is opened, when that one is not built).
        karpenter = binary(env) if self.name == "karpenter" else ""
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        if self.name == "karpenter":
            _TAKEN.clear()  # the last run's ports are free again
            folder = self.cluster.folder
            self.metrics_port = free_port()
            child_env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("KARPUI_", "DATABASE_URL"))},
                "KUBECONFIG": str(folder / "karpenter.kubeconfig" if folder else self.cluster.kubeconfig),
                "DISABLE_LEADER_ELECTION": "true",
                "METRICS_PORT": str(self.metrics_port),
                "HEALTH_PROBE_PORT": str(free_port()),
                "SYSTEM_NAMESPACE": "kube-system",
                "LOG_LEVEL": "info",
                **env,
            }
            self.process = subprocess.Popen(
                [karpenter], env=child_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        else:
            from tests.kube.engineprocess import Database

            self.kubectl("create", "namespace", "karpui")
            database = Database(self.folder / "karpui", self.folder / "template")
            self.database = database.path
            database.cluster("real", "kwok", self.cluster.kubeconfig)
            if env.get("INSTANCE_TYPES_FILE_PATH"):
                database.manage("catalog", "import", "--overwrite-builtin", env["INSTANCE_TYPES_FILE_PATH"])
            child_env = database.env(
                KARPUI_TICK_SECONDS="0.5",
                KARPUI_FEATURE_GATES=env.get("FEATURE_GATES", ""),
                KARPUI_IGNORE_DRA_REQUESTS=env.get("IGNORE_DRA_REQUESTS", "true"),
                KARPUI_LEGACY_NODE_REPAIR=env.get("LEGACY_NODE_REPAIR", "false"),
                KARPUI_MIN_VALUES_POLICY=env.get("MIN_VALUES_POLICY", "Strict"),
                KARPUI_PREFERENCE_POLICY=env.get("PREFERENCE_POLICY", "Respect"),
            )
            profiled = ["-m", "cProfile", "-o", str(self.profile)] if self.profile is not None else []
            self.process = subprocess.Popen(
                [sys.executable, *profiled, "manage.py", "engine", "--cluster", "real", "--lease-namespace", "karpui"],
                cwd=ROOT,
                env=child_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        out.close()
        self.usage = []
        time.sleep(3.0 if self.name == "karpenter" else 5.0)  # started and its caches synced

    def end(self) -> None:
        if self.nodeclaims is not None:
            self.nodeclaims.stop()
            self.nodeclaims = None
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def sample(self) -> None:
        """The provisioner's CPU-seconds so far and its peak RSS (its whole process group); a provisioner that
        exited ends the workload, with the end of its log."""
        if self.process is None:
            return
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-600:]
            raise RuntimeError(f"{self.name} exited ({self.process.returncode}): {tail}")
        self.usage.append((time.monotonic(), *process_usage(self.process.pid)))

    def commands(self) -> Counter[tuple[str, str]]:
        """The disruption commands made since the provisioner started: (consolidation type, "executed" or
        "rejected") -> how many. Karpenter's are read from its metrics (karpenter_commands), karpui's from its
        database (karpui_commands)."""
        if self.name == "karpenter" and self.metrics_port is not None:
            try:
                with urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
                    return karpenter_commands(response.read().decode())
            except OSError:
                return Counter()  # its metrics unread: no count, rather than no lap
        if self.database is not None:
            return karpui_commands(self.database)
        return Counter()

    def apply(self, stream: str) -> None:
        self.kubectl("apply", "-f", "-", input=stream)

    def scale(self, target: str, replicas: int) -> None:
        kind, name = target.split("/", 1)
        self.kubectl("scale", kind, name, f"--replicas={replicas}")

    def clock(self) -> float:
        return time.monotonic()

    def pause(self, seconds: float) -> None:
        """Wall time passing, the provisioner watched each second (it may have exited)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.sample()
            time.sleep(min(POLL_SECONDS, left))

    def state(self) -> tuple[Any, bool]:
        return progress(self.items("nodeclaims"), self.items("pods", "-A"))

    def node_condition(self, step: dict[str, str]) -> None:
        from provisioner.cluster.objects import timestamp

        nodes = sorted(
            (n for n in self.items("nodes") if (n["metadata"].get("labels") or {}).get(NODEPOOL) == step["nodepool"]),
            key=lambda n: n["metadata"]["name"],
        )
        node = nodes[0]
        labels = node["metadata"].get("labels") or {}
        self.made_unhealthy[node["metadata"]["name"]] = {
            "instance-type": labels.get(INSTANCE_TYPE),
            "capacity-type": labels.get(CAPACITY_TYPE),
        }
        # kwok's node-initialize stage would set a NotReady node's conditions back at once (hack/kube/cluster.py)
        self.kubectl("annotate", "node", node["metadata"]["name"], f"{HOLD_CONDITIONS}=true", "--overwrite")
        since = time.time() - seconds(step.get("since", "0s"))
        patch = {
            "status": {
                "conditions": [{"type": step["type"], "status": step["status"], "lastTransitionTime": timestamp(since)}]
            }
        }
        self.kubectl(
            "patch",
            "node",
            node["metadata"]["name"],
            "--subresource=status",
            "--type=strategic",
            "-p",
            json.dumps(patch),
        )

    def decisions(self) -> list[dict[str, Any]]:
        text = self.log.read_text(errors="replace")
        fresh, self.log_offset = text[self.log_offset :], len(text)
        found = []
        for line in fresh.splitlines():
            if '"disrupting node(s)"' not in line and '"deleting unhealthy node"' not in line:
                continue
            try:
                fields = json.loads(line[line.index("{") :])
            except ValueError:
                continue
            if fields.get("message") == "deleting unhealthy node":
                if self.name != "karpenter":
                    continue  # karpui records its repair as a disruption command too
                # Karpenter's node.health controller (v1.14's repair, --legacy-node-repair in v1.15) deletes the
                # NodeClaim without a disruption command; its line names the Node, whose type the bench noted when
                # it made the node unhealthy.
                taken = self.made_unhealthy.get((fields.get("Node") or {}).get("name", ""), {})
                fields = {"reason": "Unhealthy", "decision": "delete", "disrupted-nodes": [taken]}
            found.append(fields)
        return found

    def snapshot(self) -> Snapshot:
        events = self.events.fresh(self.items("events", "-A"))
        seen = conditions_seen(self.nodeclaims.versions()) if self.nodeclaims is not None else set()
        return snapshot(self.items("nodeclaims"), self.items("pods", "-A"), self.decisions(), (*events, *sorted(seen)))


def karpenter_commands(metrics: str) -> Counter[tuple[str, str]]:
    """Karpenter's commands from its /metrics text. Neither its log nor its Events count them whole: its
    multi-node validator returns an empty command on a rejection, so that rejection's ConsolidationRejected Events
    name no node and are never published (multinodeconsolidation.go). A command it executed is a decision
    (decisions_total); one rejected is an evaluation that waited out the 15 s validation (took over 15 s) and
    decided nothing."""
    counts: Counter[tuple[str, str]] = Counter()
    waited: Counter[str] = Counter()
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            kind = sample.labels.get("consolidation_type") or "drift"
            if sample.name == "karpenter_voluntary_disruption_decisions_total":
                counts[(kind, "executed")] += int(sample.value)
            elif sample.name == "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count":
                waited[kind] += int(sample.value)
            elif (
                sample.name == "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_bucket"
                and float(sample.labels.get("le", "0")) == 15.0
            ):
                waited[kind] -= int(sample.value)
    for kind, count in waited.items():
        if count > counts[(kind, "executed")]:
            counts[(kind, "rejected")] = count - counts[(kind, "executed")]
    return counts


def karpui_commands(database: Path) -> Counter[tuple[str, str]]:
    """karpui's commands: its DisruptionCommands that succeeded, or that validation rejected."""
    counts: Counter[tuple[str, str]] = Counter()
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "select json_extract(body, '$.spec.method'), json_extract(body, '$.status.phase') "
            "from karpui_kubeobject where kind = 'DisruptionCommand'"
        ).fetchall()
    for method, phase in rows:
        if phase in ("Succeeded", "Rejected"):
            counts[(method, "executed" if phase == "Succeeded" else "rejected")] += 1
    return counts


def free_port() -> int:
    """A free port of this bench's range (8500-8599), for Karpenter's metrics and health endpoints."""
    import socket

    for port in range(8500, 8600):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            if port not in _TAKEN:
                _TAKEN.add(port)
                return port
    raise RuntimeError("no free port in 8500-8599")


_TAKEN: set[int] = set()


def process_usage(pid: int) -> tuple[float, int]:
    """CPU-seconds (user + system) and peak RSS in bytes of a process group's members, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu, peak = 0.0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pid and int(entry.name) != pid:  # fields[2] is the process group
                continue
            cpu += (int(fields[11]) + int(fields[12])) / ticks
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return cpu, peak


# The real cluster ----------------------------------------------------------------------------------------------------


@dataclass
class ClusterHandle:
    cluster: Any
    owned: bool


def real_cluster(folder: Path, kubeconfig: str | None) -> ClusterHandle:
    from tests.kube.realcluster import RealCluster

    if kubeconfig:
        return ClusterHandle(RealCluster.given(kubeconfig), owned=False)
    kube = folder / "kube"
    kube.mkdir(parents=True, exist_ok=True)
    print(f"starting a control plane in {kube} ...", file=sys.stderr)
    return ClusterHandle(RealCluster.start(kube), owned=True)


# The comparison ----------------------------------------------------------------------------------------------------


@dataclass
class Result:
    workload: Workload
    snapshots: dict[str, dict[str, Snapshot]] = field(default_factory=dict)  # provisioner -> compare -> snapshot
    seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # What Karpenter decided in other runs of the workload, where that differed (a tie it breaks at random)
    other_outcomes: list[dict[str, Snapshot]] = field(default_factory=list)

    def differences(self, provisioner: str) -> list[str] | None:
        """What `provisioner` decided differently from Karpenter's recorded run; nothing where it decided as one of
        Karpenter's other recorded runs did."""
        theirs, mine = self.snapshots.get("karpenter"), self.snapshots.get(provisioner)
        if theirs is None or mine is None:
            return None
        said = outcome_differences(theirs, mine, self.workload.zonal)
        if said and any(not outcome_differences(o, mine, self.workload.zonal) for o in self.other_outcomes):
            return []
        return said

    def as_another_outcome(self, provisioner: str) -> bool:
        """Whether `provisioner` decided as one of Karpenter's other runs did, not as its recorded one."""
        theirs, mine = self.snapshots.get("karpenter"), self.snapshots.get(provisioner)
        return (
            theirs is not None
            and mine is not None
            and bool(outcome_differences(theirs, mine, self.workload.zonal))
            and self.differences(provisioner) == []
        )

    def event_differences(self, provisioner: str) -> list[str] | None:
        """The compared events `provisioner` saw otherwise than Karpenter's recorded run, at the steps where both
        were recorded; None where none was."""
        theirs, mine = self.snapshots.get("karpenter"), self.snapshots.get(provisioner)
        if theirs is None or mine is None:
            return None
        said: list[str] = []
        compared = False
        for step, snap in theirs.items():
            other = mine.get(step)
            found = snap.event_differences(other) if other is not None else None
            if found is not None:
                compared = True
                said += [f"{step}: {line}" for line in found]
        return said if compared else None

    def cost_ratio(self, provisioner: str) -> float | None:
        theirs, mine = self.snapshots.get("karpenter"), self.snapshots.get(provisioner)
        if not theirs or not mine:
            return None
        step = next(iter(theirs))
        if step not in mine or theirs[step].cost == 0:
            return None
        return mine[step].cost / theirs[step].cost


def outcome_differences(theirs: dict[str, Snapshot], mine: dict[str, Snapshot], zonal: bool) -> list[str]:
    said = []
    for step, snap in theirs.items():
        other = mine.get(step)
        if other is None:
            said.append(f"{step}: not recorded")
            continue
        said += [f"{step}: {d}" for d in snap.differences(other, zonal)]
    return said


def _outcome(steps: dict[str, Any]) -> dict[str, Snapshot]:
    return {step: Snapshot.from_json(snap) for step, snap in steps.items()}


def recorded(set_name: str) -> dict[str, tuple[dict[str, Snapshot], list[dict[str, Snapshot]]]]:
    """Each workload's recorded Karpenter run, and its other outcomes."""
    path = WORKLOADS / set_name / "karpenter.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    others = data.get("other outcomes") or {}
    return {
        name: (_outcome(steps), [_outcome(o) for o in others.get(name, [])])
        for name, steps in data["workloads"].items()
    }


def record(results: list[Result], outcomes: bool = False) -> None:
    """Karpenter's runs into each set's karpenter.json: as the recorded run (replacing it), or with `outcomes` as
    another outcome of the workload where it differs from every one recorded (the recorded run is kept)."""
    for result in results:
        if "karpenter" not in result.snapshots:
            continue
        workload = result.workload
        path = WORKLOADS / workload.set / "karpenter.json"
        data = json.loads(path.read_text()) if path.exists() else {"workloads": {}}
        data["karpenter"] = (
            "kwok provider v1.15.0 on kube-apiserver v1.37.2 (hack/kube); with IGNORE_DRA_REQUESTS=false, built with"
            " hack/kube/karpenter/kwok-dynamicresources.patch"
        )
        taken = {step: snap.as_json() for step, snap in result.snapshots["karpenter"].items()}
        known = data["workloads"].get(workload.name)
        if not outcomes or known is None:
            data["workloads"][workload.name] = taken
        else:
            others = data.setdefault("other outcomes", {}).setdefault(workload.name, [])
            fresh = _outcome(taken)
            if all(outcome_differences(_outcome(o), fresh, workload.zonal) for o in [known, *others]):
                others.append(taken)
            data["other outcomes"] = dict(sorted(data["other outcomes"].items()))
        data["workloads"] = dict(sorted(data["workloads"].items()))
        path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def record_events(results: list[Result]) -> None:
    """The events of Karpenter's runs into the recorded runs they decided the same as (the recorded decisions are
    kept: a tie Karpenter breaks at random is not drawn again)."""
    for result in results:
        fresh = result.snapshots.get("karpenter")
        if fresh is None:
            continue
        workload = result.workload
        path = WORKLOADS / workload.set / "karpenter.json"
        data = json.loads(path.read_text()) if path.exists() else {"workloads": {}}
        known = data["workloads"].get(workload.name)
        if known is None or outcome_differences(_outcome(known), fresh, workload.zonal):
            print(f"{workload.key}: Karpenter's events not recorded: it decided otherwise than its recorded run")
            continue
        for step, snap in fresh.items():
            if snap.events is not None:
                known[step]["events"] = list(snap.events)
        path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def save(results: list[Result], path: Path) -> None:
    data = {
        r.workload.key: {
            "snapshots": {p: {k: v.as_json() for k, v in snaps.items()} for p, snaps in r.snapshots.items()},
            "errors": r.errors,
            "seconds": {p: round(v, 1) for p, v in r.seconds.items()},
        }
        for r in results
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


def table(results: list[Result], provisioners: list[str]) -> str:
    others = [p for p in provisioners if p != "karpenter"]
    lines = [
        "| workload | Karpenter's NodeClaims | $/h | " + " | ".join(others) + " |",
        "|---|---|---|" + "---|" * len(others),
    ]
    for result in results:
        theirs = result.snapshots.get("karpenter")
        first = next(iter(theirs.values())) if theirs else None
        cells = []
        for name in others:
            if name in result.errors:
                cells.append(f"error: {result.errors[name][:80]}")
                continue
            if name.endswith("+improve"):
                ratio = result.cost_ratio(name)
                cells.append(f"{ratio:.3f}×" if ratio is not None else "–")
                continue
            differences = result.differences(name)
            if differences is None:
                cells.append("–")
            elif result.as_another_outcome(name):
                cells.append("same as another run of Karpenter's")
            else:
                cells.append("same" if not differences else "; ".join(differences))
        claims = _short(first.nodeclaims) if first else result.errors.get("karpenter", "–")[:80]
        cost = f"{first.cost:.4f}" if first else "–"
        lines.append(f"| {result.workload.key} | {claims} | {cost} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def events_table(results: list[Result], provisioners: list[str]) -> str:
    """The workloads whose compared events were recorded on both sides, where either side saw any."""
    others = [p for p in provisioners if p != "karpenter" and not p.endswith("+improve")]
    lines = [
        "| workload | Karpenter's events | " + " | ".join(others) + " |",
        "|---|---|" + "---|" * len(others),
    ]
    for result in results:
        theirs = result.snapshots.get("karpenter") or {}
        seen = [f"{step}: {_short(snap.events)}" for step, snap in theirs.items() if snap.events]
        cells = []
        for name in others:
            found = result.event_differences(name)
            cells.append("–" if found is None else "same" if not found else "; ".join(found))
        if all(cell == "–" for cell in cells) or (not seen and all(cell in ("same", "–") for cell in cells)):
            continue
        lines.append(f"| {result.workload.key} | {'; '.join(seen) or 'none'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def summary(results: list[Result], provisioners: list[str]) -> str:
    lines = []
    for name in provisioners:
        if name == "karpenter":
            continue
        if name.endswith("+improve"):
            ratios = [r for r in (x.cost_ratio(name) for x in results) if r is not None]
            if ratios:
                lines.append(
                    f"{name}: cost against Karpenter's on {len(ratios)} workloads: mean {sum(ratios) / len(ratios):.3f}×, "
                    f"worst {max(ratios):.3f}×, best {min(ratios):.3f}×"
                )
            continue
        compared = [d for d in (x.differences(name) for x in results) if d is not None]
        same = sum(1 for d in compared if not d)
        as_another = sum(1 for x in results if x.as_another_outcome(name))
        if compared:
            lines.append(
                f"{name}: the same decisions as Karpenter on {same} of {len(compared)} workloads "
                f"({100 * same / len(compared):.1f} %"
                + (f"; {as_another} of them as another of Karpenter's runs decided" if as_another else "")
                + ")"
            )
        with_events = [d for d in (x.event_differences(name) for x in results) if d is not None]
        if with_events:
            alike = sum(1 for d in with_events if not d)
            lines.append(
                f"{name}: the same disruption and consolidation events as Karpenter on {alike} of {len(with_events)} "
                "workloads whose events were recorded"
            )
    return "\n".join(lines)


def write_readme(text: str, start: str = README_START, end: str = README_END) -> None:
    """The text into bench/README.md between the markers (appended with them the first time)."""
    readme = ROOT / "bench" / "README.md"
    current = readme.read_text()
    block = f"{start}\n{text}\n{end}"
    if start in current:
        head, rest = current.split(start, 1)
        current = head + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(current)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="seeds,karpenter-1.x,corpus")
    parser.add_argument("--only", default="")
    parser.add_argument("--limit", type=int)
    parser.add_argument(
        "--longest",
        default="10m",
        help="leave out workloads whose waits add up to more than this on a real cluster (default 10m)",
    )
    parser.add_argument("--provisioners", default="karpenter,lab,kwok")
    parser.add_argument("--plan-improvement", action="store_true")
    parser.add_argument("--record", action="store_true", help="write Karpenter's results to <set>/karpenter.json")
    parser.add_argument(
        "--record-outcomes",
        action="store_true",
        help="keep the recorded run and add Karpenter's result as another outcome where it differs from all recorded",
    )
    parser.add_argument(
        "--record-events",
        action="store_true",
        help="add Karpenter's events to its recorded runs where it decided the same (the decisions are kept)",
    )
    parser.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    parser.add_argument("--save", help="write every provisioner's snapshots to this JSON file as it goes")
    parser.add_argument(
        "--merge",
        help="also report the provisioners of this --save file (comma-separated files) that were not run now",
    )
    parser.add_argument("--kubeconfig", help="a running cluster (hack/kube/cluster.py's) instead of starting one")
    args = parser.parse_args()
    # A SIGTERM unwinds as Ctrl-C does, so the provisioner started last is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    chosen = workloads(args.set.split(","), [n for n in args.only.split(",") if n], args.limit)
    provisioners = [p for p in args.provisioners.split(",") if p]  # none: only what --merge brings
    if {"karpenter", "kwok"} & set(provisioners):
        longest = seconds(args.longest)
        for workload in [w for w in chosen if waits(w) > longest]:
            print(f"{workload.key}: left out, its waits add up to {waits(workload):.0f} s (--longest)", flush=True)
            chosen.remove(workload)
    folder = Path(tempfile.mkdtemp(prefix="versus-karpenter-"))
    lab = Lab(folder)
    if "lab" in provisioners or args.plan_improvement:
        lab.setup()
    runners: list[Provisioner] = []
    handle = None
    if {"karpenter", "kwok"} & set(provisioners):
        handle = real_cluster(folder, args.kubeconfig or os.environ.get("KARPUI_REAL_KUBECONFIG"))
    for name in provisioners:
        if name == "lab":
            runners.append(lab)
        elif handle is not None:
            runners.append(Real(handle.cluster, folder, name))
    if args.plan_improvement:
        improved = Lab(folder, plan_improvement=True)
        runners.append(improved)
        provisioners.append(improved.name)
    if "karpenter" not in provisioners:
        provisioners.insert(0, "karpenter")
    memory = {s: recorded(s) for s in {w.set for w in chosen}}
    merged: dict[str, dict[str, dict[str, Snapshot]]] = {}
    for path in (args.merge or "").split(","):
        if path:
            for key, entry in json.loads(Path(path).read_text()).items():
                for name, steps in entry["snapshots"].items():
                    if name != "karpenter" and not any(r.name == name for r in runners):
                        snaps = {step: Snapshot.from_json(snap) for step, snap in steps.items()}
                        merged.setdefault(key, {})[name] = snaps
                        if name not in provisioners:
                            provisioners.append(name)
    results = []
    try:
        for workload in chosen:
            result = Result(workload)
            old, others = memory[workload.set].get(workload.name) or (None, [])
            result.other_outcomes = others
            if old is not None and not any(r.name == "karpenter" for r in runners):
                result.snapshots["karpenter"] = old
            for runner in runners:
                started = time.monotonic()
                try:
                    result.snapshots[runner.name] = runner.run(workload)
                except Exception as error:  # a workload that fails is reported, the others go on
                    result.errors[runner.name] = f"{type(error).__name__}: {error}".replace("\n", " ")
                result.seconds[runner.name] = time.monotonic() - started
            result.snapshots.update(merged.get(workload.key, {}))
            results.append(result)
            if args.record or args.record_outcomes:
                record([result], outcomes=args.record_outcomes)
            if args.record_events:
                record_events([result])
            if args.save:
                save(results, Path(args.save))
            verdicts = []
            for name in provisioners:
                if name == "karpenter" or name.endswith("+improve"):
                    continue
                found = result.differences(name)
                verdicts.append(f"{name} " + ("–" if found is None else "same" if not found else "; ".join(found)))
            timing = " ".join(f"{n} {s:.0f}s" for n, s in result.seconds.items())
            print(f"{workload.key}: {' | '.join(verdicts)} ({timing})", flush=True)
            for name, error in result.errors.items():
                print(f"  {name}: {error[:400]}", flush=True)
    finally:
        if handle is not None and handle.owned:
            handle.cluster.stop()
    events = events_table(results, provisioners)
    text = table(results, provisioners) + "\n\n" + (events + "\n\n" if events else "") + summary(results, provisioners)
    print()
    print(text)
    if args.readme:
        write_readme(text)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
