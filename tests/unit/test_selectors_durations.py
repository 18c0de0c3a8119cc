import pytest

from provisioner.durations import DurationError, format_duration, go_duration, parse_duration
from provisioner.selectors import LabelSelector, SelectorError

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=web,tier=back", False),
        ("env in (prod, staging)", True),
        ("env notin (prod)", False),
        ("app", True),
        ("!legacy", True),
        ("!app", False),
        ("missing!=x", True),
    ],
)
def test_label_selector_syntax(selector, matches):
    assert LabelSelector.parse(selector).matches(LABELS) is matches


def test_bad_selectors_are_refused():
    with pytest.raises(SelectorError):
        LabelSelector.parse("app=web=x")


def test_match_expressions():
    selector = LabelSelector.from_spec(
        {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}
    )
    assert selector is not None and selector.matches(LABELS)
    assert LabelSelector.from_spec(None) is None
    assert LabelSelector.from_spec({}).matches({})


@pytest.mark.parametrize(
    ("text", "seconds"), [("720h", 2592000), ("1h30m", 5400), ("10s", 10), ("0s", 0), ("1m1s", 61)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


def test_never_only_where_allowed():
    assert parse_duration("Never", allow_never=True) is None
    with pytest.raises(DurationError):
        parse_duration("Never")
    with pytest.raises(DurationError):
        parse_duration("5d")


@pytest.mark.parametrize(
    ("text", "printed"),
    [("223h", "223h0m0s"), ("90m", "1h30m0s"), ("1h30m", "1h30m0s"), ("30s", "30s"), ("0s", "0s"), ("48h", "48h0m0s")],
)
def test_go_duration_prints_as_go_does(text, printed):
    """What Go's time.Duration.String prints for time.ParseDuration(text) (go1 run, as metav1.Duration marshals)."""
    assert go_duration(parse_duration(text)) == printed
