"""Karpenter's topology tests (pkg/controllers/provisioning/scheduling/topology_test.go, v1.15.0) ported to karpui's engine.

Each test names the upstream `It` it follows. `Cluster.provision` plays Karpenter's `ExpectProvisioned`: it solves,
binds the pods placed on existing nodes, and launches each new NodeClaim as the fake cloud provider does (its
cheapest type, the first compatible offering of that type); `Cluster.skew` plays `ExpectSkew`.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from provisioner.nodes import Node
from provisioner.pods import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY, OwnerReference, Pod, PodAffinityTerm
from provisioner.pods import TopologySpreadConstraint as TSC
from provisioner.selectors import LabelSelector
from provisioner.taints import Taint, Toleration
from tests.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    assorted_catalog,
    fake_catalog,
    node,
    nodepool,
    pod,
    r,
    req,
    schedule,
    selector,
)

LABELS = {"test": "test"}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def tsc(key, max_skew=1, when=DO_NOT_SCHEDULE, *, labels=LABELS, **fields) -> TSC:
    """A topology spread constraint selecting `labels` (None: a nil selector, which selects nothing)."""
    return TSC(max_skew, key, when, None if labels is None else selector(**labels), **fields)


def pods(count, *, labels=LABELS, **options) -> list[Pod]:
    return [pod(labels=labels, **options) for _ in range(count)]


def default_pool(*requirements, name="default", **options):
    """The suite's NodePool: capacity-type Exists, unless a test replaces the requirements."""
    return nodepool(name, *(requirements or (req(CAPACITY_TYPE, "Exists"),)), **options)


def anti(key, **match) -> PodAffinityTerm:
    return PodAffinityTerm(topology_key=key, selector=selector(**match))


def bind(p: Pod, node_name: str) -> Pod:
    return replace(p, node_name=node_name, unschedulable=False, phase="Running")


class Cluster:
    """Nodes and bound pods across provisioning rounds, as the envtest cluster holds them."""

    def __init__(self, types=None, nodes=()):
        self.types = types if types is not None else fake_catalog()
        self.nodes: list[Node] = list(nodes)
        self._names = itertools.count(1)

    def provision(self, pending, pools=None, **options):
        pools = pools if pools is not None else [default_pool()]
        # Karpenter's provisioner only takes pods it may provision (marked unschedulable, unbound, not terminating).
        pending = [p for p in pending if p.is_provisionable()]
        result = schedule(pending, pools, self.types, nodes=self.nodes, **options)
        for i, existing in enumerate(self.nodes):
            placed = result.placements.get(existing.name, [])
            if placed:
                self.nodes[i] = replace(existing, pods=existing.pods + tuple(bind(p, existing.name) for p in placed))
        for claim in result.new_nodeclaims:
            # The fake provider launches the cheapest type and the first of its offerings the NodeClaim allows.
            it = claim.cheapest.instance_type
            offering = it.compatible_offerings(claim.requirements)[0]
            name = f"node-{next(self._names)}"
            labels = {
                **it.labels,
                ZONE: offering.zone,
                CAPACITY_TYPE: offering.capacity_type,
                INSTANCE_TYPE: it.name,
                **claim.labels,
                HOSTNAME: name,
            }
            self.nodes.append(
                Node(
                    name=name,
                    labels=labels,
                    allocatable=dict(it.allocatable),
                    capacity=dict(it.capacity),
                    taints=tuple(claim.taints),
                    pods=tuple(bind(p, name) for p in claim.pods),
                    managed=True,
                    nodepool=claim.nodepool,
                )
            )
        return result

    def node_of(self, p: Pod) -> Node | None:
        return next((n for n in self.nodes if any(q.uid == p.uid for q in n.pods)), None)

    def skew(self, key, labels=LABELS, namespace="default") -> list[int]:
        """ExpectSkew: bound pods of the namespace matching `labels` (None: all), counted per domain of `key`."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            domain = n.name if key == HOSTNAME else n.labels.get(key)
            if domain is None:
                continue
            for p in n.pods:
                if p.namespace != namespace or p.deleting or p.phase in ("Succeeded", "Failed"):
                    continue
                if labels is None or selector(**labels).matches(p.labels):
                    counts[domain] = counts.get(domain, 0) + 1
        return sorted(counts.values())

    def delete(self, doomed) -> None:
        uids = {p.uid for p in doomed}
        self.nodes = [replace(n, pods=tuple(p for p in n.pods if p.uid not in uids)) for n in self.nodes]


def scheduled_ids(result) -> set[str]:
    placed = [p for nc in result.new_nodeclaims for p in nc.pods]
    placed += [p for group in result.placements.values() for p in group]
    return {p.id for p in placed}


ZONE_1_2 = req(ZONE, "In", "test-zone-1", "test-zone-2")
CPU_1_1 = "1.1"


# Topology (top level) --------------------------------------------------------------------------------------------


def test_should_ignore_unknown_topology_keys():
    """topology_test.go It("should ignore unknown topology keys")"""
    spreading = pod(labels=LABELS, spread=[tsc("unknown")])
    plain = pod()
    result = Cluster().provision([spreading, plain])
    assert scheduled_ids(result) == {plain.id}
    assert list(result.failures) == [spreading.id]


def test_should_not_spread_when_a_nil_label_selector_is_defined():
    """topology_test.go It("should not spread when a nil label selector is defined")"""
    cluster = Cluster()
    cluster.provision(pods(2, spread=[tsc(ZONE, labels=None)]))
    assert cluster.skew(ZONE, labels=None) == [2]


# Zonal -----------------------------------------------------------------------------------------------------------


def test_zonal_should_balance_pods_across_zones_match_expressions():
    """topology_test.go Context("Zonal") It("should balance pods across zones (match expressions)")"""
    constraint = TSC(1, ZONE, DO_NOT_SCHEDULE, LabelSelector.parse("test in (test)"))
    cluster = Cluster()
    cluster.provision(pods(4, spread=[constraint]))
    assert cluster.skew(ZONE) == [1, 1, 2]


def test_zonal_should_respect_nodepool_zonal_constraints():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints")"""
    cluster = Cluster()
    cluster.provision(
        pods(4, spread=[tsc(ZONE)]), [default_pool(req(ZONE, "In", *(f"test-zone-{i}" for i in (1, 2, 3))))]
    )
    assert cluster.skew(ZONE) == [1, 1, 2]


def test_zonal_should_respect_nodepool_zonal_constraints_subset_with_requirements():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints (subset) with requirements")"""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(ZONE)]), [default_pool(ZONE_1_2)])
    assert cluster.skew(ZONE) == [2, 2]


def test_zonal_should_respect_nodepool_zonal_constraints_subset_with_labels():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints (subset) with labels")"""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(ZONE)]), [default_pool(labels={ZONE: "test-zone-1"})])
    assert cluster.skew(ZONE) == [4]


def test_zonal_should_respect_nodepool_zonal_constraints_subset_with_requirements_and_labels():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints (subset) with requirements and
    labels")"""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(ZONE)]), [default_pool(ZONE_1_2, labels={ZONE: "test-zone-1"})])
    assert cluster.skew(ZONE) == [4]


def test_zonal_should_respect_nodepool_zonal_constraints_subset_with_labels_across_nodepools():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints (subset) with labels across
    NodePools")"""
    first = default_pool(ZONE_1_2, name="np-1", labels={ZONE: "test-zone-1"})
    second = nodepool("np-2", labels={ZONE: "test-zone-2"})
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(ZONE)]), [first, second])
    assert cluster.skew(ZONE) == [2, 2]


def test_zonal_should_respect_nodepool_zonal_constraints_existing_pod():
    """topology_test.go Context("Zonal") It("should respect NodePool zonal constraints (existing pod)"): two rounds."""
    cluster = Cluster()
    first = pod(CPU_1_1, labels=LABELS, node_selector={ZONE: "test-zone-3"})
    cluster.provision([first])
    assert cluster.node_of(first) is not None
    cluster.provision(pods(6, cpu=CPU_1_1, spread=[tsc(ZONE)]), [default_pool(ZONE_1_2)])
    assert cluster.skew(ZONE) == [1, 2, 2]


def one_zone(zone):
    return default_pool(req(ZONE, "In", zone))


def test_zonal_should_schedule_to_the_non_minimum_domain_if_its_all_thats_available():
    """topology_test.go Context("Zonal") It("should schedule to the non-minimum domain if its all that's available")"""
    constraint = [tsc(ZONE, 5)]
    cluster = Cluster()
    cluster.provision(pods(1, cpu=CPU_1_1, spread=constraint), [one_zone("test-zone-1")])
    assert cluster.skew(ZONE) == [1]
    cluster.provision(pods(1, cpu=CPU_1_1, spread=constraint), [one_zone("test-zone-2")])
    assert cluster.skew(ZONE) == [1, 1]
    cluster.provision(pods(10, cpu=CPU_1_1, spread=constraint), [one_zone("test-zone-3")])
    assert cluster.skew(ZONE) == [1, 1, 6]


def test_zonal_should_only_schedule_to_minimum_domains_if_already_violating_max_skew():
    """topology_test.go Context("Zonal") It("should only schedule to minimum domains if already violating max skew")"""
    cluster = Cluster()
    first = pods(9, cpu=CPU_1_1, spread=[tsc(ZONE)])
    cluster.provision(first)
    assert cluster.skew(ZONE) == [3, 3, 3]
    cluster.delete([p for p in first if cluster.node_of(p).labels[ZONE] != "test-zone-1"])
    assert cluster.skew(ZONE) == [3]
    cluster.provision(pods(3, cpu=CPU_1_1, spread=[tsc(ZONE)]))
    assert cluster.skew(ZONE) == [1, 2, 3]


def test_zonal_should_not_violate_max_skew_when_unsat_do_not_schedule():
    """topology_test.go Context("Zonal") It("should not violate max-skew when unsat = do not schedule")"""
    cluster = Cluster()
    cluster.provision(pods(1, cpu=CPU_1_1, spread=[tsc(ZONE)]), [one_zone("test-zone-1")])
    assert cluster.skew(ZONE) == [1]
    result = cluster.provision(
        pods(10, cpu=CPU_1_1, spread=[tsc(ZONE)]), [default_pool(req(ZONE, "In", "test-zone-2", "test-zone-3"))]
    )
    assert cluster.skew(ZONE) == [1, 2, 2]
    assert len(result.failures) == 6


def test_zonal_should_not_violate_max_skew_when_unsat_do_not_schedule_discover_domains():
    """topology_test.go Context("Zonal") It("should not violate max-skew when unsat = do not schedule (discover
    domains)"): the first pod has no constraint, yet counts for the later ones."""
    cluster = Cluster()
    cluster.provision(pods(1, cpu=CPU_1_1), [one_zone("test-zone-1")])
    cluster.provision(
        pods(10, cpu=CPU_1_1, spread=[tsc(ZONE)]), [default_pool(req(ZONE, "In", "test-zone-2", "test-zone-3"))]
    )
    assert cluster.skew(ZONE) == [1, 2, 2]


def counted_and_ignored_pods(first, second, third):
    """The bound pods of 'should only count running/scheduled pods ...': only the last three count."""
    return {
        first: [
            pod(node_name=first),  # no labels
            pod(labels=LABELS, namespace="wrong-namespace", node_name=first),
            replace(pod(labels=LABELS, node_name=first), phase="Failed"),
            replace(pod(labels=LABELS, node_name=first), phase="Succeeded"),
            pod(labels=LABELS, node_name=first),
            pod(labels=LABELS, node_name=first),
        ],
        second: [pod(labels=LABELS, node_name=second)],
        third: [pod(labels=LABELS, node_name=third)],  # the node has no domain
    }


def ignored_pending_pods():
    """test.Pod (pending, not marked unschedulable) and a terminating one: neither provisioned nor counted."""
    return [
        replace(pod(labels=LABELS), unschedulable=False),
        replace(pod(labels=LABELS), unschedulable=False, deleting=True),
    ]


def test_zonal_should_only_count_running_scheduled_pods_with_matching_labels_scheduled_to_nodes_with_a_domain():
    """topology_test.go Context("Zonal") It("should only count running/scheduled pods with matching labels scheduled to
    nodes with a corresponding domain")"""
    bound = counted_and_ignored_pods("first", "second", "third")
    nodes = [
        node("first", "0", "0", 0, labels={ZONE: "test-zone-1"}, scheduled=bound["first"]),
        node("second", "0", "0", 0, labels={ZONE: "test-zone-2"}, scheduled=bound["second"]),
        node("third", "0", "0", 0, scheduled=bound["third"]),
    ]
    cluster = Cluster(nodes=nodes)
    cluster.provision([*ignored_pending_pods(), *pods(2, spread=[tsc(ZONE)])])
    assert cluster.skew(ZONE) == [1, 2, 2]


@pytest.mark.parametrize("key", [ZONE, CAPACITY_TYPE])
def test_should_match_all_pods_when_label_selector_is_not_specified(key):
    """topology_test.go Context("Zonal") and Context("CapacityType") It("should match all pods when labelSelector is
    not specified")"""
    cluster = Cluster()
    cluster.provision([pod()])
    assert cluster.skew(key, labels=None) == [1]


def test_should_handle_interdependent_selectors():
    """topology_test.go Context("Zonal") and Context("CapacityType") It("should handle interdependent selectors") (the
    two are the same test, both on hostname): the pods do not match their own hostname spread's selector, so nothing limits them to one per node."""
    spreading = pods(5, labels=None, spread=[tsc(HOSTNAME)])
    result = Cluster().provision(spreading)
    assert [len(nc.pods) for nc in result.new_nodeclaims] == [5]


def test_zonal_should_respect_min_domains_constraints():
    """topology_test.go Context("Zonal") It("should respect minDomains constraints")"""
    cluster = Cluster()
    cluster.provision(pods(3, spread=[tsc(ZONE, min_domains=3)]), [default_pool(ZONE_1_2)])
    assert cluster.skew(ZONE) == [1, 1]


@pytest.mark.parametrize("min_domains", [3, 2], ids=["equal", "greater-than-minimum"])
def test_zonal_satisfied_min_domains_constraints_allow_expected_pod_scheduling(min_domains):
    """topology_test.go Context("Zonal") It("satisfied minDomains constraints (equal) should allow expected pod
    scheduling") and It("satisfied minDomains constraints (greater than minimum) ...")"""
    pool = default_pool(req(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3"))
    cluster = Cluster()
    cluster.provision(pods(11, spread=[tsc(ZONE, min_domains=min_domains)]), [pool])
    assert cluster.skew(ZONE) == [3, 4, 4]


# Hostname --------------------------------------------------------------------------------------------------------


def spread_app(app, **options):
    return pod(labels={"app": app}, spread=[tsc(HOSTNAME, labels={"app": app})], **options)


def test_hostname_balance_multiple_deployments_with_hostname_topology_spread():
    """topology_test.go Context("Hostname") It("balance multiple deployments with hostname topology spread")"""
    cluster = Cluster()
    result = cluster.provision([spread_app("app1"), spread_app("app1"), spread_app("app2"), spread_app("app2")])
    assert not result.failures
    assert len(cluster.nodes) == 2


def test_hostname_balance_multiple_deployments_with_hostname_topology_spread_and_varying_arch():
    """topology_test.go Context("Hostname") It("balance multiple deployments with hostname topology spread & varying
    arch")"""
    amd = [spread_app("app1", required=[[r(ARCH, "In", "amd64")]]) for _ in range(2)]
    arm = [spread_app("app2", required=[[r(ARCH, "In", "arm64")]]) for _ in range(2)]
    cluster = Cluster()
    result = cluster.provision([*amd, *arm])
    assert not result.failures
    assert len(cluster.nodes) == 4


# CapacityType ----------------------------------------------------------------------------------------------------


def test_capacity_type_should_respect_nodepool_capacity_type_constraints():
    """topology_test.go Context("CapacityType") It("should respect NodePool capacity type constraints")"""
    cluster = Cluster()
    cluster.provision(
        pods(4, spread=[tsc(CAPACITY_TYPE)]), [default_pool(req(CAPACITY_TYPE, "In", "spot", "on-demand"))]
    )
    assert cluster.skew(CAPACITY_TYPE) == [2, 2]


def capacity(*values):
    return default_pool(req(CAPACITY_TYPE, "In", *values))


@pytest.mark.parametrize(("when", "expected"), [(DO_NOT_SCHEDULE, [1, 2]), (SCHEDULE_ANYWAY, [1, 5])])
def test_capacity_type_max_skew_when_unsat(when, expected):
    """topology_test.go Context("CapacityType") It("should not violate max-skew when unsat = do not schedule (capacity
    type)") and It("should violate max-skew when unsat = schedule anyway (capacity type)"), in two rounds."""
    cluster = Cluster()
    cluster.provision(pods(1, cpu=CPU_1_1, spread=[tsc(CAPACITY_TYPE, 1, when)]), [capacity("spot")])
    assert cluster.skew(CAPACITY_TYPE) == [1]
    cluster.provision(pods(5, cpu=CPU_1_1, spread=[tsc(CAPACITY_TYPE, 1, when)]), [capacity("on-demand")])
    assert cluster.skew(CAPACITY_TYPE) == expected


def test_capacity_type_should_only_count_running_scheduled_pods_with_matching_labels_scheduled_to_nodes_with_a_domain():
    """topology_test.go Context("CapacityType") It("should only count running/scheduled pods with matching labels
    scheduled to nodes with a corresponding domain")"""
    bound = counted_and_ignored_pods("first", "second", "third")
    # test.Node has no labels but the hostname: the third node is in no capacity-type domain.
    nodes = [
        node("first", "0", "0", 0, labels={CAPACITY_TYPE: "spot"}, scheduled=bound["first"]),
        node("second", "0", "0", 0, labels={CAPACITY_TYPE: "on-demand"}, scheduled=bound["second"]),
        node("third", "0", "0", 0, scheduled=bound["third"]),
    ]
    cluster = Cluster(nodes=nodes)
    cluster.provision([*ignored_pending_pods(), *pods(2, spread=[tsc(CAPACITY_TYPE)])])
    assert cluster.skew(CAPACITY_TYPE) == [2, 3]


def test_capacity_type_should_balance_pods_across_capacity_types_node_required_affinity_constrained():
    """topology_test.go Context("CapacityType") It("should balance pods across capacity-types (node required affinity
    constrained)")"""
    cluster = Cluster()
    first = pod(labels=LABELS, required=[[r(ZONE, "In", "test-zone-1"), r(CAPACITY_TYPE, "In", "on-demand")]])
    cluster.provision([first])
    assert cluster.node_of(first) is not None
    spot_zone_2 = [[r(ZONE, "In", "test-zone-2"), r(CAPACITY_TYPE, "In", "spot")]]
    cluster.provision(pods(5, required=spot_zone_2, spread=[tsc(CAPACITY_TYPE)]))
    assert cluster.skew(CAPACITY_TYPE) == [1, 5]


def test_capacity_type_should_balance_pods_across_capacity_types_no_constraints():
    """topology_test.go Context("CapacityType") It("should balance pods across capacity-types (no constraints)")"""
    cluster = Cluster()
    first = pod(
        labels=LABELS,
        node_selector={INSTANCE_TYPE: "single-pod-instance-type"},
        required=[[r(CAPACITY_TYPE, "In", "on-demand")]],
    )
    cluster.provision([first])
    assert cluster.node_of(first) is not None
    cluster.provision(pods(5, cpu="2", spread=[tsc(CAPACITY_TYPE)]), [capacity("spot")])
    assert cluster.skew(CAPACITY_TYPE) == [1, 2]


def test_capacity_type_should_balance_pods_across_arch_no_constraints():
    """topology_test.go Context("CapacityType") It("should balance pods across arch (no constraints)")"""
    cluster = Cluster()
    first = pod(
        labels=LABELS, node_selector={INSTANCE_TYPE: "single-pod-instance-type"}, required=[[r(ARCH, "In", "amd64")]]
    )
    cluster.provision([first])
    assert cluster.node_of(first) is not None
    cluster.provision(pods(5, cpu="2", spread=[tsc(ARCH)]), [default_pool(req(ARCH, "In", "arm64"))])
    assert cluster.skew(ARCH) == [1, 2]


# Combined Hostname and Zonal Topology ----------------------------------------------------------------------------


def test_combined_should_spread_pods_while_respecting_both_constraints_hostname_and_zonal():
    """topology_test.go Context("Combined Hostname and Zonal Topology") It("should spread pods while respecting both
    constraints (hostname and zonal)"), in four rounds."""
    constraints = [tsc(ZONE), tsc(HOSTNAME, 3)]
    cluster = Cluster()
    for count, zones in ((2, [1, 1]), (3, [1, 2, 2]), (5, [3, 3, 4]), (11, [7, 7, 7])):
        cluster.provision(pods(count, spread=constraints))
        assert cluster.skew(ZONE) == zones
        assert max(cluster.skew(HOSTNAME)) <= 3


def test_combined_should_balance_pods_across_nodepool_requirements():
    """topology_test.go Context("Combined Hostname and Zonal Topology") It("should balance pods across NodePool
    requirements")"""
    key = "capacity.spread.4-1"
    spot = nodepool("spot", req(CAPACITY_TYPE, "In", "spot"), req(key, "In", "2", "3", "4", "5"))
    on_demand = nodepool("on-demand", req(CAPACITY_TYPE, "In", "on-demand"), req(key, "In", "1"))
    cluster = Cluster()
    result = cluster.provision(pods(20, spread=[tsc(key)]), [spot, on_demand])
    assert not result.failures
    assert cluster.skew(key) == [4, 4, 4, 4, 4]
    assert cluster.skew(CAPACITY_TYPE) == [4, 16]


def test_combined_should_spread_pods_while_respecting_both_constraints_zone_and_schedule_anyway_hostname():
    """topology_test.go Context("Combined Hostname and Zonal Topology") the first It("should spread pods while
    respecting both constraints"): a second NodePool limited to zero CPU cannot open test-zone-3."""
    constraints = [tsc(ZONE), tsc(HOSTNAME, 1, SCHEDULE_ANYWAY)]
    disabled = nodepool("b", req(ZONE, "In", "test-zone-3"), limits={"cpu": "0"})
    cluster = Cluster()
    cluster.provision(pods(10, spread=constraints), [default_pool(ZONE_1_2), disabled])
    assert cluster.skew(ZONE) == [1, 1]
    assert cluster.skew(HOSTNAME) == [1, 1]


def test_combined_should_spread_pods_while_respecting_both_constraints_capacity_type_and_hostname():
    """topology_test.go Context("Combined Hostname and Zonal Topology") the second It("should spread pods while
    respecting both constraints"), capacity type and hostname, in four rounds."""
    constraints = [tsc(CAPACITY_TYPE), tsc(HOSTNAME, 3)]
    cluster = Cluster()
    for count, split in ((2, [1, 1]), (3, [2, 3]), (5, [5, 5]), (11, [10, 11])):
        cluster.provision(pods(count, spread=constraints))
        assert cluster.skew(CAPACITY_TYPE) == split
        assert max(cluster.skew(HOSTNAME)) <= 3


# MatchLabelKeys --------------------------------------------------------------------------------------------------


def test_match_label_keys_should_ignore_unknown_labels_specified_in_match_label_keys():
    """topology_test.go Context("MatchLabelKeys") It("should ignore unknown labels specified in matchLabelKeys")"""
    cluster = Cluster()
    cluster.provision(pods(4, spread=[tsc(HOSTNAME, match_label_keys=("test-label",))]))
    assert cluster.skew(HOSTNAME) == [1, 1, 1, 1]


# NodeTaintsPolicy / NodeAffinityPolicy ---------------------------------------------------------------------------

SPREAD_LABEL = "fake-label"
TAINT = Taint("taintname", "NoSchedule", "taintvalue")

# Karpenter registers an existing node's domain in a spread group only when the node passes the group's node filter
# (topology.go countDomains: tg.nodeFilter.Matches), and a NodePool's domains only for pods tolerating its taints
# under NodeTaintsPolicy=Honor (topologydomaingroup.go ForEachDomain).


@pytest.mark.parametrize(("policy", "expected"), [(IGNORE, [1]), (HONOR, [5])])
def test_node_taints_policy_should_balance_pods_across_a_label(policy, expected):
    """topology_test.go Context("NodeTaintsPolicy") It("should balance pods across a label (NodeTaintsPolicy=ignore)")
    and It("... (NodeTaintsPolicy=honor)"): two tainted, full nodes hold domains foo and bar."""
    nodes = [
        node(name, "100m", "0", 0, labels={SPREAD_LABEL: value}, taints=[TAINT])
        for name, value in (("n-foo", "foo"), ("n-bar", "bar"))
    ]
    cluster = Cluster(nodes=nodes)
    constraint = tsc(SPREAD_LABEL, node_taints_policy=policy)
    cluster.provision(pods(5, cpu="1", spread=[constraint]), [default_pool(labels={SPREAD_LABEL: "baz"})])
    assert cluster.skew(SPREAD_LABEL) == expected


@pytest.mark.parametrize(("policy", "expected"), [(IGNORE, [1]), (HONOR, [2])])
def test_node_taints_policy_should_balance_pods_across_a_label_discovered_from_the_nodepool(policy, expected):
    """topology_test.go Context("NodeTaintsPolicy") It("should balance pods across a label when discovered from the
    nodepool (NodeTaintsPolicy=ignore)") and It("... (NodeTaintsPolicy=honor)")"""
    open_pool = default_pool(req(CAPACITY_TYPE, "Exists"), req(SPREAD_LABEL, "In", "foo"), name="open")
    tainted = default_pool(
        req(CAPACITY_TYPE, "Exists"),
        req(SPREAD_LABEL, "In", "bar"),
        name="tainted",
        taints=[Taint("taint-key", "NoSchedule", "taint-value")],
    )
    cluster = Cluster()
    cluster.provision(pods(2, spread=[tsc(SPREAD_LABEL, node_taints_policy=policy)]), [open_pool, tainted])
    assert cluster.skew(SPREAD_LABEL) == expected


def test_node_taints_policy_honor_mutually_exclusive_nodepools_share_domains():
    """topology_test.go Context("NodeTaintsPolicy") It("should balance pods across a label when mutually exclusive
    NodePools (by taints) share domains (NodeTaintsPolicy=honor)")"""
    pools = [
        default_pool(
            req(CAPACITY_TYPE, "Exists"),
            req(SPREAD_LABEL, "In", *domains),
            name=f"np-{i}",
            taints=[Taint("taint-key", "NoSchedule", f"nodepool-{i}")],
        )
        for i, domains in enumerate((("foo", "bar"), ("foo", "baz")))
    ]
    constraint = tsc(SPREAD_LABEL, node_taints_policy=HONOR)
    pending = [
        p
        for i in range(2)
        for p in pods(
            (i + 1) * 2,
            spread=[constraint],
            tolerations=[Toleration(key="taint-key", operator="Equal", value=f"nodepool-{i}", effect="NoSchedule")],
        )
    ]
    cluster = Cluster()
    cluster.provision(pending, pools)
    assert cluster.skew(SPREAD_LABEL) == [1, 2, 3]


@pytest.mark.parametrize(("policy", "expected"), [(IGNORE, [1]), (HONOR, [5])])
def test_node_affinity_policy_should_balance_pods_across_a_label(policy, expected):
    """topology_test.go Context("NodeAffinityPolicy") It("should balance pods across a label (NodeAffinityPolicy=ignore)")
    and It("... (NodeAffinityPolicy=honor)"): full nodes in foo and bar do not match the pods' node selector."""
    nodes = [
        node(name, "100m", "0", 0, labels={SPREAD_LABEL: value, "selector": "mismatch"})
        for name, value in (("n-foo", "foo"), ("n-bar", "bar"))
    ]
    cluster = Cluster(nodes=nodes)
    pool = default_pool(labels={SPREAD_LABEL: "baz", "selector": "value"})
    constraint = tsc(SPREAD_LABEL, node_affinity_policy=policy)
    cluster.provision(pods(5, cpu="1", node_selector={"selector": "value"}, spread=[constraint]), [pool])
    assert cluster.skew(SPREAD_LABEL) == expected


# Combined Zonal and Capacity Type / Hostname, Zonal and Capacity Type ---------------------------------------------


def test_combined_zonal_and_capacity_type_should_spread_pods_while_respecting_both_constraints():
    """topology_test.go Context("Combined Zonal and Capacity Type Topology") It("should spread pods while respecting
    both constraints"), in four rounds."""
    constraints = [tsc(CAPACITY_TYPE), tsc(ZONE)]
    cluster = Cluster()
    for count, most_per_type, most_per_zone in ((2, 1, 1), (3, 3, 2), (3, 5, 4), (11, 11, 7)):
        cluster.provision(pods(count, spread=constraints))
        assert max(cluster.skew(CAPACITY_TYPE)) <= most_per_type
        assert max(cluster.skew(ZONE)) <= most_per_zone


def max_skew(counts):
    """ExpectMaxSkew (scheduling/suite_test.go): the largest count minus the smallest, over the domains holding pods."""
    return max(counts) - min(counts)


def test_combined_hostname_zonal_and_capacity_type_should_spread_pods_while_respecting_all_constraints():
    """topology_test.go Context("Combined Hostname, Zonal, and Capacity Type Topology") It("should spread pods while
    respecting all constraints"), with fake.InstanceTypesAssorted and batches of 1..14 pods."""
    constraints = [tsc(CAPACITY_TYPE), tsc(ZONE, 2), tsc(HOSTNAME, 3)]
    cluster = Cluster(types=assorted_catalog())
    for count in range(1, 15):
        result = cluster.provision(pods(count, spread=constraints))
        assert not result.failures
        assert max_skew(cluster.skew(CAPACITY_TYPE)) <= 1
        assert max_skew(cluster.skew(ZONE)) <= 2
        assert max_skew(cluster.skew(HOSTNAME)) <= 3


# Combined Zonal Topology and Node Affinity -----------------------------------------------------------------------


def test_combined_zonal_and_node_affinity_should_limit_spread_options_by_node_selector():
    """topology_test.go Context("Combined Zonal Topology and Node Affinity") It("should limit spread options by
    nodeSelector")"""
    cluster = Cluster()
    cluster.provision(
        [
            *pods(5, spread=[tsc(ZONE)], node_selector={ZONE: "test-zone-1"}),
            *pods(10, spread=[tsc(ZONE)], node_selector={ZONE: "test-zone-2"}),
        ]
    )
    assert cluster.skew(ZONE) == [5, 10]


def test_combined_zonal_and_node_affinity_should_limit_spread_options_by_node_requirements():
    """topology_test.go Context("Combined Zonal Topology and Node Affinity") It("should limit spread options by node
    requirements")"""
    cluster = Cluster()
    cluster.provision(pods(10, spread=[tsc(ZONE)], required=[[r(ZONE, "In", "test-zone-1", "test-zone-2")]]))
    assert cluster.skew(ZONE) == [5, 5]


def test_combined_zonal_and_node_affinity_should_limit_spread_options_by_required_node_affinity():
    """topology_test.go Context("Combined Zonal Topology and Node Affinity") It("should limit spread options by required
    node affinity"), in three rounds."""
    cluster = Cluster()
    cluster.provision(pods(6, spread=[tsc(ZONE)], required=[[r(ZONE, "In", "test-zone-1", "test-zone-2")]]))
    assert cluster.skew(ZONE) == [3, 3]
    three = default_pool(req(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3"))
    cluster.provision(pods(1, spread=[tsc(ZONE)], required=[[r(ZONE, "In", "test-zone-2", "test-zone-3")]]), [three])
    assert cluster.skew(ZONE) == [1, 3, 3]
    cluster.provision(pods(5, spread=[tsc(ZONE)]), [three])
    assert cluster.skew(ZONE) == [4, 4, 4]


def test_combined_zonal_and_node_affinity_should_not_limit_spread_options_by_preferred_node_affinity():
    """topology_test.go Context("Combined Zonal Topology and Node Affinity") It("should not limit spread options by
    preferred node affinity")"""
    cluster = Cluster()
    cluster.provision(pods(6, spread=[tsc(ZONE)], preferred=[(1, [r(ZONE, "In", "test-zone-1", "test-zone-2")])]))
    assert cluster.skew(ZONE) == [2, 2, 2]


# Combined Capacity Type Topology and Node Affinity ---------------------------------------------------------------


def test_combined_capacity_type_and_node_affinity_should_limit_spread_options_by_node_selector():
    """topology_test.go Context("Combined Capacity Type Topology and Node Affinity") It("should limit spread options by
    nodeSelector")"""
    constraint = [tsc(CAPACITY_TYPE, 1, SCHEDULE_ANYWAY)]
    cluster = Cluster()
    cluster.provision(
        [
            *pods(5, spread=constraint, node_selector={CAPACITY_TYPE: "spot"}),
            *pods(5, spread=constraint, node_selector={CAPACITY_TYPE: "on-demand"}),
        ]
    )
    assert cluster.skew(CAPACITY_TYPE) == [5, 5]


def test_combined_capacity_type_and_node_affinity_should_limit_spread_options_by_node_affinity():
    """topology_test.go Context("Combined Capacity Type Topology and Node Affinity") It("should limit spread options by
    node affinity (capacity type)"), in three rounds."""
    cluster = Cluster()
    cluster.provision(pods(3, spread=[tsc(CAPACITY_TYPE)], required=[[r(CAPACITY_TYPE, "In", "spot")]]))
    assert cluster.skew(CAPACITY_TYPE) == [3]
    cluster.provision(pods(1, spread=[tsc(CAPACITY_TYPE)], required=[[r(CAPACITY_TYPE, "In", "on-demand", "spot")]]))
    assert cluster.skew(CAPACITY_TYPE) == [1, 3]
    cluster.provision(pods(5, spread=[tsc(CAPACITY_TYPE)]))
    assert cluster.skew(CAPACITY_TYPE) == [4, 5]


# Pod Affinity/Anti-Affinity --------------------------------------------------------------------------------------

S2 = {"security": "s2"}


def test_affinity_should_schedule_a_pod_with_empty_pod_affinity_and_anti_affinity():
    """topology_test.go It("should schedule a pod with empty pod affinity and anti-affinity")"""
    lone = pod(affinity=(), anti_affinity=())
    assert scheduled_ids(Cluster().provision([lone])) == {lone.id}


def test_affinity_should_respect_pod_affinity_hostname():
    """topology_test.go It("should respect pod affinity (hostname)")"""
    target = pod(labels=S2)
    follower = pod(affinity=[anti(HOSTNAME, **S2)])
    cluster = Cluster()
    cluster.provision([*pods(10, spread=[tsc(HOSTNAME)]), target, follower])
    assert cluster.node_of(target) is not None
    assert cluster.node_of(target).name == cluster.node_of(follower).name


def test_affinity_should_respect_pod_affinity_arch():
    """topology_test.go It("should respect pod affinity (arch)")"""
    spread_s2 = [tsc(HOSTNAME, labels=S2)]
    arm = pod("2", labels=S2, spread=spread_s2, node_selector={ARCH: "arm64"})
    follower = pod("1", labels=S2, spread=spread_s2, affinity=[anti(ARCH, **S2)])
    cluster = Cluster()
    cluster.provision([arm, follower])
    n1, n2 = cluster.node_of(arm), cluster.node_of(follower)
    assert n1 is not None and n2 is not None
    assert n1.labels[ARCH] == n2.labels[ARCH] == "arm64"
    assert n1.name != n2.name


def test_affinity_should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname():
    """topology_test.go It("should respect self pod affinity for first empty topology domain only (hostname)"):
    five pods fill the first node (the fake types hold five pods); a second batch finds no room beside them."""
    cluster = Cluster()
    first = pods(10, labels=S2, affinity=[anti(HOSTNAME, **S2)])
    cluster.provision(first)
    placed = [p for p in first if cluster.node_of(p)]
    assert len(placed) == 5
    assert len({cluster.node_of(p).name for p in placed}) == 1
    second = pods(10, labels=S2, affinity=[anti(HOSTNAME, **S2)])
    result = cluster.provision(second)
    assert scheduled_ids(result) == set()


def test_affinity_should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname_constrained_zones():
    """topology_test.go It("should respect self pod affinity for first empty topology domain only (hostname/constrained
    zones)")"""
    cluster = Cluster()
    cluster.provision([pod(labels=S2, node_selector={ZONE: "test-zone-1"}, affinity=[anti(HOSTNAME, **S2)])])
    later = pods(
        10, labels=S2, required=[[r(ZONE, "In", "test-zone-2", "test-zone-3")]], affinity=[anti(HOSTNAME, **S2)]
    )
    assert scheduled_ids(cluster.provision(later)) == set()


def test_affinity_should_respect_self_pod_affinity_zone_with_constraint():
    """topology_test.go It("should respect self pod affinity (zone w/ constraint)")"""
    cluster = Cluster()
    group = pods(3, labels=S2, affinity=[anti(ZONE, **S2)], required=[[r(ZONE, "In", "test-zone-3")]])
    cluster.provision(group)
    nodes = {cluster.node_of(p).name for p in group}
    assert len(nodes) == 1
    assert all(cluster.node_of(p).labels[ZONE] == "test-zone-3" for p in group)


def test_affinity_should_allow_two_nodes_when_two_pods_with_matching_affinities_have_incompatible_selectors():
    """topology_test.go It("should allow two nodes to be created when two pods with matching affinities have
    incompatible selectors")"""
    s1 = {"security": "s1"}
    pod1 = pod(labels=s1, affinity=[anti(ZONE, **s1)], required=[[r(ZONE, "In", "test-zone-2")]])
    pod2 = pod(labels=s1, affinity=[anti(ZONE, **s1)], required=[[r(ZONE, "In", "test-zone-3")]])
    cluster = Cluster()
    cluster.provision([pod1, pod2])
    assert cluster.node_of(pod1).labels[ZONE] == "test-zone-2"
    assert cluster.node_of(pod2).labels[ZONE] == "test-zone-3"
    assert cluster.node_of(pod1).name != cluster.node_of(pod2).name


def test_affinity_should_allow_violation_of_preferred_pod_affinity():
    """topology_test.go It("should allow violation of preferred pod affinity")"""
    follower = pod(preferred_affinity=[PodAffinityTerm(HOSTNAME, selector(**S2), weight=50)])
    result = Cluster().provision([*pods(10, spread=[tsc(HOSTNAME)]), follower])
    assert follower.id in scheduled_ids(result)


def test_affinity_should_allow_violation_of_preferred_pod_anti_affinity():
    """topology_test.go It("should allow violation of preferred pod anti-affinity")"""
    avoiders = [pod(preferred_anti_affinity=[PodAffinityTerm(ZONE, selector(**LABELS), weight=50)]) for _ in range(10)]
    result = Cluster().provision([*pods(3, spread=[tsc(ZONE)]), *avoiders])
    assert {p.id for p in avoiders} <= scheduled_ids(result)


def test_affinity_should_not_violate_pod_anti_affinity_on_zone_other_schedules_first():
    """topology_test.go It("should not violate pod anti-affinity on zone (other schedules first)")"""
    big = pod("2", labels=S2)
    loner = pod(anti_affinity=[anti(ZONE, **S2)])
    result = Cluster().provision([big, loner])
    assert scheduled_ids(result) == {big.id}


def test_affinity_should_not_violate_pod_anti_affinity_arch():
    """topology_test.go It("should not violate pod anti-affinity (arch)")"""
    spread_s2 = [tsc(HOSTNAME, labels=S2)]
    arm = pod("2", labels=S2, spread=spread_s2, node_selector={ARCH: "arm64"})
    other = pod("1", labels=S2, spread=spread_s2, anti_affinity=[anti(ARCH, **S2)])
    cluster = Cluster()
    cluster.provision([arm, other])
    assert cluster.node_of(arm).labels[ARCH] == "arm64"
    assert cluster.node_of(other).labels[ARCH] == "amd64"


def zone_pinned(**options):
    return [pod("2", node_selector={ZONE: f"test-zone-{i}"}, **options) for i in (1, 2, 3)]


def test_affinity_should_violate_preferred_pod_anti_affinity_on_zone_inverse():
    """topology_test.go It("should violate preferred pod anti-affinity on zone (inverse)")"""
    pinned = zone_pinned(preferred_anti_affinity=[PodAffinityTerm(ZONE, selector(**S2), weight=10)])
    target = pod(labels=S2)
    result = Cluster().provision([*pinned, target])
    assert scheduled_ids(result) == {p.id for p in [*pinned, target]}


def test_affinity_should_not_violate_pod_anti_affinity_on_zone_inverse():
    """topology_test.go It("should not violate pod anti-affinity on zone (inverse)")"""
    pinned = zone_pinned(anti_affinity=[anti(ZONE, **S2)])
    target = pod(labels=S2)
    result = Cluster().provision([*pinned, target])
    assert scheduled_ids(result) == {p.id for p in pinned}


def test_affinity_should_not_violate_pod_anti_affinity_on_zone_schroedinger():
    """topology_test.go It("should not violate pod anti-affinity on zone (Schrödinger)")"""
    anywhere = pod("2", anti_affinity=[anti(ZONE, **S2)])
    target = pod(labels=S2)
    cluster = Cluster()
    assert scheduled_ids(cluster.provision([anywhere, target])) == {anywhere.id}
    assert scheduled_ids(cluster.provision([target])) == {target.id}
    assert cluster.node_of(anywhere).labels[ZONE] != cluster.node_of(target).labels[ZONE]


def test_affinity_should_not_violate_pod_anti_affinity_on_zone_inverse_with_existing_nodes():
    """topology_test.go It("should not violate pod anti-affinity on zone (inverse w/existing nodes)")"""
    cluster = Cluster()
    pinned = zone_pinned(anti_affinity=[anti(ZONE, **S2)])
    assert scheduled_ids(cluster.provision(pinned)) == {p.id for p in pinned}
    assert scheduled_ids(cluster.provision([pod(labels=S2)])) == set()


def test_affinity_should_violate_preferred_pod_anti_affinity_on_zone_inverse_with_existing_nodes():
    """topology_test.go It("should violate preferred pod anti-affinity on zone (inverse w/existing nodes)")"""
    cluster = Cluster()
    pinned = zone_pinned(preferred_anti_affinity=[PodAffinityTerm(ZONE, selector(**S2), weight=10)])
    cluster.provision(pinned)
    target = pod(labels=S2)
    assert scheduled_ids(cluster.provision([target])) == {target.id}


def test_affinity_should_allow_violation_of_a_pod_affinity_preference_with_a_conflicting_required_constraint():
    """topology_test.go It("should allow violation of a pod affinity preference with a conflicting required
    constraint")"""
    target = pod(labels=S2)
    followers = pods(
        3, spread=[tsc(HOSTNAME)], preferred_affinity=[PodAffinityTerm(HOSTNAME, selector(**S2), weight=50)]
    )
    cluster = Cluster()
    result = cluster.provision([*followers, target])
    assert scheduled_ids(result) == {p.id for p in [*followers, target]}
    assert cluster.skew(HOSTNAME) == [1, 1, 1]


def test_affinity_should_support_pod_anti_affinity_with_a_zone_topology():
    """topology_test.go It("should support pod anti-affinity with a zone topology"): one pod per round until every zone
    holds one."""
    cluster = Cluster()
    for expected in ([1], [1, 1], [1, 1, 1], [1, 1, 1]):
        cluster.provision(pods(3, labels=S2, anti_affinity=[anti(ZONE, **S2)]))
        assert cluster.skew(ZONE, labels=None) == expected


def test_affinity_should_not_schedule_pods_with_affinity_to_a_non_existent_pod():
    """topology_test.go It("should not schedule pods with affinity to a non-existent pod")"""
    result = Cluster().provision(pods(10, labels=None, affinity=[anti(ZONE, **S2)]))
    assert scheduled_ids(result) == set() and len(result.failures) == 10


def test_affinity_should_support_pod_affinity_with_zone_topology_unconstrained_target():
    """topology_test.go It("should support pod affinity with zone topology (unconstrained target)"): the followers
    wait a round for the target to be bound, then join its zone."""
    target = pod(labels=S2)
    followers = pods(10, labels=None, affinity=[anti(ZONE, **S2)])
    cluster = Cluster()
    assert scheduled_ids(cluster.provision([*followers, target])) == {target.id}
    assert cluster.skew(ZONE, labels=None) == [1]
    assert scheduled_ids(cluster.provision(followers)) == {p.id for p in followers}
    assert cluster.skew(ZONE, labels=None) == [11]


def test_affinity_should_support_pod_affinity_with_zone_topology_constrained_target():
    """topology_test.go It("should support pod affinity with zone topology (constrained target)")"""
    target = pod(labels=S2, required=[[r(ZONE, "In", "test-zone-1")]])
    followers = pods(10, labels=None, affinity=[anti(ZONE, **S2)])
    cluster = Cluster()
    cluster.provision([*followers, target])
    assert cluster.skew(ZONE, labels=None) == [11]


def test_affinity_should_handle_multiple_dependent_affinities():
    """topology_test.go It("should handle multiple dependent affinities") (one of its fifty identical rounds)"""
    db = {"type": "db", "spread": "spread"}
    web = {"type": "web", "spread": "spread"}
    cache = {"type": "cache", "spread": "spread"}
    ui = {"type": "ui", "spread": "spread"}
    chain = [
        pod(labels=db),
        pod(labels=web, affinity=[anti(HOSTNAME, **db)]),
        pod(labels=cache, affinity=[anti(HOSTNAME, **web)]),
        pod(labels=ui, affinity=[anti(HOSTNAME, **cache)]),
    ]
    assert scheduled_ids(Cluster().provision(chain)) == {p.id for p in chain}


def test_affinity_should_fail_to_schedule_pods_with_unsatisfiable_dependencies():
    """topology_test.go It("should fail to schedule pods with unsatisfiable dependencies")"""
    lonely = pod(labels={"type": "db", "spread": "spread"}, affinity=[anti(HOSTNAME, type="web", spread="spread")])
    assert scheduled_ids(Cluster().provision([lonely])) == set()


def test_affinity_should_filter_pod_affinity_topologies_by_namespace_no_matching_pods():
    """topology_test.go It("should filter pod affinity topologies by namespace, no matching pods")"""
    target = pod(labels=S2, namespace="other-ns-no-match")
    follower = pod(affinity=[anti(HOSTNAME, **S2)])
    result = Cluster().provision([*pods(10, spread=[tsc(HOSTNAME)]), target, follower])
    assert target.id in scheduled_ids(result) and follower.id not in scheduled_ids(result)


def test_affinity_should_filter_pod_affinity_topologies_by_namespace_empty_namespace_selector():
    """topology_test.go It("should filter pod affinity topologies by namespace, empty namespace selector")"""
    target = pod(labels=S2, namespace="empty-ns-selector")
    follower = pod(affinity=[PodAffinityTerm(HOSTNAME, selector(**S2), namespace_selector=LabelSelector())])
    cluster = Cluster()
    cluster.provision(
        [*pods(10, spread=[tsc(HOSTNAME)]), target, follower],
        namespace_labels={"empty-ns-selector": {"foo": "bar"}, "default": {}},
    )
    assert cluster.node_of(target) is not None
    assert cluster.node_of(target).name == cluster.node_of(follower).name


# DefaultConstraints (karpui has no scheduler default constraints; only the case without them applies) ----------


def test_default_constraints_should_be_a_no_op_when_no_default_constraints_are_configured():
    """topology_test.go Context("DefaultConstraints") It("should be a no-op when no default constraints are
    configured"): three ReplicaSet pods without constraints share one node."""
    owned = pods(3, owner=OwnerReference("ReplicaSet", "rs"))
    cluster = Cluster()
    cluster.provision(owned)
    assert len({cluster.node_of(p).name for p in owned}) == 1


# Taints ----------------------------------------------------------------------------------------------------------


def test_taints_should_taint_nodes_with_nodepool_taints():
    """topology_test.go Describe("Taints") It("should taint nodes with NodePool taints")"""
    taint = Taint("test", "NoSchedule", "bar")
    tolerant = pod(tolerations=[Toleration(operator="Exists", effect="NoSchedule")])
    cluster = Cluster()
    cluster.provision([tolerant], [default_pool(taints=[taint])])
    assert taint in cluster.node_of(tolerant).taints


def test_taints_should_schedule_pods_that_tolerate_nodepool_constraints():
    """topology_test.go Describe("Taints") It("should schedule pods that tolerate NodePool constraints")"""
    pool = default_pool(taints=[Taint("test-key", "NoSchedule", "test-value")])
    tolerant = [
        pod(tolerations=[Toleration(key="test-key", operator="Exists", effect="NoSchedule")]),
        pod(tolerations=[Toleration(key="test-key", operator="Equal", value="test-value", effect="NoSchedule")]),
    ]
    cluster = Cluster()
    assert scheduled_ids(cluster.provision(tolerant, [pool])) == {p.id for p in tolerant}
    intolerant = [
        pod(),
        pod(tolerations=[Toleration(key="invalid", operator="Exists")]),
        pod(tolerations=[Toleration(key="test-key", operator="Equal", effect="NoSchedule")]),
    ]
    assert scheduled_ids(cluster.provision(intolerant, [pool])) == set()


def test_taints_should_not_generate_taints_for_op_exists():
    """topology_test.go Describe("Taints") It("should not generate taints for OpExists"): upstream's one taint is the
    unregistered taint the test node carries; the NodeClaim itself gets none."""
    tolerant = pod(tolerations=[Toleration(key="test-key", operator="Exists", effect="NoExecute")])
    cluster = Cluster()
    cluster.provision([tolerant])
    assert cluster.node_of(tolerant).taints == ()
