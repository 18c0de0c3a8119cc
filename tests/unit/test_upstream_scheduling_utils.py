"""Host port matching and known ephemeral taints, as Karpenter's own tests check them.

Ported from sigs.k8s.io/karpenter@v1.15.0 pkg/scheduling/hostportusage_test.go (Describe("HostPortUsage")) and
pkg/scheduling/taints_test.go (Describe("IsKnownEphemeralTaint")).
"""

from provisioner.pods import HostPort
from provisioner.scheduling.hostports import HostPortUsage
from provisioner.taints import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, is_known_ephemeral, untolerated

# hostportusage_test.go Describe("HostPortUsage") Context("entry type UT") -------------------------------------------

ENTRY = HostPort(4443, "TCP", "10.0.0.0")


def test_string_output():
    """It("String() output"): IP=<ip> Port=<port> Proto=<protocol>."""
    assert str(ENTRY) == "IP=10.0.0.0 Port=4443 Proto=TCP"


def test_identical_entries_match():
    """It("identical entries match"), both ways."""
    twin = HostPort(4443, "TCP", "10.0.0.0")
    assert (ENTRY.conflicts(twin), twin.conflicts(ENTRY)) == (True, True)


def test_if_any_one_ip_has_an_unspecified_ipv4_or_ipv6_address_they_match():
    """It("if any one IP has an unspecified IPv4 or IPv6 address, they match"): 0.0.0.0 and :: both."""
    any_v4 = HostPort(4443, "TCP", "0.0.0.0")  # noqa: S104
    any_v6 = HostPort(4443, "TCP", "::")
    assert (ENTRY.conflicts(any_v4), any_v4.conflicts(ENTRY)) == (True, True)
    assert (ENTRY.conflicts(any_v6), any_v6.conflicts(ENTRY)) == (True, True)


def test_mismatched_protocols_dont_match():
    """It("mismatched protocols don't match")"""
    sctp = HostPort(4443, "SCTP", "10.0.0.0")
    assert (ENTRY.conflicts(sctp), sctp.conflicts(ENTRY)) == (False, False)


def test_mismatched_ports_dont_match():
    """It("mismatched ports don't match")"""
    other_port = HostPort(443, "TCP", "10.0.0.0")
    assert (ENTRY.conflicts(other_port), other_port.conflicts(ENTRY)) == (False, False)


def test_an_ipv4_mapped_ipv6_address_is_the_ipv4_address():
    """hostportusage.go Matches compares with net.IP.Equal, which holds ::ffff:10.0.0.0 and 10.0.0.0 equal; other
    addresses differ; a node's usage reports the first port that clashes."""
    mapped = HostPort(4443, "TCP", "::ffff:10.0.0.0")
    elsewhere = HostPort(4443, "TCP", "10.0.0.1")
    assert (ENTRY.conflicts(mapped), mapped.conflicts(ENTRY)) == (True, True)
    assert (ENTRY.conflicts(elsewhere), elsewhere.conflicts(ENTRY)) == (False, False)
    usage = HostPortUsage((elsewhere,))
    assert usage.conflict([ENTRY]) is None
    assert usage.added([ENTRY]).conflict([HostPort(9000, "TCP"), mapped]) == mapped


# taints_test.go Describe("IsKnownEphemeralTaint") --------------------------------------------------------------------


def test_matches_an_exact_entry_in_known_ephemeral_taints():
    """It("matches an exact entry in KnownEphemeralTaints")"""
    assert is_known_ephemeral(Taint("node.kubernetes.io/not-ready", NO_SCHEDULE)) is True


def test_matches_a_node_readiness_controller_taint_by_prefix():
    """It("matches a NodeReadinessController taint by prefix")"""
    assert is_known_ephemeral(Taint("readiness.k8s.io/my-rule", NO_SCHEDULE)) is True


def test_matches_any_effect_for_a_prefixed_taint():
    """It("matches any effect for a prefixed taint")"""
    assert is_known_ephemeral(Taint("readiness.k8s.io/another", NO_EXECUTE)) is True


def test_does_not_match_an_unrelated_taint():
    """It("does not match an unrelated taint")"""
    assert is_known_ephemeral(Taint("example.com/some-taint", NO_SCHEDULE)) is False


def test_does_not_match_a_taint_whose_key_only_contains_the_prefix_in_the_middle():
    """It("does not match a taint whose key only contains the prefix in the middle")"""
    assert is_known_ephemeral(Taint("foo/readiness.k8s.io/bar", NO_SCHEDULE)) is False


def test_returns_false_for_a_nil_taint():
    """It("returns false for a nil taint")"""
    assert is_known_ephemeral(None) is False


def test_the_external_cloud_provider_taint_matches_by_key_and_effect():
    """taints.go KnownEphemeralTaints lists node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule and
    compares with MatchTaint, key and effect only: any value matches, another effect does not."""
    assert is_known_ephemeral(Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE, "true")) is True
    assert is_known_ephemeral(Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_SCHEDULE)) is True
    assert is_known_ephemeral(Taint("node.cloudprovider.kubernetes.io/uninitialized", NO_EXECUTE, "true")) is False


# taints.go Taints.Tolerates -----------------------------------------------------------------------------------------


def test_tolerates_compares_gt_and_lt_numerically():
    """taints.go:79 passes enableComparisonOperators to ToleratesTaint: Gt tolerates a taint whose value is a larger
    decimal integer, Lt a smaller one; a value that is no decimal integer (a leading zero, a letter) is tolerated by
    neither."""
    gt5 = Toleration(key="tier", operator="Gt", value="5", effect=NO_SCHEDULE)
    lt5 = Toleration(key="tier", operator="Lt", value="5", effect=NO_SCHEDULE)
    taints = {value: Taint("tier", NO_SCHEDULE, value) for value in ("6", "5", "4", "-7", "06", "x")}
    assert {v: gt5.tolerates(t) for v, t in taints.items()} == {
        "6": True,
        "5": False,
        "4": False,
        "-7": False,
        "06": False,
        "x": False,
    }
    assert {v: lt5.tolerates(t) for v, t in taints.items()} == {
        "6": False,
        "5": False,
        "4": True,
        "-7": True,
        "06": False,
        "x": False,
    }
    assert untolerated([taints["6"], taints["4"]], [gt5]) == [taints["4"]]
