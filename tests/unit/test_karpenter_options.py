"""Karpenter's options that change decisions: FEATURE_GATES over its defaults, PREFERENCE_POLICY, MIN_VALUES_POLICY and
the provisioner's one-minute cap per scheduling simulation.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/operator/options/suite_test.go ("should use the correct default values",
"should correctly merge CLI flags and environment variables", the feature-gate overrides), and
pkg/controllers/provisioning/suite_test.go Context("Ignore Preferences") and Context("MinValuesPolicy").
"""

import itertools

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.options import DEFAULT_FEATURE_GATES, KarpenterOptions, OptionsError, parse_feature_gates
from provisioner.quantity import parse_resources
from tests.builders import ZONE, instance_type, nodepool, pod, r, req, schedule, spread


def test_defaults_are_karpenters():  # "should use the correct default values"
    options = KarpenterOptions()
    assert dict(options.feature_gates) == {
        "NodeRepair": False,
        "ReservedCapacity": True,
        "SpotToSpotConsolidation": False,
        "NodeOverlay": False,
        "StaticCapacity": False,
        "CapacityBuffer": False,
    }
    assert (options.preference_policy, options.min_values_policy) == ("Respect", "Strict")


def test_the_environment_sets_every_option():  # "should correctly merge CLI flags and environment variables"
    options = KarpenterOptions.from_env(
        {
            "PREFERENCE_POLICY": "Ignore",
            "MIN_VALUES_POLICY": "BestEffort",
            "FEATURE_GATES": "ReservedCapacity=false,SpotToSpotConsolidation=true,NodeRepair=true,NodeOverlay=true,"
            "StaticCapacity=true,CapacityBuffer=true",
            "IGNORE_DRA_REQUESTS": "true",
        }
    )
    assert (options.preference_policy, options.min_values_policy, options.ignore_dra_requests) == (
        "Ignore",
        "BestEffort",
        True,
    )
    assert dict(options.feature_gates) == {name: name != "ReservedCapacity" for name in DEFAULT_FEATURE_GATES}


@pytest.mark.parametrize("gate", list(DEFAULT_FEATURE_GATES))
def test_a_gate_named_alone_leaves_the_others_at_their_defaults(gate):  # the "when X is overridden" entries
    expected = {**DEFAULT_FEATURE_GATES, gate: not DEFAULT_FEATURE_GATES[gate]}
    assert parse_feature_gates(f"{gate}={str(expected[gate]).lower()}") == expected


def test_feature_gates_take_go_booleans_spaces_and_ignore_unknown_names():
    gates = parse_feature_gates(" NodeRepair = T,SpotToSpotConsolidation=1,,Unknown=true")
    assert (gates["NodeRepair"], gates["SpotToSpotConsolidation"], "Unknown" in gates) == (True, True, False)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FEATURE_GATES": "NodeRepair"}, "parsing feature gates, malformed pair, expect string=bool"),
        (
            {"FEATURE_GATES": "NodeRepair=yes"},
            'parsing feature gates, invalid value of NodeRepair: yes, err: strconv.ParseBool: parsing "yes": '
            "invalid syntax",
        ),
        ({"PREFERENCE_POLICY": "respect"}, 'validating cli flags / env vars, invalid PREFERENCE_POLICY "respect"'),
        ({"MIN_VALUES_POLICY": "Lenient"}, 'validating cli flags / env vars, invalid MIN_VALUES_POLICY "Lenient"'),
    ],
)
def test_bad_options_are_refused_with_karpenters_words(env, message):
    with pytest.raises(OptionsError) as error:
        KarpenterOptions.from_env(env)
    assert str(error.value) == message


# Context("Ignore Preferences") ---------------------------------------------------------------------------------


def test_ignore_preferences_ignores_node_affinity_preferences():  # "should ignore node affinity preferences"
    zone1 = pod(cpu="2", labels={"app": "foo"}, node_selector={ZONE: "test-zone-1"})
    zone2 = [pod(cpu="3", labels={"app": "bar"}, node_selector={ZONE: "test-zone-2"}) for _ in range(2)]
    prefers_zone2 = pod(cpu="1", labels={"app": "baz"}, preferred=[(1, [r(ZONE, "In", "test-zone-2")])])
    result = schedule([zone1, *zone2, prefers_zone2], preference_policy="Ignore")
    by_pod = {p.name: plan for plan in result.new_nodeclaims for p in plan.pods}
    assert by_pod[prefers_zone2.name] is by_pod[zone1.name]
    assert by_pod[prefers_zone2.name] is not by_pod[zone2[0].name]


def test_respect_preferences_follows_the_same_preference():
    zone1 = pod(cpu="2", labels={"app": "foo"}, node_selector={ZONE: "test-zone-1"})
    zone2 = [pod(cpu="3", labels={"app": "bar"}, node_selector={ZONE: "test-zone-2"}) for _ in range(2)]
    prefers_zone2 = pod(cpu="1", labels={"app": "baz"}, preferred=[(1, [r(ZONE, "In", "test-zone-2")])])
    result = schedule([zone1, *zone2, prefers_zone2], preference_policy="Respect")
    [plan] = [plan for plan in result.new_nodeclaims if prefers_zone2 in plan.pods]
    assert plan.requirements[ZONE].values == frozenset({"test-zone-2"})


@pytest.mark.parametrize("key", [ZONE, "kubernetes.io/hostname"])
def test_ignore_preferences_ignores_schedule_anyway_spread(key):  # "should ignore topologySpreadConstraint preferences"
    pods = [pod(cpu="0.1", labels={"app": "foo"}, spread=[spread(key, when="ScheduleAnyway", app="foo")]) for _ in "ab"]
    assert len(schedule(pods, preference_policy="Ignore").new_nodeclaims) == 1
    assert len(schedule(pods, preference_policy="Respect").new_nodeclaims) == 2


# Context("MinValuesPolicy") ------------------------------------------------------------------------------------


def _types(*names):
    """Arm64 4 CPU / 4Gi types with one spot offering at $0.52, as the suite's fake.NewInstanceType(...) calls."""
    return [
        InstanceType(
            name=name,
            capacity=parse_resources({"cpu": "4", "memory": "4Gi", "pods": "110"}),
            offerings=(Offering(f"test-zone-{i}-spot", "spot", 0.52),),
            labels={"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux"},
        )
        for i, name in enumerate(names, start=1)
    ]


MIN3 = nodepool(
    "default",
    req(
        "node.kubernetes.io/instance-type", "In", "instance-type-1", "instance-type-2", "instance-type-3", min_values=3
    ),
    weight=100,
)


def test_strict_min_values_does_not_schedule_when_unmet():  # "should not schedule when minValues requirement is not met"
    result = schedule(
        [pod(cpu="0.9", memory="0.9Gi")],
        pools=[MIN3],
        types=_types("instance-type-1", "instance-type-2"),
        min_values_policy="Strict",
    )
    assert result.new_nodeclaims == []
    [failure] = result.failures.values()
    assert failure.reasons[0].kind == "no-instance-types"


def test_best_effort_min_values_schedules_and_lowers_min_values():  # "should schedule even when minValues ... not met"
    result = schedule(
        [pod(cpu="0.9", memory="0.9Gi")],
        pools=[MIN3],
        types=_types("instance-type-1", "instance-type-2"),
        min_values_policy="BestEffort",
    )
    [plan] = result.new_nodeclaims
    assert plan.min_values_relaxed is True
    assert {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["instance-type-1", "instance-type-2"],
        "minValues": 2,
    } in plan.requirements.to_specs()


def test_best_effort_relaxes_min_values_before_falling_back_to_other_nodepools():
    """ "should relax minValues before falling back to other nodepools": the weighted pool's NodeClaim is made, with
    minValues lowered, rather than the pool without minValues."""
    fallback = nodepool("fallback")
    result = schedule(
        [pod(cpu="0.9", memory="0.9Gi")],
        pools=[MIN3, fallback],
        types=_types("instance-type-1", "instance-type-2"),
        min_values_policy="BestEffort",
    )
    assert [plan.nodepool for plan in result.new_nodeclaims] == ["default"]


# The one-minute cap (provisioner.go: context.WithTimeout(ctx, time.Minute) around Solve) ----------------------


def test_a_simulation_past_its_time_limit_keeps_what_it_planned_and_leaves_the_rest_untried():
    ticks = itertools.count()
    pods = [pod(cpu="1", name=f"p{i}") for i in range(3)]
    # Each read of the clock is a second later; the cap of 2 s is reached after the first pod was tried.
    result = schedule(
        pods, types=[instance_type("one-cpu", "2", "2Gi", pods=1)], time_limit=2.0, clock=lambda: float(next(ticks))
    )
    assert result.timed_out is True
    assert [p.name for plan in result.new_nodeclaims for p in plan.pods] == ["p0"]
    assert result.failures == {}  # the others were never tried: they wait for the next batch, with no verdict


def test_a_simulation_within_its_time_limit_is_not_cut():
    result = schedule([pod(cpu="1") for _ in range(3)], time_limit=60.0)
    assert result.timed_out is False and sum(len(p.pods) for p in result.new_nodeclaims) == 3
