"""Karpenter v1.15.0's provisioning tests (scheduling/instance_selection_test.go and provisioning/suite_test.go)
ported onto karpui's scheduler, to find where the two differ."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from provisioner.catalog import InstanceType
from provisioner.controllers.provisioning import daemonsets
from provisioner.manifests.pod import pod_from_manifest
from provisioner.nodes import DaemonSet
from provisioner.pods import OwnerReference
from provisioner.quantity import MILLI, parse_quantity, parse_resources
from provisioner.taints import Taint
from tests.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    assorted_catalog,
    fake_catalog,
    instance_type,
    nodepool,
    placed_types,
    pod,
    r,
    req,
    schedule,
    spread,
    term,
)

OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
GENERATION = "karpenter/numerical-value"
GIB = 2**30


# Karpenter's fake cloud provider, as the Go tests see it ----------------------------------------------------------


def price_from_resources(cpu: int, memory_gib: int) -> float:
    """fake.PriceFromResources: 0.1 per CPU and 0.1 per (decimal) GB."""
    return 0.1 * cpu + 0.1 * memory_gib * GIB / 1e9


ASSORTED = assorted_catalog()
MIN_PRICE = min(o.price for it in ASSORTED for o in it.offerings)


def one_offering_type(
    name: str,
    cpu: str,
    memory: str,
    price: float,
    *,
    arch: str = "arm64",
    zone: str = "test-zone-1-spot",
    **labels: str,
) -> InstanceType:
    """A fake.NewInstanceType with a single spot offering at a given price, as the MinValues tests build them."""
    return instance_type(name, cpu, memory, arch=arch, labels=labels, zones=((zone, "spot"),), price=price)


def supported_types(nodeclaim) -> list[InstanceType]:
    """supportedInstanceTypes: the types the NodeClaim's instance-type requirement allows."""
    allowed = nodeclaim.requirements[INSTANCE_TYPE]
    return [it for it in ASSORTED if allowed.has(it.name)]


def has_offering(it: InstanceType, capacity_type: str, zone: str) -> bool:
    return any(o.capacity_type == capacity_type and o.zone == zone for o in it.offerings)


def chosen_price(nodeclaim) -> float:
    """The price of the type the fake provider launches: the cheapest compatible offering of the cheapest type."""
    return nodeclaim.cheapest.price


def node_pods(result) -> list[int]:
    return sorted(len(nc.pods) for nc in result.new_nodeclaims)


# scheduling/instance_selection_test.go -----------------------------------------------------------------------------

# BeforeEach: the NodePool allows spot and on-demand, arm64 and amd64.
SELECTION_POOL_REQUIREMENTS = (
    req(CAPACITY_TYPE, "In", "spot", "on-demand"),
    req(ARCH, "In", "arm64", "amd64"),
)

CHEAPEST_CASES = [
    # (It text suffix, NodePool requirements (None: the BeforeEach ones), pod requirements, label checks, offering)
    ("", None, (), {}, None),
    ("(pod arch = amd64)", None, (r(ARCH, "In", "amd64"),), {ARCH: "amd64"}, None),
    ("(pod arch = arm64)", None, (r(ARCH, "In", "arm64"),), {ARCH: "arm64"}, None),
    ("(prov arch = amd64)", (req(ARCH, "In", "amd64"),), (), {ARCH: "amd64"}, None),
    ("(prov arch = arm64)", (req(ARCH, "In", "arm64"),), (), {ARCH: "arm64"}, None),
    ("(prov os = windows)", (req(OS, "In", "windows"),), (), {OS: "windows"}, None),
    ("(pod os = windows)", None, (r(OS, "In", "windows"),), {OS: "windows"}, None),
    ("(pod os = linux)", None, (r(OS, "In", "linux"),), {OS: "linux"}, None),
    ("(prov zone = test-zone-2)", (req(ZONE, "In", "test-zone-2"),), (), {ZONE: "test-zone-2"}, None),
    ("(pod zone = test-zone-2)", None, (r(ZONE, "In", "test-zone-2"),), {ZONE: "test-zone-2"}, None),
    ("(prov ct = spot)", (req(CAPACITY_TYPE, "In", "spot"),), (), {CAPACITY_TYPE: "spot"}, None),
    ("(pod ct = spot)", None, (r(CAPACITY_TYPE, "In", "spot"),), {CAPACITY_TYPE: "spot"}, None),
    (
        "(prov ct = ondemand, prov zone = test-zone-1)",
        (req(CAPACITY_TYPE, "In", "on-demand"), req(ZONE, "In", "test-zone-1")),
        (),
        {},
        ("on-demand", "test-zone-1"),
    ),
    (
        "(pod ct = spot, pod zone = test-zone-1)",
        None,
        (r(CAPACITY_TYPE, "In", "spot"), r(ZONE, "In", "test-zone-1")),
        {},
        ("spot", "test-zone-1"),
    ),
    (
        "(prov ct = spot, pod zone = test-zone-2)",
        (req(CAPACITY_TYPE, "In", "spot"),),
        (r(ZONE, "In", "test-zone-2"),),
        {},
        ("spot", "test-zone-2"),
    ),
    (
        "(prov ct = ondemand/test-zone-1/arm64/windows)",
        (
            req(ARCH, "In", "arm64"),
            req(OS, "In", "windows"),
            req(CAPACITY_TYPE, "In", "on-demand"),
            req(ZONE, "In", "test-zone-1"),
        ),
        (),
        {OS: "windows", ARCH: "arm64"},
        ("on-demand", "test-zone-1"),
    ),
    (
        "(prov = spot/test-zone-2, pod = amd64/linux)",
        (req(ARCH, "In", "amd64"), req(OS, "In", "linux")),
        (r(CAPACITY_TYPE, "In", "spot"), r(ZONE, "In", "test-zone-2")),
        {OS: "linux", ARCH: "amd64"},
        ("spot", "test-zone-2"),
    ),
    (
        "(pod ct = spot/test-zone-2/amd64/linux)",
        None,
        (r(ARCH, "In", "amd64"), r(OS, "In", "linux"), r(CAPACITY_TYPE, "In", "spot"), r(ZONE, "In", "test-zone-2")),
        {OS: "linux", ARCH: "amd64"},
        ("spot", "test-zone-2"),
    ),
]


@pytest.mark.parametrize(
    ("case", "pool_requirements", "pod_requirements", "labels", "offering"),
    CHEAPEST_CASES,
    ids=[c[0] or "plain" for c in CHEAPEST_CASES],
)
def test_a_pod_lands_on_one_of_the_cheapest_assorted_instances(
    case, pool_requirements, pod_requirements, labels, offering
):
    """instance_selection_test.go: "should schedule on one of the cheapest instances <case>" (all 18 Its; the two
    duplicated "(pod os = linux)" and "(prov os = windows)" Its are each one row). Every type the NodeClaim offers
    the cloud provider must match the constraints (ExpectInstancesWithLabel / ExpectInstancesWithOffering)."""
    requirements = SELECTION_POOL_REQUIREMENTS if pool_requirements is None else pool_requirements
    pods = [pod(required=[pod_requirements] if pod_requirements else ())]
    result = schedule(pods, pools=[nodepool("default", *requirements)], types=ASSORTED)
    assert len(result.new_nodeclaims) == 1
    nodeclaim = result.new_nodeclaims[0]
    assert chosen_price(nodeclaim) == pytest.approx(MIN_PRICE)
    supported = supported_types(nodeclaim)
    assert supported
    for key, value in labels.items():
        if key in (ZONE, CAPACITY_TYPE):
            attribute = "zone" if key == ZONE else "capacity_type"
            assert all(any(getattr(o, attribute) == value for o in it.offerings) for it in supported), key
        else:
            assert {it.labels[key] for it in supported} == {value}, key
    if offering is not None:
        assert all(has_offering(it, *offering) for it in supported)


def _without_arm(types, zone: str | None = None) -> list[InstanceType]:
    """filterInstanceTypes as the Go tests use it: drop arm64 types (only those offered in `zone`, if given)."""
    return [
        it
        for it in types
        if it.labels[ARCH] == "amd64" or (zone is not None and not any(o.zone == zone for o in it.offerings))
    ]


def test_no_arm_pod_schedules_when_no_arm_type_exists():
    """instance_selection_test.go: "should not schedule if no instance type matches selector (pod arch = arm)"."""
    types = _without_arm(ASSORTED)
    result = schedule(
        [pod(required=[[r(ARCH, "In", "arm64")]])],
        pools=[nodepool("default", *SELECTION_POOL_REQUIREMENTS)],
        types=types,
    )
    assert result.new_nodeclaims == [] and len(result.failures) == 1


def test_no_arm_pod_in_zone_2_schedules_when_zone_2_has_no_arm_type():
    """instance_selection_test.go: "should not schedule if no instance type matches selector (pod arch = arm
    zone=test-zone-2)"."""
    types = _without_arm(ASSORTED, zone="test-zone-2")
    pods = [pod(required=[[r(ARCH, "In", "arm64"), r(ZONE, "In", "test-zone-2")]])]
    result = schedule(pods, pools=[nodepool("default", *SELECTION_POOL_REQUIREMENTS)], types=types)
    assert result.new_nodeclaims == [] and len(result.failures) == 1


def test_an_arm_nodepool_cannot_serve_a_zone_2_pod_when_zone_2_has_no_arm_type():
    """instance_selection_test.go: "should not schedule if no instance type matches selector (prov arch = arm /
    pod zone=test-zone-2)"."""
    types = _without_arm(ASSORTED, zone="test-zone-2")
    result = schedule(
        [pod(required=[[r(ZONE, "In", "test-zone-2")]])],
        pools=[nodepool("default", req(ARCH, "In", "arm64"))],
        types=types,
    )
    assert result.new_nodeclaims == [] and len(result.failures) == 1


@pytest.mark.parametrize("cpu", ["0.1", "1.0", "2.0", "2.5", "4.0", "8.0", "16.0"])
def test_three_equal_pods_share_one_node_whose_every_type_holds_them_with_overhead(cpu):
    """instance_selection_test.go: "should schedule on an instance with enough resources" (one row per CPU value,
    the memory values in a loop). Scheduling must not change any type's capacity or overhead either."""
    before = {it.name: (dict(it.capacity), it.overhead.total()) for it in ASSORTED}
    for mem in ("0.1", "1.0", "2.0", "4.0", "8.0", "16.0", "32.0"):
        pods = [pod(cpu, f"{mem}Gi") for _ in range(3)]
        result = schedule(pods, pools=[nodepool("default", *SELECTION_POOL_REQUIREMENTS)], types=ASSORTED)
        assert node_pods(result) == [3], (cpu, mem)
        total_cpu = 3 * parse_quantity(cpu)
        total_memory = 3 * parse_quantity(f"{mem}Gi")
        for it in supported_types(result.new_nodeclaims[0]):
            overhead = it.overhead.total()
            assert total_cpu + overhead["cpu"] < it.capacity["cpu"], (cpu, mem, it.name)
            assert total_memory + overhead["memory"] < it.capacity["memory"], (cpu, mem, it.name)
    assert before == {it.name: (dict(it.capacity), it.overhead.total()) for it in ASSORTED}


# MinValues -----------------------------------------------------------------------------------------------------


def two_small_pods():
    return [pod("0.9", "0.9Gi"), pod("0.9", "0.9Gi")]


def generation_types(*specs: tuple[str, str, float, str]) -> list[InstanceType]:
    """instance-type-1..n with (cpu, memory, price, generation)."""
    return [
        one_offering_type(f"instance-type-{i}", cpu, memory, price, **{GENERATION: gen})
        for i, (cpu, memory, price, gen) in enumerate(specs, start=1)
    ]


def assert_two_nodes_each_with(result, names: set[str]) -> None:
    """Both pods on separate NodeClaims (node1.Name != node2.Name), each NodeClaim offering exactly `names`."""
    assert node_pods(result) == [1, 1]
    for nodeclaim in result.new_nodeclaims:
        assert set(nodeclaim.requirements[INSTANCE_TYPE].values) == names


def test_min_values_on_a_gt_requirement_splits_the_pods():
    """instance_selection_test.go MinValues: "should schedule respecting the minValues in Gt operator"."""
    types = generation_types(("1", "1Gi", 0.52, "2"), ("1", "1Gi", 1.0, "3"), ("4", "4Gi", 1.2, "4"))
    pool = nodepool("default", req(GENERATION, "Gt", "2", min_values=2))
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-2", "instance-type-3"})


def test_the_min_values_pod_error_names_the_labels_as_karpenter_words_it():
    """instance_selection_test.go MinValues: "scheduler should fail if the minValues in Gt operator is not
    satisfied": no NodeClaim, and every PodError contains `minValues requirement is not met for label(s)
    (label(s)=[karpenter/numerical-value])`."""
    types = generation_types(("1", "1Gi", 0.52, "2"), ("4", "4Gi", 1.0, "3"))
    pool = nodepool("default", req(GENERATION, "Exists", min_values=2))
    pods = [pod("0.9", "0.9Gi", required=[[r(GENERATION, "Gt", "2")]]) for _ in range(2)]
    result = schedule(pods, pools=[pool], types=types)
    assert result.new_nodeclaims == [] and len(result.failures) == 2
    for failure in result.failures.values():
        assert "minValues requirement is not met for label(s) (label(s)=[karpenter/numerical-value])" in failure.message


def test_min_values_on_an_lt_requirement_splits_the_pods():
    """instance_selection_test.go MinValues: "should schedule respecting the minValues in Lt operator"."""
    types = generation_types(("1", "1Gi", 0.52, "2"), ("2", "2Gi", 1.0, "3"), ("4", "4Gi", 1.2, "4"))
    pool = nodepool("default", req(GENERATION, "Lt", "4", min_values=2))
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-1", "instance-type-2"})


def test_min_values_on_an_lt_requirement_left_with_one_generation_fails():
    """instance_selection_test.go MinValues: "scheduler should fail if the minValues in Lt operator is not
    satisfied"."""
    types = generation_types(("2", "2Gi", 0.52, "2"), ("4", "4Gi", 1.2, "4"))
    pool = nodepool("default", req(GENERATION, "Lt", "4", min_values=2))
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert result.new_nodeclaims == [] and len(result.failures) == 2


def test_in_and_not_in_min_values_take_the_larger():
    """instance_selection_test.go MinValues: "should schedule considering the max of the minValues of In and NotIn
    operators in the instance-type requirements"."""
    types = [
        one_offering_type("instance-type-1", "1", "1Gi", 0.52),
        one_offering_type("instance-type-2", "2", "2Gi", 1.0),
        one_offering_type("instance-type-3", "4", "4Gi", 1.2),
    ]
    pool = nodepool(
        "default",
        req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", "instance-type-3", min_values=1),
        req(INSTANCE_TYPE, "NotIn", "instance-type-3", min_values=2),
    )
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-1", "instance-type-2"})
    assert all(nc.requirements[INSTANCE_TYPE].min_values == 2 for nc in result.new_nodeclaims)


def test_gt_and_lt_min_values_take_the_larger():
    """instance_selection_test.go MinValues: "should schedule considering the max of the minValues of Gt and Lt
    operators."."""
    types = generation_types(
        ("1", "1Gi", 0.52, "2"), ("1", "1Gi", 1.0, "3"), ("4", "4Gi", 1.2, "4"), ("4", "4Gi", 1.2, "5")
    )
    pool = nodepool("default", req(GENERATION, "Gt", "2", min_values=1), req(GENERATION, "Lt", "5", min_values=2))
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-2", "instance-type-3"})


def test_exists_and_in_min_values_on_one_key_take_the_larger():
    """instance_selection_test.go MinValues: "should schedule and pick the max of minValues of InstanceTypes if
    multiple operators are used for the same requirement."."""
    types = [
        one_offering_type("instance-type-1", "1", "1Gi", 0.52),
        one_offering_type("instance-type-2", "4", "4Gi", 1.0),
    ]
    pool = nodepool(
        "default",
        req(INSTANCE_TYPE, "Exists", min_values=1),
        req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", min_values=2),
    )
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-1", "instance-type-2"})


def test_min_values_on_two_keys_are_both_kept():
    """instance_selection_test.go MinValues: "should schedule and respect multiple requirement keys with
    minValues"."""
    types = [
        one_offering_type("instance-type-1", "1", "1Gi", 0.52, arch="arm64"),
        one_offering_type("instance-type-2", "4", "4Gi", 1.0, arch="amd64"),
    ]
    pool = nodepool(
        "default",
        req(ARCH, "Exists", min_values=2),
        req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", min_values=1),
    )
    result = schedule(two_small_pods(), pools=[pool], types=types)
    assert_two_nodes_each_with(result, {"instance-type-1", "instance-type-2"})


# provisioning/suite_test.go --------------------------------------------------------------------------------------

# The fake provider registers its `size` label as well-known; karpui's set of well-known labels is fixed, so its
# kwok instance-size key (well-known to karpui) stands in for it.
SIZE = "karpenter.kwok.sh/instance-size"


def suite_types() -> list[InstanceType]:
    """The fake provider's default types with the `size` label NewInstanceType gives them: large above 4 CPU and
    8Gi, small otherwise."""
    sized = []
    for it in fake_catalog():
        large = it.capacity["cpu"] > 4 * MILLI and it.capacity["memory"] > parse_quantity("8Gi")
        labels = {**it.labels, SIZE: "large" if large else "small"}
        sized.append(InstanceType(it.name, it.capacity, it.offerings, labels, it.overhead))
    return sized


SUITE_TYPES = suite_types()
SUITE_BY_NAME = {it.name: it for it in SUITE_TYPES}


def suite_schedule(pods, pools=None, **options):
    return schedule(pods, pools=pools, types=options.pop("types", SUITE_TYPES), **options)


def launched_capacity(result) -> tuple[int, int]:
    """The (cpu, memory) capacity of the one type the fake provider launches, as the Go tests read it."""
    [nodeclaim] = result.new_nodeclaims
    capacity = nodeclaim.cheapest.instance_type.capacity
    return capacity["cpu"], capacity["memory"]


FOUR_CPU_4GI = (4 * MILLI, parse_quantity("4Gi"))
TWO_CPU_2GI = (2 * MILLI, parse_quantity("2Gi"))


def ds(template, name: str = "ds") -> DaemonSet:
    return DaemonSet(name=name, namespace="kube-system", template=template)


def ds_pod(cpu=None, memory=None, **kwargs):
    return pod(cpu, memory, owner=OwnerReference("DaemonSet", "ds"), **kwargs)


def spec_pod(spec: dict, name: str = "p"):
    """A pod read from a PodSpec the way karpui reads cluster objects (requests defaulted from limits, init
    containers and sidecars folded into the effective requests)."""
    manifest = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    parsed = pod_from_manifest(manifest)
    return pod(name=name, requests={k: f"{v}m" for k, v in parsed.requests.items()})


def container(requests=None, limits=None, **extra) -> dict:
    return {"name": "c", "image": "pause", "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def test_one_pod_makes_one_node():
    """suite_test.go: "should provision nodes"."""
    result = suite_schedule([pod()])
    assert node_pods(result) == [1] and result.failures == {}


def test_a_hundred_pods_all_schedule():
    """suite_test.go: "Should provision nodes for multiple pods"."""
    result = suite_schedule([pod() for _ in range(100)])
    assert result.scheduled_count() == 100 and result.new_nodeclaims


SELECTOR_CASES = [
    (NODEPOOL, "default", True),
    (ZONE, "test-zone-1", True),
    (INSTANCE_TYPE, "default-instance-type", True),
    (ARCH, "arm64", True),
    (OS, "linux", True),
    (NODEPOOL, "unknown", False),
    (ZONE, "unknown", False),
    (INSTANCE_TYPE, "unknown", False),
    (ARCH, "unknown", False),
    (OS, "unknown", False),
    (CAPACITY_TYPE, "unknown", False),
    ("foo", "bar", False),
]


@pytest.mark.parametrize(("key", "value", "schedulable"), SELECTOR_CASES)
def test_supported_node_selectors(key, value, schedulable):
    """suite_test.go: "should provision nodes for pods with supported node selectors"."""
    result = suite_schedule([pod(node_selector={key: value})])
    assert result.scheduled_count() == (1 if schedulable else 0)


@pytest.mark.parametrize(("key", "value", "schedulable"), SELECTOR_CASES)
def test_supported_node_affinities(key, value, schedulable):
    """suite_test.go: "should provision nodes for pods with supported node affinities"."""
    result = suite_schedule([pod(required=[[r(key, "In", value)]])])
    assert result.scheduled_count() == (1 if schedulable else 0)


def test_a_one_pod_type_makes_a_node_per_pod():
    """suite_test.go: "should provision multiple nodes when maxPods is set"."""
    pool = nodepool("default", req(INSTANCE_TYPE, "In", "single-pod-instance-type"))
    result = suite_schedule([pod(), pod(), pod()], pools=[pool])
    assert node_pods(result) == [1, 1, 1]


def example_types() -> list[InstanceType]:
    """AddInstanceResources ×3 (10/4Gi, 11/5Gi, 12/6Gi) on top of the fake provider's types. Go names all three
    "example"; karpui keys types by name, so they are told apart by their CPU."""
    return [
        *SUITE_TYPES,
        *(
            instance_type(
                f"example-{cpu}",
                str(cpu),
                f"{mem}Gi",
                arch="arch",
                zones=(("test-zone-1", "spot"),),
                price=price_from_resources(cpu, mem),
            )
            for cpu, mem in ((10, 4), (11, 5), (12, 6))
        ),
    ]


SIDECAR = {"restartPolicy": "Always"}


@pytest.mark.parametrize(
    ("case", "containers", "init_containers"),
    [
        (
            "when initcontainer comes first",
            [container({"cpu": "6", "memory": "2Gi"})],
            [container({"cpu": "10", "memory": "4Gi"}), container({"cpu": "4.9", "memory": "2.9Gi"}, **SIDECAR)],
        ),
        (
            "when sidecar container comes first and init container resources are smaller than container resources",
            [container({"cpu": "6", "memory": "2Gi"})],
            [container({"cpu": "4.9", "memory": "2.9Gi"}, **SIDECAR), container({"cpu": "5", "memory": "1Gi"})],
        ),
        (
            "when sidecar container comes first and init container resources are bigger than container resources",
            [container({"cpu": "5", "memory": "1Gi"})],
            [container({"cpu": "4.9", "memory": "2.9Gi"}, **SIDECAR), container({"cpu": "6", "memory": "2Gi"})],
        ),
    ],
    ids=["init-first", "sidecar-first-init-smaller", "sidecar-first-init-bigger"],
)
def test_sidecars_and_init_containers_size_the_node(case, containers, init_containers):
    """suite_test.go: "should schedule based on the max resource requests of containers and initContainers with
    sidecar containers <case>": the 11 CPU / 5Gi type, not the smaller or bigger one."""
    the_pod = spec_pod({"containers": containers, "initContainers": init_containers})
    result = suite_schedule([the_pod], types=example_types())
    assert placed_types(result) == ["example-11"]


def test_pod_level_resources_are_the_pods_requests():
    """suite_test.go: "should schedule based on the pod level resources requests": spec.resources requests
    9.9 CPU / 3.9Gi win over the containers' (the 10 CPU / 4Gi type is launched)."""
    spec = {
        "resources": {"requests": {"cpu": "9.9", "memory": "3.9Gi"}, "limits": {"cpu": "10", "memory": "4Gi"}},
        "containers": [container({"cpu": "5", "memory": "1Gi"})],
        "initContainers": [
            container({"cpu": "6", "memory": "2Gi"}),
            container({"cpu": "4", "memory": "2Gi"}, **SIDECAR),
        ],
    }
    the_pod = spec_pod(spec)
    result = suite_schedule([the_pod], types=example_types())
    assert placed_types(result) == ["example-10"]
    assert the_pod.requests["cpu"] == 9900 and the_pod.requests["memory"] == parse_quantity("3.9Gi")


# Resource Limits


def test_a_cpu_limit_lets_one_of_two_anti_affine_pods_through():
    """suite_test.go Resource Limits: "should partially schedule if limits would be exceeded"."""
    pool = nodepool("default", limits={"cpu": "3"})
    pods = [pod("1.5", labels={"app": "foo"}, anti_affinity=[term(HOSTNAME, app="foo")]) for _ in range(2)]
    result = suite_schedule(pods, pools=[pool])
    assert result.scheduled_count() == 1 and len(result.failures) == 1


def test_a_pods_limit_of_one_refuses_the_gpu_type_with_five():
    """suite_test.go Resource Limits: "should not schedule if limits would be exceeded (GPU)"."""
    pool = nodepool("default", limits={"pods": "1"})
    result = suite_schedule([pod(requests={"fake.com/vendor-a": "1"})], pools=[pool])
    assert result.scheduled_count() == 0


# Daemonsets


def test_daemonset_overhead_comes_from_the_live_daemonset_pod():
    """suite_test.go Daemonsets: "should account for overhead using daemonset pod spec instead of daemonset spec":
    the DaemonSet asks 4 CPU / 4Gi, its running pod 2 CPU / 2Gi; with a 1 CPU / 1Gi pod Karpenter launches a 4 CPU /
    4Gi type, which only the pod's requests allow."""
    template = {"spec": {"containers": [container({"cpu": "4", "memory": "4Gi"})]}}
    daemonset_obj = {
        "metadata": {"name": "ds", "namespace": "default", "uid": "ds-uid"},
        "spec": {"template": template},
    }
    daemonset_pod = {
        "metadata": {
            "name": "ds-abcde",
            "namespace": "default",
            "uid": "ds-pod-uid",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": True}
            ],
        },
        "spec": {"containers": [container({"cpu": "2", "memory": "2Gi"})]},
    }
    objects = {"DaemonSet": [daemonset_obj], "Pod": [daemonset_pod]}
    ctx = SimpleNamespace(
        api=SimpleNamespace(list=lambda kind, *a, **k: objects.get(kind, []), scan=lambda kind: objects.get(kind, [])),
        ignore_dra_requests=False,
    )
    result = suite_schedule([pod("1", "1Gi")], daemonsets=daemonsets(ctx))
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_memory_limit_without_a_request_is_its_request():
    """suite_test.go Daemonsets: "should not schedule if resource requests are not defined and limits (requests) are
    too large"."""
    template = spec_pod({"containers": [container({"cpu": "1"}, {"cpu": "10000", "memory": "10000Gi"})]})
    result = suite_schedule([pod()], daemonsets=[ds(template)])
    assert result.scheduled_count() == 0


def test_daemonset_init_containers_raise_its_overhead():
    """suite_test.go Daemonsets: "should schedule based on the max resource requests of containers and
    initContainers"."""
    template = spec_pod(
        {
            "containers": [container({"cpu": "1"}, {"cpu": "10000", "memory": "1Gi"})],
            "initContainers": [container({"cpu": "3"}, {"cpu": "10000", "memory": "3Gi"})],
        }
    )
    result = suite_schedule([pod()], daemonsets=[ds(template)])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_init_container_too_large_for_any_node_blocks_the_pod():
    """suite_test.go Daemonsets: "should not schedule if combined max resources are too large for any node"."""
    template = spec_pod(
        {
            "containers": [container({"cpu": "1"}, {"cpu": "10000", "memory": "1Gi"})],
            "initContainers": [container({"cpu": "1"}, {"cpu": "10000", "memory": "10000Gi"})],
        }
    )
    assert suite_schedule([pod()], daemonsets=[ds(template)]).scheduled_count() == 0


def test_a_daemonset_init_container_request_too_large_blocks_the_pod():
    """suite_test.go Daemonsets: "should not schedule if initContainer resources are too large"."""
    template = spec_pod(
        {"containers": [container()], "initContainers": [container({"cpu": "10000", "memory": "10000Gi"})]}
    )
    assert suite_schedule([pod()], daemonsets=[ds(template)]).scheduled_count() == 0


def test_a_daemonset_without_requests_or_limits_lets_the_pod_schedule():
    """suite_test.go Daemonsets: "should be able to schedule pods if resource requests and limits are not
    defined"."""
    assert suite_schedule([pod()], daemonsets=[ds(ds_pod())]).scheduled_count() == 1


def test_a_daemonset_selecting_an_unknown_label_adds_no_overhead():
    """suite_test.go Daemonsets: "should ignore daemonsets with an invalid selector"."""
    result = suite_schedule([pod("1", "1Gi")], daemonsets=[ds(ds_pod("2", "2Gi", node_selector={"node": "invalid"}))])
    assert launched_capacity(result) == TWO_CPU_2GI


def test_a_daemonset_no_instance_type_satisfies_adds_no_overhead():
    """suite_test.go Daemonsets: "should ignore daemonsets when no instance types meet the daemonset
    requirements"."""
    daemon = ds_pod("2", "2Gi", required=[[r(INSTANCE_TYPE, "In", "non-existent-instance-type")]])
    result = suite_schedule([pod("1", "1Gi")], daemonsets=[ds(daemon)])
    assert launched_capacity(result) == TWO_CPU_2GI


def test_a_daemonset_selecting_the_nodepools_custom_label_counts():
    """suite_test.go Daemonsets: "should account for daemonsets with a custom label nodeSelector that matches the
    nodepool"."""
    pool = nodepool("default", labels={"purpose": "monitoring"})
    daemon = ds_pod("2", "2Gi", node_selector={"purpose": "monitoring"})
    result = suite_schedule([pod("1", "1Gi")], pools=[pool], daemonsets=[ds(daemon)])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_daemonsets_count_only_on_the_instance_types_they_select():
    """suite_test.go Daemonsets: "should filter out daemonsets based on instance type requirements": a 1 CPU
    daemon for small types and a 10 CPU one for large types; the pod goes to a small 4 CPU / 4Gi type."""
    daemons = [
        ds(ds_pod("1", required=[[r(SIZE, "In", "small")]]), "small"),
        ds(ds_pod("10", required=[[r(SIZE, "In", "large")]]), "large"),
    ]
    result = suite_schedule([pod("1", "1Gi")], daemonsets=daemons)
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_not_in_an_undefined_key_counts():
    """suite_test.go Daemonsets: "should account daemonsets with NotIn operator and unspecified key"."""
    daemon = ds_pod("2", "2Gi", required=[[r("foo", "NotIn", "bar")]])
    result = suite_schedule([pod("1", "1Gi", required=[[r(ZONE, "In", "test-zone-2")]])], daemonsets=[ds(daemon)])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_matching_the_second_of_its_terms_counts():
    """suite_test.go Daemonsets: "should consider a daemonset schedulable with multiple node affinity terms"."""
    pool = nodepool("default", labels={"foo": "bar"})
    daemon = ds_pod("2", "2Gi", required=[[r("foo", "In", "voo")], [r("foo", "In", "bar")]])
    result = suite_schedule([pod("1", "1Gi")], pools=[pool], daemonsets=[ds(daemon)])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_with_an_impossible_preference_counts():
    """suite_test.go Daemonsets: "should consider a daemonset schedulable with an incompatible node affinity
    preference"."""
    daemon = ds_pod("2", "2Gi", preferred=[(1, [r("node", "In", "invalid")])])
    result = suite_schedule([pod("1", "1Gi")], daemonsets=[ds(daemon)])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_counts_on_a_prefer_no_schedule_nodepool():
    """suite_test.go Daemonsets: "should consider a daemonset schedulable with a PreferNoSchedule taint"."""
    pool = nodepool("default", taints=[Taint("test", "PreferNoSchedule")])
    result = suite_schedule([pod("1", "1Gi")], pools=[pool], daemonsets=[ds(ds_pod("2", "2Gi"))])
    assert launched_capacity(result) == FOUR_CPU_4GI


def test_a_daemonset_host_port_counts_only_where_the_daemonset_runs():
    """suite_test.go Daemonsets: "should not account for daemonset hostports when daemonset would not schedule on
    selected node": port 8080 belongs to a large-only daemon; the small-only pod with port 8080 lands on a small
    4 CPU / 4Gi type beside the small-only daemon (2 CPU, port 8081)."""
    daemons = [
        ds(ds_pod("4", "4Gi", required=[[r(SIZE, "In", "large")]], host_ports=[8080]), "large"),
        ds(ds_pod("2", "2Gi", required=[[r(SIZE, "In", "small")]], host_ports=[8081]), "small"),
    ]
    the_pod = pod("1", "1Gi", required=[[r(SIZE, "In", "small")]], host_ports=[8080])
    result = suite_schedule([the_pod], daemonsets=daemons)
    assert launched_capacity(result) == FOUR_CPU_4GI
    assert result.new_nodeclaims[0].cheapest.instance_type.labels[SIZE] == "small"


# Labels


def test_nodepool_labels_and_requirements_become_node_labels():
    """suite_test.go Labels: "should label nodes"."""
    pool = nodepool(
        "default",
        req("test-key-2", "In", "test-value-2"),
        req("test-key-3", "NotIn", "test-value-3"),
        req("test-key-4", "Lt", "4"),
        req("test-key-5", "Gt", "5"),
        req("test-key-6", "Exists"),
        req("test-key-7", "DoesNotExist"),
        labels={"test-key-1": "test-value-1"},
    )
    [nodeclaim] = suite_schedule([pod()], pools=[pool]).new_nodeclaims
    labels = nodeclaim.labels
    assert labels[NODEPOOL] == "default"
    assert labels["test-key-1"] == "test-value-1"
    assert labels["test-key-2"] == "test-value-2"
    assert labels["test-key-3"] != "test-value-3"
    assert int(labels["test-key-4"]) < 4
    assert int(labels["test-key-5"]) > 5
    assert "test-key-6" in labels
    assert "test-key-7" not in labels


@pytest.mark.parametrize(
    "key", ["kubernetes.io/test", "k8s.io/test", "subdomain.kubernetes.io/test", "subdomain.k8s.io/test"]
)
def test_labels_in_the_kubernetes_domains_reach_the_node(key):
    """suite_test.go Labels: "should label nodes with labels in the kubernetes domains" and "... in the subdomain
    from kubernetes domains"."""
    pool = nodepool("default", labels={key: "test-value"})
    result = suite_schedule([pod(required=[[r(key, "In", "test-value")]])], pools=[pool])
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.labels[key] == "test-value"


def test_a_well_known_not_in_requirement_does_not_label_the_node_with_the_excluded_value():
    """suite_test.go Labels: "should not label nodes with well-known labels from requirements"."""
    pool = nodepool("default", req("foo", "In", "bar"), req("node.kubernetes.io/windows-build", "NotIn", "test-value"))
    [nodeclaim] = suite_schedule([pod()], pools=[pool]).new_nodeclaims
    assert nodeclaim.labels.get("node.kubernetes.io/windows-build") != "test-value"
    assert nodeclaim.labels["foo"] == "bar"


# NodeClaim Creation


def test_the_nodeclaim_offers_every_fitting_type_of_its_nodepool():
    """suite_test.go NodeClaim Creation: "should create a nodeclaim request with expected requirements"."""
    [nodeclaim] = suite_schedule([pod()]).new_nodeclaims
    assert nodeclaim.requirements[INSTANCE_TYPE].values == frozenset(SUITE_BY_NAME)
    assert nodeclaim.requirements[NODEPOOL].values == frozenset({"default"})


def test_the_nodeclaim_carries_the_nodepools_custom_requirements():
    """suite_test.go NodeClaim Creation: "should create a nodeclaim request with additional expected
    requirements"."""
    pool = nodepool(
        "default", req("custom-requirement-key", "In", "value"), req("custom-requirement-key2", "In", "value")
    )
    [nodeclaim] = suite_schedule([pod()], pools=[pool]).new_nodeclaims
    assert nodeclaim.requirements[INSTANCE_TYPE].values == frozenset(SUITE_BY_NAME)
    assert nodeclaim.requirements["custom-requirement-key"].values == frozenset({"value"})
    assert nodeclaim.requirements["custom-requirement-key2"].values == frozenset({"value"})


def test_an_arm_nodepool_offers_only_the_arm_type():
    """suite_test.go NodeClaim Creation: "should create a nodeclaim request restricting instance types on
    architecture"."""
    [nodeclaim] = suite_schedule([pod()], pools=[nodepool("default", req(ARCH, "In", "arm64"))]).new_nodeclaims
    assert nodeclaim.requirements[ARCH].values == frozenset({"arm64"})
    assert nodeclaim.requirements[INSTANCE_TYPE].values == frozenset({"arm-instance-type"})


def test_a_gpu_request_offers_only_the_gpu_type():
    """suite_test.go NodeClaim Creation: "should create a nodeclaim request restricting instance types based on
    pod resource requests"."""
    [nodeclaim] = suite_schedule([pod(requests={"fake.com/vendor-a": "1"})]).new_nodeclaims
    assert nodeclaim.requirements[INSTANCE_TYPE].values == frozenset({"gpu-vendor-instance-type"})


def test_the_nodeclaim_requests_are_the_pods_requests_and_one_pod():
    """suite_test.go NodeClaim Creation: "should create a nodeclaim with resource requests"."""
    [nodeclaim] = suite_schedule([pod("1", "1Mi", requests={"fake.com/vendor-a": "1"})]).new_nodeclaims
    assert nodeclaim.requests == parse_resources({"cpu": "1", "memory": "1Mi", "fake.com/vendor-a": "1", "pods": "1"})


# Preferential Fallback


def test_all_impossible_node_preferences_are_relaxed():
    """suite_test.go Preferential Fallback: "should relax all node affinity terms"."""
    preferred = [(1, [r(ZONE, "In", "invalid")]), (1, [r(INSTANCE_TYPE, "In", "invalid")])]
    assert suite_schedule([pod(preferred=preferred)]).scheduled_count() == 1


def test_a_prefer_no_schedule_taint_is_tolerated_after_node_preferences_are_relaxed():
    """suite_test.go Preferential Fallback: "should tolerate PreferNoSchedule taint only after trying to relax
    Affinity terms"."""
    pool = nodepool("default", taints=[Taint("foo", "PreferNoSchedule", "bar")])
    preferred = [(1, [r(ZONE, "In", "invalid")]), (1, [r(INSTANCE_TYPE, "In", "invalid")])]
    [nodeclaim] = suite_schedule([pod(preferred=preferred)], pools=[pool]).new_nodeclaims
    assert Taint("foo", "PreferNoSchedule", "bar") in nodeclaim.taints


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_an_impossible_node_preference_does_not_stop_a_pod_sharing_a_node(key):
    """suite_test.go Preferential Fallback: DescribeTable "should ignore node preferredDuringSchedulingIgnoredDuring
    Execution affinity" (both entries)."""
    first = pod("2", labels={"app": "foo"})
    preferring = pod("1", labels={"app": "baz"}, preferred=[(1, [r(key, "In", "value-1")])])
    result = suite_schedule([first, preferring])
    assert node_pods(result) == [2]


# Ignore Preferences (PreferencePolicy=Ignore)


def zone_pods_and(extra):
    zone1 = pod("2", labels={"app": "foo"}, node_selector={ZONE: "test-zone-1"})
    zone2 = [pod("3", labels={"app": "bar"}, node_selector={ZONE: "test-zone-2"}) for _ in range(2)]
    return zone1, zone2, [zone1, *zone2, extra]


def nodeclaim_of(result, the_pod):
    return next(nc for nc in result.new_nodeclaims if any(p.uid == the_pod.uid for p in nc.pods))


def test_ignored_node_preferences_leave_the_pod_on_the_emptier_node():
    """suite_test.go Ignore Preferences: "should ignore node affinity preferences"."""
    extra = pod("1", labels={"app": "baz"}, preferred=[(1, [r(ZONE, "In", "test-zone-2")])])
    zone1, zone2, pods = zone_pods_and(extra)
    result = suite_schedule(pods, preference_policy="Ignore")
    assert result.scheduled_count() == 4
    assert nodeclaim_of(result, extra) is nodeclaim_of(result, zone1)
    assert nodeclaim_of(result, extra) is not nodeclaim_of(result, zone2[0])


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignored_pod_affinity_preferences_leave_the_pod_on_the_emptier_node(key):
    """suite_test.go Ignore Preferences: DescribeTable "should ignore pod affinity preferences" (both entries)."""
    extra = pod("1", labels={"app": "baz"}, preferred_affinity=[term(key, weight=1, app="bar")])
    zone1, zone2, pods = zone_pods_and(extra)
    result = suite_schedule(pods, preference_policy="Ignore")
    assert result.scheduled_count() == 4
    assert nodeclaim_of(result, extra) is nodeclaim_of(result, zone1)
    assert nodeclaim_of(result, extra) is not nodeclaim_of(result, zone2[0])


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignored_schedule_anyway_spread_puts_five_pods_on_one_node(key):
    """suite_test.go Ignore Preferences: DescribeTable "should ignore topologySpreadConstraint preferences"."""
    pods = [pod(labels={"app": "foo"}, spread=[spread(key, when="ScheduleAnyway", app="foo")]) for _ in range(5)]
    assert node_pods(suite_schedule(pods, preference_policy="Ignore")) == [5]


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignored_anti_affinity_preferences_put_five_pods_on_one_node(key):
    """suite_test.go Ignore Preferences: DescribeTable "should ignore pod anti-affinity preferences"."""
    pods = [pod(labels={"app": "foo"}, preferred_anti_affinity=[term(key, weight=1, app="foo")]) for _ in range(5)]
    assert node_pods(suite_schedule(pods, preference_policy="Ignore")) == [5]


# Multiple NodePools


def test_a_pod_selecting_a_nodepools_label_goes_there():
    """suite_test.go Multiple NodePools: "should schedule to a NodePool by labels"."""
    pools = [nodepool("labelled", labels={"foo": "bar"}), nodepool("plain")]
    [nodeclaim] = suite_schedule([pod(node_selector={"foo": "bar"})], pools=pools).new_nodeclaims
    assert nodeclaim.nodepool == "labelled"


# MinValuesPolicy


def two_four_cpu_types(zone1: str = "test-zone-1-spot", zone2: str = "test-zone-2-spot") -> list[InstanceType]:
    return [
        one_offering_type("instance-type-1", "4", "4Gi", 0.52, zone=zone1),
        one_offering_type("instance-type-2", "4", "4Gi", 0.52, zone=zone2),
    ]


THREE_TYPES_MIN_3 = req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", "instance-type-3", min_values=3)


def test_strict_min_values_above_the_types_available_blocks_the_pod():
    """suite_test.go MinValuesPolicy, instance type, Strict: "should not schedule when minValues requirement is not
    met"."""
    pool = nodepool("default", THREE_TYPES_MIN_3, weight=100)
    result = schedule([pod("0.9", "0.9Gi")], pools=[pool], types=two_four_cpu_types(), min_values_policy="Strict")
    assert result.scheduled_count() == 0


def test_best_effort_lowers_min_values_to_the_types_available():
    """suite_test.go MinValuesPolicy, instance type, BestEffort: "should schedule even when minValues requirement is
    not met"."""
    pool = nodepool("default", THREE_TYPES_MIN_3, weight=100)
    result = schedule([pod("0.9", "0.9Gi")], pools=[pool], types=two_four_cpu_types(), min_values_policy="BestEffort")
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.cheapest.instance_type.name == "instance-type-1"
    assert nodeclaim.min_values_relaxed is True
    requirement = nodeclaim.requirements[INSTANCE_TYPE]
    assert (requirement.values, requirement.min_values) == (frozenset({"instance-type-1", "instance-type-2"}), 2)


@pytest.mark.parametrize("other_min_values", [None, 3], ids=["other-without-min-values", "other-with-min-values-3"])
def test_best_effort_relaxes_the_heavier_nodepool_before_falling_back(other_min_values):
    """suite_test.go MinValuesPolicy, BestEffort: "should relax minValues before falling back to other nodepools"
    (the weight-10 NodePool has no minValues) and "should choose nodepool with higher weight when relaxing
    minValues" (it has minValues 3 too)."""
    heavy = nodepool("heavy", THREE_TYPES_MIN_3, weight=100)
    light = nodepool(
        "light",
        req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", "instance-type-3", min_values=other_min_values),
        weight=10,
    )
    result = schedule(
        [pod("0.9", "0.9Gi")], pools=[heavy, light], types=two_four_cpu_types(), min_values_policy="BestEffort"
    )
    [nodeclaim] = result.new_nodeclaims
    assert (nodeclaim.nodepool, nodeclaim.cheapest.instance_type.name) == ("heavy", "instance-type-1")
    assert nodeclaim.min_values_relaxed is True
    requirement = nodeclaim.requirements[INSTANCE_TYPE]
    assert (requirement.values, requirement.min_values) == (frozenset({"instance-type-1", "instance-type-2"}), 2)


def two_zone_type() -> list[InstanceType]:
    return [
        instance_type(
            "instance-type-1",
            "4",
            "4Gi",
            arch="arm64",
            zones=(("test-zone-1", "spot"), ("test-zone-2", "spot")),
            prices={"spot": 0.52},
        )
    ]


THREE_ZONES_MIN_3 = req(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3", min_values=3)


def test_strict_zone_min_values_above_the_zones_offered_blocks_the_pod():
    """suite_test.go MinValuesPolicy, zone, Strict: "should not schedule when zone minValues requirement is not
    met"."""
    result = schedule(
        [pod("0.9", "0.9Gi")],
        pools=[nodepool("default", THREE_ZONES_MIN_3)],
        types=two_zone_type(),
        min_values_policy="Strict",
    )
    assert result.scheduled_count() == 0


def test_best_effort_lowers_zone_min_values_to_the_zones_offered():
    """suite_test.go MinValuesPolicy, zone, BestEffort: "should schedule even when zone minValues requirement is not
    met" (the two offerings are priced 0.52 and 0.54 upstream; karpui's builder prices them alike, which the
    expectations do not depend on)."""
    result = schedule(
        [pod("0.9", "0.9Gi")],
        pools=[nodepool("default", THREE_ZONES_MIN_3)],
        types=two_zone_type(),
        min_values_policy="BestEffort",
    )
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.cheapest.instance_type.name == "instance-type-1"
    assert nodeclaim.min_values_relaxed is True
    zone = nodeclaim.requirements[ZONE]
    assert (zone.values, zone.min_values) == (frozenset({"test-zone-1", "test-zone-2", "test-zone-3"}), 2)


def test_best_effort_lowers_both_instance_type_and_zone_min_values():
    """suite_test.go MinValuesPolicy, instance type and zone, BestEffort: "should schedule when minValues requirement
    is not met"."""
    pool = nodepool("default", THREE_TYPES_MIN_3, THREE_ZONES_MIN_3, weight=100)
    result = schedule([pod("0.9", "0.9Gi")], pools=[pool], types=two_zone_type(), min_values_policy="BestEffort")
    [nodeclaim] = result.new_nodeclaims
    assert nodeclaim.min_values_relaxed is True
    types_requirement, zone = nodeclaim.requirements[INSTANCE_TYPE], nodeclaim.requirements[ZONE]
    assert (types_requirement.values, types_requirement.min_values) == (frozenset({"instance-type-1"}), 1)
    assert (zone.values, zone.min_values) == (frozenset({"test-zone-1", "test-zone-2", "test-zone-3"}), 2)
