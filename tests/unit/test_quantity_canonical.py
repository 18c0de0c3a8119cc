"""JSON and YAML numbers as quantities, exactly as their text reads, and quantities in kube-apiserver's canonical
form (apimachinery's Quantity.CanonicalizeBytes)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.manifests import ManifestError
from provisioner.manifests.fields import resources
from provisioner.quantity import QuantityError, canonical_quantity, number_text, parse_quantity, parse_resources


@pytest.mark.parametrize(
    ("number", "milli"),
    [
        (0.5, 500),
        (0.1, 100),  # the float's binary value, 0.1000000000000000055..., would round up to 101m
        (0.3, 300),
        (1.1, 1100),
        (2.675, 2675),
        (1.5e0, 1500),
        (1e3, 1_000_000),
        (1000.0, 1_000_000),
        (0.0001, 1),
        (1e-7, 1),  # below a milli-unit: rounded up, as for "100n"
        (-0.5, -500),
        (0.0, 0),
        (-0.0, 0),
        (123456.789, 123_456_789),
        (9.2e15, 9_200_000_000_000_000_000),
    ],
)
def test_a_number_with_a_fraction_is_the_quantity_its_text_reads(number, milli):
    assert parse_quantity(number) == milli


def test_integers_stay_exact():
    assert parse_quantity(2**53 + 1) == (2**53 + 1) * 1000  # a float would have made it 2**53
    assert parse_quantity(9_223_372_036_854_775) == 9_223_372_036_854_775_000


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.5, "0.5"),
        (0.1, "0.1"),
        (1e3, "1000"),
        (1.5e-6, "0.0000015"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e20, "100000000000000000000"),
        (1e21, "1e21"),
        (-2.5, "-2.5"),
        (0.0, "0"),
    ],
)
def test_a_number_is_read_as_the_text_kubectl_sends_for_it(number, text):
    assert number_text(number) == text


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
def test_a_number_that_is_not_finite_is_refused(number):
    with pytest.raises(QuantityError, match="^must be a finite number, got (-?inf|nan)$"):
        parse_quantity(number)


def test_an_endless_number_is_refused_naming_its_field():
    with pytest.raises(ManifestError) as refused:
        resources({"memory": "1Gi", "cpu": math.inf}, "spec.containers[0].resources.requests")
    assert (refused.value.field, refused.value.message) == (
        "spec.containers[0].resources.requests.cpu",
        "must be a finite number, got inf",
    )


def test_where_numbers_are_not_allowed_a_fraction_is_refused_naming_its_field():
    with pytest.raises(ManifestError) as refused:
        resources({"cpu": 0.5}, "spec.limits", numbers=False)
    assert (refused.value.field, refused.value.message) == (
        "spec.limits.cpu",
        "quantities must be strings or integers, not float",
    )
    assert parse_resources({"cpu": 4}, numbers=False) == {"cpu": 4000}


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        # The brief's examples, and kube's doc comment's.
        ("0.5", "500m"),
        ("1.5Gi", "1536Mi"),
        ("2048Mi", "2Gi"),
        ("1000m", "1"),
        (1, "1"),
        ("1.5", "1500m"),
        # Decimal SI: the largest suffix with an integer mantissa.
        ("0", "0"),
        ("0m", "0"),
        ("0.0", "0"),
        ("-0", "0"),
        ("1", "1"),
        ("100m", "100m"),
        ("7900m", "7900m"),
        ("1000", "1k"),
        (1000, "1k"),
        ("1100", "1100"),
        ("1.100", "1100m"),
        ("1.", "1"),
        (".5", "500m"),
        ("+1", "1"),
        ("01", "1"),
        ("1500k", "1500k"),
        ("1500000", "1500k"),
        ("1000000", "1M"),
        ("1000k", "1M"),
        ("0.001k", "1"),
        ("1000M", "1G"),
        ("1T", "1T"),
        ("5P", "5P"),
        ("100u", "100u"),
        ("1000u", "1m"),
        ("1n", "1n"),
        ("1000n", "1u"),
        ("0.1n", "1n"),  # below a nano-unit: rounded up, away from zero
        ("-0.1n", "-1n"),
        ("-1.5", "-1500m"),
        ("12345678901", "12345678901"),
        # Binary SI: kept while the amount is a whole number of at least 1024.
        ("1Ki", "1Ki"),
        ("8Ki", "8Ki"),
        ("1024Ki", "1Mi"),
        ("1536Mi", "1536Mi"),
        ("16374Mi", "16374Mi"),
        ("1025Ki", "1025Ki"),
        ("1.5Ki", "1536"),
        ("0.5Ki", "512"),
        ("1.0009765625Ki", "1025"),
        ("0.5Mi", "512Ki"),
        ("0.25Gi", "256Mi"),
        ("1.0001Ki", "1024102400u"),  # 1024.1024 is no whole number: decimal SI
        ("4Pi", "4Pi"),
        ("4096Ti", "4Pi"),
        ("8191Ti", "8191Ti"),
        ("-2Ki", "-2Ki"),
        ("-0.5Ki", "-512"),
        ("0Gi", "0"),
        # Decimal exponent: an exponent that is a multiple of 3.
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("12e6", "12e6"),
        ("1.5e3", "1500"),
        ("1e-3", "1e-3"),
        ("0.5e0", "500e-3"),
        ("1e0", "1"),
        ("1000e-3", "1"),
        ("1e1", "10"),
        ("1e2", "100"),
        ("1e4", "10e3"),
        ("1e+6", "1e6"),
        ("1e-7", "100e-9"),
        # Numbers with a fraction, as their text reads.
        (0.5, "500m"),
        (0.1, "100m"),
        (1.5, "1500m"),
        (1e3, "1k"),
        (1e-7, "100e-9"),
    ],
)
def test_a_quantity_is_written_in_kubes_canonical_form(given, canonical):
    assert canonical_quantity(given) == canonical


@pytest.mark.parametrize("bad", ["lots", "1Gb", True, math.inf, "9Ei", "", None])
def test_what_cannot_be_parsed_has_no_canonical_form(bad):
    with pytest.raises(QuantityError):
        canonical_quantity(bad)


SUFFIXES = ["", "m", "k", "M", "G", "n", "u", "Ki", "Mi", "Gi", "e3", "e-3", "e0"]


@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=3),
    st.sampled_from(SUFFIXES),
)
def test_the_canonical_form_is_the_same_amount_and_canonical_itself(digits, decimals, suffix):
    text = f"{digits / 10**decimals:.{decimals}f}{suffix}" if decimals else f"{digits}{suffix}"
    canonical = canonical_quantity(text)
    assert parse_quantity(canonical) == parse_quantity(text)
    assert canonical_quantity(canonical) == canonical  # idempotent
    assert "." not in canonical  # an integer mantissa


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_the_canonical_form_of_an_amount_is_exact(milli):
    assert parse_quantity(canonical_quantity(f"{milli}m")) == milli
    assert parse_quantity(canonical_quantity(f"{milli // 2**30}Ki")) == milli // 2**30 * 1024 * 1000


@given(st.floats(min_value=-1e12, max_value=1e12).filter(lambda x: x == 0 or abs(x) > 1e-20))
def test_a_float_is_taken_as_its_shortest_decimal(number):
    assert parse_quantity(number) == parse_quantity(repr(number))


def test_a_nodepool_limit_with_a_fraction_is_refused_as_its_crds_int_or_string_field_refuses_it():
    from provisioner.manifests.nodepool import parse_nodepool
    from tests.unit.test_nodepool_manifests import with_spec

    with pytest.raises(ManifestError) as refused:
        parse_nodepool(with_spec("spec.limits", {"cpu": 0.5}))
    assert refused.value.field == "spec.limits.cpu"
    assert parse_nodepool(with_spec("spec.limits", {"cpu": 4})).limits == {"cpu": 4000}
