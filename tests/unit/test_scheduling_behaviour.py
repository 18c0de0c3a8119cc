"""Karpenter's provisioning behaviour (reference/provisioning.md §5), over the fake provider's catalog."""

from dataclasses import replace

import pytest

from provisioner.pods import SCHEDULE_ANYWAY, effective_requests
from provisioner.quantity import parse_resources
from provisioner.scheduling import results as reasons
from provisioner.taints import Taint, Toleration
from tests.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    KWOK,
    ZONE,
    daemonset,
    fake_catalog,
    instance_type,
    node,
    nodepool,
    placed_types,
    pod,
    r,
    req,
    schedule,
    spread,
    term,
    zone_counts,
)


def scheduled(result) -> int:
    return result.scheduled_count()


# 2. Weighted NodePools ---------------------------------------------------------------------------------------


def test_pods_go_to_the_highest_weight_nodepool():
    pools = [nodepool("unweighted"), nodepool("twenty", weight=20), nodepool("hundred", weight=100)]
    result = schedule([pod(), pod(), pod()], pools=pools)
    assert [nc.nodepool for nc in result.new_nodeclaims] == ["hundred"]
    assert len(result.new_nodeclaims[0].pods) == 3


def test_a_pod_selecting_a_nodepool_by_name_goes_there_whatever_its_weight():
    pools = [nodepool("unweighted"), nodepool("hundred", weight=100)]
    result = schedule([pod(node_selector={"karpenter.sh/nodepool": "unweighted"})], pools=pools)
    assert [nc.nodepool for nc in result.new_nodeclaims] == ["unweighted"]


def test_equal_weights_are_ordered_by_name_descending():
    result = schedule([pod()], pools=[nodepool("alpha"), nodepool("beta")])
    assert [nc.nodepool for nc in result.new_nodeclaims] == ["beta"]


# 3. and 4. Taints ----------------------------------------------------------------------------------------------


def test_a_prefer_no_schedule_nodepool_is_avoided_by_pods_that_do_not_tolerate_it():
    tainted = nodepool("z-tainted", taints=[Taint("foo", "PreferNoSchedule", "bar")])
    result = schedule([pod()], pools=[tainted, nodepool("a-plain")])
    assert [nc.nodepool for nc in result.new_nodeclaims] == ["a-plain"]


def test_a_prefer_no_schedule_nodepool_is_used_when_it_is_the_only_one():
    tainted = nodepool("tainted", taints=[Taint("foo", "PreferNoSchedule", "bar")])
    result = schedule([pod()], pools=[tainted])
    assert [nc.nodepool for nc in result.new_nodeclaims] == ["tainted"]
    assert list(result.relaxations.values()) == [["adding toleration for PreferNoSchedule taints"]]


TAINTED = nodepool("default", taints=[Taint("test-key", "NoSchedule", "test-value")])


@pytest.mark.parametrize(
    ("toleration", "placed"),
    [
        (Toleration(key="test-key", operator="Exists"), 1),
        (Toleration(key="test-key", operator="Equal", value="test-value"), 1),
        (None, 0),
        (Toleration(key="wrong-key", operator="Exists"), 0),
        (Toleration(key="test-key", operator="Equal", value="wrong-value"), 0),
    ],
)
def test_nodepool_taints_must_be_tolerated(toleration, placed):
    result = schedule([pod(tolerations=[toleration] if toleration else [])], pools=[TAINTED])
    assert scheduled(result) == placed
    if not placed:
        [failure] = result.failures.values()
        assert failure.reasons[0].kind == reasons.TAINTS
        assert (
            failure.message
            == 'incompatible with nodepool "default", did not tolerate taint test-key=test-value:NoSchedule'
        )


def test_startup_taints_need_not_be_tolerated():
    pool = nodepool("default", startup_taints=[Taint("ignore-me", "NoSchedule", "nothing")])
    assert scheduled(schedule([pod()], pools=[pool])) == 1


# 5. Custom labels ----------------------------------------------------------------------------------------------

LABELLED = nodepool("default", labels={"test-key": "test-value"})


def test_nodepool_labels_land_on_the_nodeclaim():
    [plan] = schedule([pod()], pools=[LABELLED]).new_nodeclaims
    assert plan.labels["test-key"] == "test-value"


@pytest.mark.parametrize(
    ("constraint", "placed"),
    [
        ({"node_selector": {"test-key": "different-value"}}, 0),
        ({"node_selector": {"undefined-key": "value"}}, 0),
        ({"required": [[r("undefined-key", "NotIn", "value")]]}, 1),
        ({"required": [[r("undefined-key", "DoesNotExist")]]}, 1),
        ({"required": [[r("undefined-key", "Exists")]]}, 0),
        ({"node_selector": {"test-key": "test-value"}}, 1),
    ],
)
def test_custom_label_constraints(constraint, placed):
    assert scheduled(schedule([pod(**constraint)], pools=[LABELLED])) == placed


def test_undefined_custom_keys_are_explained():
    result = schedule([pod(node_selector={"undefined-key": "value"})], pools=[LABELLED])
    [failure] = result.failures.values()
    assert failure.reasons[0].kind == reasons.REQUIREMENTS
    assert 'label "undefined-key" does not have known values' in failure.message


# 6. and 7. Node affinity terms and preferences -----------------------------------------------------------------


def test_required_terms_are_ored_and_tried_in_order():
    terms = [
        [r(ZONE, "In", "invalid")],
        [r(ZONE, "In", "invalid")],
        [r(ZONE, "In", "test-zone-1")],
        [r(ZONE, "In", "test-zone-2")],
    ]
    result = schedule([pod(required=terms)])
    [plan] = result.new_nodeclaims
    assert plan.requirements[ZONE].values == frozenset({"test-zone-1"})


def test_a_single_unsatisfiable_required_term_is_not_relaxed():
    assert scheduled(schedule([pod(required=[[r(ZONE, "In", "invalid")]])])) == 0


def test_the_heaviest_satisfiable_preference_wins():
    pool = nodepool("default", req(ZONE, "In", "test-zone-1", "test-zone-2"))
    preferred = [
        (100, [r(ZONE, "In", "invalid")]),
        (50, [r(ZONE, "In", "test-zone-2")]),
        (1, [r(ZONE, "In", "test-zone-1")]),
    ]
    [plan] = schedule([pod(preferred=preferred)], pools=[pool]).new_nodeclaims
    assert plan.requirements[ZONE].values == frozenset({"test-zone-2"})


def test_a_preference_conflicting_with_a_requirement_is_dropped():
    result = schedule(
        [pod(required=[[r(ZONE, "In", "test-zone-3")]], preferred=[(1, [r(ZONE, "NotIn", "test-zone-3")])])]
    )
    [plan] = result.new_nodeclaims
    assert plan.requirements[ZONE].values == frozenset({"test-zone-3"})


# 8. and 9. Instance choice ------------------------------------------------------------------------------------


def test_a_pod_lands_on_the_globally_cheapest_compatible_offering():
    [plan] = schedule([pod(cpu="100m")]).new_nodeclaims
    cheapest = min(o.price for it in fake_catalog() if it.labels[ARCH] == "amd64" for o in it.offerings)
    assert plan.cheapest.price == cheapest
    assert plan.cheapest.instance_type.name == "small-instance-type"


def test_on_demand_only_prefers_the_cheaper_on_demand_price():
    types = [
        instance_type("type1", "4", "4Gi", prices={"on-demand": 1.0, "spot": 0.2}),
        instance_type("type2", "4", "4Gi", prices={"on-demand": 1.3, "spot": 0.1}),
    ]
    pool = nodepool("default", req(CAPACITY_TYPE, "In", "on-demand"))
    [plan] = schedule([pod()], pools=[pool], types=types).new_nodeclaims
    assert (plan.cheapest.instance_type.name, plan.cheapest.price) == ("type1", 1.0)
    assert plan.capacity_types == frozenset({"on-demand"})


def test_a_small_pod_gets_the_smallest_type():
    assert placed_types(schedule([pod(memory="100M")])) == ["small-instance-type"]


def test_five_small_pods_share_one_small_node():
    result = schedule([pod(memory="10M") for _ in range(5)])
    assert placed_types(result) == ["small-instance-type"]
    assert len(result.new_nodeclaims[0].pods) == 5


def test_pod_overhead_counts_toward_the_node_size():
    requests = effective_requests([parse_resources({"cpu": "1"})], overhead=parse_resources({"cpu": "2"}))
    overhead_pod = replace(pod(), requests=requests)
    assert placed_types(schedule([overhead_pod])) == ["default-instance-type"]


# 10. Capacity packing -----------------------------------------------------------------------------------------


def test_forty_large_pods_pack_two_per_default_node():
    pool = nodepool("default", req(ARCH, "In", "amd64"))
    result = schedule([pod(memory="1.8G") for _ in range(40)], pools=[pool])
    assert placed_types(result) == ["default-instance-type"] * 20
    assert {len(nc.pods) for nc in result.new_nodeclaims} == {2}


def test_small_pods_fill_the_gaps_beside_large_ones():
    pool = nodepool("default", req(ARCH, "In", "amd64"))
    pods = [pod(memory="1.8G") for _ in range(40)] + [pod(memory="400M") for _ in range(20)]
    result = schedule(pods, pools=[pool])
    assert len(result.new_nodeclaims) == 20
    assert sorted(len(nc.pods) for nc in result.new_nodeclaims) == [3] * 20


# 11. Impossible pods ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("requests", [{"memory": "2Ti"}, {"cpu": "512"}])
def test_impossible_requests_are_explained_not_raised(requests):
    result = schedule([pod(requests=requests)])
    [failure] = result.failures.values()
    assert scheduled(result) == 0
    assert failure.reasons[0].kind == reasons.RESOURCES
    assert "no instance type has enough resources" in failure.message


def test_a_zero_request_of_an_unknown_resource_schedules():
    assert scheduled(schedule([pod(requests={"example.com/unknown": "0"})])) == 1


def test_a_positive_request_of_an_unknown_resource_does_not():
    result = schedule([pod(requests={"example.com/unknown": "1"})])
    assert scheduled(result) == 0
    assert list(result.failures.values())[0].reasons[0].details["exceeds"] == ["example.com/unknown"]


def test_gpu_requests_pick_the_gpu_type():
    assert placed_types(schedule([pod(requests={"fake.com/vendor-a": "1"})])) == ["gpu-vendor-instance-type"]


def test_an_empty_catalog_gives_a_reason_per_nodepool():
    result = schedule([pod()], types=[])
    [failure] = result.failures.values()
    assert (
        failure.message == 'incompatible with nodepool "default", the NodePool\'s node class offers no instance types'
    )


def test_no_nodepool_at_all_is_a_reason():
    result = schedule([pod()], pools=[])
    assert list(result.failures.values())[0].reasons[0].kind == reasons.NO_NODEPOOL


def test_conflicting_requirements_are_a_reason():
    result = schedule([pod(node_selector={ZONE: "test-zone-1"}, required=[[r(ZONE, "In", "test-zone-2")]])])
    assert scheduled(result) == 0


# 12. In-flight NodeClaims ---------------------------------------------------------------------------------------


def test_a_pod_that_fits_an_in_flight_node_goes_there():
    inflight = node(
        "inflight-1",
        cpu="3900m",
        memory="4086Mi",
        pods=5,
        initialized=False,
        managed=True,
        nodepool_name="default",
        scheduled=[pod(cpu="1", node_name="inflight-1")],
    )
    result = schedule([pod(cpu="1")], nodes=[inflight])
    assert result.new_nodeclaims == []
    assert list(result.placements) == ["inflight-1"]


def quarter_node(name, pods):
    """An in-flight node of the 4.25-CPU, 4-pod type holding `pods`."""
    return node(
        name,
        cpu="4250m",
        memory="8Gi",
        pods=4,
        initialized=False,
        managed=True,
        nodepool_name="default",
        scheduled=pods,
    )


def test_repeated_batches_leave_at_most_one_node_with_a_free_cpu():
    import random

    rng = random.Random(11)
    types = [instance_type("quarter", "4250m", "8Gi", pods=4, overhead=False)]
    nodes = []
    for round_number in range(15):
        pods = [pod(cpu="1") for _ in range(rng.randint(1, 5))]
        result = schedule(pods, types=types, nodes=nodes)
        assert scheduled(result) == len(pods)
        nodes = [quarter_node(n.name, [*n.pods, *result.placements.get(n.name, [])]) for n in nodes]
        nodes += [quarter_node(f"n{round_number}-{i}", list(plan.pods)) for i, plan in enumerate(result.new_nodeclaims)]
    free = [n for n in nodes if 4250 - 1000 * len(n.pods) >= 1000]
    assert len(free) <= 1


# 13. and 14. DaemonSets ----------------------------------------------------------------------------------------


def test_daemonset_overhead_makes_room_on_the_chosen_type():
    assert placed_types(schedule([pod(cpu="1", memory="1Gi")], daemonsets=[daemonset("1", "1Gi")])) == [
        "default-instance-type"
    ]


def test_daemonset_overhead_applies_with_startup_taints_too():
    pool = nodepool("default", startup_taints=[Taint("startup", "NoSchedule")])
    assert placed_types(schedule([pod(cpu="1", memory="1Gi")], pools=[pool], daemonsets=[daemonset("1", "1Gi")])) == [
        "default-instance-type"
    ]


def test_a_daemonset_that_does_not_tolerate_the_pool_adds_no_overhead():
    pool = nodepool("default", taints=[Taint("dedicated", "NoSchedule")])
    tolerant = pod(cpu="1", memory="1Gi", tolerations=[Toleration(key="dedicated", operator="Exists")])
    assert placed_types(schedule([tolerant], pools=[pool], daemonsets=[daemonset("1", "1Gi")])) == [
        "small-instance-type"
    ]


def test_a_huge_daemonset_leaves_no_room():
    result = schedule([pod(cpu="1")], daemonsets=[daemonset("10000", "1Gi")])
    assert scheduled(result) == 0
    assert 'daemonset overhead {"cpu":"10000"' in list(result.failures.values())[0].message


def test_a_host_port_held_by_a_daemonset_blocks_the_pod():
    result = schedule([pod(host_ports=[8080])], daemonsets=[daemonset("100m", "10Mi", host_ports=[8080])])
    assert (scheduled(result), len(result.new_nodeclaims)) == (0, 0)
    assert list(result.failures.values())[0].reasons[0].kind == reasons.HOST_PORTS


def test_two_pods_with_the_same_host_port_need_two_nodes():
    result = schedule([pod(host_ports=[80]), pod(host_ports=[80])])
    assert len(result.new_nodeclaims) == 2


def test_nodeclaim_requests_include_daemon_overhead():
    ds = [daemonset("1", "1Mi")]
    [one] = schedule([pod(cpu="1", memory="1Mi")], daemonsets=ds).new_nodeclaims
    assert one.requests_text() == {"cpu": "2", "memory": "2Mi", "pods": "2"}
    [two] = schedule([pod(cpu="1", memory="1Mi"), pod(cpu="1", memory="1Mi")], daemonsets=ds).new_nodeclaims
    assert two.requests_text() == {"cpu": "3", "memory": "3Mi", "pods": "3"}


# 15. Limits -----------------------------------------------------------------------------------------------------


def test_a_pod_within_the_cpu_limit_schedules_on_a_type_within_it():
    result = schedule([pod(cpu="1.75")], pools=[nodepool("default", limits={"cpu": "2"})])
    assert placed_types(result) == ["small-instance-type"]


def test_a_pod_needing_a_type_beyond_the_limit_does_not_schedule():
    result = schedule([pod(cpu="2.1")], pools=[nodepool("default", limits={"cpu": "2"})])
    [failure] = result.failures.values()
    assert failure.reasons[0].kind == reasons.LIMITS
    assert failure.message == (
        'incompatible with nodepool "default", all instance types that fit exceed the NodePool\'s remaining limits (cpu=2)'
    )


def test_a_second_round_beyond_the_limit_does_not_schedule():
    pool = nodepool("default", limits={"cpu": "2"})
    first = schedule([pod(cpu="1.75")], pools=[pool])
    existing = node(
        "n1",
        cpu="1900m",
        memory="2038Mi",
        pods=5,
        managed=True,
        nodepool_name="default",
        scheduled=list(first.new_nodeclaims[0].pods),
    )
    existing = type(existing)(
        **{**existing.__dict__, "capacity": {"cpu": 2000, "memory": 2 * 2**30 * 1000, "pods": 5000}}
    )
    result = schedule([pod(cpu="1.75")], pools=[pool], nodes=[existing])
    assert scheduled(result) == 0
    assert list(result.failures.values())[0].reasons[0].kind == reasons.LIMITS


def test_limits_subtract_the_largest_option_of_each_new_nodeclaim():
    pool = nodepool("default", limits={"cpu": "3"})
    pods = [pod(cpu="1.5", labels={"app": "x"}, anti_affinity=[term(HOSTNAME, app="x")]) for _ in range(2)]
    result = schedule(pods, pools=[pool])
    assert scheduled(result) == 1


def test_existing_usage_over_the_limit_blocks_the_pool():
    big = node(
        "big", cpu="100", memory="100Gi", managed=True, nodepool_name="default", taints=[Taint("full", "NoSchedule")]
    )
    result = schedule([pod(cpu="1")], pools=[nodepool("default", limits={"cpu": "20"})], nodes=[big])
    assert scheduled(result) == 0


def test_the_nodes_limit_is_enforced_across_rounds():
    pool = nodepool("default", limits={"nodes": "2"})
    nodes = []
    outcomes = []
    for round_number in range(3):
        result = schedule([pod(cpu="3")], pools=[pool], nodes=nodes)
        outcomes.append(scheduled(result))
        for plan in result.new_nodeclaims:
            nodes.append(
                node(
                    f"n{round_number}",
                    cpu="3900m",
                    memory="4086Mi",
                    managed=True,
                    nodepool_name="default",
                    scheduled=list(plan.pods),
                )
            )
    assert outcomes == [1, 1, 0]


# 16.-18. Topology spread -------------------------------------------------------------------------------------------

ANY_CAPACITY = nodepool("default", req(CAPACITY_TYPE, "Exists"))


def spread_pods(count, key=ZONE, max_skew=1, when="DoNotSchedule", **extra):
    return [
        pod(labels={"app": "spread"}, spread=[spread(key, max_skew, when, app="spread")], **extra) for _ in range(count)
    ]


def test_four_pods_spread_over_three_zones():
    assert zone_counts(schedule(spread_pods(4), pools=[ANY_CAPACITY])) == [1, 1, 2]


def test_four_pods_spread_over_the_four_kwok_zones():
    assert zone_counts(schedule(spread_pods(4), types=KWOK)) == [1, 1, 1, 1]


def test_a_zone_the_nodepool_names_and_no_type_offers_is_a_domain_at_zero_pods():
    # topology.go buildDomainGroups adds a NodePool's In values whatever its types offer: test-zone-4, named by the
    # pool and offered by no fake type, holds the spread at one pod in test-zone-1.
    pool = nodepool("default", req(ZONE, "In", "test-zone-1", "test-zone-4"))
    result = schedule(spread_pods(3), pools=[pool])
    assert (zone_counts(result), len(result.failures)) == ([1], 2)


def full_node(name, labels):
    """A node whose single pod slot is taken by a pod the spread selector matches."""
    return node(name, pods=1, labels=labels, scheduled=[pod(labels={"app": "spread"}, node_name=name)])


def test_spread_counts_existing_pods_and_leaves_the_rest_pending():
    existing = full_node("z1", {ZONE: "test-zone-1"})
    pool = nodepool("default", req(ZONE, "In", "test-zone-2", "test-zone-3"))
    result = schedule(spread_pods(10), pools=[pool], nodes=[existing])
    assert zone_counts(result) == [2, 2]
    assert len(result.failures) == 6
    assert list(result.failures.values())[0].reasons[0].kind == reasons.TOPOLOGY


def test_a_node_the_pods_node_selector_excludes_is_no_domain_of_their_spread():
    # NodeAffinityPolicy=Honor is the default: a zone-1 node the pods could never use does not hold zone-1 at zero
    # pods and cap zone-2 at one (Karpenter's countDomains skips nodes failing the group's node filter).
    elsewhere = node("db-1", pods=0, labels={ZONE: "test-zone-1", "team": "db"})
    pool = nodepool("default", req(ZONE, "In", "test-zone-2"), labels={"team": "web"})
    result = schedule(spread_pods(4, node_selector={"team": "web"}), pools=[pool], nodes=[elsewhere])
    assert zone_counts(result) == [4]


def test_a_node_the_pods_node_selector_excludes_still_counts_for_another_pods_affinity():
    # Only spread groups filter nodes: (anti-)affinity terms see every node's domain.
    guard = pod(labels={"app": "db"}, node_name="db-1")
    elsewhere = node("db-1", labels={ZONE: "test-zone-1", "team": "db"}, scheduled=[guard])
    web = pod(node_selector={"team": "web"}, anti_affinity=[term(ZONE, app="db")])
    pool = nodepool("default", req(ZONE, "In", "test-zone-1", "test-zone-2"), labels={"team": "web"})
    result = schedule([web], pools=[pool], nodes=[elsewhere])
    assert [nc.requirements.get(ZONE).values for nc in result.new_nodeclaims] == [frozenset({"test-zone-2"})]


def test_max_skew_five_allows_six_in_the_third_zone():
    existing = [full_node(f"z{i}", {ZONE: f"test-zone-{i}"}) for i in (1, 2)]
    pool = nodepool("default", req(ZONE, "In", "test-zone-3"))
    result = schedule(spread_pods(10, max_skew=5), pools=[pool], nodes=existing)
    assert zone_counts(result) == [6]
    assert len(result.failures) == 4


def test_hostname_spread_with_max_skew_one_gives_a_node_per_pod():
    assert len(schedule(spread_pods(4, key=HOSTNAME)).new_nodeclaims) == 4


def test_hostname_spread_with_max_skew_four_shares_one_node():
    result = schedule(spread_pods(4, key=HOSTNAME, max_skew=4))
    assert [len(nc.pods) for nc in result.new_nodeclaims] == [4]


def test_capacity_type_spread_splits_evenly():
    assert zone_counts(schedule(spread_pods(4, key=CAPACITY_TYPE), pools=[ANY_CAPACITY]), key=CAPACITY_TYPE) == [2, 2]


def spot_node():
    return full_node("spot-1", {CAPACITY_TYPE: "spot"})


def test_capacity_type_spread_do_not_schedule_stops_at_the_skew():
    on_demand = nodepool("default", req(CAPACITY_TYPE, "In", "on-demand"))
    result = schedule(spread_pods(5, key=CAPACITY_TYPE), pools=[on_demand], nodes=[spot_node()])
    assert (scheduled(result), len(result.failures)) == (2, 3)


def test_capacity_type_spread_schedule_anyway_is_relaxed():
    on_demand = nodepool("default", req(CAPACITY_TYPE, "In", "on-demand"))
    result = schedule(spread_pods(5, key=CAPACITY_TYPE, when=SCHEDULE_ANYWAY), pools=[on_demand], nodes=[spot_node()])
    assert (scheduled(result), len(result.failures)) == (5, 0)


def test_min_domains_keeps_the_global_minimum_at_zero():
    pool = nodepool("default", req(ZONE, "In", "test-zone-1"))
    pods = [pod(labels={"app": "s"}, spread=[spread(ZONE, 1, min_domains=3, app="s")]) for _ in range(3)]
    result = schedule(pods, pools=[pool])
    assert scheduled(result) == 1


# 19.-21. Pod affinity and anti-affinity ----------------------------------------------------------------------------


def test_self_affinity_on_hostname_puts_pods_together():
    pods = [pod(labels={"app": "web"}, affinity=[term(HOSTNAME, app="web")]) for _ in range(3)]
    assert [len(nc.pods) for nc in schedule(pods).new_nodeclaims] == [3]


def test_self_affinity_on_zone_uses_one_zone():
    pods = [pod(labels={"app": "web"}, affinity=[term(ZONE, app="web")]) for _ in range(3)]
    result = schedule(pods)
    assert zone_counts(result) == [3]


def test_affinity_to_a_later_pod_succeeds_on_a_later_pass():
    follower = pod(cpu="2", labels={"app": "follower"}, affinity=[term(HOSTNAME, app="leader")])
    leader = pod(cpu="100m", labels={"app": "leader"})
    result = schedule([follower, leader])
    assert [sorted(p.name for p in nc.pods) for nc in result.new_nodeclaims] == [sorted([follower.name, leader.name])]


@pytest.mark.parametrize("a_first", [True, False])
def test_anti_affinity_separates_pods_whatever_their_order(a_first):
    a = pod(labels={"app": "a"}, created=1 if a_first else 2)
    b = pod(labels={"app": "b"}, anti_affinity=[term(HOSTNAME, app="a")], created=2 if a_first else 1)
    result = schedule([a, b])
    assert len(result.new_nodeclaims) == 2


def test_zone_anti_affinity_with_every_zone_taken_leaves_the_pod_pending():
    pinned = [pod(cpu="2", labels={"security": "s2"}, node_selector={ZONE: f"test-zone-{i}"}) for i in (1, 2, 3)]
    loner = pod(cpu="1", anti_affinity=[term(ZONE, security="s2")])
    result = schedule([*pinned, loner])
    assert scheduled(result) == 3
    assert list(result.failures) == [loner.id]
    assert result.failures[loner.id].reasons[0].kind == reasons.TOPOLOGY


def test_existing_pods_anti_affinity_keeps_matching_pods_away():
    guard = pod(labels={"app": "guard"}, anti_affinity=[term(HOSTNAME, app="web")], node_name="n1")
    existing = node("n1", cpu="4", memory="4Gi", scheduled=[guard])
    result = schedule([pod(labels={"app": "web"})], nodes=[existing])
    assert list(result.placements) == [] and len(result.new_nodeclaims) == 1


def test_unsatisfiable_preferred_affinity_and_anti_affinity_are_relaxed():
    relaxed = pod(
        labels={"app": "x"},
        preferred_affinity=[term(HOSTNAME, weight=50, app="nobody")],
        preferred_anti_affinity=[term(HOSTNAME, weight=10, app="x")],
    )
    other = pod(labels={"app": "x"})
    result = schedule([relaxed, other], nodes=[])
    assert scheduled(result) == 2
    assert result.relaxations[relaxed.id][0] == "removing heaviest preferred pod affinity term"


# 22. minValues ----------------------------------------------------------------------------------------------------

MIN_TYPES = [instance_type("it-1", "1", "1Gi", price=0.52, overhead=True), instance_type("it-4", "4", "4Gi", price=1.0)]


def test_min_values_splits_pods_so_each_nodeclaim_keeps_two_types():
    pool = nodepool("default", req("node.kubernetes.io/instance-type", "In", "it-1", "it-4", min_values=2))
    pods = [pod(cpu="0.9", memory="0.9Gi"), pod(cpu="0.9", memory="0.9Gi")]
    result = schedule(
        pods, pools=[pool], types=[instance_type("it-1", "1", "1Gi", price=0.52, overhead=False), MIN_TYPES[1]]
    )
    assert len(result.new_nodeclaims) == 2
    assert [nc.instance_type_names for nc in result.new_nodeclaims] == [["it-1", "it-4"], ["it-1", "it-4"]]
    assert result.new_nodeclaims[0].requirements["node.kubernetes.io/instance-type"].min_values == 2


def test_min_values_larger_than_the_catalog_blocks_the_pool():
    types = [instance_type(f"t{i}", "4", "4Gi") for i in range(10)]
    pool = nodepool("default", req("node.kubernetes.io/instance-type", "Exists", min_values=11))
    result = schedule([pod()], pools=[pool], types=types)
    assert scheduled(result) == 0
    assert result.skipped_nodepools == {
        "default": "the instance types that meet the NodePool's requirements cannot meet its minValues: "
        "node.kubernetes.io/instance-type has 10 distinct values, minValues 11"
    }


def test_truncation_below_min_values_fails_every_pod_of_the_nodeclaim():
    pool = nodepool("default", req("node.kubernetes.io/instance-type", "In", "it-1", "it-4", min_values=2))
    types = [instance_type("it-1", "1", "1Gi", price=0.52, overhead=False), MIN_TYPES[1]]
    result = schedule([pod(cpu="0.5"), pod(cpu="0.5")], pools=[pool], types=types, max_instance_types=1)
    assert scheduled(result) == 0
    assert {f.message for f in result.failures.values()} == {
        "pod didn’t schedule because NodePool couldn’t meet minValues requirements, validating minValues, "
        "minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type]) (NodePool=default)"
    }


def test_best_effort_min_values_relaxes_and_says_so():
    pool = nodepool("default", req("node.kubernetes.io/instance-type", "In", "it-1", "it-4", min_values=2))
    types = [instance_type("it-1", "1", "1Gi", price=0.52, overhead=False), MIN_TYPES[1]]
    result = schedule([pod(cpu="0.9"), pod(cpu="0.9")], pools=[pool], types=types, min_values_policy="BestEffort")
    assert len(result.new_nodeclaims) == 1
    assert result.new_nodeclaims[0].min_values_relaxed is True


# 23. Existing nodes ------------------------------------------------------------------------------------------------


def test_initialized_nodes_are_filled_before_uninitialized_ones():
    nodes = [node("a-uninitialized", initialized=False, managed=True), node("b-initialized")]
    result = schedule([pod(cpu="1")], nodes=nodes)
    assert list(result.placements) == ["b-initialized"]


def test_pods_go_to_nodes_karpenter_does_not_own():
    result = schedule([pod(cpu="1")], nodes=[node("static-worker")])
    assert list(result.placements) == ["static-worker"] and result.new_nodeclaims == []


def test_existing_nodes_need_custom_labels_to_be_defined():
    result = schedule([pod(node_selector={ZONE: "test-zone-1"})], nodes=[node("no-zone-label")])
    assert list(result.placements) == [] and len(result.new_nodeclaims) == 1


def test_uninitialized_karpenter_nodes_ignore_their_startup_taints():
    startup = Taint("startup", "NoSchedule")
    inflight = node("inflight", initialized=False, managed=True, taints=[startup])
    inflight = replace(inflight, startup_taints=(startup,))
    result = schedule([pod()], nodes=[inflight])
    assert list(result.placements) == ["inflight"]


# Validation ---------------------------------------------------------------------------------------------------------


def test_pods_selecting_restricted_labels_are_refused_with_a_reason():
    result = schedule([pod(node_selector={"karpenter.sh/custom": "x"}), pod(node_selector={HOSTNAME: "n1"})])
    assert scheduled(result) == 0
    kinds = {f.reasons[0].kind for f in result.failures.values()}
    assert kinds == {reasons.VALIDATION}


def test_an_existing_pods_zonal_anti_affinity_blocks_only_its_own_zone():
    """The topology's domains for a key came only from pending pods' constraints, so a running pod's anti-affinity
    on zones (no pending pod mentions zones) knew just its own zone and blocked matching pods everywhere."""
    from provisioner.catalog.kwok import kwok_catalog

    types = list(kwok_catalog().instance_types)
    guard = pod("1", name="guard", anti_affinity=[term(ZONE, app="pinned")], node_name="nd")
    running = node("nd", "8", "16Gi", labels={ZONE: "test-zone-d"}, scheduled=[guard], managed=True)
    pinned = pod("1", name="z-a", labels={"app": "pinned"}, node_selector={ZONE: "test-zone-a"})
    blocked = pod("1", name="z-d", labels={"app": "pinned"}, node_selector={ZONE: "test-zone-d"})
    result = schedule([pinned, blocked], types=types, nodes=[running])
    assert [sorted(nc.requirements.get(ZONE).values) for nc in result.new_nodeclaims] == [["test-zone-a"]]
    assert [f.pod.name for f in result.failures.values()] == ["z-d"]


def test_an_existing_nodes_used_capacity_is_its_running_pods_requests_as_the_scheduler_counts_them():
    from provisioner.quantity import add
    from provisioner.scheduling.existing import _requested
    from provisioner.scheduling.poddata import PodState

    pods = [
        pod(cpu="700m", memory="1Gi"),
        replace(pod(requests={"pods": "2", "cpu": "1"}), node_name="n"),  # asks for pods itself
        pod(requests={"nvidia.com/gpu": "1"}),
    ]
    expected = add(*(PodState.of(p).data().requests for p in pods))
    assert _requested(pods) == expected
    assert list(_requested(pods)) == list(expected)  # the same keys in the same order
    assert _requested([]) == {}


def test_a_port_clash_on_an_existing_node_does_not_turn_away_an_equal_pod_without_the_port():
    holder = node("busy", scheduled=[pod(cpu="100m", host_ports=[8080])])
    clashing, portless = pod(cpu="1", host_ports=[8080]), pod(cpu="1")
    result = schedule([clashing, portless], nodes=[holder])
    placed = [[p.name for p in nc.pods] for nc in result.new_nodeclaims]
    assert ([p.name for p in result.placements["busy"]], placed) == ([portless.name], [[clashing.name]])


def test_a_port_clash_with_a_daemonset_does_not_turn_away_an_equal_pod_without_the_port():
    clashing, portless = pod(cpu="1", host_ports=[8080]), pod(cpu="1")
    result = schedule([clashing, portless], daemonsets=[daemonset("100m", "10Mi", host_ports=[8080])])
    placed = [[p.name for p in nc.pods] for nc in result.new_nodeclaims]
    assert (placed, list(result.failures)) == ([[portless.name]], [clashing.uid])
    assert result.failures[clashing.uid].reasons[0].kind == reasons.HOST_PORTS
