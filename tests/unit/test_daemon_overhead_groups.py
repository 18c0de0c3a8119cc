"""DaemonSet overhead per group of instance types (Karpenter v1.14+ buildDaemonOverheadGroups): a DaemonSet weighs
only on the types it would run on, and a NodeClaim asks for the least overhead among the types it keeps."""

from __future__ import annotations

from provisioner.nodes import DaemonSet
from provisioner.options import BEST_EFFORT
from provisioner.pods import OwnerReference
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling import results as reasons
from provisioner.scheduling.nodeclaim import NodeClaimTemplate
from tests.builders import instance_type, nodepool, placed_types, pod, r, req, schedule

SIZE = "example.com/size"
SMALL = instance_type("small", "2", "4Gi", labels={SIZE: "small"})
LARGE = instance_type("large", "8", "16Gi", labels={SIZE: "large"})
HUGE = instance_type("huge", "16", "32Gi", labels={SIZE: "large"})
TYPES = [SMALL, LARGE, HUGE]
# A DaemonSet selecting a custom key counts only where the NodePool's requirements define it (Karpenter's IsCompatible).
POOL = nodepool("default", req(SIZE, "Exists"))


def sized_daemonset(name: str, cpu: str, size: str, host_ports: tuple[int, ...] = ()) -> DaemonSet:
    """A DaemonSet whose pods run only on nodes of one size."""
    template = pod(
        cpu, "100Mi", required=[[r(SIZE, "In", size)]], host_ports=host_ports, owner=OwnerReference("DaemonSet", name)
    )
    return DaemonSet(name=name, namespace="kube-system", template=template)


DAEMONS = [sized_daemonset("for-small", "1", "small"), sized_daemonset("for-large", "3", "large")]


def test_the_types_are_grouped_by_the_daemonsets_that_would_run_on_them():
    template = NodeClaimTemplate.build(POOL, TYPES, DAEMONS, BEST_EFFORT)
    groups = {
        tuple(it.name for it in template.index.members(g.mask)): g.overhead.get("cpu") for g in template.daemon_groups
    }
    assert groups == {("small",): 1 * MILLI, ("large", "huge"): 3 * MILLI}


def test_a_daemonset_no_type_would_run_leaves_one_group_without_overhead():
    template = NodeClaimTemplate.build(POOL, TYPES, [sized_daemonset("nowhere", "1", "medium")], BEST_EFFORT)
    [group] = template.daemon_groups
    assert (group.mask, group.overhead) == (template.index.all, {})


def test_the_nodeclaim_asks_for_the_least_overhead_of_the_types_it_keeps():
    """nodeclaim.go addDaemonRequests: the pod's requests plus the smallest overhead among the remaining options."""
    [plan] = schedule([pod("500m", "100Mi")], pools=[POOL], types=TYPES, daemonsets=DAEMONS).new_nodeclaims
    assert plan.instance_type_names == ["huge", "large", "small"]
    assert plan.requests["cpu"] == 1500


def test_a_nodeclaim_of_large_types_asks_for_the_large_daemon():
    the_pod = pod("500m", "100Mi", required=[[r(SIZE, "In", "large")]])
    [plan] = schedule([the_pod], pools=[POOL], types=TYPES, daemonsets=DAEMONS).new_nodeclaims
    assert plan.requests["cpu"] == 3500


def test_a_pod_too_large_with_either_daemon_reads_the_overhead_range():
    """Karpenter's resourcesString shows min and max where the groups' overheads differ."""
    result = schedule([pod("15", "100Mi")], pools=[POOL], types=TYPES, daemonsets=DAEMONS)
    [reason] = list(result.failures.values())[0].reasons
    assert reason.kind == reasons.RESOURCES
    assert (
        'daemonset overhead min={"cpu":"1","memory":"100Mi","pods":"1"}, max={"cpu":"3","memory":"100Mi","pods":"1"}'
        in reason.message
    )


def test_a_daemonset_host_port_only_rules_out_the_types_it_runs_on():
    daemons = [sized_daemonset("ports", "100m", "small", host_ports=(8080,))]
    assert placed_types(schedule([pod("500m", host_ports=[8080])], pools=[POOL], types=TYPES, daemonsets=daemons)) == [
        "large"
    ]


def test_a_host_port_held_by_the_daemonsets_of_every_type_is_the_reason():
    daemons = [sized_daemonset("a", "100m", "small", (8080,)), sized_daemonset("b", "100m", "large", (8080,))]
    result = schedule([pod("500m", host_ports=[8080])], pools=[POOL], types=TYPES, daemonsets=daemons)
    [reason] = list(result.failures.values())[0].reasons
    assert (reason.kind, reason.message) == (reasons.HOST_PORTS, "host port 8080/TCP is already in use")


def test_memory_fits_with_the_group_overhead_only():
    """A 3.5Gi pod fits the small type beside its 100Mi daemon: the large daemon's needs do not count there."""
    assert parse_quantity("3.5Gi") < SMALL.allocatable["memory"]
    placed = placed_types(schedule([pod("100m", "3.5Gi")], pools=[POOL], types=TYPES, daemonsets=DAEMONS))
    assert placed == ["small"]


def test_the_overhead_is_the_least_before_the_options_are_truncated():
    """FinalizeScheduling (scheduler.go:523) adds the daemon requests before TruncateInstanceTypes
    (provisioner.go:441): a small type cut from the options still lowers the NodeClaim's requests."""
    cheap_large = instance_type("large", "8", "16Gi", labels={SIZE: "large"}, price=0.01)
    types = [SMALL, cheap_large]
    [plan] = schedule(
        [pod("500m", "100Mi")], pools=[POOL], types=types, daemonsets=DAEMONS, max_instance_types=1
    ).new_nodeclaims
    assert (plan.instance_type_names, plan.requests["cpu"]) == (["large"], 1500)
