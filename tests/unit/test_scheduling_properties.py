"""Invariants of the scheduling simulation over random workloads."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.quantity import add, fits
from provisioner.requirements import Requirements
from provisioner.taints import Taint, Toleration, tolerates_all
from tests.builders import ARCH, HOSTNAME, KWOK, ZONE, nodepool, pod, req, schedule, spread, term

SMALL_KWOK = [it for it in KWOK if it.labels["karpenter.kwok.sh/instance-cpu"] in ("1", "2", "4", "8", "16")]

pod_specs = st.lists(
    st.fixed_dictionaries(
        {
            "cpu": st.sampled_from(["100m", "250m", "500m", "1", "1500m", "3"]),
            "memory": st.sampled_from(["100Mi", "512Mi", "1Gi", "4Gi"]),
            "zone": st.sampled_from([None, "test-zone-a", "test-zone-b"]),
            "arch": st.sampled_from([None, "amd64", "arm64"]),
            "app": st.sampled_from(["a", "b", "c"]),
            "constraint": st.sampled_from([None, "anti-hostname", "spread-zone", "spread-hostname", "tolerate"]),
        }
    ),
    min_size=1,
    max_size=40,
)


def build_pods(specs):
    pods = []
    for spec in specs:
        selector = {}
        if spec["zone"]:
            selector[ZONE] = spec["zone"]
        if spec["arch"]:
            selector[ARCH] = spec["arch"]
        extra = {}
        if spec["constraint"] == "anti-hostname":
            extra["anti_affinity"] = [term(HOSTNAME, app=spec["app"])]
        elif spec["constraint"] == "spread-zone":
            extra["spread"] = [spread(ZONE, 1, app=spec["app"])]
        elif spec["constraint"] == "spread-hostname":
            extra["spread"] = [spread(HOSTNAME, 1, app=spec["app"])]
        elif spec["constraint"] == "tolerate":
            extra["tolerations"] = [Toleration(key="dedicated", operator="Exists")]
        pods.append(pod(spec["cpu"], spec["memory"], labels={"app": spec["app"]}, node_selector=selector, **extra))
    return pods


POOLS = [
    nodepool("general", req("kubernetes.io/os", "In", "linux"), limits={"cpu": "64"}),
    nodepool("dedicated", weight=10, taints=[Taint("dedicated", "NoSchedule")], limits={"cpu": "32"}),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_specs)
def test_every_plan_respects_capacity_constraints_and_limits(specs):
    pods = build_pods(specs)
    result = schedule(pods, pools=POOLS, types=SMALL_KWOK)
    by_pool = {p.name: p for p in POOLS}
    used = {name: 0 for name in by_pool}
    placed = 0
    for plan in result.new_nodeclaims:
        pool = by_pool[plan.nodepool]
        assert plan.options, "a planned NodeClaim always has at least one option"
        for option in plan.options:
            # No option's allocatable is exceeded by the pods' requests.
            assert fits(plan.requests, option.instance_type.allocatable)
            assert Requirements(option.instance_type.requirements.values()).intersects(
                Requirements(v for k, v in plan.requirements.items() if k in option.instance_type.requirements)
            )
        for placed_pod in plan.pods:
            # Each pod's node constraints hold on the NodeClaim, and it tolerates the pool's taints.
            assert plan.requirements.compatible(Requirements.from_labels(placed_pod.node_selector))
            assert tolerates_all(pool.taints, placed_pod.tolerations)
        assert plan.requests == add(*(add(p.requests, {"pods": 1000}) for p in plan.pods))
        used[plan.nodepool] += plan.cheapest.instance_type.capacity["cpu"]
        placed += len(plan.pods)
        for p in plan.pods:
            if p.anti_affinity:
                # A pod with hostname anti-affinity never shares a node with pods it selects.
                assert sum(1 for q in plan.pods if q.labels["app"] == p.labels["app"]) == 1
    for name, pool in by_pool.items():
        assert used[name] <= pool.limits["cpu"]
    assert placed + len(result.failures) == len(pods)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_specs)
def test_identical_input_gives_an_identical_result(specs):
    pods = build_pods(specs)
    first = schedule(pods, pools=POOLS, types=SMALL_KWOK)
    second = schedule(pods, pools=POOLS, types=SMALL_KWOK)

    def shape(result):
        return (
            [
                (nc.nodepool, [p.uid for p in nc.pods], nc.instance_type_names, sorted(nc.requests.items()))
                for nc in result.new_nodeclaims
            ],
            sorted((uid, f.message) for uid, f in result.failures.items()),
        )

    assert shape(first) == shape(second)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=3))
def test_zonal_spread_never_exceeds_the_skew(count, max_skew):
    pods = [pod("100m", labels={"app": "s"}, spread=[spread(ZONE, max_skew, app="s")]) for _ in range(count)]
    result = schedule(pods, pools=[nodepool("default")], types=SMALL_KWOK)
    counts = {z: 0 for z in ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")}
    for plan in result.new_nodeclaims:
        [zone] = plan.requirements[ZONE].values
        counts[zone] += len(plan.pods)
    assert max(counts.values()) - min(counts.values()) <= max_skew
    assert sum(counts.values()) == count
