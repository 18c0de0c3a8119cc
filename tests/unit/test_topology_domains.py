"""The domains a spread under NodeTaintsPolicy=Honor sees: those of NodePools whose taints the pod tolerates."""

import pytest

from provisioner.scheduling.topologydomains import DomainGroup
from provisioner.taints import Taint, Toleration

GPU = (Taint("gpu", "NoSchedule"),)
SPOT = (Taint("spot", "NoSchedule"),)
TOLERATES_GPU = (Toleration(key="gpu", operator="Exists"),)


def offered(*pools: tuple[str, tuple[Taint, ...]]) -> DomainGroup:
    domains = DomainGroup()
    for domain, taints in pools:
        domains.insert(domain, taints)
    return domains


def test_a_domain_only_tainted_nodepools_offer_is_seen_only_by_pods_tolerating_one_of_them():
    domains = offered(("a", GPU), ("a", SPOT), ("b", SPOT))
    assert list(domains.tolerated(TOLERATES_GPU)) == ["a"]
    assert list(domains.tolerated(())) == []


@pytest.mark.parametrize("untainted_first", [True, False])
def test_an_untainted_nodepool_makes_its_domain_seen_by_every_pod_whatever_the_order(untainted_first):
    pools = [("a", ()), ("a", GPU)]
    domains = offered(*(pools if untainted_first else reversed(pools)))
    assert list(domains.tolerated(())) == ["a"]


def test_node_taints_policy_ignore_sees_every_domain():
    assert list(offered(("a", GPU), ("b", ())).tolerated(None)) == ["a", "b"]
