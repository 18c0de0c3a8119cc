"""Gte and Lte (Karpenter v1.9, designs/gte-lte-operators.md): inclusive bounds, with Gt/Lt held as Gte N+1 / Lte N-1.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/scheduling/requirement_test.go ("Gte and Lte Operators", "String",
"NodeSelectorRequirements Conversion"), pkg/scheduling/requirements_test.go, pkg/apis/v1/nodepool_validation_cel_test.go
("should fail with invalid GTE or LTE values") and pkg/controllers/provisioning/scheduling/suite_test.go
("should schedule compatible requirements with Operator=Gte|Lte").
"""

import sys

import pytest

from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.requirements import Requirement, Requirements
from tests.builders import fake_catalog, instance_type, nodepool, pod, req, schedule, with_spec


def r(operator, *values, key="key", min_values=None):
    return Requirement.from_operator(operator, key, values, min_values)


GTE2, LTE8 = r("Gte", "2"), r("Lte", "8")


def test_gte_is_an_inclusive_lower_bound():  # "should treat Gte as inclusive lower bound"
    assert [GTE2.has(v) for v in ("2", "3", "100", "1", "0")] == [True, True, True, False, False]


def test_lte_is_an_inclusive_upper_bound():  # "should treat Lte as inclusive upper bound"
    assert [LTE8.has(v) for v in ("8", "7", "0", "9", "10")] == [True, True, True, False, False]


def test_gte_and_lte_intersect_to_the_closed_range():  # "should intersect Gte and Lte correctly"
    both = GTE2.intersect(LTE8)
    assert [both.has(v) for v in ("2", "5", "8", "1", "9")] == [True, True, True, False, False]


def test_gte_and_lte_equal_the_adjusted_gt_and_lt():  # "should be equivalent to adjusted Gt/Lt"
    assert (GTE2.has("2"), GTE2.has("1")) == (r("Gt", "1").has("2"), r("Gt", "1").has("1"))
    assert (LTE8.has("8"), LTE8.has("9")) == (r("Lt", "9").has("8"), r("Lt", "9").has("9"))


@pytest.mark.parametrize(
    ("first", "second", "spec"),
    [
        (r("Gt", "4"), r("Gte", "5"), {"key": "key", "operator": "Gte", "values": ["5"]}),  # collapse redundant bounds
        (r("Gt", "5"), r("Gte", "5"), {"key": "key", "operator": "Gte", "values": ["6"]}),  # keep Gt when tighter
        (r("Gt", "3"), r("Gte", "6"), {"key": "key", "operator": "Gte", "values": ["6"]}),  # keep Gte when tighter
        (r("Lt", "5"), r("Lte", "5"), {"key": "key", "operator": "Lte", "values": ["4"]}),  # keep Lt when tighter
        (r("Lt", "9"), r("Lte", "5"), {"key": "key", "operator": "Lte", "values": ["5"]}),  # keep Lte when tighter
    ],
)
def test_intersecting_bounds_keeps_the_tighter_one_as_a_single_requirement(first, second, spec):
    assert first.intersect(second).to_spec() == spec


def test_zero_boundaries():  # "should handle Gte 0 boundary", "should handle Lte 0 boundary"
    assert (r("Gte", "0").has("0"), r("Gte", "0").has("-1")) == (True, False)
    assert (r("Lte", "0").has("0"), r("Lte", "0").has("1")) == (True, False)


def test_any_value_lies_within_the_bounds():  # "should return valid value from Any() for Gte|Lte"
    assert int(r("Gte", "5").any_value()) >= 5
    assert int(r("Lte", "10").any_value()) <= 10


def test_gt_max_int_matches_nothing():  # "should return DoesNotExist for Gt MaxInt"
    nothing = r("Gt", str(sys.maxsize))
    assert (nothing.operator, len(nothing)) == ("DoesNotExist", 0)


@pytest.mark.parametrize(
    ("requirement", "text"),
    [
        (r("Exists"), "key Exists"),
        (r("DoesNotExist"), "key DoesNotExist"),
        (r("In", "A", "B"), "key In [A B]"),
        (r("NotIn", "1", "2"), "key NotIn [1 2]"),
        (r("Gt", "1"), "key Exists >=2"),
        (r("Gt", "9"), "key Exists >=10"),
        (r("Lt", "1"), "key Exists <=0"),
        (r("Lt", "9"), "key Exists <=8"),
        (r("Gt", "1").intersect(r("Lt", "9")), "key Exists >=2 <=8"),
        (r("Gt", "9").intersect(r("Lt", "1")), "key DoesNotExist"),
        (r("In", "a", "b", "c", "d", "e", "f", "g"), "key In [a b c d e and 2 others]"),
        (r("Exists", min_values=1), "key Exists minValues 1"),
    ],
)
def test_requirements_print_as_karpenters_do(requirement, text):  # Context("String")
    assert str(requirement) == text


@pytest.mark.parametrize(
    ("requirement", "spec"),
    [
        (r("Gt", "1"), {"key": "key", "operator": "Gte", "values": ["2"]}),
        (r("Gt", "9"), {"key": "key", "operator": "Gte", "values": ["10"]}),
        (r("Lt", "1"), {"key": "key", "operator": "Lte", "values": ["0"]}),
        (r("Lt", "9", min_values=1), {"key": "key", "operator": "Lte", "values": ["8"], "minValues": 1}),
        (r("NotIn", "2", "1"), {"key": "key", "operator": "NotIn", "values": ["1", "2"]}),
    ],
)
def test_bounds_serialise_as_gte_and_lte(requirement, spec):  # "NodeSelectorRequirements Conversion"
    assert requirement.to_spec() == spec


def test_a_requirement_with_both_bounds_serialises_as_two():  # "should return both Gte and Lte requirements ..."
    both = Requirements([r("Gte", "8", key="cpu"), r("Lte", "8", key="cpu")])
    assert both.to_specs() == [
        {"key": "cpu", "operator": "Gte", "values": ["8"]},
        {"key": "cpu", "operator": "Lte", "values": ["8"]},
    ]
    assert Requirements.from_specs(both.to_specs()) == both


def _integer_catalog():
    """Karpenter's fake types carry `integer` = their CPU count (fake.IntegerInstanceLabelKey)."""
    return [
        instance_type(
            t.name,
            str(t.capacity["cpu"] // 1000),
            f"{t.capacity['memory'] // 1000}",
            labels={"integer": str(t.capacity["cpu"] // 1000)},
        )
        for t in fake_catalog()
        if not any(k.startswith("fake.com") for k in t.capacity)
    ]


@pytest.mark.parametrize(
    ("operator", "value", "label"), [("Gt", "8", "16"), ("Lt", "8", "2"), ("Gte", "16", "16"), ("Lte", "2", "2")]
)
def test_nodepool_bounds_choose_the_instance_types(operator, value, label):
    result = schedule([pod()], pools=[nodepool("default", req("integer", operator, value))], types=_integer_catalog())
    [plan] = result.new_nodeclaims
    assert plan.cheapest.instance_type.labels["integer"] == label


def _nodepool_doc(requirement):
    return with_spec("spec.template.spec.requirements", [requirement])


@pytest.mark.parametrize("operator", ["Gte", "Lte"])
@pytest.mark.parametrize("values", [[], ["1", "2"], ["a"], ["-1"]])
def test_gte_and_lte_need_one_non_negative_integer(operator, values):  # "should fail with invalid GTE or LTE values"
    with pytest.raises(ManifestError) as error:
        parse_nodepool(_nodepool_doc({"key": "topology.kubernetes.io/zone", "operator": operator, "values": values}))
    if values == ["-1"]:  # the CRD's label-value pattern refuses it first, as kube-apiserver's schema check does
        assert error.value.field == "spec.template.spec.requirements[0].values[0]"
        return
    assert error.value.field == "spec.template.spec.requirements[0].values"
    assert error.value.message == (
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
    )


def test_gte_and_lte_are_kept_as_written_in_the_nodepool():
    pool = parse_nodepool(_nodepool_doc({"key": "karpenter.kwok.sh/instance-cpu", "operator": "Gte", "values": ["4"]}))
    assert pool.requirements[0].to_spec() == {
        "key": "karpenter.kwok.sh/instance-cpu",
        "operator": "Gte",
        "values": ["4"],
    }
