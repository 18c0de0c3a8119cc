"""Karpenter v1.15.0's v1 API suites (pkg/apis/v1: nodepool_validation_cel_test.go, nodepool_default_test.go,
nodepool_budgets_test.go) ported onto karpui's NodePool manifests and disruption budgets, each test naming the It it
follows (Describe/Context/It).

The CRD's rules (pkg/apis/crds/karpenter.sh_nodepools.yaml) and NodePool.RuntimeValidate (nodepool_validation.go,
nodeclaim_validation.go) are one gate in karpui: parse_nodepool refuses both, where Karpenter's API server accepts a
NodePool RuntimeValidate fails and its validation controller then marks it ValidationSucceeded=False (karpui leaves such
a NodePool out, with the same condition). So an It that expects `Create` to succeed and `RuntimeValidate` to fail
expects a refusal here. The suite's node class, karpenter.test.sh/TestNodeClass, is karpui's KWOKNodeClass: karpui
refuses a node class it does not serve. Go's metav1.Duration is written as Go prints it ("20m" is "20m0s").
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from provisioner.disruption.budgets import allowed_disruptions, budget_active, budget_allowed, schedule_parses
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeclaim import validate_nodeclaim
from provisioner.manifests.nodepool import nodepool_to_manifest, parse_nodepool, update_problem
from provisioner.objects import Budget
from tests.builders import nodepool
from tests.disruption_builders import claimed
from tests.lab_builders import lab, nodepool_doc

CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
REQ = "spec.template.spec.requirements"
TAINTS = "spec.template.spec.taints"
LABELS = "spec.template.metadata.labels"
REF = "spec.template.spec.nodeClassRef"
LONG = "a" * 250  # strings.ToLower(randomdata.Alphanumeric(250))


def base() -> dict[str, Any]:
    """The BeforeEach NodePool: a node class reference and `karpenter.sh/capacity-type Exists`."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [{"key": CAPACITY_TYPE, "operator": "Exists"}],
                }
            }
        },
    }


def at(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`doc` with `value` set at a dotted path (unstructured.SetNestedField)."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    target = doc
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = value
    return doc


def without(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """`doc` with the field at a dotted path removed (unstructured.RemoveNestedField)."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    target = doc
    for key in parents:
        target = target.get(key, {})
    target.pop(last, None)
    return doc


def refused(doc: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ManifestError) as raised:
        parse_nodepool(doc)
    return raised.value.field, raised.value.message


def budgets(*items: dict[str, Any]) -> dict[str, Any]:
    return at(base(), "spec.disruption.budgets", list(items))


def taints(*items: dict[str, Any]) -> dict[str, Any]:
    return at(base(), TAINTS, list(items))


def requirements(*items: dict[str, Any]) -> dict[str, Any]:
    return at(base(), REQ, list(items))


def labels(values: dict[str, str]) -> dict[str, Any]:
    return at(base(), "spec.template.metadata", {"labels": values})


# CEL/Validation Context("Disruption") -----------------------------------------------------------------------------


def test_should_succeed_on_a_disabled_expire_after():
    assert parse_nodepool(at(base(), "spec.template.spec.expireAfter", "Never")).expire_after_seconds is None


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30), ("1h30m5s", 5405), ("Never", None)])
def test_should_succeed_on_a_valid_expire_after(value, seconds):
    assert parse_nodepool(at(base(), "spec.template.spec.expireAfter", value)).expire_after_seconds == seconds


@pytest.mark.parametrize("value", ["-1s", "1hr", "FooNever"])  # negative, invalid unit, partial match
def test_should_fail_on_an_invalid_expire_after(value):
    field, message = refused(at(base(), "spec.template.spec.expireAfter", value))
    assert (field, message) == (
        "spec.template.spec.expireAfter",
        f"invalid duration '{value}': expected \"Never\" or a sequence like 720h, 1h30m or 10s",
    )


def test_should_succeed_on_a_disabled_consolidate_after():
    assert parse_nodepool(at(base(), "spec.disruption.consolidateAfter", "Never")).consolidate_after_seconds is None


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30), ("1h30m5s", 5405), ("Never", None)])
def test_should_succeed_on_a_valid_consolidate_after(value, seconds):
    assert parse_nodepool(at(base(), "spec.disruption.consolidateAfter", value)).consolidate_after_seconds == seconds


@pytest.mark.parametrize("value", ["-1s", "1hr", "FooNever"])
def test_should_fail_on_an_invalid_consolidate_after(value):
    assert refused(at(base(), "spec.disruption.consolidateAfter", value))[0] == "spec.disruption.consolidateAfter"


@pytest.mark.parametrize(
    ("policy", "after"),
    [
        ("WhenEmpty", "30s"),  # should succeed when setting consolidateAfter with consolidationPolicy=WhenEmpty
        ("WhenEmptyOrUnderutilized", "30s"),  # ... with consolidationPolicy=WhenUnderutilized
        ("WhenEmptyOrUnderutilized", "Never"),  # ... to 'Never' with consolidationPolicy=WhenUnderutilized
        ("WhenEmpty", "Never"),  # ... to 'Never' with consolidationPolicy=WhenEmpty
    ],
)
def test_should_succeed_when_setting_consolidate_after_with_a_consolidation_policy(policy, after):
    doc = at(base(), "spec.disruption", {"consolidationPolicy": policy, "consolidateAfter": after})
    made = parse_nodepool(doc)
    assert (made.consolidation_policy, made.consolidate_after) == (policy, after)


def test_should_default_consolidate_after_to_0s_when_omitted_on_a_dynamic_nodepool():
    doc = without(
        at(base(), "spec.disruption", {"consolidationPolicy": "WhenEmpty"}), "spec.disruption.consolidateAfter"
    )
    assert nodepool_to_manifest(parse_nodepool(doc))["spec"]["disruption"]["consolidateAfter"] == "0s"


@pytest.mark.parametrize("policy", ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"])
def test_should_succeed_on_a_valid_consolidation_policy(policy):
    # and "should pass RuntimeValidate for valid consolidationPolicy", the same three
    assert parse_nodepool(at(base(), "spec.disruption.consolidationPolicy", policy)).consolidation_policy == policy


@pytest.mark.parametrize(
    "policy", ["1", "2", "3", "0", "4", "10", "balanced", "whenempty", "", "WhenUnderutilized", "foo"]
)
def test_should_fail_on_an_invalid_consolidation_policy(policy):
    assert refused(at(base(), "spec.disruption.consolidationPolicy", policy)) == (
        "spec.disruption.consolidationPolicy",
        f'Unsupported value: "{policy}": supported values: WhenEmpty, WhenEmptyOrUnderutilized, Balanced',
    )


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        # should fail when creating a budget with an invalid cron
        ({"nodes": "10", "schedule": "*", "duration": "20m0s"}, "spec.disruption.budgets[0].schedule"),
        # should fail when creating a schedule with less than 5 entries
        ({"nodes": "10", "schedule": "* * * * ", "duration": "20m0s"}, "spec.disruption.budgets[0].schedule"),
        # should fail when creating a budget with a negative duration
        ({"nodes": "10", "schedule": "* * * * *", "duration": "-20m0s"}, "spec.disruption.budgets[0].duration"),
        # should fail when creating a budget with a seconds duration
        ({"nodes": "10", "schedule": "* * * * *", "duration": "30s"}, "spec.disruption.budgets[0].duration"),
        # should fail when creating a budget with a negative value int / percent / percent with more than 3 digits
        ({"nodes": "-10"}, "spec.disruption.budgets[0].nodes"),
        ({"nodes": "-10%"}, "spec.disruption.budgets[0].nodes"),
        ({"nodes": "1000%"}, "spec.disruption.budgets[0].nodes"),
    ],
)
def test_should_fail_when_creating_a_budget_with_a_bad_field(budget, field):
    assert refused(budgets(budget))[0] == field


def test_should_fail_when_creating_a_budget_with_a_cron_but_no_duration():
    assert refused(budgets({"nodes": "10", "schedule": "* * * * *"})) == (
        "spec.disruption.budgets[0].duration",
        "'schedule' must be set with 'duration'",
    )


def test_should_fail_when_creating_a_budget_with_a_duration_but_no_cron():
    assert refused(budgets({"nodes": "10", "duration": "20m0s"})) == (
        "spec.disruption.budgets[0].schedule",
        "'schedule' must be set with 'duration'",
    )


@pytest.mark.parametrize(
    "budget",
    [
        {"nodes": "10", "schedule": "* * * * *", "duration": "20m0s"},  # with both duration and cron
        {"nodes": "10", "schedule": "* * * * *", "duration": "2h20m0s"},  # with hours and minutes in duration
        {"nodes": "10"},  # with neither duration nor cron
        {"nodes": "10", "schedule": "@annually", "duration": "20m0s"},  # with special cased crons
    ],
)
def test_should_succeed_when_creating_a_budget(budget):
    made = parse_nodepool(budgets(budget))
    assert made.budgets == (Budget(nodes="10", schedule=budget.get("schedule"), duration=budget.get("duration")),)


def test_should_fail_when_creating_two_budgets_where_one_has_an_invalid_crontab():
    doc = budgets(
        {"nodes": "10", "schedule": "@annually", "duration": "20m0s"},
        {"nodes": "10", "schedule": "*", "duration": "20m0s"},
    )
    assert refused(doc)[0] == "spec.disruption.budgets[1].schedule"


def test_should_fail_when_creating_multiple_budgets_where_one_doesnt_have_both_schedule_and_duration():
    doc = budgets(
        {"nodes": "10", "duration": "20m0s"},
        {"nodes": "10", "schedule": "* * * * *", "duration": "20m0s"},
        {"nodes": "10"},
    )
    assert refused(doc) == ("spec.disruption.budgets[0].schedule", "'schedule' must be set with 'duration'")


@pytest.mark.parametrize("reason", ["Drifted", "Underutilized", "Empty", "Unhealthy"])
def test_should_succeed_when_creating_a_budget_with_valid_reasons(reason):
    made = parse_nodepool(budgets({"nodes": "10", "schedule": "* * * * *", "duration": "20m0s", "reasons": [reason]}))
    assert made.budgets[0].reasons == (reason,)


@pytest.mark.parametrize("reason", ["invalid", "expired", ""])
def test_should_fail_when_creating_a_budget_with_invalid_reasons(reason):
    doc = budgets({"nodes": "10", "schedule": "* * * * *", "duration": "20m0s", "reasons": [reason]})
    assert refused(doc) == (
        "spec.disruption.budgets[0].reasons[0]",
        f'Unsupported value: "{reason}": supported values: Underutilized, Empty, Drifted, Unhealthy',
    )


def test_should_allow_setting_multiple_reasons():
    doc = budgets({"nodes": "10", "schedule": "* * * * *", "duration": "20m0s", "reasons": ["Drifted", "Empty"]})
    assert parse_nodepool(doc).budgets[0].reasons == ("Drifted", "Empty")


def test_a_reason_given_twice_is_refused_as_the_crds_set_refuses_it():  # reasons: x-kubernetes-list-type: set
    doc = budgets({"nodes": "10", "reasons": ["Drifted", "Drifted"]})
    assert refused(doc) == ("spec.disruption.budgets[0].reasons[1]", 'Duplicate value: "Drifted"')


def test_a_budgets_nodes_must_be_a_string():  # budgets[].nodes: type: string
    assert refused(budgets({"nodes": 10})) == ("spec.disruption.budgets[0].nodes", "expected a string, got integer")


# CEL/Validation Context("Taints") ---------------------------------------------------------------------------------


def test_taints_should_succeed_for_valid_taints():
    doc = taints(
        {"key": "a", "value": "b", "effect": "NoSchedule"},
        {"key": "c", "value": "d", "effect": "NoExecute"},
        {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "test.com.com/test", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "key-only", "effect": "NoExecute"},
    )
    assert [(t.key, t.value, t.effect) for t in parse_nodepool(doc).taints] == [
        ("a", "b", "NoSchedule"),
        ("c", "d", "NoExecute"),
        ("e", "f", "PreferNoSchedule"),
        ("Test", "f", "PreferNoSchedule"),
        ("test.com/Test", "f", "PreferNoSchedule"),
        ("test.com.com/test", "f", "PreferNoSchedule"),
        ("key-only", "", "NoExecute"),
    ]


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("test.com.com}", "name part must be at most 63 alphanumerics"),
        ("Test.com/test", "prefix must be a DNS subdomain"),
        ("test/test/test", "prefix must be a DNS subdomain"),
        ("test/", "name part must be at most 63 alphanumerics"),
        ("/test", "prefix part must be non-empty"),
    ],
)
def test_taints_should_fail_for_invalid_taint_keys(key, problem):
    field, message = refused(taints({"key": key, "effect": "NoSchedule"}))
    assert field == f"{TAINTS}[0].key"
    assert message.startswith(f"invalid key '{key}': {problem}")


@pytest.mark.parametrize(
    ("key", "problem"),
    [(f"test.com.test.{LONG}/test", "prefix must be a DNS subdomain"), (f"test.com.test/test-{LONG}", "name part")],
)
def test_taints_should_fail_at_runtime_for_taint_keys_that_are_too_long(key, problem):
    field, message = refused(taints({"key": key, "effect": "NoSchedule"}))
    assert field == f"{TAINTS}[0].key" and problem in message


def test_taints_should_fail_for_missing_taint_key():
    assert refused(taints({"effect": "NoSchedule"})) == (f"{TAINTS}[0].key", "Required value")


def test_taints_should_fail_for_invalid_taint_value():
    field, message = refused(taints({"key": "invalid-value", "effect": "NoSchedule", "value": "???"}))
    assert (field, message.split(":")[0]) == (f"{TAINTS}[0].value", "invalid taint value '???'")


def test_a_taint_value_is_a_qualified_name_as_karpenter_checks_it():  # the CRD's pattern, validateTaintsField
    doc = taints({"key": "gpu", "effect": "NoSchedule", "value": "example.com/on"})
    assert parse_nodepool(doc).taints[0].value == "example.com/on"


def test_taints_should_fail_for_invalid_taint_effect():
    assert refused(taints({"key": "invalid-effect", "effect": "???"})) == (
        f"{TAINTS}[0].effect",
        'Unsupported value: "???": supported values: NoSchedule, PreferNoSchedule, NoExecute',
    )


def test_taints_should_not_fail_for_same_key_with_different_effects():
    doc = taints({"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"})
    assert [(t.key, t.effect) for t in parse_nodepool(doc).taints] == [("a", "NoSchedule"), ("a", "NoExecute")]


# CEL/Validation Context("Requirements") ---------------------------------------------------------------------------


def test_requirements_should_succeed_for_valid_requirement_keys():
    keys = ["Test", "test.com/Test", "test.com.com/test", "key-only"]
    doc = requirements(*({"key": key, "operator": "Exists"} for key in keys))
    assert [r.key for r in parse_nodepool(doc).requirements] == keys


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("test.com.com}", "name part must be at most 63 alphanumerics"),
        ("Test.com/test", "prefix must be a DNS subdomain"),
        ("test/test/test", "prefix must be a DNS subdomain"),
        ("test/", "name part must be at most 63 alphanumerics"),
        ("/test", "prefix part must be non-empty"),
    ],
)
def test_requirements_should_fail_for_invalid_requirement_keys(key, problem):
    field, message = refused(requirements({"key": key, "operator": "Exists"}))
    assert field == f"{REQ}[0].key"
    assert message.startswith(f"invalid key '{key}': {problem}")


@pytest.mark.parametrize("key", [f"test.com.test.{LONG}/test", f"test.com.test/test-{LONG}"])
def test_requirements_should_fail_at_runtime_for_requirement_keys_that_are_too_long(key):
    assert refused(requirements({"key": key, "operator": "Exists"}))[0] == f"{REQ}[0].key"


def test_requirements_should_fail_for_the_karpenter_sh_nodepool_label():
    field, message = refused(requirements({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}))
    assert (field, message.startswith('label "karpenter.sh/nodepool" is restricted')) == (f"{REQ}[0].key", True)


def test_requirements_should_allow_supported_ops():
    doc = requirements(
        {"key": ZONE, "operator": "In", "values": ["test"]},
        {"key": ZONE, "operator": "Gt", "values": ["1"]},
        {"key": ZONE, "operator": "Lt", "values": ["1"]},
        {"key": ZONE, "operator": "NotIn"},
        {"key": ZONE, "operator": "Exists"},
    )
    assert [r.operator for r in parse_nodepool(doc).requirements] == ["In", "Gt", "Lt", "NotIn", "Exists"]


def test_requirements_should_fail_for_unsupported_ops():
    assert refused(requirements({"key": ZONE, "operator": "unknown", "values": ["test"]})) == (
        f"{REQ}[0].operator",
        'Unsupported value: "unknown": supported values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte',
    )


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/test",  # should fail for restricted domains (RestrictedLabelDomains: karpenter.sh)
        # The CRD's rule asks whether the text before the first slash ends with "karpenter.sh".
        "sub.karpenter.sh/test",
        "notkarpenter.sh/test",
        "karpenter.sh",
    ],
)
def test_requirements_should_fail_for_restricted_domains(key):
    doc = requirements({"key": key, "operator": "In", "values": ["test"]})
    assert refused(doc) == (f"{REQ}[0].key", 'label domain "karpenter.sh" is restricted')


def test_requirements_should_fail_for_restricted_labels():  # RestrictedLabels + "/test": not a qualified name
    field, message = refused(requirements({"key": "kubernetes.io/hostname/test", "operator": "In", "values": ["t"]}))
    assert (field, message) == (
        f"{REQ}[0].key",
        "invalid key 'kubernetes.io/hostname/test': prefix must be a DNS subdomain",
    )


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/test",  # should allow kubernetes domains
        "k8s.io/test",
        "subdomain.kubernetes.io/test",  # should allow kubernetes subdomains exceptions
        "subdomain.k8s.io/test",
        # should allow well known label exceptions (WellKnownLabels but the NodePool's and the capacity type)
        ZONE,
        "topology.kubernetes.io/region",
        INSTANCE_TYPE,
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/windows-build",
    ],
)
def test_requirements_should_allow_kubernetes_domains_and_well_known_labels(key):
    assert parse_nodepool(requirements({"key": key, "operator": "In", "values": ["test"]})).requirements[0].key == key


def test_requirements_should_allow_non_empty_set_after_removing_overlapped_value():
    doc = requirements(
        {"key": ZONE, "operator": "In", "values": ["test", "foo"]},
        {"key": ZONE, "operator": "NotIn", "values": ["test", "bar"]},
    )
    assert parse_nodepool(doc).template_requirements()[ZONE].values == frozenset({"foo"})


def test_requirements_should_allow_empty_requirements():
    assert parse_nodepool(requirements()).requirements == ()


@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])  # should fail with invalid GT or LT / GTE or LTE
@pytest.mark.parametrize("values", [[], ["1", "2"], ["a"], ["-1"]])
def test_requirements_should_fail_with_invalid_comparison_values(operator, values):
    field, message = refused(requirements({"key": ZONE, "operator": operator, "values": values}))
    if values == ["-1"]:  # not even a label value, which the CRD checks first
        assert field == f"{REQ}[0].values[0]" and message.startswith("invalid label value '-1'")
    else:
        assert (field, message) == (
            f"{REQ}[0].values",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        )


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        # should error when minValues is negative / zero
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": -1},
            "must be greater than or equal to 1, got -1",
        ),
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": 0},
            "must be greater than or equal to 1, got 0",
        ),
        # should error when minValues is more than 50
        ({"key": INSTANCE_TYPE, "operator": "Exists", "minValues": 51}, "must be less than or equal to 50, got 51"),
        # should error when minValues is greater than the number of unique values specified within In operator
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": 2},
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        ),
    ],
)
def test_requirements_should_error_on_min_values(requirement, message):
    assert refused(requirements(requirement)) == (f"{REQ}[0].minValues", message)


def test_requirements_should_allow_more_than_50_values_if_min_values_is_not_specified():
    values = [f"instance{i}" for i in range(90)]
    doc = requirements({"key": INSTANCE_TYPE, "operator": "In", "values": values})
    assert parse_nodepool(doc).requirements[0].values == tuple(values)


# CEL/Validation Context("Labels") ---------------------------------------------------------------------------------


def test_labels_should_allow_unrecognized_labels():
    assert parse_nodepool(labels({"foo": "bar"})).template_labels == {"foo": "bar"}


def test_labels_should_fail_for_the_karpenter_sh_nodepool_label():
    field, message = refused(labels({"karpenter.sh/nodepool": "x"}))
    assert field == f"{LABELS}.karpenter.sh/nodepool"
    assert message.startswith('label "karpenter.sh/nodepool" is restricted')


def test_labels_should_fail_for_invalid_label_keys():
    field, message = refused(labels({"spaces are not allowed": "x"}))
    assert field == f"{LABELS}.spaces are not allowed"
    assert message.startswith("invalid key 'spaces are not allowed': name part")


@pytest.mark.parametrize("key", [f"test.com.test.{LONG}/test", f"test.com.test/test-{LONG}"])
def test_labels_should_fail_at_runtime_for_label_keys_that_are_too_long(key):
    assert refused(labels({key: "x"}))[0] == f"{LABELS}.{key}"


def test_labels_should_fail_for_invalid_label_values():
    field, message = refused(labels({"foo": "/ is not allowed"}))
    assert (field, message.startswith("invalid label value '/ is not allowed'")) == (f"{LABELS}.foo", True)


@pytest.mark.parametrize("key", ["karpenter.sh/unknown", "notkarpenter.sh/unknown", "karpenter.sh"])
def test_labels_should_fail_for_restricted_label_domains(key):
    assert refused(labels({key: "x"})) == (f"{LABELS}.{key}", 'label domain "karpenter.sh" is restricted')


def test_labels_should_allow_labels_kops_require():
    kops = {"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"}
    assert parse_nodepool(labels(kops)).template_labels == kops


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io",  # should allow labels in kubernetes domains
        "k8s.io",
        "kubernetes.io/key",  # should allow labels prefixed with the kubernetes domain
        "k8s.io/key",
        "subdomain.kubernetes.io",  # should allow subdomain labels in restricted domains exceptions list
        "subdomain.k8s.io",
        "subdomain.kubernetes.io/key",  # should allow subdomain labels prefixed with the kubernetes domain
        "subdomain.k8s.io/key",
    ],
)
def test_labels_should_allow_labels_in_kubernetes_domains(key):
    assert parse_nodepool(labels({key: "test-value"})).template_labels == {key: "test-value"}


# CEL/Validation Context("TerminationGracePeriod") -----------------------------------------------------------------


@pytest.mark.parametrize("value", ["30s", "1h30m5s"])
def test_should_succeed_on_a_valid_termination_grace_period(value):
    assert parse_nodepool(at(base(), "spec.template.spec.terminationGracePeriod", value)).termination_grace_period == (
        value
    )


@pytest.mark.parametrize("value", ["-1s", "1hr", "Never", "FooNever"])
def test_should_fail_on_an_invalid_termination_grace_period(value):
    assert refused(at(base(), "spec.template.spec.terminationGracePeriod", value)) == (
        "spec.template.spec.terminationGracePeriod",
        f"invalid duration '{value}': expected a sequence like 720h, 1h30m or 10s",
    )


# CEL/Validation Context("NodeClassRef") ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "message"),
    [("group", "nodeClassRef.group is immutable"), ("kind", "nodeClassRef.kind is immutable")],
)
def test_node_class_ref_should_fail_to_mutate(field, message):  # should fail to mutate group / kind
    """The stored NodePool had another group (kind); karpui serves one kind per group, so the other one is what was
    stored rather than what is written."""
    stored = nodepool_to_manifest(parse_nodepool(base()))["spec"]
    stored["template"]["spec"]["nodeClassRef"][field] = {"group": "karpenter.test.sh", "kind": "TestNodeClass2"}[field]
    problem = update_problem(stored, parse_nodepool(base()))
    assert problem is not None and (problem.field, problem.message) == (REF, message)
    assert update_problem(stored, parse_nodepool(base()), keep_ref=False) is None  # a kind karpui chose may change


def test_node_class_ref_name_may_change():
    stored = nodepool_to_manifest(parse_nodepool(base()))["spec"]
    assert update_problem(stored, parse_nodepool(at(base(), f"{REF}.name", "other"))) is None


@pytest.mark.parametrize("field", ["group", "kind", "name"])  # should fail if group / kind / name is unset
def test_node_class_ref_should_fail_if_a_field_is_unset(field):
    assert refused(at(base(), f"{REF}.{field}", "")) == (f"{REF}.{field}", f"{field} may not be empty")


# CEL/Validation Context("Replicas") -------------------------------------------------------------------------------


@pytest.mark.parametrize("replicas", [5, 0, 1000])  # a positive value, zero, a large value
def test_replicas_should_succeed_when_set_to_a_valid_value(replicas):
    assert parse_nodepool(at(base(), "spec.replicas", replicas)).replicas == replicas


def test_replicas_should_fail_when_set_to_a_negative_value():
    assert refused(at(base(), "spec.replicas", -100)) == (
        "spec.replicas",
        "must be greater than or equal to 0, got -100",
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("spec.limits", {"cpu": "1000"}, "only 'limits.nodes' is supported on static NodePools"),
        ("spec.limits", {"memory": "2000Gi"}, "only 'limits.nodes' is supported on static NodePools"),
        ("spec.limits", {"pods": "10"}, "only 'limits.nodes' is supported on static NodePools"),
        ("spec.limits", {"ephemeral-storage": "10Gi"}, "only 'limits.nodes' is supported on static NodePools"),
        ("spec.weight", 25, "'weight' is not supported on static NodePools"),
    ],
)
def test_replicas_should_fail_for_incompatible_fields(path, value, message):
    assert refused(at(at(base(), path, value), "spec.replicas", 10)) == ("spec", message)


COMPATIBLE = [
    ("spec.limits", {"nodes": "100"}),
    (
        "spec.disruption",
        {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "5m",
            "budgets": [
                {"nodes": "20%", "schedule": "0 9 * * mon-fri", "duration": "8h0m0s", "reasons": ["Drifted", "Empty"]},
                {"nodes": "30%", "schedule": "0 22 * * sat,sun", "duration": "4h0m0s", "reasons": ["Underutilized"]},
                {"nodes": "5"},
            ],
        },
    ),
    ("spec.template.metadata", {"labels": {"environment": "production"}}),
    ("spec.template.metadata", {"annotations": {"example.com/last-updated": "2024-01-01"}}),
    (TAINTS, [{"key": "gpu-workload", "value": "enabled", "effect": "NoSchedule"}]),
    (
        "spec.template.spec.startupTaints",
        [{"key": "example.com/initializing", "value": "true", "effect": "NoSchedule"}],
    ),
    (
        REQ,
        [
            {
                "key": INSTANCE_TYPE,
                "operator": "In",
                "values": ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.large", "c5.xlarge", "r5.large", "r5.xlarge"],
                "minValues": 3,
            },
            {"key": ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b", "us-west-2c"]},
            {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": ["8192"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["64"]},
        ],
    ),
    ("spec.template.spec.expireAfter", "72h"),
    ("spec.template.spec.terminationGracePeriod", "5m0s"),
]


@pytest.mark.parametrize(("path", "value"), COMPATIBLE, ids=[f"{p}-{i}" for i, (p, _) in enumerate(COMPATIBLE)])
def test_replicas_should_succeed_for_compatible_fields(path, value):
    made = parse_nodepool(at(at(base(), path, value), "spec.replicas", 10))
    written = nodepool_to_manifest(made)
    target: Any = written
    for key in path.split("."):
        target = target[key]
    assert (made.replicas, {k: target[k] for k in value} if isinstance(value, dict) else target) == (10, value)


def test_replicas_should_succeed_when_consolidate_after_is_omitted_on_a_static_nodepool():
    assert parse_nodepool(at(base(), "spec.replicas", 3)).consolidate_after == "0s"


def test_replicas_update_should_succeed_when_increasing_replicas():
    stored = nodepool_to_manifest(parse_nodepool(at(base(), "spec.replicas", 3)))["spec"]
    assert update_problem(stored, parse_nodepool(at(base(), "spec.replicas", 5))) is None


@pytest.mark.parametrize(("before", "after"), [(3, None), (None, 3)])  # static to dynamic, dynamic to static
def test_replicas_update_should_fail_when_changing_between_static_and_dynamic(before, after):
    stored = nodepool_to_manifest(parse_nodepool(at(base(), "spec.replicas", before)))["spec"]
    problem = update_problem(stored, parse_nodepool(at(base(), "spec.replicas", after)))
    assert problem is not None and (problem.field, problem.message) == (
        "spec",
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
    )


def test_replicas_update_should_succeed_when_changing_the_static_nodepool_nodes_limit():
    static = at(base(), "spec.replicas", 3)
    stored = nodepool_to_manifest(parse_nodepool(at(static, "spec.limits", {"nodes": "10"})))["spec"]
    changed = parse_nodepool(at(static, "spec.limits", {"nodes": "100"}))
    assert update_problem(stored, changed) is None and changed.limits == {"nodes": 100_000}


# CEL/Default Context("Defaults/TopLevel") -------------------------------------------------------------------------


def test_should_default_the_disruption_stanza_when_undefined():
    assert nodepool_to_manifest(parse_nodepool(base()))["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }


# Budgets (nodepool_budgets_test.go) --------------------------------------------------------------------------------

CLOCK = datetime(2000, 6, 15, 12, 30, 30, tzinfo=UTC).timestamp()  # the middle of 2000, the best year ever
EVERY_MINUTE = {"schedule": "* * * * *", "duration": "1h0m0s"}
REASONS = ("Empty", "Underutilized", "Drifted", "Unhealthy")


def suite_budgets() -> list[Budget]:
    return [
        Budget(nodes="10", **EVERY_MINUTE),
        Budget(nodes="100", **EVERY_MINUTE),
        Budget(nodes="100%", **EVERY_MINUTE),
        Budget(nodes="15", reasons=("Drifted", "Underutilized"), **EVERY_MINUTE),
        Budget(nodes="5", reasons=("Drifted",), **EVERY_MINUTE),
        Budget(nodes="0", schedule="@weekly", duration="1h0m0s", reasons=REASONS),
    ]


def by_reason(pool_budgets: list[Budget], now: float = CLOCK) -> dict[str, int]:
    """GetAllowedDisruptionsByReason over 100 nodes. Karpenter's MaxInt32 (no active budget) is karpui's node count:
    either lets every candidate through."""
    pool = nodepool(budgets=pool_budgets)
    nodes = [claimed(f"n{i:03}") for i in range(100)]
    return {reason: allowed_disruptions(pool, reason, nodes, now) for reason in REASONS}


def test_get_allowed_disruptions_by_reason_should_return_0_for_all_reasons_if_a_budget_is_active_for_all_reasons():
    items = suite_budgets()
    items[5] = Budget(nodes="0", reasons=REASONS, **EVERY_MINUTE)
    assert by_reason(items) == dict.fromkeys(REASONS, 0)


def test_get_allowed_disruptions_by_reason_should_be_unbounded_for_all_reasons_when_there_are_no_active_budgets():
    items = [Budget(nodes=b.nodes, schedule="@yearly", duration="1h0m0s", reasons=b.reasons) for b in suite_budgets()]
    assert by_reason(items) == dict.fromkeys(REASONS, 100)


def test_get_allowed_disruptions_by_reason_should_ignore_reason_defined_budgets_when_inactive():
    items = suite_budgets()
    items[3] = Budget(nodes="15", schedule="@yearly", duration="1h0m0s", reasons=("Drifted", "Underutilized"))
    items[4] = Budget(nodes="5", schedule="@yearly", duration="1h0m0s", reasons=("Drifted",))
    assert by_reason(items) == dict.fromkeys(REASONS, 10)


def test_get_allowed_disruptions_by_reason_should_return_the_budget_for_all_disruption_reasons_when_undefined():
    assert by_reason(suite_budgets()[:1]) == dict.fromkeys(REASONS, 10)


def test_get_allowed_disruptions_by_reason_should_get_the_minimum_budget_for_each_reason():
    allowed = by_reason([*suite_budgets(), Budget(nodes="4", reasons=("Empty",), **EVERY_MINUTE)])
    assert (allowed["Empty"], allowed["Drifted"], allowed["Underutilized"]) == (4, 5, 10)


def test_allowed_disruptions_should_return_zero_values_if_a_schedule_is_invalid():
    assert budget_allowed(Budget(nodes="10", schedule="@wrongly", duration="1h0m0s"), 100, CLOCK) == 0


def test_an_invalid_schedule_allows_nothing_for_its_reasons_only():  # GetAllowedDisruptionsByReason's min
    items = [Budget(nodes="100%", schedule="0 0 * * tue-mon", duration="6h0m0s", reasons=("Drifted",))]
    assert by_reason(items) == {"Empty": 100, "Underutilized": 100, "Drifted": 0, "Unhealthy": 100}


def test_allowed_disruptions_should_be_unbounded_when_a_budget_is_inactive():  # MaxInt32: no limit
    assert budget_allowed(Budget(nodes="10", schedule="@yearly", duration="1h0m0s"), 100, CLOCK) is None


def test_allowed_disruptions_should_return_the_int_value_when_a_budget_is_active():
    assert budget_allowed(suite_budgets()[0], 100, CLOCK) == 10


def test_allowed_disruptions_should_return_the_string_value_when_a_budget_is_active():
    assert budget_allowed(suite_budgets()[2], 100, CLOCK) == 100


def test_is_active_should_always_consider_a_schedule_and_time_in_utc():
    # time.Date(2000, time.June, 0, ...) is May 31st, at midnight an hour ahead of UTC: 23:00 UTC on May 30th.
    now = datetime(2000, 5, 31, tzinfo=timezone(timedelta(hours=1))).timestamp()
    assert budget_active(Budget(nodes="10", schedule="@daily", duration="30m0s"), now) is False


@pytest.mark.parametrize(
    ("budget", "now", "active"),
    [
        (Budget(nodes="10"), CLOCK, True),  # should return that a schedule is active when schedule and duration are nil
        (suite_budgets()[0], CLOCK, True),  # should return that a schedule is active
        (Budget(nodes="10", schedule="@yearly", duration="1h0m0s"), CLOCK, False),  # ... is inactive
        # ... active when the schedule hit is in the middle of the duration
        (
            Budget(nodes="10", schedule="@yearly", duration="24h0m0s"),
            datetime(1000, 1, 1, 12, tzinfo=UTC).timestamp(),
            True,
        ),
        # ... active when the duration is longer than the recurrence
        (Budget(nodes="10", schedule="@daily", duration="48h0m0s"), datetime(2024, 1, 7, tzinfo=UTC).timestamp(), True),
        # ... inactive when the schedule hit is after the duration
        (
            Budget(nodes="10", schedule="30 6 * * SUN", duration="6h0m0s"),
            datetime(2024, 1, 7, tzinfo=UTC).timestamp(),
            False,
        ),
    ],
)
def test_is_active(budget, now, active):
    assert budget_active(budget, now) is active


def test_allowed_disruptions_should_return_zero_values_if_a_nodes_value_is_invalid():
    assert budget_allowed(Budget(nodes="1000a%", **EVERY_MINUTE), 100, CLOCK) == 0


def test_is_active_should_return_an_error_indicating_why_the_cron_fails_to_parse():
    # robfig/cron: "beginning of range (2) beyond end of range (1)", where croniter would wrap the range round.
    assert (schedule_parses("0 0 * * tue-mon"), schedule_parses("0 0 * * mon-tue")) == (False, True)


# nodeclaim_validation_cel_test.go: Describe("Validation") --------------------------------------------------------


def claim() -> dict[str, Any]:
    """The BeforeEach NodeClaim: a node class reference and `karpenter.sh/capacity-type Exists`."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClaim", "name": "default"},
            "requirements": [{"key": CAPACITY_TYPE, "operator": "Exists"}],
        },
    }


def claim_refused(doc: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ManifestError) as raised:
        validate_nodeclaim(doc)
    return raised.value.field, raised.value.message


CLAIM_REQ = "spec.requirements"


@pytest.mark.parametrize(
    "value",
    [
        # Taints: should succeed for valid taints
        [
            {"key": "a", "value": "b", "effect": "NoSchedule"},
            {"key": "c", "value": "d", "effect": "NoExecute"},
            {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "key-only", "effect": "NoExecute"},
        ],
        # Taints: should not fail for same key with different effects
        [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}],
    ],
)
def test_nodeclaim_taints_should_succeed(value):
    validate_nodeclaim(at(claim(), "spec.taints", value))


@pytest.mark.parametrize(
    ("taint", "field", "message"),
    [
        # should fail for invalid taint keys
        ({"key": "???"}, "spec.taints[0].key", "invalid value '???': must match"),
        ({"effect": "NoSchedule"}, "spec.taints[0].key", "Required value"),  # should fail for missing taint key
        # should fail for invalid taint value
        ({"key": "invalid-value", "effect": "NoSchedule", "value": "???"}, "spec.taints[0].value", "invalid value"),
        # should fail for invalid taint effect
        (
            {"key": "invalid-effect", "effect": "???"},
            "spec.taints[0].effect",
            'Unsupported value: "???": supported values: NoSchedule, PreferNoSchedule, NoExecute',
        ),
    ],
)
def test_nodeclaim_taints_should_fail(taint, field, message):
    got_field, got_message = claim_refused(at(claim(), "spec.taints", [taint]))
    assert (got_field, got_message.startswith(message)) == (field, True)


def test_nodeclaim_node_class_ref_should_succeed_for_valid_group():
    validate_nodeclaim(
        at(claim(), "spec.nodeClassRef", {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "nc"})
    )


def test_nodeclaim_node_class_ref_should_fail_for_invalid_group():
    ref = {"group": "karpenter.test.sh/v1", "kind": "TestNodeClass", "name": "nodeclass-test"}
    assert claim_refused(at(claim(), "spec.nodeClassRef", ref)) == (
        "spec.nodeClassRef.group",
        "group 'karpenter.test.sh/v1' must not contain '/'",
    )


@pytest.mark.parametrize(
    "requirements",
    [
        # should allow supported ops
        [
            {"key": ZONE, "operator": "In", "values": ["test"]},
            {"key": ZONE, "operator": "Gt", "values": ["1"]},
            {"key": ZONE, "operator": "Lt", "values": ["1"]},
            {"key": ZONE, "operator": "NotIn"},
            {"key": ZONE, "operator": "Exists"},
        ],
        # should allow kubernetes domains / subdomains
        [{"key": "kubernetes.io/test", "operator": "In", "values": ["test"]}],
        [{"key": "k8s.io/test", "operator": "In", "values": ["test"]}],
        [{"key": "subdomain.kubernetes.io/test", "operator": "In", "values": ["test"]}],
        [{"key": "subdomain.k8s.io/test", "operator": "In", "values": ["test"]}],
        # should allow well known label exceptions: a NodeClaim carries its NodePool's label
        *(
            [{"key": key, "operator": "In", "values": ["test"]}]
            for key in (
                "karpenter.sh/nodepool",
                ZONE,
                "topology.kubernetes.io/region",
                INSTANCE_TYPE,
                "kubernetes.io/arch",
                "kubernetes.io/os",
                "node.kubernetes.io/windows-build",
            )
        ),
        # should allow non-empty set after removing overlapped value
        [
            {"key": ZONE, "operator": "In", "values": ["test", "foo"]},
            {"key": ZONE, "operator": "NotIn", "values": ["test", "bar"]},
        ],
        [],  # should allow empty requirements
        # should allow more than 50 values if minValues is not specified.
        [{"key": INSTANCE_TYPE, "operator": "In", "values": [f"instance{i}" for i in range(90)]}],
    ],
)
def test_nodeclaim_requirements_should_allow(requirements):
    validate_nodeclaim(at(claim(), CLAIM_REQ, requirements))


@pytest.mark.parametrize(
    ("requirement", "field", "message"),
    [
        # should fail for unsupported ops
        (
            {"key": ZONE, "operator": "unknown", "values": ["test"]},
            f"{CLAIM_REQ}[0].operator",
            'Unsupported value: "unknown": supported values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte',
        ),
        # should fail for restricted domains / restricted labels
        (
            {"key": "karpenter.sh/test", "operator": "In", "values": ["test"]},
            f"{CLAIM_REQ}[0].key",
            'label domain "karpenter.sh" is restricted',
        ),
        (
            {"key": "kubernetes.io/hostname/test", "operator": "In", "values": ["test"]},
            f"{CLAIM_REQ}[0].key",
            "invalid value 'kubernetes.io/hostname/test': must match",
        ),
        (
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["test"]},
            f"{CLAIM_REQ}[0].key",
            'label "kubernetes.io/hostname" is restricted',
        ),
        # should error when minValues is negative / zero / more than 50
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": -1},
            f"{CLAIM_REQ}[0].minValues",
            "must be greater than or equal to 1, got -1",
        ),
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": 0},
            f"{CLAIM_REQ}[0].minValues",
            "must be greater than or equal to 1, got 0",
        ),
        (
            {"key": INSTANCE_TYPE, "operator": "Exists", "minValues": 51},
            f"{CLAIM_REQ}[0].minValues",
            "must be less than or equal to 50, got 51",
        ),
        # should error when minValues is greater than the number of unique values specified within In operator
        (
            {"key": INSTANCE_TYPE, "operator": "In", "values": ["insance-type-1"], "minValues": 2},
            CLAIM_REQ,
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        ),
    ],
)
def test_nodeclaim_requirements_should_fail(requirement, field, message):
    got_field, got_message = claim_refused(at(claim(), CLAIM_REQ, [requirement]))
    assert (got_field, got_message.startswith(message)) == (field, True)


@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])  # should fail with invalid GT or LT / GTE or LTE
@pytest.mark.parametrize("values", [[], ["1", "2"], ["a"], ["-1"]])
def test_nodeclaim_requirements_should_fail_with_invalid_comparison_values(operator, values):
    field, message = claim_refused(at(claim(), CLAIM_REQ, [{"key": ZONE, "operator": operator, "values": values}]))
    if values == ["-1"]:  # not even a label value
        assert field == f"{CLAIM_REQ}[0].values[0]" and message.startswith("invalid label value '-1'")
    else:
        assert (field, message) == (
            CLAIM_REQ,
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        )


def test_nodeclaim_requirements_should_error_when_requirements_is_greater_than_100():
    requirements = [{"key": f"key-{i}", "operator": "In", "values": [f"value-{i}"]} for i in range(101)]
    assert claim_refused(at(claim(), CLAIM_REQ, requirements)) == (CLAIM_REQ, "must have at most 100 items")


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("terminationGracePeriod", "30s", True),  # should succeed on a valid terminationGracePeriod
        ("terminationGracePeriod", "1h30m5s", True),
        ("terminationGracePeriod", "-1s", False),  # should fail on an invalid terminationGracePeriod
        ("terminationGracePeriod", "1hr", False),
        ("terminationGracePeriod", "Never", False),
        ("terminationGracePeriod", "FooNever", False),
        ("expireAfter", "30s", True),  # should succeed on a valid expireAfter
        ("expireAfter", "1h30m5s", True),
        ("expireAfter", "Never", True),
        ("expireAfter", "-1s", False),  # should fail on an invalid expireAfter
        ("expireAfter", "1hr", False),
        ("expireAfter", "FooNever", False),
    ],
)
def test_nodeclaim_durations(field, value, ok):
    doc = at(claim(), f"spec.{field}", value)
    if ok:
        validate_nodeclaim(doc)
    else:
        assert claim_refused(doc)[0] == f"spec.{field}"


def test_a_nodeclaims_long_keys_pass_the_crd_which_has_no_runtime_validation():
    # The Its "should fail at runtime for ... too long" are NodePool ones: a NodeClaim's key is held to the CRD only.
    key = f"test.com.test.{'a' * 250}/test"
    validate_nodeclaim(at(claim(), CLAIM_REQ, [{"key": key, "operator": "Exists"}]))


def test_a_schedule_the_crds_pattern_lets_through_is_stored_and_its_budget_allows_nothing():
    """The CRD only matches a schedule against its pattern (five fields, or a macro at the start); Karpenter's cron
    parser then fails on one like these, and the budget allows no disruption for its reasons."""
    for schedule in ("foo bar baz qux quux", "@annuallyx"):
        made = parse_nodepool(budgets({"nodes": "100%", "schedule": schedule, "duration": "1h0m0s"}))
        assert by_reason(list(made.budgets)) == dict.fromkeys(REASONS, 0)


@pytest.mark.parametrize(("value", "ok"), [("9223372036854775807", True), ("9223372036854775808", False)])
def test_a_comparison_value_past_int64_is_no_integer(value, ok):  # the CRD's int(x.values[0]) >= 0
    doc = requirements({"key": ZONE, "operator": "Gt", "values": [value]})
    if ok:
        assert parse_nodepool(doc).requirements[0].values == (value,)
    else:
        assert refused(doc) == (
            f"{REQ}[0].values",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        )


def test_the_disruption_controller_logs_a_budget_karpenter_cannot_read_on_every_pass():
    """controller.go:147 and :268-287 (logInvalidBudgets): each reconcile, one error line naming every NodePool whose
    budgets GetAllowedDisruptionsByReason cannot read; a NodePool whose budgets all read is not named."""
    bad = {"budgets": [{"nodes": "0", "schedule": "0 0 * * tue-mon", "duration": "6h", "reasons": ["Drifted"]}]}
    made = lab(nodepool_doc("bad", disruption=bad), nodepool_doc("good"))
    made.advance(25)
    lines = [e for e in made.logs if e.record.message == "detected disruption budget errors"]
    assert [(e.record.level, e.record.logger) for e in lines[:1]] == [("ERROR", "controller.disruption")]
    assert {e.record.fields["error"] for e in lines} == {
        'invalid disruption budgets in nodepool bad, invariant violated, invalid cron, cannot parse "0 0 * * tue-mon" '
        "(cron=<nil>)"
    }
    assert [round(b.time - a.time) for a, b in zip(lines, lines[1:], strict=False)] == [10, 10]
