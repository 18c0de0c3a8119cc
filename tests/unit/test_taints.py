import pytest

from provisioner.taints import Taint, Toleration, tolerates_all, untolerated

TAINT = Taint(key="test-key", value="test-value", effect="NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        (Toleration(key="test-key", operator="Exists"), True),
        (Toleration(key="test-key", operator="Equal", value="test-value"), True),
        (Toleration(key="test-key", operator="Equal", value="test-value", effect="NoSchedule"), True),
        (Toleration(operator="Exists"), True),  # empty key with Exists tolerates everything
        (Toleration(key="test-key", operator="Equal", value="other"), False),
        (Toleration(key="other-key", operator="Exists"), False),
        (Toleration(key="test-key", operator="Exists", effect="NoExecute"), False),
        (Toleration(key="test-key", operator="Gt", value="1"), False),
    ],
)
def test_toleration_matching_follows_kubernetes(toleration, tolerated):
    assert toleration.tolerates(TAINT) is tolerated


def test_prefer_no_schedule_must_also_be_tolerated_for_provisioning():
    soft = Taint(key="foo", value="bar", effect="PreferNoSchedule")
    assert untolerated([soft, TAINT], [Toleration(key="test-key", operator="Exists")]) == [soft]
    assert tolerates_all([soft], [Toleration(operator="Exists", effect="PreferNoSchedule")])


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("dedicated=gpu:NoSchedule", Taint("dedicated", "NoSchedule", "gpu")),
        ("dedicated:NoExecute", Taint("dedicated", "NoExecute")),
        ("example.com/k=v:PreferNoSchedule", Taint("example.com/k", "PreferNoSchedule", "v")),
    ],
)
def test_kubectl_taint_syntax_parses(text, taint):
    assert Taint.parse(text) == taint
    assert str(Taint.parse(text)) == text


@pytest.mark.parametrize("text", ["dedicated=gpu", "dedicated=gpu:Sometimes", ":NoSchedule"])
def test_bad_taint_syntax_is_refused(text):
    with pytest.raises(ValueError):
        Taint.parse(text)
