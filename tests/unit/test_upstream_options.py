"""Karpenter v1.15.0's options suite (pkg/operator/options/suite_test.go) ported onto provisioner.options, each test
naming the It it follows; the Its test_karpenter_options.py already ports (defaults, the feature-gate overrides, the
policies' refusals) are not repeated here.

karpui reads the options that change decisions only (FEATURE_GATES, PREFERENCE_POLICY, MIN_VALUES_POLICY,
IGNORE_DRA_REQUESTS, LEGACY_NODE_REPAIR, BATCH_IDLE_DURATION, BATCH_MAX_DURATION), from the environment only: there are no CLI flags.
"""

from __future__ import annotations

import pytest

from provisioner.options import DEFAULT_FEATURE_GATES, KarpenterOptions, OptionsError, parse_feature_gates


@pytest.mark.parametrize(
    ("text", "spot_to_spot"),
    [
        ("SpotToSpotConsolidation=true", True),  # basic true
        ("SpotToSpotConsolidation=false", False),  # basic false
        ("SpotToSpotConsolidation\t= false", False),  # with whitespace
        ("Hello=true,SpotToSpotConsolidation=false,World=true", False),  # multiple values
    ],
)
def test_feature_gates_should_successfully_parse_well_formed_feature_gate_strings(text, spot_to_spot):
    assert parse_feature_gates(text) == {**DEFAULT_FEATURE_GATES, "SpotToSpotConsolidation": spot_to_spot}


def test_parse_should_use_the_correct_default_values_for_the_batch_window():  # "should use the correct default values"
    options = KarpenterOptions.from_env({})
    assert (options.batch_max_duration, options.batch_idle_duration) == (10.0, 1.0)
    assert (options.preference_policy, options.min_values_policy) == ("Respect", "Strict")


def test_parse_should_use_environment_variables_for_the_batch_window():
    # "should correctly merge CLI flags and environment variables": BATCH_MAX_DURATION=5s, BATCH_IDLE_DURATION=5s
    options = KarpenterOptions.from_env({"BATCH_MAX_DURATION": "5s", "BATCH_IDLE_DURATION": "5s"})
    assert (options.batch_max_duration, options.batch_idle_duration) == (5.0, 5.0)


def test_feature_gates_an_empty_entry_is_skipped_but_a_blank_one_is_malformed():
    """component-base's MapStringBool.Set skips an empty item before trimming, so a blank one is a malformed pair."""
    assert parse_feature_gates("NodeRepair=true,")["NodeRepair"] is True
    with pytest.raises(OptionsError) as raised:
        parse_feature_gates("NodeRepair=true, ")
    assert str(raised.value) == "parsing feature gates, malformed pair, expect string=bool"


def test_legacy_node_repair_should_default_to_false():  # LegacyNodeRepair: "should default to false"
    assert KarpenterOptions.from_env({}).legacy_node_repair is False


def test_legacy_node_repair_should_be_set_by_environment_variable():
    # LegacyNodeRepair: "should be set by environment variable"
    assert KarpenterOptions.from_env({"LEGACY_NODE_REPAIR": "true"}).legacy_node_repair is True


def test_legacy_node_repair_refuses_what_is_not_a_bool():
    with pytest.raises(OptionsError, match="LEGACY_NODE_REPAIR"):
        KarpenterOptions.from_env({"LEGACY_NODE_REPAIR": "sometimes"})
