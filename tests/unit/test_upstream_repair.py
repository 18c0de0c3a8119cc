"""Node repair, ported from sigs.k8s.io/karpenter@v1.15.0: pkg/controllers/node/health/policy_internal_test.go
("Repair Policies"), pkg/controllers/state/unhealthy_test.go and pkg/controllers/disruption/repair_test.go ("Repair").

Each test names the It (or Entry) it follows. The policy and state suites run on karpui's matcher
(provisioner/repairpolicies.py); the repair suite runs in a lab over the kwok provider, whose repair policies a test
replaces with the suite's (a condition BadNode=False tolerated 30 minutes). karpui proposes each repair on its queue
as soon as the node turns unhealthy and forces it when the toleration ends, so "a command" upstream is a NodeClaim
being deleted here.
"""

import pytest

from provisioner.cloudprovider.types import RepairPolicy
from provisioner.cluster.objects import parse_timestamp, timestamp
from provisioner.controllers.repair import unhealthy
from provisioner.options import KarpenterOptions, parse_feature_gates
from provisioner.repairpolicies import (
    REBOOT_NODE,
    REPLACE_NODE,
    RepairPolicyError,
    match_inputs_equal,
    repair_policy_matcher,
    resolve,
)
from tests.lab_builders import KWOK_CLASS, deployment, lab, nodepool_doc, reconfigure

MINUTE = 60.0
HOUR = 3600.0
ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeRepair=true"))
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
DO_NOT_REPAIR = "karpenter.sh/do-not-repair"
VETO = 'repair is blocked through the "karpenter.sh/do-not-repair" annotation'

# Repair Policies (pkg/controllers/node/health/policy_internal_test.go) --------------------------------------------

DEFAULT_FALLBACK = RepairPolicy("AcceleratorReady", "False", 30 * MINUTE, action=REPLACE_NODE)
VALID_SPECIFIC = RepairPolicy(
    "AcceleratorReady", "False", 10 * MINUTE, reason_regex=r"^NvidiaXID(48|63|95)Error$", action=REBOOT_NODE
)
BOTH = frozenset({REBOOT_NODE, REPLACE_NODE})


def _fault(policies, actions=BOTH):
    with pytest.raises(RepairPolicyError) as raised:
        repair_policy_matcher(policies, actions)
    return str(raised.value)


def test_accepts_valid_policies():
    """validating complete policy sets: accepts valid policies"""
    matcher = repair_policy_matcher([VALID_SPECIFIC, DEFAULT_FALLBACK], BOTH)
    assert matcher.fallback == DEFAULT_FALLBACK


def test_accepts_every_kubernetes_condition_status():
    """validating complete policy sets: accepts every Kubernetes condition status"""
    matcher = repair_policy_matcher(
        [
            RepairPolicy("ConditionTrue", "True", 0.0),
            RepairPolicy("ConditionFalse", "False", 0.0, reason_regex=".*"),
            RepairPolicy("ConditionUnknown", "Unknown", 0.0, reason_regex=".*"),
        ],
        BOTH,
    )
    assert sorted(matcher.groups) == [
        ("ConditionFalse", "False"),
        ("ConditionTrue", "True"),
        ("ConditionUnknown", "Unknown"),
    ]


@pytest.mark.parametrize(
    ("entry", "policies", "actions", "fault"),
    [
        ("rejects an empty condition type", [RepairPolicy("", "False", 0.0)], BOTH, "empty condition type"),
        (
            "rejects an invalid condition status",
            [RepairPolicy("AcceleratorReady", "", 0.0)],
            BOTH,
            "invalid condition status",
        ),
        (
            "rejects an invalid reason regex",
            [RepairPolicy("AcceleratorReady", "False", 0.0, reason_regex="[", action=REBOOT_NODE), DEFAULT_FALLBACK],
            BOTH,
            "invalid reason regex",
        ),
        (
            "rejects an unsupported action",
            [VALID_SPECIFIC, DEFAULT_FALLBACK],
            frozenset({REPLACE_NODE}),
            'unsupported action "RebootNode"',
        ),
        (
            "rejects a negative toleration",
            [RepairPolicy("AcceleratorReady", "False", -1.0)],
            BOTH,
            "negative toleration duration",
        ),
        (
            "rejects a negative termination grace period",
            [RepairPolicy("AcceleratorReady", "False", 0.0, termination_grace_period_seconds=-1.0)],
            BOTH,
            "negative termination grace period",
        ),
        (
            "rejects a negative priority",
            [RepairPolicy("AcceleratorReady", "False", 0.0, priority=-1)],
            BOTH,
            "priority -1 outside the supported range [0, 100]",
        ),
        (
            "rejects a priority above the supported range",
            [RepairPolicy("AcceleratorReady", "False", 0.0, priority=101)],
            BOTH,
            "priority 101 outside the supported range [0, 100]",
        ),
        ("rejects a missing default fallback", [VALID_SPECIFIC], BOTH, "must define one default fallback"),
        (
            "rejects multiple default fallbacks",
            [DEFAULT_FALLBACK, RepairPolicy("StorageReady", "False", 0.0)],
            BOTH,
            "multiple default fallbacks",
        ),
        (
            "requires a replacement default fallback",
            [RepairPolicy("AcceleratorReady", "False", 0.0, action=REBOOT_NODE)],
            BOTH,
            "default fallback policy",
        ),
    ],
)
def test_validating_complete_policy_sets(entry, policies, actions, fault):
    """validating complete policy sets: each rejecting Entry"""
    assert fault in _fault(policies, actions)


def test_includes_the_complete_policy_in_validation_errors():
    """includes the complete policy in validation errors"""
    fault = _fault(
        [
            RepairPolicy("AcceleratorReady", "False", 0.0, reason_regex="[", priority=17, action=REBOOT_NODE),
            DEFAULT_FALLBACK,
        ]
    )
    assert "ConditionType:AcceleratorReady" in fault
    assert "ReasonRegex:[" in fault
    assert "Priority:17" in fault


NOW = 1_788_264_000.0  # 2026-09-01T12:00:00Z, the Matching context's now
CONDITION = {
    "type": "AcceleratorReady",
    "status": "False",
    "reason": "NvidiaXID48Error",
    "lastTransitionTime": timestamp(NOW),
}
MATCHING = [
    RepairPolicy("AcceleratorReady", "False", 10 * MINUTE, reason_regex="XID(48|63)", action=REBOOT_NODE),
    RepairPolicy("AcceleratorReady", "False", 30 * MINUTE, reason_regex="48Error$", action=REPLACE_NODE),
    RepairPolicy("AcceleratorReady", "False", 0.0, action=REPLACE_NODE),
]


def evaluate(policies, now, *conditions, created=None):
    node = {"metadata": {}, "status": {"conditions": list(conditions)}}
    if created is not None:
        node["metadata"]["creationTimestamp"] = timestamp(created)
    return resolve(repair_policy_matcher(policies).match(node), now)


def cond(kind, status="False", reason="", since=None):
    c = {"type": kind, "status": status, "reason": reason}
    if since is not None:
        c["lastTransitionTime"] = timestamp(since)
    return c


def test_suppresses_an_eligible_fallback_while_specific_policies_are_waiting():
    """Matching: suppresses an eligible fallback while specific policies are waiting"""
    assert evaluate(MATCHING, NOW + 5 * MINUTE, CONDITION).action == ""
    assert evaluate(MATCHING, NOW + 10 * MINUTE, CONDITION).action == REBOOT_NODE


def test_merges_eligible_policies_into_a_single_result():
    """Matching: merges eligible policies into a single result"""
    result = evaluate(MATCHING, NOW + 15 * MINUTE, CONDITION)
    assert (result.action, result.condition, result.condition_status, result.reason) == (
        REBOOT_NODE,
        "AcceleratorReady",
        "False",
        "NvidiaXID48Error",
    )
    assert (result.reason_regex, result.fallback, result.selected_eligible_at) == ("XID(48|63)", False, NOW + 600)
    result = evaluate(MATCHING, NOW + 35 * MINUTE, CONDITION)
    assert (result.action, result.condition, result.condition_status, result.reason) == (
        REPLACE_NODE,
        "AcceleratorReady",
        "False",
        "NvidiaXID48Error",
    )
    assert (result.reason_regex, result.fallback, result.selected_eligible_at) == ("48Error$", False, NOW + 1800)
    assert result.score_at(NOW + 35 * MINUTE) == pytest.approx(25.0 / 30.0)


def test_retains_the_earliest_eligibility_across_same_action_policies():
    """Matching: retains the earliest eligibility across same-action policies"""
    same = [
        RepairPolicy("AcceleratorReady", "False", 20 * MINUTE, reason_regex="XID48"),
        RepairPolicy("AcceleratorReady", "False", 10 * MINUTE, reason_regex="48Error"),
        RepairPolicy("AcceleratorReady", "False", 0.0),
    ]
    for ordered in (same, same[::-1]):
        result = evaluate(ordered, NOW + 25 * MINUTE, CONDITION)
        assert (result.action, result.selected_eligible_at) == (REPLACE_NODE, NOW + 10 * MINUTE)


def test_selects_the_shortest_termination_grace_period_across_eligible_actions():
    """Matching: selects the shortest termination grace period across eligible actions"""
    cross = [
        RepairPolicy("AcceleratorReady", "False", 0.0, reason_regex="XID48", termination_grace_period_seconds=900.0),
        RepairPolicy(
            "AcceleratorReady",
            "False",
            0.0,
            reason_regex="48Error",
            termination_grace_period_seconds=300.0,
            action=REBOOT_NODE,
        ),
        RepairPolicy("AcceleratorReady", "False", 0.0),
    ]
    for ordered in (cross, cross[::-1]):
        result = evaluate(ordered, NOW, CONDITION)
        assert (result.action, result.termination_grace_period) == (REPLACE_NODE, 300.0)


def test_uses_the_default_fallback_across_supported_conditions():
    """Matching: uses the default fallback across supported conditions"""
    policies = [
        DEFAULT_FALLBACK,
        RepairPolicy("StorageReady", "False", 0.0, reason_regex="^KnownStorageFailure$", action=REBOOT_NODE),
    ]
    storage = {**CONDITION, "type": "StorageReady", "reason": "NewStorageFailure"}
    result = evaluate(policies, NOW + 31 * MINUTE, storage)
    assert (result.action, result.condition, result.condition_status, result.reason) == (
        REPLACE_NODE,
        "StorageReady",
        "False",
        "NewStorageFailure",
    )
    assert (result.reason_regex, result.fallback, result.selected_eligible_at) == ("", True, NOW + 30 * MINUTE)


def test_treats_a_non_empty_match_all_expression_as_a_specific_policy():
    """Matching: treats a non-empty match-all expression as a specific policy"""
    policies = [
        RepairPolicy("AcceleratorReady", "False", 0.0, reason_regex=".*", action=REBOOT_NODE),
        RepairPolicy("AcceleratorReady", "False", 0.0),
    ]
    assert evaluate(policies, NOW, CONDITION).action == REBOOT_NODE


def test_does_not_match_a_different_condition_type_or_status():
    """Matching: does not match a different condition type or status"""
    assert evaluate(MATCHING, NOW, {**CONDITION, "type": "DifferentCondition"}).action == ""
    assert evaluate(MATCHING, NOW, {**CONDITION, "status": "True"}).action == ""


PRIORITIES = [
    RepairPolicy("LowPriority", "False", 30 * MINUTE, reason_regex=".*", priority=10),
    RepairPolicy("HighPriority", "False", 30 * MINUTE, reason_regex=".*", priority=90),
    RepairPolicy("Fallback", "False", 0.0),
]


def test_scores_a_node_using_its_most_urgent_eligible_policy():
    """Matching: scores a node using its most urgent eligible policy"""
    result = evaluate(
        PRIORITIES,
        NOW,
        cond("LowPriority", since=NOW - 180 * MINUTE),
        cond("HighPriority", since=NOW - 45 * MINUTE),
    )
    assert (result.score_at(NOW), result.action, result.condition) == (6.0, REPLACE_NODE, "HighPriority")


def test_merges_score_action_condition_eligibility_and_tgp_across_conditions():
    """Matching: merges score, action, condition, eligibility, and TGP across conditions"""
    policies = [
        RepairPolicy(
            "HighPriority",
            "False",
            30 * MINUTE,
            reason_regex=".*",
            priority=90,
            termination_grace_period_seconds=300.0,
            action=REBOOT_NODE,
        ),
        RepairPolicy(
            "LowPriority", "False", 30 * MINUTE, reason_regex=".*", priority=10, termination_grace_period_seconds=900.0
        ),
        RepairPolicy("Fallback", "False", 0.0),
    ]
    high = cond("HighPriority", reason="HighPriorityFailure", since=NOW - 180 * MINUTE)
    low = cond("LowPriority", reason="LowPriorityFailure", since=NOW - 45 * MINUTE)
    for conditions in ((high, low), (low, high)):
        result = evaluate(policies, NOW, *conditions)
        assert (result.score_at(NOW), result.action, result.condition, result.condition_status) == (
            7.0,
            REPLACE_NODE,
            "LowPriority",
            "False",
        )
        assert (result.reason, result.reason_regex, result.fallback, result.selected_eligible_at) == (
            "LowPriorityFailure",
            ".*",
            False,
            NOW - 15 * MINUTE,
        )
        assert (result.termination_grace_period, result.termination_grace_period_condition) == (300.0, "HighPriority")


def test_uses_earliest_eligibility_then_condition_type_to_attribute_equal_termination_grace_periods():
    """Matching: uses earliest eligibility, then condition type, to attribute equal termination grace periods"""
    policies = [
        RepairPolicy(kind, "False", 0.0, reason_regex=".*", termination_grace_period_seconds=300.0)
        for kind in ("ConditionA", "ConditionB", "ConditionC")
    ] + [RepairPolicy("Fallback", "False", 0.0)]
    a = cond("ConditionA", since=NOW)
    b = cond("ConditionB", since=NOW - MINUTE)
    c = cond("ConditionC", since=NOW - MINUTE)
    for conditions in ((a, b, c), (c, b, a)):
        assert evaluate(policies, NOW, *conditions).termination_grace_period_condition == "ConditionB"


def test_uses_earliest_eligibility_to_break_equal_priority_condition_ties():
    """Matching: uses earliest eligibility to break equal-priority condition ties"""
    policies = [
        RepairPolicy("Earlier", "False", 20 * MINUTE, reason_regex=".*", priority=50),
        RepairPolicy("Later", "False", 10 * MINUTE, reason_regex=".*", priority=50),
        RepairPolicy("Fallback", "False", 0.0),
    ]
    earlier = cond("Earlier", since=NOW - 40 * MINUTE)
    later = cond("Later", since=NOW - 15 * MINUTE)
    for conditions in ((earlier, later), (later, earlier)):
        assert evaluate(policies, NOW, *conditions).condition == "Earlier"


def test_uses_condition_type_to_break_complete_policy_ties():
    """Matching: uses condition type to break complete policy ties"""
    policies = [
        RepairPolicy("ConditionA", "False", 0.0, reason_regex=".*", priority=50),
        RepairPolicy("ConditionB", "False", 0.0, reason_regex=".*", priority=50),
        RepairPolicy("Fallback", "False", 0.0),
    ]
    a, b = cond("ConditionA", since=NOW), cond("ConditionB", since=NOW)
    for conditions in ((a, b), (b, a)):
        assert evaluate(policies, NOW, *conditions).condition == "ConditionA"


def test_does_not_treat_a_missing_transition_time_as_predating_the_node():
    """Matching: does not treat a missing transition time as predating the Node"""
    undated = {k: v for k, v in CONDITION.items() if k != "lastTransitionTime"}
    assert evaluate(MATCHING, NOW + 9 * MINUTE, undated, created=NOW).action == ""
    result = evaluate(MATCHING, NOW + 10 * MINUTE, undated, created=NOW)
    assert (result.action, result.selected_eligible_at) == (REBOOT_NODE, NOW + 10 * MINUTE)


def test_reconstructs_eligibility_from_the_current_condition_after_restart():
    """Matching: reconstructs eligibility from the current condition after restart"""
    policies = [
        RepairPolicy("AcceleratorReady", "False", 30 * MINUTE, reason_regex="^ImmediateReason$"),
        RepairPolicy("AcceleratorReady", "False", 2 * HOUR),
    ]
    unknown = {**CONDITION, "reason": "UnknownReason", "lastTransitionTime": timestamp(NOW - HOUR)}
    assert evaluate(policies, NOW, unknown).action == ""
    result = evaluate(policies, NOW, {**unknown, "reason": "ImmediateReason"})
    assert (result.action, result.selected_eligible_at) == (REPLACE_NODE, NOW - 30 * MINUTE)


def test_ranks_a_fallback_matched_condition_by_the_fallbacks_priority():
    """ranks a fallback-matched condition by the fallback's priority"""
    policies = [
        RepairPolicy("AcceleratorReady", "False", MINUTE, priority=10),
        RepairPolicy("AcceleratorReady", "False", MINUTE, reason_regex="^XID$", priority=0),
    ]
    other = evaluate(policies, HOUR, cond("AcceleratorReady", reason="Other", since=0.0))
    xid = evaluate(policies, HOUR, cond("AcceleratorReady", reason="XID", since=0.0))
    assert (other.score_at(HOUR), xid.score_at(HOUR)) == (1 + 59 / 30, 59 / 30)


def test_describes_a_match_for_logging():
    """describes a match for logging"""
    node = {"metadata": {}, "status": {"conditions": [cond("AcceleratorReady", reason="NvidiaXID48Error", since=0.0)]}}
    [match] = repair_policy_matcher([DEFAULT_FALLBACK, VALID_SPECIFIC]).match(node)
    assert match.log_values() == [
        "condition",
        "AcceleratorReady",
        "status",
        "False",
        "reason",
        "NvidiaXID48Error",
        "reason-regex",
        r"^NvidiaXID(48|63|95)Error$",
        "fallback",
        False,
        "action",
        REBOOT_NODE,
        "eligible-at",
        10 * MINUTE,
    ]


def test_describes_a_decision_with_the_condition_that_set_its_drain_bound():
    """describes a decision with the condition that set its drain bound"""
    policies = [RepairPolicy("AcceleratorReady", "False", MINUTE, termination_grace_period_seconds=MINUTE)]
    values = evaluate(policies, HOUR, cond("AcceleratorReady", since=0.0)).log_values()
    assert values[-6:] == [
        "eligible-at",
        MINUTE,
        "termination-grace-period",
        MINUTE,
        "termination-grace-period-condition",
        "AcceleratorReady",
    ]
    assert values[10:12] == ["action", REPLACE_NODE]


def test_measures_toleration_from_no_earlier_than_not_before():
    """measures toleration from no earlier than notBefore"""
    policies = [RepairPolicy("AcceleratorReady", "False", 10 * MINUTE)]
    node = {"metadata": {}, "status": {"conditions": [cond("AcceleratorReady", since=0.0)]}}
    matches = repair_policy_matcher(policies).match(node)
    assert resolve(matches, HOUR + 9 * MINUTE, HOUR).action == ""
    result = resolve(matches, HOUR + 10 * MINUTE, HOUR)
    assert (result.action, result.selected_eligible_at) == (REPLACE_NODE, HOUR + 10 * MINUTE)


def _changed(mutate):
    node = {
        "metadata": {"creationTimestamp": timestamp(0.0)},
        "status": {"conditions": [cond("AcceleratorReady", reason="XID", since=60.0)]},
    }
    updated = {"metadata": dict(node["metadata"]), "status": {"conditions": [dict(node["status"]["conditions"][0])]}}
    mutate(updated)
    return node, updated


@pytest.mark.parametrize(
    ("entry", "mutate", "equal"),
    [
        ("ignores heartbeats", lambda n: n["status"]["conditions"][0].update(lastHeartbeatTime=timestamp(120)), True),
        ("ignores messages", lambda n: n["status"]["conditions"][0].update(message="changed"), True),
        ("ignores labels", lambda n: n["metadata"].update(labels={"updated": "true"}), True),
        ("detects a type change", lambda n: n["status"]["conditions"][0].update(type="Other"), False),
        ("detects a status change", lambda n: n["status"]["conditions"][0].update(status="True"), False),
        ("detects a reason change", lambda n: n["status"]["conditions"][0].update(reason="Other"), False),
        (
            "detects a transition",
            lambda n: n["status"]["conditions"][0].update(lastTransitionTime=timestamp(90)),
            False,
        ),
        (
            "detects an added condition",
            lambda n: n["status"]["conditions"].append({"type": "Other", "status": "True"}),
            False,
        ),
        ("detects a creation timestamp change", lambda n: n["metadata"].update(creationTimestamp=timestamp(30)), False),
    ],
)
def test_comparing_match_inputs(entry, mutate, equal):
    """comparing match inputs: each Entry; equal inputs must give equal matches"""
    old, updated = _changed(mutate)
    assert match_inputs_equal(old, updated) is equal
    if equal:
        matcher = repair_policy_matcher([DEFAULT_FALLBACK, VALID_SPECIFIC])
        assert matcher.match(updated) == matcher.match(old)


# Unhealthy nodes in cluster state (pkg/controllers/state/unhealthy_test.go) ---------------------------------------
# karpui keeps no per-node match cache: the health controller and the 20% rule match each Node as they read it.

STATE_POLICIES = (
    RepairPolicy("BadNode", "False", 30 * MINUTE),
    RepairPolicy("BadNode", "False", MINUTE, reason_regex="^Kernel$"),
    RepairPolicy("Ready", "Unknown", 10 * MINUTE, reason_regex=".*"),
)


def managed(*conditions, created=NOW):
    return {"metadata": {"creationTimestamp": timestamp(created)}, "status": {"conditions": list(conditions)}}


def matches_any(node):
    """unhealthyNames: the node matches some policy, past every toleration."""
    return resolve(repair_policy_matcher(STATE_POLICIES).match(node), NOW + 24 * HOUR).action != ""


def test_should_mark_a_node_unhealthy_as_soon_as_a_condition_matches_a_policy_before_its_toleration_elapses():
    sick, well = managed(cond("BadNode", since=NOW)), managed()
    assert [matches_any(sick), matches_any(well)] == [True, False]
    assert unhealthy(sick, STATE_POLICIES) is not None and unhealthy(well, STATE_POLICIES) is None
    assert resolve(repair_policy_matcher(STATE_POLICIES).match(sick), NOW).action == ""


def test_should_match_on_condition_type_and_status():
    nodes = [managed(cond("Ready", "Unknown")), managed(cond("Ready", "False")), managed(cond("BadNode", "True"))]
    assert [matches_any(n) for n in nodes] == [True, False, False]


def test_should_match_a_condition_that_is_not_the_last_one():
    assert matches_any(managed(cond("BadNode", since=NOW), cond("Other", "True")))


def test_should_resolve_the_toleration_against_the_clock_without_a_node_update():
    result = resolve(
        repair_policy_matcher(STATE_POLICIES).match(managed(cond("BadNode", since=NOW))), NOW + 31 * MINUTE
    )
    assert (result.action, result.condition) == (REPLACE_NODE, "BadNode")


def test_should_re_match_the_policies_when_a_conditions_reason_changes():
    matcher = repair_policy_matcher(STATE_POLICIES)
    assert resolve(matcher.match(managed(cond("BadNode", since=NOW))), NOW + 2 * MINUTE).action == ""
    kernel = managed(cond("BadNode", reason="Kernel", since=NOW))
    assert resolve(matcher.match(kernel), NOW + 2 * MINUTE).reason_regex == "^Kernel$"


def test_should_mark_a_node_healthy_when_its_condition_recovers():
    assert not matches_any(managed())


def test_should_keep_a_node_unhealthy_across_heartbeats():
    node = managed(cond("BadNode", since=NOW))
    beaten = managed({**cond("BadNode", since=NOW), "lastHeartbeatTime": timestamp(NOW + MINUTE)})
    assert match_inputs_equal(node, beaten) and matches_any(beaten)


# Repair (pkg/controllers/disruption/repair_test.go) ---------------------------------------------------------------

SUITE = (RepairPolicy("BadNode", "False", 30 * MINUTE),)  # the suite's BeforeEach: BadNode=False for 30 minutes
STATIC_ON = KarpenterOptions(feature_gates=parse_feature_gates("NodeRepair=true,StaticCapacity=true"))
C2X = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-2x-amd64-linux"]}]


def use(made, policies):
    """useRepairPolicies: the provider's policy set, replaced."""
    made.cloud.repair_policies = lambda: tuple(policies)


def running(*docs, pool=None, policies=SUITE, options=ON):
    made = lab(pool or nodepool_doc(disruption={"consolidateAfter": "Never"}), *docs, options=options)
    use(made, policies)
    made.advance(60)
    return made


def one_node(pool=None, policies=SUITE, **pod_spec):
    made = running(deployment(replicas=1, **pod_spec), pool=pool, policies=policies)
    [claim] = made.store.list("NodeClaim")
    return made, claim["metadata"]["name"], claim["status"]["nodeName"]


def sicken(made, node_name, kind="BadNode", status="False", reason="", since=None):
    """markUnhealthyWithReason: the condition `kind` set to `status` with `reason`, changed at `since` (now)."""
    node = made.store.get("Node", node_name)
    conditions = [c for c in node["status"]["conditions"] if c["type"] != kind]
    changed = made.ctx.now if since is None else since
    conditions.append({"type": kind, "status": status, "reason": reason, "lastTransitionTime": timestamp(changed)})
    node["status"]["conditions"] = conditions
    made.store.update(node)


def annotate(made, kind, name, **annotations):
    obj = made.store.get(kind, name)
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    made.store.update(obj)


def deleting(made, claim_name):
    claim = made.store.get("NodeClaim", claim_name)
    return claim is None or bool(claim["metadata"].get("deletionTimestamp"))


def stored_claim(made, name):
    return made.store.get("NodeClaim", name) or made.store.removed[("NodeClaim", "", name)]


def events(made, reason):
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"])
        for e in made.store.list("Event", "default")
        if e["reason"] == reason
    )


def test_should_pre_spin_a_replacement_and_terminate_the_unhealthy_node_only_after_the_replacement_is_healthy():
    made, claim, node = one_node()
    sicken(made, node)
    made.advance(31 * MINUTE)
    [replacement] = [c["metadata"]["name"] for c in made.store.list("NodeClaim") if c["metadata"]["name"] != claim]
    assert deleting(made, claim)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    # The lab's kwok registers a NodeClaim at once, so the three steps share a second; their order is the point.
    assert [s["step"] for s in command["status"]["steps"]] == [
        f"launched NodeClaim {replacement} in default before the repair",
        "1 replacement(s) initialized",
        f"deleted NodeClaim {claim}",
        "every candidate drained and deleted",
    ]
    assert command["status"]["replacementNodeClaims"] == [replacement]
    # It reads as the replace it turned out to be (Command.String's "-> [1 replacement]").
    assert (command["spec"]["decision"], command["metadata"]["labels"]["karpui.dev/decision"]) == ("replace", "replace")
    assert command["spec"]["text"] == (
        f"Unhealthy/{command['metadata']['name']}: replace: nodepools=[default]: [{node}] -> [1 replacement] "
        "(savings: $0.00)"
    )
    assert [r["nodepool"] for r in command["spec"]["replacements"]] == ["default"]


def test_should_delete_an_empty_unhealthy_node_without_pre_spinning_a_replacement():
    made, claim, node = one_node()
    scaled = made.store.get("Deployment", "inflate", "default")
    scaled["spec"]["replicas"] = 0
    made.store.update(scaled)
    made.advance(30)
    assert made.store.list("Pod") == []
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert deleting(made, claim)
    assert [c["metadata"]["name"] for c in made.store.list("NodeClaim")] in ([], [claim])


def test_should_use_a_matching_reason_specific_policy_instead_of_the_fallback():
    made, claim, node = one_node(
        policies=[
            RepairPolicy("BadNode", "False", 10 * MINUTE, reason_regex="^FastFailure$"),
            RepairPolicy("BadNode", "False", 30 * MINUTE),
        ]
    )
    sicken(made, node, reason="FastFailure")
    made.advance(11 * MINUTE)
    assert deleting(made, claim)


def test_should_preserve_condition_age_across_a_reason_only_change():
    made, claim, node = one_node(
        policies=[
            RepairPolicy("BadNode", "False", 30 * MINUTE, reason_regex="^ImmediateReason$"),
            RepairPolicy("BadNode", "False", 2 * HOUR),
        ]
    )
    made.advance(HOUR)
    created = made.store.get("Node", node)["metadata"]["creationTimestamp"]
    sicken(made, node, reason="UnknownReason")
    stored = made.store.get("Node", node)
    stored["status"]["conditions"][-1]["lastTransitionTime"] = created
    made.store.update(stored)
    made.advance(5)
    assert not deleting(made, claim)
    stored = made.store.get("Node", node)
    stored["status"]["conditions"][-1]["reason"] = "ImmediateReason"
    made.store.update(stored)
    made.advance(5)
    assert deleting(made, claim)


def test_should_suppress_an_eligible_fallback_while_a_matching_reason_specific_policy_is_waiting():
    made, claim, node = one_node(
        policies=[
            RepairPolicy("BadNode", "False", 30 * MINUTE, reason_regex="FastFailure"),
            RepairPolicy("BadNode", "False", 0.0),
        ]
    )
    sicken(made, node, reason="PrefixFastFailureSuffix")
    made.advance(10 * MINUTE)
    assert not deleting(made, claim)


def test_should_use_the_condition_fallback_for_an_unknown_reason():
    made, claim, node = one_node(
        policies=[
            RepairPolicy("BadNode", "False", 10 * MINUTE, reason_regex="^KnownFailure$"),
            RepairPolicy("BadNode", "False", 30 * MINUTE),
        ]
    )
    sicken(made, node, reason="UnknownFailure")
    made.advance(11 * MINUTE)
    assert not deleting(made, claim)
    made.advance(20 * MINUTE)
    assert deleting(made, claim)


def test_should_not_repair_a_node_carrying_the_do_not_repair_annotation():
    made, claim, node = one_node()
    annotate(made, "Node", node, **{DO_NOT_REPAIR: "true"})
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    assert events(made, "DisruptionBlocked") == [
        ("Node", node, "Normal", VETO),
        ("NodeClaim", claim, "Normal", VETO),
    ]


def test_should_report_the_do_not_repair_veto_ahead_of_an_unbounded_drain():
    """karpui runs consolidation beside repair: its Blocked event for the do-not-disrupt pod takes the recorder's
    dedupe slot (reason and object, as Karpenter's), so only the absence of the drain-bound event is asserted."""
    made, claim, node = one_node()
    pod = made.store.list("Pod")[0]
    annotate(made, "Pod", pod["metadata"]["name"], **{"karpenter.sh/do-not-disrupt": "true"})
    annotate(made, "Node", node, **{DO_NOT_REPAIR: "true"})
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    messages = {message for *_, message in events(made, "DisruptionBlocked")}
    assert "repair requires a termination grace period to bypass blocking pods" not in messages


def test_should_not_report_the_do_not_repair_veto_while_the_node_is_still_within_its_policys_toleration():
    made, claim, node = one_node()
    annotate(made, "Node", node, **{DO_NOT_REPAIR: "true"})
    sicken(made, node)
    made.advance(MINUTE)
    assert not deleting(made, claim)
    assert events(made, "DisruptionBlocked") == []


def test_should_still_repair_a_node_whose_do_not_repair_annotation_is_not_true():
    made, claim, node = one_node()
    annotate(made, "Node", node, **{DO_NOT_REPAIR: "false"})
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert deleting(made, claim)


def test_should_stamp_min_policy_tgp_nodeclaim_tgp_before_requesting_deletion():
    pool = nodepool_doc(disruption={"consolidateAfter": "Never"}, template_spec={"terminationGracePeriod": "5m"})
    made, claim, node = one_node(
        pool=pool, policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=1200.0)]
    )
    sicken(made, node)
    made.advance(30 * MINUTE - 1)
    assert not deleting(made, claim)
    made.advance(1)
    assert deleting(made, claim)
    assert stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP] == timestamp(
        made.ctx.now + 5 * MINUTE
    )


def test_should_act_on_the_highest_priority_eligible_condition():
    """should act on and meter the highest-priority eligible condition (its drain bound; karpui has no metric)"""
    made, claim, node = one_node(
        policies=[
            RepairPolicy("LowPriority", "False", 30 * MINUTE, priority=10, termination_grace_period_seconds=900.0),
            RepairPolicy(
                "HighPriority",
                "False",
                30 * MINUTE,
                reason_regex=".*",
                priority=90,
                termination_grace_period_seconds=300.0,
            ),
        ]
    )
    sicken(made, node, kind="LowPriority")
    sicken(made, node, kind="HighPriority")
    made.advance(30 * MINUTE - 1)
    assert not deleting(made, claim)
    made.advance(1)
    assert stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP] == timestamp(
        made.ctx.now + 5 * MINUTE
    )


def test_should_resolve_the_governing_condition_using_only_policies_matching_its_reason():
    made, claim, node = one_node(
        policies=[
            RepairPolicy(
                "Diagnostic",
                "False",
                30 * MINUTE,
                reason_regex="^Critical$",
                termination_grace_period_seconds=0.0,
                priority=90,
            ),
            RepairPolicy("Diagnostic", "False", 30 * MINUTE, termination_grace_period_seconds=600.0, priority=10),
            RepairPolicy(
                "MediumPriority",
                "False",
                30 * MINUTE,
                reason_regex=".*",
                termination_grace_period_seconds=300.0,
                priority=50,
            ),
        ]
    )
    sicken(made, node, kind="Diagnostic", reason="Unknown")
    sicken(made, node, kind="MediumPriority")
    made.advance(30 * MINUTE)
    assert stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP] == timestamp(
        made.ctx.now + 5 * MINUTE
    )


def static_nodes(count, policies=SUITE):
    pool = nodepool_doc("static", replicas=count, template_spec={"requirements": C2X})
    made = lab(pool, options=STATIC_ON)
    use(made, policies)
    made.advance(30)
    claims = sorted(made.store.list("NodeClaim"), key=lambda c: c["metadata"]["name"])
    assert len(claims) == count
    return made, [(c["metadata"]["name"], c["status"]["nodeName"]) for c in claims]


def test_should_not_bypass_a_blocking_pod_without_a_bounded_drain():
    """karpui runs consolidation beside repair, whose Blocked event for the pod takes the recorder's dedupe slot
    (reason and object, as Karpenter's): the repair's own words are asserted on its command."""
    made, claim, node = one_node()
    pod = made.store.list("Pod")[0]
    annotate(made, "Pod", pod["metadata"]["name"], **{"karpenter.sh/do-not-disrupt": "true"})
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    assert command["status"]["message"] == "blocked: repair requires a termination grace period to bypass blocking pods"


def test_a_blocking_pod_is_bypassed_with_a_bounded_drain():
    """the other side of "should not bypass a blocking pod without a bounded drain": a policy's bound (the
    replacement sizing of "should size replacement capacity for a blocking pod" is karpui's provisioner's)"""
    made, claim, node = one_node(
        policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=300.0)]
    )
    pod = made.store.list("Pod")[0]
    annotate(made, "Pod", pod["metadata"]["name"], **{"karpenter.sh/do-not-disrupt": "true"})
    sicken(made, node)
    made.advance(30 * MINUTE)
    assert deleting(made, claim)


def test_should_stop_repairing_a_nodepool_when_more_than_20_percent_of_its_nodes_are_unhealthy():
    made, pairs = static_nodes(10)
    made.advance(31 * MINUTE)  # a condition cannot predate its Node
    # Only the first is past its toleration: the breaker counts the two fresh conditions too.
    sicken(made, pairs[0][1], since=made.ctx.now - 31 * MINUTE)
    sicken(made, pairs[1][1])
    sicken(made, pairs[2][1])
    made.advance(5)
    assert not any(deleting(made, claim) for claim, _ in pairs)
    message = 'more than 20% of nodes in nodepool "static" are unhealthy'
    assert events(made, "NodeRepairBlocked") == [
        ("Node", pairs[0][1], "Warning", message),
        ("NodeClaim", pairs[0][0], "Warning", message),
        ("NodePool", "static", "Warning", message),
    ]


def test_should_break_a_tie_by_node_name_between_candidates_resolved_at_different_times():
    made, pairs = ten_nodes(SUITE)
    first, second = sorted(pairs[:2], key=lambda pair: pair[1])
    for _, node in (second, first):
        sicken(made, node)
    made.advance(30 * MINUTE)
    assert [deleting(made, first[0]), deleting(made, second[0])] == [True, False]


DIAGNOSTIC = [
    RepairPolicy("Diagnostic", "False", 30 * MINUTE, reason_regex="^Critical$", priority=90),
    RepairPolicy("Diagnostic", "False", 30 * MINUTE, priority=10),
    RepairPolicy("MediumPriority", "False", 30 * MINUTE, reason_regex=".*", priority=50),
]


def test_should_not_score_a_node_using_a_reason_specific_policy_that_does_not_match():
    made, pairs = ten_nodes(DIAGNOSTIC)
    (fallback_claim, fallback), (medium_claim, medium) = pairs[:2]
    sicken(made, fallback, kind="Diagnostic", reason="Unknown")
    sicken(made, medium, kind="MediumPriority")
    made.advance(30 * MINUTE)
    assert [deleting(made, medium_claim), deleting(made, fallback_claim)] == [True, False]


def test_should_not_score_a_node_using_a_matching_policy_whose_toleration_has_not_elapsed():
    made, pairs = ten_nodes(
        [
            RepairPolicy("Diagnostic", "False", HOUR, reason_regex="^failure$", priority=100),
            RepairPolicy("Diagnostic", "False", 0.0, reason_regex="failure", priority=0),
            RepairPolicy("Diagnostic", "False", 0.0, priority=0),
            RepairPolicy("MediumPriority", "False", 0.0, reason_regex=".*", priority=50),
        ]
    )
    (waiting_claim, waiting), (medium_claim, medium) = pairs[:2]
    sicken(made, waiting, kind="Diagnostic", reason="failure")
    sicken(made, medium, kind="MediumPriority")
    made.advance(5)
    assert [deleting(made, medium_claim), deleting(made, waiting_claim)] == [True, False]


def test_should_order_a_node_by_its_most_urgent_condition_not_just_its_highest_priority_one():
    made, pairs = ten_nodes(
        [
            RepairPolicy("LowPriority", "False", 30 * MINUTE, priority=10),
            RepairPolicy("HighPriority", "False", 30 * MINUTE, reason_regex=".*", priority=90),
        ]
    )
    made.advance(181 * MINUTE)  # a condition cannot predate its Node
    (a_claim, a), (b_claim, b) = pairs[:2]
    # A: low priority starving for 5 aging constants (score 5), high priority fresh (1.1); B: high for 3 (4).
    sicken(made, a, kind="LowPriority", since=made.ctx.now - 180 * MINUTE)
    sicken(made, b, kind="HighPriority", since=made.ctx.now - 120 * MINUTE)
    sicken(made, a, kind="HighPriority", since=made.ctx.now - 33 * MINUTE)
    made.advance(5)
    assert [deleting(made, a_claim), deleting(made, b_claim)] == [True, False]


def test_should_not_repair_when_the_disruption_budget_is_zero():
    made, claim, node = one_node(
        pool=nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]})
    )
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    assert (
        command["status"]["message"]
        == 'blocked: NodePool "default" allows no more nodes to be disrupted for Unhealthy now'
    )


def test_should_repair_with_the_full_policy_decision_once_a_blocking_budget_lifts():
    made, claim, node = one_node(
        pool=nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]}),
        policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=300.0)],
    )
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    reconfigure(
        made, nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}, generation=2)
    )
    made.advance(10)
    assert deleting(made, claim)
    stamped = stored_claim(made, claim)["metadata"]["annotations"][TERMINATION_TIMESTAMP]
    assert parse_timestamp(stamped) - made.ctx.now in range(290, 301)


def ten_nodes(policies):
    """Ten nodes of one pod each in a NodePool of the default budget (10%: one node at a time)."""
    pool = nodepool_doc(disruption={"consolidateAfter": "Never"}, template_spec={"requirements": C2X})
    made = running(deployment(replicas=10, cpu="1500m"), pool=pool, policies=policies)
    claims = sorted(made.store.list("NodeClaim"), key=lambda c: c["metadata"]["name"])
    assert len(claims) == 10
    return made, [(c["metadata"]["name"], c["status"]["nodeName"]) for c in claims]


def test_should_repair_the_higher_priority_condition_first():
    made, pairs = ten_nodes(
        [
            RepairPolicy("LowPriority", "False", 30 * MINUTE, priority=10),
            RepairPolicy("HighPriority", "False", 30 * MINUTE, reason_regex=".*", priority=90),
        ]
    )
    (low_claim, low), (high_claim, high) = pairs[:2]
    sicken(made, low, kind="LowPriority")
    sicken(made, high, kind="HighPriority")
    made.advance(30 * MINUTE)
    assert [deleting(made, high_claim), deleting(made, low_claim)] == [True, False]


def test_should_explicitly_exclude_standalone_nodeclaims_that_have_no_safe_replacement_template():
    made, claim, node = one_node()
    for kind, name in (("NodeClaim", claim), ("Node", node)):
        obj = made.store.get(kind, name)
        del obj["metadata"]["labels"]["karpenter.sh/nodepool"]
        made.store.update(obj)
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)
    standalone = "repair requires a NodePool to construct and budget a safe replacement"
    assert [e for e in events(made, "DisruptionBlocked") if e[3] == standalone] == [
        ("Node", node, "Normal", standalone),
        ("NodeClaim", claim, "Normal", standalone),
    ]


# Context "uninitialized nodes": registered, never initialized (a known ephemeral taint stays, as Karpenter's
# registerNode leaves the Node without the initialized label).


def uninitialize(made, claim, node):
    stored = made.store.get("Node", node)
    stored["metadata"]["labels"].pop("karpenter.sh/initialized", None)
    taint = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
    stored["spec"].setdefault("taints", []).append(taint)
    made.store.update(stored)
    stored = made.store.get("NodeClaim", claim)
    for condition in stored["status"]["conditions"]:
        if condition["type"] == "Initialized":
            condition["status"] = "Unknown"
    made.store.update(stored)
    made.advance(5)
    assert "karpenter.sh/initialized" not in made.store.get("Node", node)["metadata"]["labels"]


def test_uninitialized_should_repair_an_unhealthy_node_that_never_initialized():
    made, claim, node = one_node()
    uninitialize(made, claim, node)
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert deleting(made, claim)


def test_uninitialized_should_not_repair_before_the_toleration_duration_elapses():
    made, claim, node = one_node()
    uninitialize(made, claim, node)
    sicken(made, node)
    made.advance(29 * MINUTE)
    assert not deleting(made, claim)


def test_uninitialized_should_repair_without_disruption_budget():
    made, claim, node = one_node(
        pool=nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]})
    )
    uninitialize(made, claim, node)
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert deleting(made, claim)


def test_uninitialized_should_not_consume_disruption_budget_for_initialized_nodes():
    pool = nodepool_doc(
        disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]}, template_spec={"requirements": C2X}
    )
    made = running(deployment(replicas=6, cpu="1500m"), pool=pool)
    pairs = sorted((c["metadata"]["name"], c["status"]["nodeName"]) for c in made.store.list("NodeClaim"))
    assert len(pairs) == 6
    uninitialize(made, *pairs[0])
    sicken(made, pairs[0][1])
    sicken(made, pairs[1][1])
    made.advance(30 * MINUTE)  # both due now: the initialized one's repair takes the budget, the other needs none
    assert [deleting(made, claim) for claim, _ in pairs[:2]] == [True, True]


def test_uninitialized_should_not_repair_a_node_carrying_the_do_not_repair_annotation():
    made, claim, node = one_node()
    annotate(made, "Node", node, **{DO_NOT_REPAIR: "true"})
    uninitialize(made, claim, node)
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert not deleting(made, claim)


def test_uninitialized_should_stop_repairing_a_nodepool_when_more_than_20_percent_of_its_nodes_are_unhealthy():
    made, pairs = static_nodes(3)
    for claim, node in pairs[:2]:
        uninitialize(made, claim, node)
        sicken(made, node)
    made.advance(31 * MINUTE)
    assert not any(deleting(made, claim) for claim, _ in pairs)


def test_should_neither_terminate_nor_stamp_a_deadline_when_the_replacement_never_becomes_healthy():
    made, claim, node = one_node(
        policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=600.0)]
    )
    # New nodes take 20 minutes to register from now on: the replacement is still coming at 31 minutes.
    reconfigure(
        made,
        nodepool_doc(disruption={"consolidateAfter": "Never"}),
        {**KWOK_CLASS, "spec": {"nodeRegistrationDelay": "20m"}},
    )
    sicken(made, node)
    made.advance(31 * MINUTE)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    assert len(command["status"]["replacementNodeClaims"]) == 1
    assert not deleting(made, claim)
    assert TERMINATION_TIMESTAMP not in (made.store.get("NodeClaim", claim)["metadata"].get("annotations") or {})


def test_should_size_replacement_capacity_for_a_blocking_pod_when_the_drain_is_bounded():
    made, claim, node = one_node(
        policies=[RepairPolicy("BadNode", "False", 30 * MINUTE, termination_grace_period_seconds=300.0)]
    )
    [pod] = made.store.list("Pod")
    annotate(made, "Pod", pod["metadata"]["name"], **{"karpenter.sh/do-not-disrupt": "true"})
    sicken(made, node)
    made.advance(31 * MINUTE)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    [replacement] = command["status"]["replacementNodeClaims"]
    launched = made.store.get("NodeClaim", replacement)
    assert launched["spec"]["resources"]["requests"] == {"cpu": "1", "pods": "1"}  # the blocking pod's room


def test_should_repair_a_static_nodepool_with_a_one_for_one_replacement_from_the_same_pool():
    made, nodes = static_nodes(5)
    claim, node = nodes[0]
    sicken(made, node)
    made.advance(31 * MINUTE)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    [replacement] = command["status"]["replacementNodeClaims"]
    assert made.store.get("NodeClaim", replacement)["metadata"]["labels"]["karpenter.sh/nodepool"] == "static"
    assert deleting(made, claim)


def test_should_honor_a_static_nodepool_node_limit_before_reserving_replacement_capacity():
    pool = nodepool_doc("static", replicas=5, limits={"nodes": "5"}, template_spec={"requirements": C2X})
    made = lab(pool, options=STATIC_ON)
    use(made, SUITE)
    made.advance(30)
    claims = sorted(made.store.list("NodeClaim"), key=lambda c: c["metadata"]["name"])
    claim, node = claims[0]["metadata"]["name"], claims[0]["status"]["nodeName"]
    sicken(made, node)
    made.advance(31 * MINUTE)
    assert len(made.store.list("NodeClaim")) == 5 and not deleting(made, claim)
    [command] = [c for c in made.store.list("DisruptionCommand") if c["spec"]["reason"] == "Unhealthy"]
    assert (
        command["status"]["message"] == "blocked: static NodePool is at its node limit and cannot stage a replacement"
    )
