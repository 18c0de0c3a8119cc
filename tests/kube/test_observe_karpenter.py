"""observe mode over Karpenter itself (its kwok provider v1.15 on the session's real control plane): karpui mirrors
what Karpenter does, and its gate holds Karpenter's voluntary disruption in a gated NodePool until a person approves
it, then lets Karpenter carry out exactly that, with nothing of karpui's left behind once the gate is off."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.test import Client

from karpui import models
from karpui.clusters.engines import Engine
from karpui.gate import disruption
from karpui.insight.pending import KARPENTER, Waiting, waiting_pods
from karpui.people.audit import Actor
from provisioner.disruption.holds import GATE_ANNOTATION, HELD_BY
from provisioner.leaderelection import ElectionConfig
from tests.kube.karpenter import Karpenter, karpenter
from tests.lab_builders import deployment as lab_deployment

pytestmark = [pytest.mark.real, pytest.mark.django_db]

NODECLASS = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
OWN_BUDGETS = [{"nodes": "10%"}]  # what Karpenter's CRD defaults a NodePool's budgets to
HELD = [{"nodes": "0"}, *OWN_BUDGETS]  # karpui's hold first


def nodepool(name: str = "default", mode: str | None = "manual", consolidate_after: str = "5s") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "annotations": {"karpui.dev/approval-mode": mode} if mode else {}},
        "spec": {
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after},
        },
    }


def deployment(name: str, replicas: int, pool: str = "default", cpu: str = "1") -> dict[str, Any]:
    """`replicas` pods of `cpu` for NodePool `pool` (its template's label)."""
    return lab_deployment(name, replicas, cpu, nodeSelector={"pool": pool})


class Observed:
    """The real cluster with Karpenter running, and karpui's engine observing it (stepped by the test)."""

    def __init__(self, real: Any, karpenter: Karpenter, engine: Engine, row: models.Cluster) -> None:
        self.real, self.karpenter, self.engine, self.row = real, karpenter, engine, row

    def apply(self, *documents: dict[str, Any]) -> None:
        self.real.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))

    def get(self, kind: str, name: str = "") -> Any:
        found = json.loads(self.real.kubectl("get", kind, *([name] if name else []), "-o", "json").stdout)
        return found if name else found["items"]

    def until(self, check: Callable[[], Any], timeout: float = 120.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            self.engine.step(time.time())
            value = check()
            if value:
                return value
            assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
            time.sleep(0.5)

    def steps(self, seconds: float) -> None:
        """Step the engine for `seconds`, as `manage.py engine` does."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.engine.step(time.time())
            time.sleep(0.5)

    def running(self, count: int) -> None:
        self.until(
            lambda: models.KubeObject.objects.filter(cluster=self.row, kind="Pod", phase="Running").count() == count,
            what=f"the mirror shows {count} pods running",
        )

    def launched(self, pods: int) -> str:
        """Karpenter's one NodeClaim for `pods` one-CPU pods, once they run and the NodeClaim names its Node (as the
        mirror shows: the informers watch apart, so the pods can show Running a step before the NodeClaim shows the
        Node it registered, which is what a person's request for that node is checked against)."""
        [claim] = self.until(lambda: self.claims(), what=f"Karpenter launched a node for {pods} pods")
        self.running(pods)
        self.until(lambda: self.mirrored_node(claim), what=f"the mirror shows NodeClaim {claim}'s Node")
        return claim

    def mirrored_node(self, claim: str) -> str:
        """The Node the mirror's copy of a NodeClaim names ("" until it names one)."""
        row = models.KubeObject.objects.filter(cluster=self.row, kind="NodeClaim", name=claim).first()
        return str((((row.body if row else None) or {}).get("status") or {}).get("nodeName") or "")

    def underutilized(self) -> tuple[str, models.KubeObject]:
        """Five pods on Karpenter's node in the gated NodePool, then one: its NodeClaim, and the command karpui
        proposed (what Karpenter would do), waiting for a person."""
        self.apply(NODECLASS, nodepool(), deployment("inflate", 5))
        claim = self.launched(5)
        self.until(lambda: self.budgets() == HELD, what="karpui held the gated NodePool")
        self.real.kubectl("scale", "deployment/inflate", "--replicas=1")
        command = self.until(
            lambda: next(iter(self.commands("AwaitingApproval")), None),
            what="karpui proposed what Karpenter would do, and waits for a person",
        )
        return claim, command

    def finished(self, name: str, timeout: float = 240.0) -> models.KubeObject:
        """The command once it succeeded or failed."""

        def done() -> models.KubeObject | None:
            command = models.KubeObject.objects.get(cluster=self.row, kind="DisruptionCommand", name=name)
            return command if command.phase in ("Succeeded", "Failed") else None

        return self.until(done, timeout=timeout, what=f"command {name} finished")

    def commands(self, phase: str = "") -> list[models.KubeObject]:
        rows = models.KubeObject.objects.filter(cluster=self.row, kind="DisruptionCommand")
        return list(rows.filter(phase=phase) if phase else rows)

    def claims(self) -> list[str]:
        return sorted(c["metadata"]["name"] for c in self.get("nodeclaims.karpenter.sh"))

    def budgets(self, pool: str = "default") -> list[dict[str, Any]]:
        return list(self.get("nodepools.karpenter.sh", pool)["spec"]["disruption"]["budgets"])

    def karpui_marks(self) -> dict[str, Any]:
        """Everything karpui wrote into the cluster's NodePools and Nodes."""
        marks: dict[str, Any] = {}
        for pool in self.get("nodepools.karpenter.sh"):
            annotations = pool["metadata"].get("annotations") or {}
            if GATE_ANNOTATION in annotations:
                marks[f"nodepool/{pool['metadata']['name']}"] = annotations[GATE_ANNOTATION]
        for node in self.get("nodes"):
            annotations = node["metadata"].get("annotations") or {}
            if HELD_BY in annotations:
                marks[f"node/{node['metadata']['name']}"] = annotations[HELD_BY]
        return marks

    def karpenter_events(self, reason: str) -> list[str]:
        return [
            e.body["message"]
            for e in models.KubeObject.objects.filter(cluster=self.row, kind="Event")
            if e.body.get("reason") == reason and (e.body.get("source") or {}).get("component") == "karpenter"
        ]


@pytest.fixture
def observed(real: Any, tmp_path: Path, settings: Any) -> Iterator[Observed]:
    row = models.Cluster.objects.create(name="prod", mode=models.Cluster.Mode.OBSERVE, kubeconfig=str(real.kubeconfig))
    settings.KARPUI_KARPENTER_LOGS = {"prod": str(tmp_path / "karpenter.log")}  # where its lines go (karpenter())
    with karpenter(real, tmp_path) as running:
        engine = Engine.open(
            row,
            election=ElectionConfig(
                identity="observer",
                name="karpui-engine",
                namespace="default",
                lease_duration=3.0,
                renew_deadline=2.0,
                retry_period=0.25,
            ),  # fmt: skip
        )
        try:
            yield Observed(real, running, engine, row)
        finally:
            engine.stop()


def person(name: str, *groups: str) -> Actor:
    user = User.objects.create_user(name, password=f"{name}-pass-1")
    for group in groups:
        user.groups.add(Group.objects.get(name=group))
    return Actor.for_user(user, "web")


def test_a_consolidation_karpenter_wants_waits_for_approval_then_karpenter_does_it_and_the_gate_leaves_nothing(
    observed: Observed,
) -> None:
    claim, command = observed.underutilized()
    spec = command.body["spec"]
    assert (spec["reason"], spec["decision"], [c["nodeclaim"] for c in spec["candidates"]]) == (
        "Underutilized",
        "replace",
        [claim],
    )
    # Karpenter would have replaced the node within 30 s of it becoming consolidatable: the hold keeps it back, and
    # Karpenter says so on the NodePool.
    observed.steps(30)
    assert observed.claims() == [claim]
    assert "No allowed disruptions for disruption reason Underutilized due to blocking budget" in (
        observed.karpenter_events("DisruptionBlocked")
    )
    disruption.command_approve(
        cluster=observed.row, name=command.name, actor=person("ann", "approvers"), reason="one pod on 8 CPUs"
    )
    done = observed.finished(command.name)  # Karpenter carried out the approved command
    assert done.phase == "Succeeded", done.body["status"]
    [replacement] = observed.claims()
    assert replacement != claim
    assert (
        observed.get("nodeclaims.karpenter.sh", replacement)["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        == spec["replacements"][0]["instanceTypes"][0]
    )
    # What Karpenter said when it formed the command, as karpui recorded it on the approved one.
    node = spec["candidates"][0]["node"]
    [said] = [line for line in done.body["status"]["release"]["karpenter"] if "ConsolidationCandidate" in line]
    assert said.startswith(
        f"{node}: ConsolidationCandidate: Consolidation candidate: replace: [{node}] -> [1 replacement]"
    )
    # Karpenter's own log lines for it, read from its log file into the cluster's logs beside karpui's.
    # (Its fields compared here, not in SQL: LogEntry.fields is json on PostgreSQL, which has no =.)
    logged = models.LogEntry.objects.filter(cluster=observed.row, message="disrupting node(s)")
    lines = [fields for fields in logged.values_list("fields", flat=True) if fields.get("source") == "karpenter"]
    assert [line["controller"] for line in lines] == ["disruption"] * len(lines)
    assert [line for line in lines if node in json.dumps(line)], lines
    observed.until(lambda: observed.budgets() == HELD, what="the hold came back whole")
    # The gate turned off on the Disruption page (the NodePool back to auto): leaving manual is itself a decision,
    # asked by an editor and made by an approver (issue 27 point 10); then nothing of karpui's stays there.
    request = disruption.approval_mode_request(
        cluster=observed.row, nodepool="default", mode="auto", actor=person("ed", "editors"), reason="gate off"
    )
    assert request is not None
    disruption.approval_mode_decide(
        cluster=observed.row, request=request.pk, actor=person("ava", "approvers"), approve=True, note="agreed"
    )
    observed.until(lambda: observed.budgets() == OWN_BUDGETS, what="karpui took its hold out")
    assert observed.karpui_marks() == {}
    annotations = observed.get("nodepools.karpenter.sh", "default")["metadata"]["annotations"]
    assert [k for k in annotations if k.startswith("karpui.dev/")] == []


def test_a_denied_consolidation_never_happens_and_is_not_proposed_again_for_the_same_state(
    observed: Observed,
) -> None:
    claim, command = observed.underutilized()
    disruption.command_deny(
        cluster=observed.row, name=command.name, actor=person("bob", "approvers"), reason="keep it for tonight's batch"
    )
    started = time.monotonic()
    observed.steps(45)  # Karpenter polls every 10 s and would have replaced the node within 30 s
    assert observed.claims() == [claim]
    assert [(c.name, c.phase) for c in observed.commands()] == [(command.name, "Denied")]
    assert observed.budgets() == HELD
    assert set(observed.karpui_marks()) == {"nodepool/default"}  # the hold, and no node marked: nothing released
    assert time.monotonic() - started >= 45


def test_a_pause_holds_every_voluntary_disruption_even_where_karpenter_decides_alone(observed: Observed) -> None:
    observed.apply(NODECLASS, nodepool(mode=None), deployment("inflate", 5))
    claim = observed.launched(5)
    assert observed.budgets() == OWN_BUDGETS  # not gated: Karpenter's own to disrupt
    disruption.disruption_pause(
        cluster=observed.row, actor=person("ann", "approvers"), reason="incident 4411", seconds=3600
    )
    [hold] = observed.until(
        lambda: [b for b in observed.budgets() if b != OWN_BUDGETS[0]], what="karpui held every NodePool"
    )
    # From the minute the pause was seen, to the pause's end rounded up to a minute (cron's resolution).
    assert (hold["nodes"], "reasons" in hold) == ("0", False)
    assert hold["duration"] in ("1h", "1h1m")
    observed.real.kubectl("scale", "deployment/inflate", "--replicas=1")
    observed.steps(45)
    assert observed.claims() == [claim]
    assert "No allowed disruptions for disruption reason Underutilized due to blocking budget" in (
        observed.karpenter_events("DisruptionBlocked")
    )
    assert observed.commands() == []  # karpui decides nothing for a NodePool Karpenter decides alone
    disruption.disruption_resume(cluster=observed.row, actor=person("bob", "approvers"))
    observed.until(lambda: observed.budgets() == OWN_BUDGETS, what="the pause's hold came out")
    observed.until(
        lambda: claim not in observed.claims() and len(observed.claims()) == 1,
        timeout=180,
        what="Karpenter replaced the node once the pause was over",
    )
    assert observed.commands() == []
    assert observed.karpui_marks() == {}


def test_four_eyes_a_persons_request_needs_another_to_approve_then_karpenter_drains_the_node(
    observed: Observed,
) -> None:
    observed.apply(NODECLASS, nodepool(), deployment("inflate", 5))
    claim = observed.launched(5)
    node = observed.get("nodeclaims.karpenter.sh", claim)["status"]["nodeName"]
    ann, bob = person("ann", "approvers"), person("bob", "approvers")
    request = disruption.node_disruption_request(cluster=observed.row, node=node, actor=ann, reason="bad kernel")
    name = request["metadata"]["name"]
    observed.until(
        lambda: models.KubeObject.objects.get(cluster=observed.row, name=name).phase == "AwaitingApproval",
        what="the request waits for a person",
    )
    with pytest.raises(PermissionDenied, match="ann asked for this disruption and may not approve it alone"):
        disruption.command_approve(cluster=observed.row, name=name, actor=ann, reason="mine")
    observed.steps(3)
    assert observed.claims() == [claim]
    disruption.command_approve(cluster=observed.row, name=name, actor=bob, reason="agreed")
    done = observed.until(
        lambda: (
            (c := models.KubeObject.objects.get(cluster=observed.row, name=name)).phase in ("Succeeded", "Failed") and c
        ),
        timeout=180,
        what="karpui deleted the NodeClaim and Karpenter drained and terminated it",
    )
    assert done.phase == "Succeeded", done.body["status"]
    [replacement] = observed.until(
        lambda: [c for c in observed.claims() if c != claim] and claim not in observed.claims() and observed.claims(),
        what="Karpenter launched a node for the evicted pods",
    )
    assert replacement != claim
    observed.running(5)


def test_pending_pods_say_why_in_karpuis_simulation_and_in_karpenters_own_words(observed: Observed) -> None:
    observed.apply(NODECLASS, nodepool(mode=None), deployment("huge", 1, cpu="1000"), deployment("inflate", 2))
    observed.launched(2)

    def explained() -> Waiting | None:
        row = models.Cluster.objects.get(pk=observed.row.pk)
        huge = [p for p in waiting_pods(cluster=row) if p.name.startswith("huge-")]
        sources = {v.source for pod in huge for v in pod.verdicts}
        return huge[0] if len(huge) == 1 and sources == {"", KARPENTER} else None

    pod = observed.until(explained, what="the waiting pod has karpui's verdict and Karpenter's word")
    mine, karpenters = pod.verdicts
    assert (mine.nodepool, mine.kind) == ("default", "resources")
    assert (karpenters.label, karpenters.kind) == ("Karpenter", "FailedScheduling")
    assert karpenters.message.startswith("Failed to schedule pod, no instance type has enough resources, requirements=")
    assert karpenters.message.endswith('resources={"cpu":"1k","pods":"1"}')
    assert pod.reason == "default: resources · Karpenter: FailedScheduling"
    admin = User.objects.create_superuser("root", password="root-pass-1")
    client = Client()
    client.force_login(admin)
    page = client.get("/pods/pending/?cluster=prod&group=none").content.decode()
    assert pod.name in page and "Failed to schedule pod, no instance type has enough resources" in page
    assert observed.commands() == []  # nothing gated: karpui decides nothing
