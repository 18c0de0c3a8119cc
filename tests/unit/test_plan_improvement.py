"""Plan improvement (karpui.dev/plan-improvement): cheaper NodeClaims for the same pods, every constraint kept."""

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner import labels as wk
from provisioner.catalog.kwok import kwok_catalog
from provisioner.lab import Lab, LabConfig
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass
from provisioner.quantity import add, fits
from provisioner.requirements import Requirements
from provisioner.scheduling.improve import Packer, Shape
from provisioner.taints import Taint, Toleration, tolerates_all
from tests.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    KWOK,
    ZONE,
    daemonset,
    nodepool,
    pod,
    req,
    schedule,
    spread,
    term,
)

AMD64_ON_DEMAND = (req(ARCH, "In", "amd64"), req(CAPACITY_TYPE, "In", "on-demand"))
KARPENTER = nodepool("default", *AMD64_ON_DEMAND)


def improving(pool=KARPENTER):
    return replace(pool, annotations={wk.PLAN_IMPROVEMENT: wk.PLAN_IMPROVEMENT_ENABLED})


def launched(result) -> list[tuple[str, str, int]]:
    """Each new NodeClaim as (the type it launches as, its price, how many pods it holds)."""
    return [(nc.cheapest.instance_type.name, f"{nc.cheapest.price:.6f}", len(nc.pods)) for nc in result.new_nodeclaims]


def total(result) -> str:
    return f"{sum(nc.cheapest.price for nc in result.new_nodeclaims):.6f}"


def half_cpu_pods(count, **overrides):
    return [pod(cpu="500m", **overrides) for _ in range(count)]


# The flag ---------------------------------------------------------------------------------------------------------


def test_ten_half_cpu_pods_launch_a_c_4x_and_a_c_2x_for_three_quarters_of_karpenters_price():
    result = schedule(half_cpu_pods(10), pools=[improving()], types=KWOK)
    assert launched(result) == [("c-4x-amd64-linux", "0.108590", 7), ("c-2x-amd64-linux", "0.054295", 3)]
    assert total(result) == "0.162885"
    assert [nc.requests_text() for nc in result.new_nodeclaims] == [
        {"cpu": "3500m", "pods": "7"},
        {"cpu": "1500m", "pods": "3"},
    ]
    assert not result.failures


def test_without_the_annotation_the_same_pods_get_karpenters_single_c_8x():
    for pool in (KARPENTER, replace(KARPENTER, annotations={wk.PLAN_IMPROVEMENT: wk.PLAN_IMPROVEMENT_DISABLED})):
        result = schedule(half_cpu_pods(10), pools=[pool], types=KWOK)
        assert launched(result) == [("c-8x-amd64-linux", "0.217180", 10)]
        assert len(result.new_nodeclaims[0].options) == 54


def test_five_one_cpu_pods_keep_one_c_8x_because_the_cheapest_split_costs_the_same_with_more_nodes():
    # c-4x + c-2x + c-2x also costs $0.217180; at an equal price fewer nodes win.
    result = schedule([pod(cpu="1") for _ in range(5)], pools=[improving()], types=KWOK)
    assert launched(result) == [("c-8x-amd64-linux", "0.217180", 5)]


def test_two_half_full_c_1x_would_be_one_c_2x_at_the_same_price():
    c1, c2 = Shape(0, (900, 1000 * 16), 0.027147), Shape(1, (1900, 1000 * 32), 0.054294)
    packer = Packer([(400, 1000)], [c1, c2])
    assert [(b.shape, b.content) for b in packer.pack([4])] == [(c2, (4,))]


def test_the_same_pods_always_get_the_same_plan():
    pods = [*half_cpu_pods(10), *[pod(cpu="2", memory="3Gi") for _ in range(3)], pod(cpu="250m", memory="6Gi")]
    plans = [schedule(pods, pools=[improving()], types=KWOK).new_nodeclaims for _ in range(3)]
    shown = [[(nc.cheapest.instance_type.name, [p.name for p in nc.pods], nc.hostname) for nc in p] for p in plans]
    assert shown[0] == shown[1] == shown[2]


# Constraints the re-pack keeps ------------------------------------------------------------------------------------


def test_zonal_spread_pods_keep_their_four_nodeclaims_one_per_zone():
    pods = half_cpu_pods(8, labels={"app": "web"}, spread=[spread(ZONE, app="web")])
    result = schedule(pods, pools=[improving()], types=KWOK)
    assert launched(result) == [("c-2x-amd64-linux", "0.054295", 2)] * 4
    zones = [next(iter(nc.requirements.get(ZONE).values)) for nc in result.new_nodeclaims]
    assert sorted(zones) == ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"]


def test_pods_another_pods_anti_affinity_selects_stay_where_karpenter_put_them():
    web = half_cpu_pods(10, labels={"app": "web"})
    loner = pod(cpu="500m", anti_affinity=[term(HOSTNAME, app="web")])
    result = schedule([*web, loner], pools=[improving()], types=KWOK)
    assert launched(result) == [("c-8x-amd64-linux", "0.217180", 10), ("c-1x-amd64-linux", "0.027147", 1)]
    assert loner not in result.new_nodeclaims[0].pods


def test_a_nodes_limit_of_one_keeps_the_single_c_8x():
    pool = nodepool("default", *AMD64_ON_DEMAND, limits={"nodes": "1"})
    result = schedule(half_cpu_pods(10), pools=[improving(pool)], types=KWOK)
    assert launched(result) == [("c-8x-amd64-linux", "0.217180", 10)]


def test_under_a_cpu_limit_each_new_nodeclaim_lists_only_types_no_larger_than_the_one_it_was_sized_for():
    # Karpenter counts a NodeClaim as its largest option: 4 + 2 vCPU stays within the limit of 8.
    pool = nodepool("default", *AMD64_ON_DEMAND, limits={"cpu": "8"})
    result = schedule(half_cpu_pods(10), pools=[improving(pool)], types=KWOK)
    assert launched(result) == [("c-4x-amd64-linux", "0.108590", 7), ("c-2x-amd64-linux", "0.054295", 3)]
    largest = [max(o.instance_type.capacity["cpu"] for o in nc.options) for nc in result.new_nodeclaims]
    assert largest == [4000, 2000]


def test_min_values_on_instance_size_keep_two_sizes_in_every_nodeclaim():
    sizes = req(wk.KWOK_INSTANCE_SIZE, "In", "1", "2", "8", min_values=2)
    result = schedule(half_cpu_pods(14), pools=[improving(nodepool("default", *AMD64_ON_DEMAND, sizes))], types=KWOK)
    assert launched(result) == [("c-2x-amd64-linux", "0.054295", 3)] * 4 + [("c-2x-amd64-linux", "0.054295", 2)]
    offered = [{o.instance_type.labels[wk.KWOK_INSTANCE_SIZE] for o in nc.options} for nc in result.new_nodeclaims]
    assert offered == [{"2", "8"}] * 5
    # Without minValues the one c-8x is both Karpenter's plan and the cheapest.
    unbounded = req(wk.KWOK_INSTANCE_SIZE, "In", "1", "2", "8")
    result = schedule(
        half_cpu_pods(14), pools=[improving(nodepool("default", *AMD64_ON_DEMAND, unbounded))], types=KWOK
    )
    assert launched(result) == [("c-8x-amd64-linux", "0.217180", 14)]


def test_daemonset_overhead_is_counted_on_every_new_nodeclaim():
    # With a 500m DaemonSet a c-4x has room for 6 such pods and a c-2x for 2.
    result = schedule(half_cpu_pods(8), pools=[improving()], types=KWOK, daemonsets=[daemonset("500m", "100Mi")])
    assert launched(result) == [("c-4x-amd64-linux", "0.108590", 6), ("c-2x-amd64-linux", "0.054295", 2)]
    assert [nc.requests_text() for nc in result.new_nodeclaims] == [
        {"cpu": "3500m", "memory": "100Mi", "pods": "7"},
        {"cpu": "1500m", "memory": "100Mi", "pods": "3"},
    ]
    karpenter = schedule(half_cpu_pods(8), pools=[KARPENTER], types=KWOK, daemonsets=[daemonset("500m", "100Mi")])
    assert launched(karpenter) == [("c-8x-amd64-linux", "0.217180", 8)]


def test_a_tainted_pool_gives_its_taint_to_every_new_nodeclaim():
    taint = Taint("dedicated", "NoSchedule", "batch")
    tolerating = [Toleration(key="dedicated", operator="Equal", value="batch", effect="NoSchedule")]
    pool = improving(nodepool("default", *AMD64_ON_DEMAND, taints=[taint]))
    result = schedule(half_cpu_pods(10, tolerations=tolerating), pools=[pool], types=KWOK)
    assert launched(result) == [("c-4x-amd64-linux", "0.108590", 7), ("c-2x-amd64-linux", "0.054295", 3)]
    assert [nc.taints for nc in result.new_nodeclaims] == [(taint,), (taint,)]


# Across NodePools (corpus/010) ------------------------------------------------------------------------------------

GPU_TAINT = Taint("dedicated", "NoSchedule", "gpu")
TOLERATES_GPU = [Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule")]
TAINTED = nodepool("tainted", *AMD64_ON_DEMAND, weight=50, taints=[GPU_TAINT])
PLAIN = nodepool("plain", *AMD64_ON_DEMAND)


def tolerating_first(plain_pods: int) -> list:
    """corpus/010's order: the tolerating pod first in the queue, then the plain ones, all 1 CPU / 256Mi."""
    first = pod(cpu="1", memory="256Mi", name="a-tolerating", tolerations=TOLERATES_GPU)
    return [first, *(pod(cpu="1", memory="256Mi", name=f"b-plain-{i}") for i in range(plain_pods))]


def by_pool(result) -> list[tuple[str, str, str, int]]:
    return [
        (nc.nodepool, *launched_one) for nc, launched_one in zip(result.new_nodeclaims, launched(result), strict=True)
    ]


def test_a_tolerating_pod_that_opened_the_tainted_pool_joins_the_plain_nodeclaim_when_that_is_cheaper():
    # Karpenter opens a c-2x on the tainted pool (weight 50) for the first pod, then a c-8x for the five plain ones
    # (they cannot join a tainted NodeClaim); the c-8x holds all six, as it would have had a plain pod come first.
    karpenter = schedule(tolerating_first(5), pools=[TAINTED, PLAIN], types=KWOK)
    assert by_pool(karpenter) == [
        ("tainted", "c-2x-amd64-linux", "0.054295", 1),
        ("plain", "c-8x-amd64-linux", "0.217180", 5),
    ]
    improved = schedule(tolerating_first(5), pools=[improving(TAINTED), improving(PLAIN)], types=KWOK)
    assert by_pool(improved) == [("plain", "c-8x-amd64-linux", "0.217180", 6)]
    assert sorted(p.name for p in improved.new_nodeclaims[0].pods) == [
        "a-tolerating",
        *(f"b-plain-{i}" for i in range(5)),
    ]
    assert not improved.failures


def test_a_fold_that_would_need_a_larger_type_is_not_made():
    # Seven plain pods fill the c-8x (7 of its 8 CPUs; its allocatable holds no eighth), so the tolerating pod
    # joining would make it a c-16x: dearer than the tainted c-2x it would save.
    improved = schedule(tolerating_first(7), pools=[improving(TAINTED), improving(PLAIN)], types=KWOK)
    assert by_pool(improved) == [
        ("tainted", "c-2x-amd64-linux", "0.054295", 1),
        ("plain", "c-8x-amd64-linux", "0.217180", 7),
    ]


def test_pods_move_across_nodepools_only_between_nodepools_that_opt_in():
    for pools in ([TAINTED, improving(PLAIN)], [improving(TAINTED), PLAIN]):
        result = schedule(tolerating_first(5), pools=pools, types=KWOK)
        assert [nc.nodepool for nc in result.new_nodeclaims] == ["tainted", "plain"]


def test_a_nodeclaim_holding_a_host_port_pod_is_left_as_karpenter_planned_it():
    pods = [*half_cpu_pods(9), pod(cpu="500m", host_ports=[8080])]
    assert launched(schedule(pods, pools=[improving()], types=KWOK)) == [("c-8x-amd64-linux", "0.217180", 10)]


def test_a_disruption_simulation_moving_running_pods_gets_karpenters_replacement():
    # Consolidation replaces with at most one NodeClaim; splitting its replacement would refuse the saving.
    moving = half_cpu_pods(10, node_name="candidate-node")
    assert launched(schedule(moving, pools=[improving()], types=KWOK)) == [("c-8x-amd64-linux", "0.217180", 10)]


# The lab's logs -------------------------------------------------------------------------------------------------


NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "annotations": {wk.PLAN_IMPROVEMENT: "enabled"}},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": ARCH, "operator": "In", "values": ["amd64"]},
                    {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                ],
            }
        }
    },
}


def test_the_lab_logs_one_created_nodeclaim_line_per_improved_nodeclaim():
    config = LabConfig(
        nodepools=[parse_nodepool(NODEPOOL)],
        nodepool_uids={"default": "uid-default"},
        nodeclasses={("KWOKNodeClass", "default"): NodeClass("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass", "default")},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types)},
    )
    lab = Lab([], config, {}, now=1_800_000_000.0)
    requests = {"requests": {"cpu": "500m"}}
    container = {"name": "c", "image": "pause", "resources": requests}
    lab.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {
                "replicas": 10,
                "selector": {"matchLabels": {"app": "inflate"}},
                "template": {"metadata": {"labels": {"app": "inflate"}}, "spec": {"containers": [container]}},
            },
        }
    )
    lab.advance(30)
    created = [r.record.fields for r in lab.logs if r.record.message == "created nodeclaim"]
    assert [c["requests"] for c in created] == [{"cpu": "3500m", "pods": "7"}, {"cpu": "1500m", "pods": "3"}]
    # Like Karpenter's, the line names the first five options alphabetically: every type that fits is an option.
    first = "c-128x-amd64-linux, c-128x-amd64-windows, c-16x-amd64-linux, c-16x-amd64-windows, c-192x-amd64-linux"
    assert [c["instance-types"] for c in created] == [f"{first} and 55 other(s)", f"{first} and 61 other(s)"]
    names = sorted(c["NodeClaim"]["name"] for c in created)
    assert sorted(nc["metadata"]["name"] for nc in lab.store.list("NodeClaim")) == names
    launched_as = sorted(nc["metadata"]["labels"][wk.INSTANCE_TYPE] for nc in lab.store.list("NodeClaim"))
    assert launched_as == ["c-2x-amd64-linux", "c-4x-amd64-linux"]
    running = lab.store.list("Pod", fields={"status.phase": "Running"})
    assert len(running) == 10


# Over random batches ----------------------------------------------------------------------------------------------

batches = st.lists(
    st.fixed_dictionaries(
        {
            "cpu": st.sampled_from(["100m", "250m", "500m", "1", "1500m", "3", "7"]),
            "memory": st.sampled_from(["100Mi", "512Mi", "1Gi", "4Gi", "12Gi"]),
            "zone": st.sampled_from([None, None, "test-zone-a"]),
            "app": st.sampled_from(["a", "b", "c"]),
            "constraint": st.sampled_from([None, None, None, "anti-hostname", "spread-zone", "tolerate"]),
        }
    ),
    min_size=1,
    max_size=40,
)
POOLS = [
    nodepool("general", *AMD64_ON_DEMAND, limits={"cpu": "96"}),
    nodepool("dedicated", *AMD64_ON_DEMAND, weight=10, taints=[Taint("dedicated", "NoSchedule")], limits={"cpu": "24"}),
]


def batch(specs):
    pods = []
    for spec in specs:
        extra = {}
        if spec["constraint"] == "anti-hostname":
            extra["anti_affinity"] = [term(HOSTNAME, app=spec["app"])]
        elif spec["constraint"] == "spread-zone":
            extra["spread"] = [spread(ZONE, 1, app=spec["app"])]
        elif spec["constraint"] == "tolerate":
            extra["tolerations"] = [Toleration(key="dedicated", operator="Exists")]
        selector = {ZONE: spec["zone"]} if spec["zone"] else {}
        pods.append(pod(spec["cpu"], spec["memory"], labels={"app": spec["app"]}, node_selector=selector, **extra))
    return pods


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_an_improved_plan_places_the_same_pods_for_no_more_and_breaks_no_constraint(specs):
    pods = batch(specs)
    karpenter = schedule(pods, pools=POOLS, types=KWOK)
    improved = schedule(pods, pools=[improving(p) for p in POOLS], types=KWOK)
    assert sorted(improved.failures) == sorted(karpenter.failures)
    assert sorted(p.uid for nc in improved.new_nodeclaims for p in nc.pods) == sorted(
        p.uid for nc in karpenter.new_nodeclaims for p in nc.pods
    )
    assert float(total(improved)) <= float(total(karpenter)) + 1e-6
    untouched = {frozenset(p.uid for p in nc.pods) for nc in karpenter.new_nodeclaims}
    by_pool = {p.name: p for p in POOLS}
    counted: dict[str, int] = {name: 0 for name in by_pool}
    for plan in improved.new_nodeclaims:
        pool = by_pool[plan.nodepool]
        for option in plan.options:
            assert fits(plan.requests, option.instance_type.allocatable)
        assert plan.requests == add(*(add(p.requests, {"pods": 1000}) for p in plan.pods))
        for placed in plan.pods:
            assert plan.requirements.compatible(Requirements.from_labels(placed.node_selector))
            assert tolerates_all(pool.taints, placed.tolerations)
        if any(p.anti_affinity or p.spread for p in plan.pods):
            # Pods with topology constraints keep Karpenter's NodeClaims exactly.
            assert frozenset(p.uid for p in plan.pods) in untouched
        # Karpenter's accounting: each NodeClaim counts as its largest option against the limits.
        counted[plan.nodepool] += max(o.instance_type.capacity["cpu"] for o in plan.options)
    for name, pool in by_pool.items():
        assert counted[name] <= pool.limits["cpu"]
