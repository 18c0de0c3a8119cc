"""Provisioning over the kwok catalog: the issue's and Karpenter README's worked examples."""

import random

from provisioner.pods import Pod
from provisioner.scheduling.launch import cheapest_launch
from provisioner.taints import Taint, Toleration
from tests.builders import CAPACITY_TYPE, KWOK, nodepool, pod, req, schedule

AMD64_ON_DEMAND = nodepool("default", req("kubernetes.io/arch", "In", "amd64"), req(CAPACITY_TYPE, "In", "on-demand"))


def test_five_one_cpu_pods_share_one_nodeclaim_with_54_candidates_launched_as_c_8x():
    result = schedule([pod(cpu="1") for _ in range(5)], pools=[AMD64_ON_DEMAND], types=KWOK)
    assert len(result.new_nodeclaims) == 1
    plan = result.new_nodeclaims[0]
    assert len(plan.options) == 54
    assert plan.requests_text() == {"cpu": "5", "pods": "5"}
    launch = cheapest_launch(plan, random.Random(0))
    assert (launch.instance_type.name, launch.offering.capacity_type, f"{launch.price:.6f}") == (
        "c-8x-amd64-linux",
        "on-demand",
        "0.217180",
    )
    assert plan.instance_type_names[:5] == [
        "c-128x-amd64-linux",
        "c-128x-amd64-windows",
        "c-16x-amd64-linux",
        "c-16x-amd64-windows",
        "c-192x-amd64-linux",
    ]


def test_the_kwok_readme_example_ten_pods_on_spot_launch_c_16x():
    pool = nodepool(
        "default",
        req("kubernetes.io/arch", "In", "amd64"),
        req("kubernetes.io/os", "In", "linux"),
        req(CAPACITY_TYPE, "In", "spot"),
    )
    result = schedule([pod(cpu="1") for _ in range(10)], pools=[pool], types=KWOK)
    [plan] = result.new_nodeclaims
    assert plan.requests_text() == {"cpu": "10", "pods": "10"}
    assert len(plan.options) == 24
    assert plan.instance_type_names[:5] == [
        "c-128x-amd64-linux",
        "c-16x-amd64-linux",
        "c-192x-amd64-linux",
        "c-256x-amd64-linux",
        "c-32x-amd64-linux",
    ]
    launch = cheapest_launch(plan, random.Random(7))
    assert (launch.instance_type.name, launch.offering.capacity_type, f"{launch.price:.6f}") == (
        "c-16x-amd64-linux",
        "spot",
        "0.304052",
    )
    assert plan.labels["karpenter.sh/nodepool"] == "default"
    assert plan.labels["karpenter.kwok.sh/kwoknodeclass"] == "default"


def test_launch_zone_is_drawn_from_the_seeded_rng_among_equal_prices():
    pool = nodepool("default", req("kubernetes.io/arch", "In", "amd64"), req(CAPACITY_TYPE, "In", "spot"))
    [plan] = schedule([pod(cpu="1")], pools=[pool], types=KWOK).new_nodeclaims
    zones = {cheapest_launch(plan, random.Random(seed)).offering.zone for seed in range(40)}
    assert zones == {"test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"}
    assert cheapest_launch(plan, random.Random(3)) == cheapest_launch(plan, random.Random(3))


# corpus/008-taints: a tainted NodePool of weight 50 beside a plain one, 2 tolerating and 6 plain pods of 1 CPU /
# 128Mi created in the same second. Karpenter's queue orders equal pods by creation second, then by UID
# (scheduling/queue.go:72-107), NodePools by weight (provisioner.go:299), and an in-flight NodeClaim takes any later
# pod that fits (scheduler.go:626-636). So the whole decision follows the pod with the lowest UID, which is random
# on a cluster: Karpenter v1.15 itself made both decisions below on the kwok cluster (bench/README.md, "The
# differences, and why"). Upstream: "Weighted NodePools / should schedule to the nodepool with the highest priority
# always" and "Taints / should schedule pods that tolerate taints" (provisioning/suite_test.go).
TAINT = Taint("dedicated", "NoSchedule", "gpu")
ON_DEMAND_LINUX = (
    req("kubernetes.io/arch", "In", "amd64"),
    req("kubernetes.io/os", "In", "linux"),
    req(CAPACITY_TYPE, "In", "on-demand"),
)
TAINTED = nodepool("tainted", *ON_DEMAND_LINUX, weight=50, taints=[TAINT])
PLAIN = nodepool("plain", *ON_DEMAND_LINUX)


def taint_workload(first: str) -> list[tuple[str, str, int]]:
    def tolerating() -> list[Pod]:
        toleration = Toleration("dedicated", "Equal", "gpu", "NoSchedule")
        return [pod(cpu="1", memory="128Mi", created=0.0, tolerations=[toleration]) for _ in range(2)]

    def plain() -> list[Pod]:
        return [pod(cpu="1", memory="128Mi", created=0.0) for _ in range(6)]

    # The builder hands out UIDs in call order: the pods built first have the lowest UIDs.
    pods = [*tolerating(), *plain()] if first == "tolerating" else [*plain(), *tolerating()]
    result = schedule(pods, pools=[PLAIN, TAINTED], types=KWOK)
    return [
        (nc.nodepool, cheapest_launch(nc, random.Random(0)).instance_type.name, len(nc.pods))
        for nc in result.new_nodeclaims
    ]


def test_a_plain_pod_first_in_the_queue_takes_every_pod_to_one_plain_nodeclaim():
    # The tolerating pods fit the in-flight plain NodeClaim, which is tried before a new one on the tainted pool.
    assert taint_workload(first="plain") == [("plain", "c-16x-amd64-linux", 8)]


def test_a_tolerating_pod_first_in_the_queue_opens_the_heavier_tainted_pool_too():
    # The tainted pool (weight 50) comes first for a pod that tolerates it; plain pods cannot join that NodeClaim,
    # and the second tolerating pod joins the emptier in-flight NodeClaim, the tainted one.
    assert taint_workload(first="tolerating") == [("tainted", "c-4x-amd64-linux", 2), ("plain", "c-8x-amd64-linux", 6)]
