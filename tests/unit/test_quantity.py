import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.quantity import (
    QuantityError,
    add,
    exceeded,
    fits,
    format_quantity,
    maximum,
    parse_quantity,
    parse_resources,
    subtract,
)


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1", 1000),
        ("500m", 500),
        ("7900m", 7900),
        ("0.5", 500),
        (".5", 500),
        ("1.", 1000),
        ("+2", 2000),
        ("-2", -2000),
        ("1Ki", 1024_000),
        ("16Gi", 16 * 2**30 * 1000),
        ("16374Mi", 16374 * 2**20 * 1000),
        ("1k", 1_000_000),
        ("1M", 10**9),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("100u", 1),  # sub-milli precision rounds up, as Kubernetes does
        ("1n", 1),
        ("1.5Gi", 3 * 2**29 * 1000),
        (2, 2000),
    ],
)
def test_quantities_parse_to_exact_milli_units(text, milli):
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    "text", ["1.5.5Gi", "NaN", "Inf", "", " 1", "1 ", "1Gb", "1KI", "Gi", "--1", "1e", "0x10", "1i"]
)
def test_malformed_quantities_are_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_booleans_and_other_types_are_not_quantities():
    with pytest.raises(QuantityError):
        parse_quantity(True)
    with pytest.raises(QuantityError, match="not list"):
        parse_quantity([1])  # type: ignore[arg-type]


def test_a_number_with_a_fraction_is_refused_where_only_strings_and_integers_are_allowed():
    with pytest.raises(QuantityError, match="^quantities must be strings or integers, not float$"):
        parse_quantity(1.5, numbers=False)
    assert parse_quantity(2, numbers=False) == 2000


@pytest.mark.parametrize(
    ("milli", "resource", "text"),
    [
        (7900, "cpu", "7900m"),
        (8000, "cpu", "8"),
        (16374 * 2**20 * 1000, "memory", "16374Mi"),
        (2**40 * 1000, "memory", "1Ti"),
        (1536 * 2**30 * 1000, "memory", "1536Gi"),
        (8289507076 * 1000, "memory", "8289507076"),
        (20 * 2**30 * 1000, "ephemeral-storage", "20Gi"),
        (128_000, "pods", "128"),
        (1024_000, "pods", "1024"),  # pods are counts, never binary-suffixed
        (0, "memory", "0"),
    ],
)
def test_quantities_format_canonically(milli, resource, text):
    assert format_quantity(milli, resource) == text


@given(st.integers(min_value=0, max_value=2**62))
def test_formatting_then_parsing_is_the_identity(milli):
    for resource in ("cpu", "memory", "pods"):
        assert parse_quantity(format_quantity(milli, resource)) == milli


def test_parse_resources_names_the_bad_key():
    with pytest.raises(QuantityError, match=r"^spec.limits.memory: "):
        parse_resources({"cpu": "1", "memory": "lots"}, field="spec.limits")


def test_resource_arithmetic_is_per_key():
    a = {"cpu": 1000, "memory": 5}
    b = {"cpu": 500, "pods": 1000}
    assert add(a, b) == {"cpu": 1500, "memory": 5, "pods": 1000}
    assert subtract(a, b) == {"cpu": 500, "memory": 5, "pods": -1000}
    assert maximum([a, b]) == {"cpu": 1000, "memory": 5, "pods": 1000}


def test_a_resource_missing_from_allocatable_fits_only_a_zero_request():
    allocatable = {"cpu": 1000}
    assert fits({"cpu": 1000, "example.com/gpu": 0}, allocatable)
    assert not fits({"example.com/gpu": 1000}, allocatable)
    assert exceeded({"cpu": 1001, "memory": 1, "example.com/gpu": 0}, allocatable) == ["cpu", "memory"]
