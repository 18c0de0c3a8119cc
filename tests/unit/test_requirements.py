import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.requirements import Requirement, RequirementError, Requirements

ZONE = "topology.kubernetes.io/zone"


def req(operator, key="k", *values, min_values=None):
    return Requirement.from_operator(operator, key, values, min_values)


@pytest.mark.parametrize(
    ("operator", "values", "allowed", "refused", "canonical"),
    [
        ("In", ("a", "b"), ["a", "b"], ["c"], "In"),
        ("NotIn", ("a",), ["b", "zzz"], ["a"], "NotIn"),
        ("Exists", (), ["a", "1"], [], "Exists"),
        ("DoesNotExist", (), [], ["a", ""], "DoesNotExist"),
        ("Gt", ("4",), ["5", "100"], ["4", "3", "x"], "Exists"),
        ("Lt", ("4",), ["3", "0", "-1"], ["4", "5", "x"], "Exists"),
        ("Gte", ("4",), ["4", "5"], ["3"], "Exists"),
        ("Lte", ("4",), ["4", "3"], ["5"], "Exists"),
    ],
)
def test_every_operator_allows_and_refuses_the_right_values(operator, values, allowed, refused, canonical):
    requirement = req(operator, "k", *values)
    assert [v for v in allowed if requirement.has(v)] == allowed
    assert [v for v in refused if requirement.has(v)] == []
    assert requirement.operator == canonical


@pytest.mark.parametrize(("operator", "values"), [("Gt", ()), ("Lt", ("a",)), ("Gt", ("1", "2")), ("Like", ("a",))])
def test_bad_operators_and_bound_values_are_refused(operator, values):
    with pytest.raises(RequirementError):
        req(operator, "k", *values)


def test_in_intersect_in_keeps_common_values():
    assert req("In", "k", "a", "b").intersect(req("In", "k", "b", "c")) == Requirement("k", frozenset({"b"}))


def test_in_intersect_not_in_removes_excluded_values():
    assert req("In", "k", "a", "b").intersect(req("NotIn", "k", "b")).values == frozenset({"a"})


def test_not_in_intersect_not_in_unions_exclusions():
    result = req("NotIn", "k", "a").intersect(req("NotIn", "k", "b"))
    assert (result.complement, result.values, result.operator) == (True, frozenset({"a", "b"}), "NotIn")


def test_bounds_filter_finite_sets_and_then_disappear():
    result = req("In", "k", "2", "8", "64", "x").intersect(req("Gt", "k", "4"))
    assert result == Requirement("k", frozenset({"8", "64"}))


def test_contradictory_bounds_become_does_not_exist():
    result = req("Gt", "k", "10").intersect(req("Lt", "k", "5"))
    assert result.operator == "DoesNotExist" and len(result) == 0


def test_bounds_combine_to_the_tightest_range():
    result = req("Gt", "k", "2").intersect(req("Lt", "k", "32")).intersect(req("Gt", "k", "4"))
    assert (result.gte, result.lte) == (5, 31)
    assert result.has("5") and not result.has("4") and not result.has("32")


def test_min_values_takes_the_maximum():
    assert req("In", "k", "a", "b", min_values=1).intersect(req("Exists", "k", min_values=2)).min_values == 2


def test_aliases_are_normalised():
    assert req("In", "failure-domain.beta.kubernetes.io/zone", "a").key == ZONE
    assert req("In", "beta.kubernetes.io/arch", "amd64").key == "kubernetes.io/arch"


def test_adding_a_key_twice_intersects():
    requirements = Requirements([req("In", ZONE, "a", "b"), req("NotIn", ZONE, "a")])
    assert requirements[ZONE].values == frozenset({"b"})


def test_custom_keys_must_be_defined_unless_negative():
    pool = Requirements([req("In", "team", "x")])
    assert pool.compatibility_errors(Requirements([req("In", "other", "y")])) == [
        'label "other" does not have known values'
    ]
    assert pool.compatible(Requirements([req("NotIn", "other", "y")]))
    assert pool.compatible(Requirements([req("DoesNotExist", "other")]))
    assert not pool.compatible(Requirements([req("Exists", "other")]))


def test_well_known_keys_may_be_undefined():
    assert Requirements([]).compatible(Requirements([req("In", ZONE, "test-zone-a")]))


def test_shared_keys_must_intersect():
    pool = Requirements([req("In", ZONE, "a")])
    assert pool.compatibility_errors(Requirements([req("In", ZONE, "b")])) == [
        "key topology.kubernetes.io/zone, topology.kubernetes.io/zone In [b] not in topology.kubernetes.io/zone In [a]"
    ]


def test_two_negative_requirements_always_intersect():
    assert Requirements([req("DoesNotExist", "k")]).intersects(Requirements([req("DoesNotExist", "k")]))
    assert Requirements([req("NotIn", "k", "a")]).intersects(Requirements([req("DoesNotExist", "k")]))


def test_does_not_exist_refuses_a_positive_requirement():
    assert not Requirements([req("DoesNotExist", "k")]).intersects(Requirements([req("In", "k", "a")]))


def test_labels_pick_one_deterministic_value_and_skip_restricted_keys():
    requirements = Requirements(
        [
            req("In", "team", "b", "a"),
            req("Exists", "kubernetes.io/hostname"),
            req("Gt", "size", "4"),
            req("DoesNotExist", "gone"),
        ]
    )
    assert requirements.labels() == {"team": "a", "size": "5"}


values = st.sampled_from(["a", "b", "c", "1", "5", "9"])
requirements_strategy = st.one_of(
    st.builds(lambda vs: req("In", "k", *vs), st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda vs: req("NotIn", "k", *vs), st.lists(values, max_size=3)),
    st.just(req("Exists")),
    st.just(req("DoesNotExist")),
    st.builds(lambda n: req("Gt", "k", str(n)), st.integers(0, 9)),
    st.builds(lambda n: req("Lt", "k", str(n)), st.integers(0, 9)),
)


@given(requirements_strategy, requirements_strategy, values)
def test_intersection_allows_exactly_the_values_both_allow(a, b, value):
    assert a.intersect(b).has(value) == (a.has(value) and b.has(value))


@given(requirements_strategy, requirements_strategy)
def test_intersection_is_commutative_on_membership(a, b):
    for value in ["a", "b", "c", "1", "5", "9", "100"]:
        assert a.intersect(b).has(value) == b.intersect(a).has(value)
