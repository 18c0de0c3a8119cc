"""Provisioning over the kwok catalog: the issue's and Karpenter README's worked examples."""

import random

from provisioner.scheduling.launch import cheapest_launch
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
