"""Karpenter's scheduling suite (pkg/controllers/provisioning/scheduling/suite_test.go, lines 1-3000) over karpui.

Each test names the upstream It it follows. The Go suite's NodePool allows capacity types spot, on-demand and reserved
unless a test replaces its requirements; its catalog is the fake cloud provider's (tests/builders.fake_catalog), whose
types also carry multi-valued `kubernetes.io/os` and the fake provider's own well-known labels `integer` (cpu count),
`size` (small/large) and `special` (only on large types). karpui's well-known keys are fixed, so those three are
translated here onto kwok's well-known keys that play the same part: instance-cpu, instance-size, instance-family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import pytest

from provisioner.catalog import InstanceType, Offering
from provisioner.nodes import DaemonSet, Node
from provisioner.pods import OwnerReference, effective_requests
from provisioner.quantity import parse_resources
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling import results as reasons
from provisioner.taints import Taint
from tests.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    daemonset,
    instance_type,
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

OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
INTEGER = "karpenter.kwok.sh/instance-cpu"  # the fake provider's `integer`
SIZE = "karpenter.kwok.sh/instance-size"  # the fake provider's `size`
SPECIAL = "karpenter.kwok.sh/instance-family"  # the fake provider's `special` (ExoticInstanceLabelKey)
GIB = 2**30


@dataclass(frozen=True)
class FakeType(InstanceType):
    """An instance type with requirements a single-valued label cannot say: several OSes, a DoesNotExist key."""

    extra: tuple[Requirement, ...] = ()

    @cached_property
    def requirements(self) -> Requirements:
        return Requirements([*InstanceType.requirements.func(self).values(), *self.extra])


def fake_type(
    name: str,
    cpu: str = "4",
    memory: str = "4Gi",
    pods: int = 5,
    *,
    arch: str = "amd64",
    oses: tuple[str, ...] = ("darwin", "linux", "windows"),
    extra: dict[str, str] | None = None,
    offerings: tuple[Offering, ...] | None = None,
) -> FakeType:
    """fake.NewInstanceType: 100m/10Mi kube-reserved, five offerings, price 0.1/CPU + 0.1/GB (+1 per GPU)."""
    base = instance_type(name, cpu, memory, pods, arch=arch, extra=extra)
    large = base.capacity["cpu"] > 4000 and base.capacity["memory"] > 8 * GIB * 1000
    return FakeType(
        name=name,
        capacity=base.capacity,
        offerings=offerings or base.offerings,
        labels={ARCH: arch, INTEGER: str(base.capacity["cpu"] // 1000), SIZE: "large" if large else "small"},
        overhead=base.overhead,
        extra=(
            Requirement(OS, frozenset(oses)),
            Requirement(SPECIAL, frozenset({"optional"} if large else set())),
        ),
    )


def fake_catalog() -> list[FakeType]:
    """fake.CloudProvider.GetInstanceTypes with no overrides."""
    return [
        fake_type("default-instance-type"),
        fake_type("small-instance-type", "2", "2Gi"),
        fake_type("gpu-vendor-instance-type", extra={"fake.com/vendor-a": "2"}),
        fake_type("gpu-vendor-b-instance-type", extra={"fake.com/vendor-b": "2"}),
        fake_type("arm-instance-type", "16", "128Gi", arch="arm64", oses=("darwin", "ios", "linux", "windows")),
        fake_type("single-pod-instance-type", pods=1),
    ]


def fake_instance_types(total: int) -> list[FakeType]:
    """fake.InstanceTypes(n): fake-it-i with i+1 CPUs, 2(i+1)Gi and 10(i+1) pods."""
    return [fake_type(f"fake-it-{i}", str(i + 1), f"{(i + 1) * 2}Gi", (i + 1) * 10) for i in range(total)]


ANY_CAPACITY = req(CAPACITY_TYPE, "In", "spot", "on-demand", "reserved")


def pool(*requirements, **options):
    """The suite's BeforeEach NodePool: its capacity-type requirement plus `requirements`."""
    return nodepool("default", ANY_CAPACITY, *requirements, **options)


def solve(pods, pools=None, types=None, **options):
    return schedule(
        pods,
        pools=[pool()] if pools is None else pools,
        types=fake_catalog() if types is None else types,
        **options,
    )


def scheduled(result) -> int:
    return result.scheduled_count()


def values(plan, key: str) -> list[str]:
    return sorted(plan.requirements[key].values)


def bound(p, name: str):
    return replace(p, node_name=name, unschedulable=False, phase="Running")


def launch(plan, name: str, *, initialized: bool = False, taints=None, extra_labels=None, pods=None) -> Node:
    """The Node fake.CloudProvider.Create makes for a planned NodeClaim: its cheapest type, the first compatible
    offering, the type's allocatable; its pods bound to it, in flight (not initialised) unless told otherwise."""
    chosen = plan.cheapest.instance_type
    offering = chosen.compatible_offerings(plan.requirements)[0]
    labels = {
        HOSTNAME: name,
        INSTANCE_TYPE: chosen.name,
        **chosen.labels,
        ZONE: offering.zone,
        CAPACITY_TYPE: offering.capacity_type,
        "karpenter.sh/nodepool": plan.nodepool,
        **plan.labels,
        **(extra_labels or {}),
    }
    if initialized:
        labels["karpenter.sh/initialized"] = "true"
    return Node(
        name=name,
        labels=labels,
        allocatable=dict(chosen.allocatable),
        capacity=dict(chosen.capacity),
        taints=tuple(plan.taints) + tuple(plan.startup_taints) if taints is None else tuple(taints),
        startup_taints=tuple(plan.startup_taints),
        pods=tuple(bound(p, name) for p in (plan.pods if pods is None else pods)),
        initialized=initialized,
        managed=True,
        nodepool=plan.nodepool,
    )


# Describe("Custom Constraints") / Context("NodePool with Labels") ----------------------------------------------


LABELLED = pool(labels={"test-key": "test-value"})


@pytest.mark.parametrize(
    ("constraint", "placed"),
    [
        # "should schedule pods that have matching requirements"
        ({"required": [[r("test-key", "In", "test-value", "another-value")]]}, 1),
        # "should not schedule pods that have conflicting requirements"
        ({"required": [[r("test-key", "In", "another-value")]]}, 0),
    ],
)
def test_nodepool_labels_against_pod_requirements(constraint, placed):
    result = solve([pod(**constraint)], pools=[LABELLED])
    assert scheduled(result) == placed
    if placed:
        assert result.new_nodeclaims[0].labels["test-key"] == "test-value"


def test_a_pod_selecting_a_key_no_nodepool_defines_is_not_scheduled():
    """It("should not schedule pods that have node selectors with undefined key") — the pool has no labels."""
    assert scheduled(solve([pod(node_selector={"test-key": "test-value"})])) == 0


# Context("Well Known Labels") (also its copy at lines 678-880) ----------------------------------------------------


@pytest.mark.parametrize(
    ("pool_requirements", "constraint", "zone"),
    [
        # "should use NodePool constraints"
        ([req(ZONE, "In", "test-zone-2")], {}, "test-zone-2"),
        # "should use node selectors"
        ([req(ZONE, "In", "test-zone-1", "test-zone-2")], {"node_selector": {ZONE: "test-zone-2"}}, "test-zone-2"),
        # "should not schedule the pod if nodeselector unknown"
        ([req(ZONE, "In", "test-zone-1")], {"node_selector": {ZONE: "unknown"}}, None),
        # "should not schedule if node selector outside of NodePool constraints"
        ([req(ZONE, "In", "test-zone-1")], {"node_selector": {ZONE: "test-zone-2"}}, None),
        # "should schedule compatible requirements with Operator=In"
        ([ANY_CAPACITY], {"required": [[r(ZONE, "In", "test-zone-3")]]}, "test-zone-3"),
        # "should not schedule incompatible preferences and requirements with Operator=In"
        ([ANY_CAPACITY], {"required": [[r(ZONE, "In", "unknown")]]}, None),
        # "should schedule compatible requirements with Operator=NotIn"
        ([ANY_CAPACITY], {"required": [[r(ZONE, "NotIn", "test-zone-1", "test-zone-2", "unknown")]]}, "test-zone-3"),
        # "should not schedule incompatible preferences and requirements with Operator=NotIn"
        (
            [ANY_CAPACITY],
            {"required": [[r(ZONE, "NotIn", "test-zone-1", "test-zone-2", "test-zone-3", "unknown")]]},
            None,
        ),
        # "should schedule compatible preferences and requirements with Operator=In"
        (
            [ANY_CAPACITY],
            {
                "required": [[r(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3", "unknown")]],
                "preferred": [(1, [r(ZONE, "In", "test-zone-2", "unknown")])],
            },
            "test-zone-2",
        ),
        # "should schedule compatible preferences and requirements with Operator=NotIn"
        (
            [ANY_CAPACITY],
            {
                "required": [[r(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3", "unknown")]],
                "preferred": [(1, [r(ZONE, "NotIn", "test-zone-1", "test-zone-3")])],
            },
            "test-zone-2",
        ),
        # "should schedule compatible node selectors, preferences and requirements"
        (
            [ANY_CAPACITY],
            {
                "node_selector": {ZONE: "test-zone-3"},
                "required": [[r(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3")]],
                "preferred": [(1, [r(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3")])],
            },
            "test-zone-3",
        ),
    ],
)
def test_well_known_zone_constraints(pool_requirements, constraint, zone):
    result = solve([pod(**constraint)], pools=[nodepool("default", *pool_requirements)])
    if zone is None:
        assert scheduled(result) == 0
    else:
        [plan] = result.new_nodeclaims
        assert launch(plan, "node-1").labels[ZONE] == zone  # the zone fake.CloudProvider.Create labels the node with


@pytest.mark.parametrize(
    "preferred",
    [
        # "should schedule incompatible preferences and requirements with Operator=In"
        [r(ZONE, "In", "unknown")],
        # "should schedule incompatible preferences and requirements with Operator=NotIn"
        [r(ZONE, "NotIn", "test-zone-1", "test-zone-2", "test-zone-3")],
    ],
)
def test_an_unsatisfiable_zone_preference_is_relaxed(preferred):
    required = [[r(ZONE, "In", "test-zone-1", "test-zone-2", "test-zone-3", "unknown")]]
    result = solve([pod(required=required, preferred=[(1, preferred)])])
    assert scheduled(result) == 1


def test_a_hostname_node_selector_is_not_scheduled():
    """It("should not schedule nodes with a hostname selector")."""
    result = solve([pod(node_selector={HOSTNAME: "red-node"})])
    assert scheduled(result) == 0 and result.new_nodeclaims == []


@pytest.mark.parametrize(
    ("operator", "value", "integer"),
    [
        ("Gt", "8", "16"),  # "should schedule compatible requirements with Operator=Gt"
        ("Lt", "8", "2"),  # "should schedule compatible requirements with Operator=Lt"
        ("Gte", "16", "16"),  # "should schedule compatible requirements with Operator=Gte"
        ("Lte", "2", "2"),  # "should schedule compatible requirements with Operator=Lte"
    ],
)
def test_nodepool_integer_bounds_pick_the_type(operator, value, integer):
    [plan] = solve([pod()], pools=[nodepool("default", req(INTEGER, operator, value))]).new_nodeclaims
    assert plan.cheapest.instance_type.labels[INTEGER] == integer


def test_multidimensional_node_selectors_preferences_and_requirements_combine():
    """It("should combine multidimensional node selectors, preferences and requirements")."""
    p = pod(
        node_selector={ZONE: "test-zone-3", INSTANCE_TYPE: "arm-instance-type"},
        required=[
            [
                r(ZONE, "In", "test-zone-1", "test-zone-3"),
                r(INSTANCE_TYPE, "In", "default-instance-type", "arm-instance-type"),
            ]
        ],
        preferred=[(1, [r(ZONE, "NotIn", "unknown"), r(INSTANCE_TYPE, "NotIn", "unknown")])],
    )
    [plan] = solve([p]).new_nodeclaims
    assert (values(plan, ZONE), plan.instance_type_names) == (["test-zone-3"], ["arm-instance-type"])


# Context("Constraints Validation") ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        HOSTNAME,  # "should not schedule pods that have node selectors with restricted labels" (v1.RestrictedLabels)
        "karpenter.sh/test",  # "... with restricted domains" (v1.RestrictedLabelDomains)
    ],
)
def test_pods_requiring_restricted_keys_are_refused(key):
    result = solve([pod(required=[[r(key, "In", "test")]])])
    assert scheduled(result) == 0
    assert [f.reasons[0].kind for f in result.failures.values()] == [reasons.VALIDATION]


@pytest.mark.parametrize("prefix", ["", "subdomain."])
def test_nodepool_requirements_in_kubernetes_domains_label_the_node(prefix):
    """It("should schedule pods that have node selectors with label in the kubernetes domains") and
    It("... in subdomain from kubernetes domains")."""
    keys = [f"{prefix}kubernetes.io/test", f"{prefix}k8s.io/test"]
    np = nodepool("default", *(req(k, "In", "test-value") for k in keys))
    [plan] = solve([pod()], pools=[np]).new_nodeclaims
    assert {k: plan.labels.get(k) for k in keys} == dict.fromkeys(keys, "test-value")


def test_pods_selecting_well_known_labels_schedule():
    """It("should schedule pods that have node selectors with label in wellknown label list")."""
    pods = [
        pod(node_selector={ZONE: "test-zone-1"}),
        pod(node_selector={INSTANCE_TYPE: "default-instance-type"}),
        pod(node_selector={ARCH: "arm64"}),
        pod(node_selector={OS: "linux"}),
        pod(node_selector={CAPACITY_TYPE: "spot"}),
    ]
    result = solve(pods)
    assert scheduled(result) == 5 and result.failures == {}


# Context("Scheduling Logic") -----------------------------------------------------------------------------------

TEST_KEY_POOL = nodepool("default", req("test-key", "In", "test-value"))


@pytest.mark.parametrize(
    ("requirement", "label"),
    [
        (None, "test-value"),  # "should schedule unconstrained pods that don't have matching node selectors"
        (r("test-key", "In", "test-value"), "test-value"),  # "... with matching value and In operator"
        (r("test-key", "NotIn", "test-value"), None),  # "should not schedule ... matching value and NotIn operator"
        (r("test-key", "Exists"), "test-value"),  # "should schedule the pod with Exists operator and defined key"
        (
            r("test-key", "DoesNotExist"),
            None,
        ),  # "should not schedule the pod with DoesNotExists operator and defined key"
        (r("test-key", "In", "another-value"), None),  # "should not schedule ... different value and In operator"
        (r("test-key", "NotIn", "another-value"), "test-value"),  # "should schedule ... different value and NotIn"
    ],
)
def test_custom_key_operators_against_a_nodepool_requirement(requirement, label):
    result = solve([pod(required=[[requirement]] if requirement is not None else ())], pools=[TEST_KEY_POOL])
    if label is None:
        assert scheduled(result) == 0
    else:
        [plan] = result.new_nodeclaims
        assert plan.labels["test-key"] == label


@pytest.mark.parametrize(
    ("requirement", "placed"),
    [
        (r("test-key", "In", "test-value"), 0),  # "... with In operator and undefined key"
        (r("test-key", "NotIn", "test-value"), 1),  # "... with NotIn operator and undefined key"
        (r("test-key", "Exists"), 0),  # "... with Exists operator and undefined key"
        (r("test-key", "DoesNotExist"), 1),  # "should schedule pods that with DoesNotExists operator and undefined key"
    ],
)
def test_custom_key_operators_against_an_undefined_key(requirement, placed):
    result = solve([pod(required=[[requirement]])])
    assert scheduled(result) == placed
    if placed:  # NotIn: the node may carry test-key, with any other value; DoesNotExist: not at all
        labels = result.new_nodeclaims[0].labels
        assert labels.get("test-key", "") != "test-value"
        assert requirement.complement or "test-key" not in labels


def test_compatible_custom_key_pods_share_a_node():
    """It("should schedule compatible pods to the same node")."""
    np = nodepool("default", req("test-key", "In", "test-value", "another-value"))
    pods = [
        pod(required=[[r("test-key", "In", "test-value")]]),
        pod(required=[[r("test-key", "NotIn", "another-value")]]),
    ]
    [plan] = solve(pods, pools=[np]).new_nodeclaims
    assert len(plan.pods) == 2 and plan.labels["test-key"] == "test-value"


def test_incompatible_custom_key_pods_get_different_nodes():
    """It("should schedule incompatible pods to the different node")."""
    np = nodepool("default", req("test-key", "In", "test-value", "another-value"))
    pods = [pod(required=[[r("test-key", "In", "test-value")]]), pod(required=[[r("test-key", "In", "another-value")]])]
    result = solve(pods, pools=[np])
    assert sorted(plan.labels["test-key"] for plan in result.new_nodeclaims) == ["another-value", "test-value"]


def test_exists_does_not_overwrite_an_in_on_the_same_key():
    """It("Exists operator should not overwrite the existing value")."""
    result = solve([pod(required=[[r(ZONE, "In", "non-existent-zone"), r(ZONE, "Exists")]])])
    assert scheduled(result) == 0


# Describe("Preferential Fallback") -----------------------------------------------------------------------------


def test_the_final_required_term_is_not_relaxed():
    """It("should not relax the final term"): the pool pins test-zone-1 and default-instance-type."""
    np = nodepool("default", req(ZONE, "In", "test-zone-1"), req(INSTANCE_TYPE, "In", "default-instance-type"))
    assert scheduled(solve([pod(required=[[r(ZONE, "In", "invalid")]])], pools=[np])) == 0


def test_every_unsatisfiable_preference_is_relaxed():
    """It("should relax all terms")."""
    preferred = [(1, [r(ZONE, "In", "invalid")]), (1, [r(INSTANCE_TYPE, "In", "invalid")])]
    result = solve([pod(preferred=preferred)])
    assert scheduled(result) == 1
    assert len(result.relaxations[next(iter(result.relaxations))]) == 2


def test_lighter_preferences_are_used_once_heavier_ones_fail():
    """It("should relax to use lighter weights"): the weight-100 term asks instance-type for a zone name."""
    np = nodepool("default", req(ZONE, "In", "test-zone-1", "test-zone-2"))
    preferred = [
        (100, [r(INSTANCE_TYPE, "In", "test-zone-3")]),
        (50, [r(ZONE, "In", "test-zone-2")]),
        (1, [r(ZONE, "In", "test-zone-1")]),
    ]
    [plan] = solve([pod(preferred=preferred)], pools=[np]).new_nodeclaims
    assert values(plan, ZONE) == ["test-zone-2"]


def test_a_self_conflicting_preference_is_relaxed():
    """It("should schedule even if preference requirements are conflicting")."""
    result = solve([pod(preferred=[(1, [r(ZONE, "In", "invalid"), r(ZONE, "NotIn", "invalid")])])])
    assert scheduled(result) == 1


# Describe("Instance Type Compatibility") -----------------------------------------------------------------------

BOTH_ARCHS = nodepool("default", req(ARCH, "In", "arm64", "amd64"))
AMD64 = nodepool("default", req(ARCH, "In", "amd64"))


@pytest.mark.parametrize(
    ("selectors", "types"),
    [
        # "should launch pods with different archs on different instances"
        ([{ARCH: "amd64"}, {ARCH: "arm64"}], [["small-instance-type"], ["arm-instance-type"]]),
        # "should launch pods with different operating systems on different instances"
        ([{OS: "linux"}, {OS: "windows"}], [["small-instance-type"], ["small-instance-type"]]),
        # "should launch pods with different instance type node selectors on different instances" (the first uses the
        # beta alias corev1.LabelInstanceType)
        (
            [{"beta.kubernetes.io/instance-type": "small-instance-type"}, {INSTANCE_TYPE: "default-instance-type"}],
            [["small-instance-type"], ["default-instance-type"]],
        ),
        # "should launch pods with different zone selectors on different instances"
        ([{ZONE: "test-zone-1"}, {ZONE: "test-zone-2"}], [["small-instance-type"], ["small-instance-type"]]),
    ],
)
def test_pods_with_different_selectors_get_different_nodes(selectors, types):
    result = solve([pod(node_selector=s) for s in selectors], pools=[BOTH_ARCHS])
    assert scheduled(result) == 2
    assert [[p.name for p in plan.pods] for plan in result.new_nodeclaims] == [[p.name] for p in result.pods_considered]
    assert sorted(placed_types(result)) == sorted(t[0] for t in types)


@pytest.mark.parametrize(
    "constraint",
    [
        # "should exclude instance types that are not supported by the pod constraints (node affinity/instance type)"
        {"required": [[r(INSTANCE_TYPE, "In", "arm-instance-type")]]},
        # "... (node affinity/operating system)": only the arm64 type runs ios
        {"required": [[r(OS, "In", "ios")]]},
        # "should exclude instance types that are not supported by the provider constraints (arch)": only arm has 14 CPUs
        {"cpu": "14"},
    ],
)
def test_an_amd64_pool_excludes_what_only_the_arm_type_offers(constraint):
    assert scheduled(solve([pod(**constraint)], pools=[AMD64])) == 0


def test_an_ios_pod_schedules_on_the_arm_type_when_the_pool_allows_arm():
    """The control for the OS exclusion above: the fake catalog's arm type does run ios."""
    assert placed_types(solve([pod(required=[[r(OS, "In", "ios")]])], pools=[BOTH_ARCHS])) == ["arm-instance-type"]


GPU1, GPU2 = "karpenter.sh/super-great-gpu", "karpenter.sh/even-better-gpu"


def gpu_types():
    types = fake_instance_types(5)
    types[0] = replace(types[0], capacity={**types[0].capacity, **parse_resources({GPU1: "25"})})
    types[1] = replace(types[1], capacity={**types[1].capacity, **parse_resources({GPU2: "25"})})
    return types


def test_resources_no_single_type_has_together_go_to_different_nodes():
    """It("should launch pods with resources that aren't on any single instance type on different instances")."""
    result = solve([pod(requests={GPU1: "1"}), pod(requests={GPU2: "1"})], types=gpu_types())
    assert sorted(placed_types(result)) == ["fake-it-0", "fake-it-1"]


def test_a_pod_needing_resources_no_single_type_has_is_not_scheduled():
    """It("should fail to schedule a pod with resources requests that aren't on a single instance type")."""
    assert scheduled(solve([pod(requests={GPU1: "1", GPU2: "1"})], types=gpu_types())) == 0


# Context("Provider Specific Labels")


def test_provider_labels_filter_instance_types():
    """It("should filter instance types that match labels")."""
    large, small = pod(node_selector={SIZE: "large"}), pod(node_selector={SIZE: "small"})
    result = solve([large, small], types=fake_instance_types(5))
    by_pod = {plan.pods[0].name: plan.cheapest.instance_type.name for plan in result.new_nodeclaims}
    assert by_pod == {large.name: "fake-it-4", small.name: "fake-it-0"}


def test_provider_labels_incompatible_with_the_instance_type_do_not_schedule():
    """It("should not schedule with incompatible labels")."""
    pods = [
        pod(node_selector={SIZE: "large", INSTANCE_TYPE: "fake-it-0"}),
        pod(node_selector={SIZE: "small", INSTANCE_TYPE: "fake-it-4"}),
    ]
    assert scheduled(solve(pods, types=fake_instance_types(5))) == 0


def test_an_optional_label_that_exists_picks_the_type_that_has_it():
    """It("should schedule optional labels"): only fake-it-4 (5 CPUs, 10Gi) is `large` and has `special`."""
    [plan] = solve([pod(required=[[r(SPECIAL, "Exists")]])], types=fake_instance_types(5)).new_nodeclaims
    assert plan.instance_type_names == ["fake-it-4"]


def test_an_optional_label_that_must_not_exist_keeps_to_the_types_without_it():
    """It("should schedule without optional labels if disallowed"), with test.NodePool() (no requirements)."""
    result = schedule([pod(required=[[r(SPECIAL, "DoesNotExist")]])], [nodepool()], fake_instance_types(5))
    [plan] = result.new_nodeclaims
    assert plan.instance_type_names == ["fake-it-0", "fake-it-1", "fake-it-2", "fake-it-3"]


# Describe("Binpacking") ------------------------------------------------------------------------------------------


def test_a_2000M_pod_fits_the_small_type():
    """It("should schedule a small pod on the smallest possible instance type"): 2000M < 2Gi - 10Mi."""
    assert placed_types(solve([pod(memory="2000M")])) == ["small-instance-type"]


def test_a_large_and_a_small_pod_get_different_types():
    """It("should pack nodes tightly"): 4.5 CPUs needs fake-it-4, 1 CPU fits fake-it-1 (fake-it-0 has 900m)."""
    result = solve([pod(cpu="4.5"), pod(cpu="1")], types=fake_instance_types(5))
    assert placed_types(result) == ["fake-it-4", "fake-it-1"]


def test_the_pods_limit_per_node_opens_new_nodes():
    """It("should create new nodes when a node is at capacity due to pod limits per node")."""
    pods = [pod(cpu="1m", memory="1m", node_selector={ARCH: "amd64"}) for _ in range(25)]
    result = solve(pods)
    assert placed_types(result) == ["small-instance-type"] * 5
    assert [len(plan.pods) for plan in result.new_nodeclaims] == [5] * 5


def with_init_container(cpu: str, memory: str, init_cpu: str, init_memory: str):
    requests = effective_requests(
        [parse_resources({"cpu": cpu, "memory": memory})],
        init_containers=[(parse_resources({"cpu": init_cpu, "memory": init_memory}), False)],
    )
    return replace(pod(), requests=requests)


def test_init_container_requests_size_the_node():
    """It("should take into account initContainer resource requests when binpacking"): 2 CPUs does not fit small."""
    assert placed_types(solve([with_init_container("1", "1Gi", "2", "1Gi")])) == ["default-instance-type"]


def test_init_container_requests_beyond_every_type_do_not_schedule():
    """It("should not schedule pods when initContainer resource requests are greater than available instance types")."""
    assert scheduled(solve([with_init_container("1", "1Gi", "2", "1Ti")])) == 0


def test_every_type_that_fits_is_kept_and_the_cheapest_chosen_whatever_its_size():
    """It("should select for valid instance types, regardless of price")."""

    def priced(name, cpu, memory, price):
        return fake_type(name, cpu, memory, offerings=(Offering("test-zone-1a", "on-demand", price),))

    types = [priced("medium", "2", "2Gi", 3.0), priced("small", "1", "1Gi", 2.0), priced("large", "4", "4Gi", 1.0)]
    [plan] = solve([pod(cpu="1m", memory="1Mi")], types=types).new_nodeclaims
    assert plan.cheapest.instance_type.name == "large"
    assert plan.instance_type_names == ["large", "medium", "small"]


# Describe("In-Flight Nodes") -------------------------------------------------------------------------------------


def test_an_in_flight_node_in_the_intersecting_zone_takes_the_pod_and_one_outside_does_not():
    """It("should not launch a second node if there is an in-flight node that can support the pod (node selectors)")."""
    [first] = solve([pod(cpu="10m", required=[[r(ZONE, "In", "test-zone-2")]])]).new_nodeclaims
    inflight = launch(first, "node-1")
    assert inflight.labels[ZONE] == "test-zone-2"
    second = solve([pod(cpu="10m", required=[[r(ZONE, "In", "test-zone-1", "test-zone-2")]])], nodes=[inflight])
    assert (list(second.placements), second.new_nodeclaims) == (["node-1"], [])
    inflight = replace(inflight, pods=inflight.pods + tuple(bound(p, "node-1") for p in second.placements["node-1"]))
    third = solve([pod(cpu="10m", required=[[r(ZONE, "In", "test-zone-1", "test-zone-3")]])], nodes=[inflight])
    assert (third.placements, len(third.new_nodeclaims)) == ({}, 1)


def test_a_pod_that_does_not_fit_the_in_flight_node_gets_a_second_node():
    """It("should launch a second node if a pod won't fit on the existingNodes node"): small type, 1900m."""
    [first] = solve([pod(cpu="1001m")]).new_nodeclaims
    assert first.cheapest.instance_type.name == "small-instance-type"
    result = solve([pod(cpu="1")], nodes=[launch(first, "node-1")])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_a_pod_incompatible_with_the_in_flight_node_gets_a_second_node():
    """It("should launch a second node if a pod isn't compatible with the existingNodes node (node selector)")."""
    [first] = solve([pod(cpu="10m")]).new_nodeclaims
    result = solve([pod(node_selector={ARCH: "arm64"})], nodes=[launch(first, "node-1")])
    assert (result.placements, placed_types(result)) == ({}, ["arm-instance-type"])


def test_a_terminating_in_flight_node_is_not_counted():
    """It("should launch a second node if an in-flight node is terminating")."""
    [first] = solve([pod(cpu="10m")]).new_nodeclaims
    deleting = replace(launch(first, "node-1"), marked_for_deletion=True)
    result = solve([pod(cpu="10m")], nodes=[deleting])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_an_unbound_pod_goes_back_to_the_in_flight_node_launched_for_it():
    """It("should not launch a second node if there is an in-flight node that can support the pod (#2011)") and
    Describe("No Pre-Binding") It("should not bind pods to nodes"): the node was launched, the pod never bound."""
    p = pod(cpu="10m")
    [first] = solve([p]).new_nodeclaims
    result = solve([p], nodes=[launch(first, "node-1", pods=())])
    assert (list(result.placements), result.new_nodeclaims) == (["node-1"], [])


SPREAD_LABELS = {"foo": "bar"}


def spread_pods(count: int, key: str):
    return [pod(labels=SPREAD_LABELS, spread=[spread(key, 1, foo="bar")]) for _ in range(count)]


def test_zone_spread_fills_in_flight_nodes_before_launching():
    """It("should balance pods across zones with in-flight nodes"): 1/1/2, then 3/3/3 with no new node."""
    first = solve(spread_pods(4, ZONE))
    assert zone_counts(first) == [1, 1, 2]
    nodes = [launch(plan, f"node-{i}") for i, plan in enumerate(first.new_nodeclaims)]
    second = solve(spread_pods(5, ZONE), nodes=nodes)
    assert second.new_nodeclaims == []
    per_zone: dict[str, int] = {}
    for n in nodes:
        per_zone[n.labels[ZONE]] = (
            per_zone.get(n.labels[ZONE], 0) + len(n.pods) + len(second.placements.get(n.name, []))
        )
    assert sorted(per_zone.values()) == [3, 3, 3]


def test_hostname_spread_launches_new_nodes_beside_in_flight_ones():
    """It("should balance pods across hostnames with in-flight nodes"): nine nodes with one pod each."""
    first = solve(spread_pods(4, HOSTNAME))
    assert [len(plan.pods) for plan in first.new_nodeclaims] == [1, 1, 1, 1]
    nodes = [launch(plan, f"node-{i}") for i, plan in enumerate(first.new_nodeclaims)]
    second = solve(spread_pods(5, HOSTNAME), nodes=nodes)
    assert (second.placements, [len(plan.pods) for plan in second.new_nodeclaims]) == ({}, [1, 1, 1, 1, 1])


# Context("Taints")


def empty_arm_node(**options) -> Node:
    """The node an 8-CPU pod launched (only arm-instance-type has 8 CPUs), after that pod was deleted."""
    [plan] = solve([pod(cpu="8")]).new_nodeclaims
    assert plan.cheapest.instance_type.name == "arm-instance-type"
    return launch(plan, "node-1", pods=(), **options)


def test_an_in_flight_node_without_taints_takes_the_pod():
    """It("should assume pod will schedule to a tainted node with no taints")."""
    result = solve([pod()], nodes=[empty_arm_node(taints=())])
    assert (list(result.placements), result.new_nodeclaims) == (["node-1"], [])


@pytest.mark.parametrize(("initialized", "placed"), [(False, True), (True, False)])
def test_not_ready_no_execute_is_ephemeral_only_while_uninitialized(initialized, placed):
    """It("should assume pod will schedule to a node with ephemeral taint node.kubernetes.io/not-ready:NoExecute
    when the node is uninitialized") — and not once it is initialized."""
    [plan] = solve([pod()]).new_nodeclaims
    not_ready = Taint("node.kubernetes.io/not-ready", "NoExecute")
    result = solve([pod()], nodes=[launch(plan, "node-1", pods=(), taints=[not_ready], initialized=initialized)])
    assert list(result.placements) == (["node-1"] if placed else [])
    assert len(result.new_nodeclaims) == (0 if placed else 1)


def test_an_initialized_node_with_a_custom_taint_is_avoided():
    """It("should not assume pod will schedule to a tainted node")."""
    tainted = empty_arm_node(taints=[Taint("foo.com/taint", "NoSchedule", "tainted")], initialized=True)
    result = solve([pod()], nodes=[tainted])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_startup_taints_count_again_after_initialization():
    """It("should not assume pod will schedule to a node with startup taints after initialization")."""
    startup = Taint("ignore-me", "NoSchedule", "nothing-to-see-here")
    [plan] = solve([pod()], pools=[pool(startup_taints=[startup])]).new_nodeclaims
    node = launch(plan, "node-1", pods=(), taints=[startup], initialized=True)
    result = solve([pod()], pools=[pool(startup_taints=[startup])], nodes=[node])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_an_in_flight_node_with_its_custom_startup_taint_takes_the_pod():
    """It("should assume pod will schedule to a tainted node with a custom startup taint")."""
    startup = Taint("foo.com/taint", "NoSchedule", "tainted")
    np = pool(startup_taints=[startup])
    [plan] = solve([pod(cpu="8")], pools=[np]).new_nodeclaims
    not_ready = Taint("node.kubernetes.io/not-ready", "NoSchedule")
    node = launch(plan, "node-1", pods=(), taints=[startup, not_ready])
    result = solve([pod()], pools=[np], nodes=[node])
    assert (list(result.placements), result.new_nodeclaims) == (["node-1"], [])


# Context("Daemonsets")


def ds_pod(ds: DaemonSet, cpu: str, memory: str, node_name: str, **options):
    return pod(
        cpu, memory, owner=OwnerReference("DaemonSet", ds.name), namespace=ds.namespace, node_name=node_name, **options
    )


def test_a_bound_daemonset_pod_uses_the_daemonsets_share_of_an_in_flight_node():
    """It("should track daemonset usage separately so we know how many DS resources are remaining to be scheduled"):
    15.9 CPUs allocatable less the DaemonSet pod's 1 leaves exactly 14.9."""
    ds = daemonset("1", "1Gi")
    node = empty_arm_node()
    node = replace(node, pods=(ds_pod(ds, "1", "2Gi", "node-1"),))
    result = solve([pod(cpu="14.9")], nodes=[node], daemonsets=[ds])
    assert (list(result.placements), result.new_nodeclaims) == (["node-1"], [])


def test_an_unexpected_daemonset_pod_on_the_node_leaves_too_little_room():
    """It("should handle unexpected daemonset pods binding to the node"): 14.9 CPUs left, the pod asks 15.5."""
    ds1 = daemonset("1", "1Gi")
    ds1 = replace(ds1, template=replace(ds1.template, node_selector={"my-node-label": "value"}))
    ds2 = daemonset("1m", "0")
    node = empty_arm_node(extra_labels={"my-node-label": "value"})
    node = replace(node, pods=(ds_pod(ds1, "1", "2Gi", "node-1", node_selector={"my-node-label": "value"}),))
    result = solve([pod(cpu="15.5")], nodes=[node], daemonsets=[ds1, ds2])
    assert (result.placements, placed_types(result)) == ({}, ["arm-instance-type"])


def test_daemonsets_selecting_registered_or_initialized_do_not_reach_the_nodeclaim():
    """It("Should properly handle DaemonSet resources with Node Affinity for `karpenter.sh/initialized` and
    `karpenter.sh/registered`"): the NodeClaim carries neither key as a requirement or label."""
    keys = ("karpenter.sh/initialized", "karpenter.sh/registered")
    dss = []
    for key in keys:
        ds = daemonset("1", "0")
        dss.append(
            replace(
                ds, template=replace(ds.template, required_terms=pod(required=[[r(key, "In", "true")]]).required_terms)
            )
        )
    [plan] = solve([pod(cpu="2")], daemonsets=dss).new_nodeclaims
    assert not set(keys) & (set(plan.requirements) | set(plan.labels))


# Describe("Existing Nodes") --------------------------------------------------------------------------------------


def unowned(name: str, cpu: str, memory: str) -> Node:
    return Node(
        name=name,
        labels={HOSTNAME: name},
        allocatable=parse_resources({"cpu": cpu, "memory": memory, "pods": "110"}),
        capacity=parse_resources({"cpu": cpu, "memory": memory, "pods": "110"}),
    )


def test_a_hundred_pods_go_to_an_existing_node_karpenter_does_not_own():
    """It("should schedule multiple pods to an existing node unowned by Karpenter")."""
    result = solve([pod(cpu="10m") for _ in range(100)], nodes=[unowned("static", "10", "100Gi")])
    assert ([len(v) for v in result.placements.values()], result.new_nodeclaims) == ([100], [])


def test_a_pod_incompatible_with_an_existing_node_waits_for_a_nodepool():
    """It("should consider a pod incompatible with an existing node but compatible with NodePool")."""
    existing = replace(unowned("existing", "10", "10Gi"), managed=True)
    p = pod(required=[[r(ZONE, "In", "test-zone-1")]])
    assert scheduled(solve([p], pools=[], nodes=[existing])) == 0
    result = solve([p], nodes=[existing])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_a_daemonset_not_strictly_compatible_with_an_existing_node_is_not_subtracted():
    """Context("Daemonsets") It("should not subtract daemonset overhead that is not strictly compatible with an
    existing node"): the node has no zone label, the DaemonSet needs test-zone-1 and 100 CPUs."""
    ds = daemonset("100", "100Gi")
    ds = replace(
        ds, template=replace(ds.template, required_terms=pod(required=[[r(ZONE, "In", "test-zone-1")]]).required_terms)
    )
    existing = replace(unowned("existing", "1", "1Gi"), managed=True)
    first = pod(cpu="1", memory="1Gi")
    result = solve([first], nodes=[existing], daemonsets=[ds])
    assert list(result.placements) == ["existing"]
    full = replace(existing, pods=(bound(first, "existing"),))
    second = solve([pod(cpu="1", memory="1Gi")], nodes=[full], daemonsets=[ds])
    assert (scheduled(second), second.new_nodeclaims) == (0, [])


# Describe("No Pre-Binding") --------------------------------------------------------------------------------------


def test_zone_self_affinity_keeps_an_unbound_pair_on_the_in_flight_node():
    """It("should respect self pod affinity without pod binding (zone)"): both pods still pending, one node."""
    pods = [pod(labels={"security": "s2"}, affinity=[term(ZONE, security="s2")]) for _ in range(2)]
    [plan] = solve([pods[0]]).new_nodeclaims
    result = solve(pods, nodes=[launch(plan, "node-1", pods=())])
    assert ([len(v) for v in result.placements.values()], result.new_nodeclaims) == ([2], [])


# The same cases where Karpenter's answer depends on how its cluster state reads a Node and its NodeClaim: karpui's
# reading is provisioner/cluster/views.node_view, so these build the objects and read them through it.


def node_object(name: str, labels: dict[str, str], taints=(), capacity=None, allocatable=None) -> dict:
    return {
        "metadata": {"name": name, "labels": {HOSTNAME: name, **labels}},
        "spec": {"taints": [t.to_spec() for t in taints]},
        "status": {"capacity": capacity or {}, "allocatable": allocatable or {}},
    }


def nodeclaim_object(plan) -> dict:
    """A registered, not yet initialized NodeClaim for `plan` (ExpectNodeClaimDeployedAndStateUpdated)."""
    chosen = plan.cheapest.instance_type
    as_text = {k: str(v // 1000) if k != "cpu" else f"{v}m" for k, v in chosen.allocatable.items()}
    return {
        "metadata": {"name": "nodeclaim-1", "labels": {"karpenter.sh/nodepool": plan.nodepool}},
        "spec": {"taints": [], "startupTaints": []},
        "status": {
            "allocatable": as_text,
            "capacity": as_text,
            "conditions": [{"type": t, "status": "True"} for t in ("Launched", "Registered")],
        },
    }


def test_the_initialized_label_makes_not_ready_no_execute_count_again():
    """Context("Taints") It("should assume pod will schedule to a node with ephemeral taint
    node.kubernetes.io/not-ready:NoExecute when the node is uninitialized"), its last step: the Node gets
    karpenter.sh/initialized=true (its NodeClaim is untouched, Registered only), so the taint is no longer ephemeral
    and the third pod needs a new node (StateNode.Initialized reads the Node's label)."""
    from provisioner.cluster.views import node_view

    [plan] = solve([pod()]).new_nodeclaims
    launched = launch(plan, "node-1", pods=())
    not_ready = Taint("node.kubernetes.io/not-ready", "NoExecute")
    registered = {**launched.labels, "karpenter.sh/registered": "true"}
    before = node_view(node_object("node-1", registered, [not_ready]), [], nodeclaim_object(plan))
    before = replace(before, allocatable=launched.allocatable)
    assert list(solve([pod()], nodes=[before]).placements) == ["node-1"]
    labelled = {**registered, "karpenter.sh/initialized": "true"}
    after = node_view(node_object("node-1", labelled, [not_ready]), [], nodeclaim_object(plan))
    after = replace(after, allocatable=launched.allocatable)
    result = solve([pod()], nodes=[after])
    assert (result.placements, len(result.new_nodeclaims)) == ({}, 1)


def test_an_uninitialized_nodes_zeroed_resources_are_read_from_its_nodeclaim():
    """Describe("No Pre-Binding") It("should handle resource zeroing of extended resources by kubelet"): kubelet
    reports vendor-a capacity 0 and an allocatable of only vendor-b 0; while the node is not initialized Karpenter
    fills zero or missing values from the NodeClaim's status (StateNode.Allocatable), so the second pod still goes to
    the in-flight node and no second node launches."""
    from provisioner.cluster.views import node_view

    gpu_pod = {"cpu": "10m", "fake.com/vendor-a": "1"}
    [plan] = solve([pod(requests=gpu_pod)]).new_nodeclaims
    assert plan.cheapest.instance_type.name == "gpu-vendor-instance-type"
    labels = {**launch(plan, "node-1").labels, "karpenter.sh/registered": "true"}
    obj = node_object("node-1", labels, capacity={"fake.com/vendor-a": "0"}, allocatable={"fake.com/vendor-b": "0"})
    view = node_view(obj, [], nodeclaim_object(plan))
    result = solve([pod(requests=gpu_pod)], nodes=[view])
    assert (list(result.placements), result.new_nodeclaims) == (["node-1"], [])
