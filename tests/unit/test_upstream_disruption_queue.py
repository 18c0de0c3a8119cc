"""Karpenter v1.15.0's orchestration queue suite (pkg/controllers/disruption/queue_test.go, Describe "Queue" / Context
"Reconcile") ported onto karpui's command queue in the lab.

The Go specs build a Drift command by hand and hand it to StartCommand; here two NodePools' c-16x nodes drift (their
NodePools now ask for c-8x) and each NodePool's drift command starts with two replacement NodeClaims. The node class
delays registration by 30 minutes, so no replacement registers on its own: ExpectMakeNodesAndNodeClaimsInitialized
is the lab's kwok Node created for a replacement now (`register`), which the lifecycle controller then initializes.
"""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.cluster.conditions import is_true
from provisioner.cluster.objects import parse_timestamp
from provisioner.controllers.commands import max_retry_seconds
from provisioner.lab import Lab
from provisioner.taints import has_disrupted_taint
from tests.lab_builders import KWOK_CLASS, deployment, lab, nodepool_doc, reconfigure

OD = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
C16X = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-16x-amd64-linux"]}
C8X = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-8x-amd64-linux"]}
DISRUPTION = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "Never",
    "budgets": [{"nodes": "1"}],
}
SLOW = {**KWOK_CLASS, "spec": {"nodeRegistrationDelay": "30m"}}
FAST = {**KWOK_CLASS, "metadata": {"name": "fast"}}


def pools(requirement: dict[str, Any], generation: int, names: tuple[str, ...] = ("a", "b")) -> list[dict[str, Any]]:
    return [
        nodepool_doc(
            name, template_spec={"requirements": [OD, requirement]}, disruption=DISRUPTION, generation=generation
        )
        for name in names
    ]


def drifting(names: tuple[str, ...] = ("a", "b")) -> tuple[Lab, dict[str, dict[str, Any]]]:
    """One c-16x node per NodePool (10 one-CPU pods each), then drifted: the commands by NodePool, both Executing."""
    made = lab(*pools(C16X, 1, names), *(deployment(n, 10, nodeSelector={"karpenter.sh/nodepool": n}) for n in names))
    made.advance(30)
    reconfigure(made, *pools(C8X, 2, names), SLOW, FAST)
    for _ in range(60):
        made.advance(1)
        commands = {c["spec"]["nodepools"][0]: c for c in made.store.list("DisruptionCommand")}
        if len(commands) == len(names) and all(c["status"]["phase"] == "Executing" for c in commands.values()):
            return made, commands
    raise AssertionError("the drift commands did not start")


def command(made: Lab, name: str) -> dict[str, Any]:
    return made.store.get("DisruptionCommand", name)


def candidate_of(made: Lab, cmd: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The command's candidate Node and NodeClaim (None once gone)."""
    [candidate] = cmd["spec"]["candidates"]
    return made.store.get("Node", candidate["node"]), made.store.get("NodeClaim", candidate["nodeclaim"])


def register(made: Lab, claim_name: str) -> None:
    """ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated: the replacement's instance registers now (its node
    class is one without a registration delay), and the lifecycle controller initializes its NodeClaim."""
    claim = made.store.get("NodeClaim", claim_name)
    claim["spec"]["nodeClassRef"] = {**claim["spec"]["nodeClassRef"], "name": "fast"}
    made.store.update(claim)
    made.advance(5)
    assert is_true(made.store.get("NodeClaim", claim_name), "Initialized")


def events(made: Lab, reason: str) -> list[tuple[str, str, str]]:
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"])
        for e in made.store.list("Event")
        if e["reason"] == reason
    )


def test_nodes_stay_tainted_while_replacements_have_not_finished_initialization():
    """Queue / Reconcile / should keep nodes tainted when replacements haven't finished initialization"""
    made, commands = drifting()
    made.advance(60)
    for cmd in commands.values():
        node, claim = candidate_of(made, cmd)
        assert node is not None and has_disrupted_taint(node)
        assert claim is not None and claim["metadata"].get("deletionTimestamp") is None
        assert command(made, cmd["metadata"]["name"])["status"]["phase"] == "Executing"
    # Each candidate's NodeClaim and its two replacements.
    assert len(made.store.list("NodeClaim")) == 6


def test_a_command_waits_without_failing_until_its_timeout():
    """Queue / Reconcile / should not return an error when handling commands before the timeout: ten minutes after
    it started (the timeout for a queue of two candidates), the command still waits"""
    made, commands = drifting()
    cmd = commands["a"]
    started = parse_timestamp(cmd["status"]["startedAt"])
    made.advance(started + 600 - made.now)
    assert command(made, cmd["metadata"]["name"])["status"]["phase"] == "Executing"
    node, _ = candidate_of(made, cmd)
    assert node is not None and has_disrupted_taint(node)


def test_a_command_that_times_out_untaints_its_nodes():
    """Queue / Reconcile / should untaint nodes when a command times out"""
    made, commands = drifting()
    made.advance(11 * 60)
    for cmd in commands.values():
        done = command(made, cmd["metadata"]["name"])
        assert (done["status"]["phase"], done["status"]["message"]) == (
            "Failed",
            "a replacement NodeClaim failed to launch or initialize; candidates untainted",
        )
        node, claim = candidate_of(made, cmd)
        assert node is not None and not has_disrupted_taint(node)
        assert claim is not None and not is_true(claim, "DisruptionReason")


def test_a_command_is_fully_handled_once_its_replacements_are_initialized():
    """Queue / Reconcile / should fully handle a command when replacements are initialized"""
    made, commands = drifting(("a",))
    cmd = commands["a"]
    replacements = cmd["status"]["replacementNodeClaims"]
    made.advance(5)
    assert events(made, "DisruptionLaunching") == [
        ("NodeClaim", r, "Launching NodeClaim: Drifted") for r in sorted(replacements)
    ]
    waiting = "Waiting on readiness to continue disruption"
    assert events(made, "DisruptionWaitingReadiness") == [("NodeClaim", r, waiting) for r in sorted(replacements)]
    node, claim = candidate_of(made, cmd)
    assert node is not None and claim is not None
    for replacement in replacements:
        register(made, replacement)
    made.advance(30)
    assert events(made, "DisruptionTerminating") == sorted(
        [
            ("Node", node["metadata"]["name"], "Disrupting Node: Drifted"),
            ("NodeClaim", claim["metadata"]["name"], "Disrupting NodeClaim: Drifted"),
        ]
    )
    assert candidate_of(made, cmd) == (None, None)
    assert command(made, cmd["metadata"]["name"])["status"]["phase"] == "Succeeded"


def test_a_command_finishes_only_when_all_its_replacements_are_initialized():
    """Queue / Reconcile / should only finish a command when all replacements are initialized"""
    made, commands = drifting(("a",))
    cmd = commands["a"]
    first, second = cmd["status"]["replacementNodeClaims"]
    register(made, first)
    made.advance(30)
    node, claim = candidate_of(made, cmd)
    assert node is not None and has_disrupted_taint(node)
    assert claim is not None and claim["metadata"].get("deletionTimestamp") is None
    assert command(made, cmd["metadata"]["name"])["status"]["phase"] == "Executing"
    register(made, second)
    made.advance(30)
    assert candidate_of(made, cmd) == (None, None)
    assert command(made, cmd["metadata"]["name"])["status"]["phase"] == "Succeeded"


def test_a_command_without_replacements_does_not_wait():
    """Queue / Reconcile / should not wait for replacements when none are needed: an empty node's delete"""
    made = lab(*pools(C16X, 1, ("a",)), deployment("a", 10, nodeSelector={"karpenter.sh/nodepool": "a"}))
    made.advance(30)
    [claim] = made.store.list("NodeClaim")
    empty = {**DISRUPTION, "consolidateAfter": "0s"}
    reconfigure(made, nodepool_doc("a", template_spec={"requirements": [OD, C16X]}, disruption=empty), SLOW)
    found = made.store.get("Deployment", "a", "default")
    found["spec"]["replicas"] = 0
    made.store.update(found)
    while not [c for c in made.store.list("DisruptionCommand") if c["status"]["phase"] == "Executing"]:
        made.advance(1)
    [cmd] = made.store.list("DisruptionCommand")
    assert (cmd["spec"]["reason"], cmd["status"]["replacementNodeClaims"]) == ("Empty", [])
    made.advance(1)
    gone = made.store.get("NodeClaim", claim["metadata"]["name"])
    assert gone is None or gone["metadata"].get("deletionTimestamp") is not None
    assert events(made, "DisruptionTerminating")[-1] == (
        "NodeClaim",
        claim["metadata"]["name"],
        "Disrupting NodeClaim: Empty",
    )


def test_two_commands_finish_in_order_as_their_replacements_are_initialized():
    """Queue / Reconcile / should finish two commands in order as replacements are initialized"""
    made, commands = drifting()
    for replacement in commands["a"]["status"]["replacementNodeClaims"]:
        register(made, replacement)
    made.advance(30)
    assert candidate_of(made, commands["a"]) == (None, None)
    node, claim = candidate_of(made, commands["b"])
    assert node is not None and has_disrupted_taint(node)
    assert claim is not None and claim["metadata"].get("deletionTimestamp") is None
    phases = {pool: command(made, c["metadata"]["name"])["status"]["phase"] for pool, c in commands.items()}
    assert phases == {"a": "Succeeded", "b": "Executing"}
    for replacement in commands["b"]["status"]["replacementNodeClaims"]:
        register(made, replacement)
    made.advance(30)
    assert candidate_of(made, commands["b"]) == (None, None)
    assert command(made, commands["b"]["metadata"]["name"])["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize(
    ("queued", "seconds"),
    [
        (100, 600.0),  # very small queue: max(100*80ms, 10min) = 10min
        (4000, 600.0),  # small queue: max(4000*80ms, 10min) = 10min
        (10000, 800.0),  # medium queue: 10000*80ms = 13min 20sec
        (40000, 3200.0),  # large queue: 40000*80ms = 53min 20sec
        (80000, 3600.0),  # very large queue (capped): min(80000*80ms, 1hr) = 1hr
        (100000, 3600.0),  # extremely large queue (capped)
    ],
)
def test_the_timeout_grows_with_the_queue(queued, seconds):
    """Queue / Reconcile / CalculateRetryDuration / should calculate correct timeout based on queue length"""
    assert max_retry_seconds(queued) == seconds
