"""Karpenter v1.15.0's disruption suite (pkg/controllers/disruption: suite_test.go, emptiness_test.go, drift_test.go)
ported onto karpui's disruption engine, each test naming the It it follows.

The suite runs over the fake provider's InstanceTypesAssorted(), rebuilt here as ASSORTED: one type per CPU x memory x
zone x capacity type x OS x architecture, each with its single offering. Where Go's unstable sort picks one of several
equally priced types (leastExpensiveInstance, mostExpensiveInstance, ...), the amd64/linux/test-zone-1 one stands for it.
A NodeClaim the Go test sets allocatable on (cpu 32, pods 100) gets exactly that here (`sized`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.disruption.candidates import blockers, build_candidates
from provisioner.disruption.consolidation import ClusterView, simulate
from provisioner.disruption.methods import disruption_pass
from provisioner.disruption.types import DisruptionBudgetPolicy, eviction_cost
from provisioner.nodes import Node
from provisioner.objects import Budget, NodePool
from provisioner.pods import OwnerReference, Pod
from provisioner.quantity import MILLI, parse_quantity
from provisioner.scheduling.scheduler import PoolOffer
from provisioner.selectors import LabelSelector
from tests.builders import HOSTNAME, assorted_catalog, instance_type, node, nodepool, pod, req
from tests.disruption_builders import NOW, claimed

DND = "karpenter.sh/do-not-disrupt"
DRIFTED = "NodePoolDrifted"


# onDemandInstances / spotInstances sorted by price (suite_test.go BeforeEach)
LEAST_EXPENSIVE = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"
LEAST_EXPENSIVE_SPOT = "1-cpu-1-mem-amd64-linux-test-zone-1-spot"
MOST_EXPENSIVE = "64-cpu-128-mem-amd64-linux-test-zone-1-on-demand"


def nc(name, instance=MOST_EXPENSIVE, *, cpu="32", max_pods=100, catalog=None, **options):
    """test.NodeClaimAndNode with one of `catalog`'s types' labels (its first offering's zone and capacity type) and
    Status.Allocatable cpu/pods only."""
    catalog = catalog or assorted_catalog()
    it = next(t for t in catalog if t.name == instance)
    offering = it.offerings[0]
    made = claimed(
        name, instance, types=list(catalog), capacity_type=offering.capacity_type, zone=offering.zone, **options
    )
    return sized(made, cpu, max_pods)


def sized(made, cpu: str, pods: int = 100):
    allocatable = {"cpu": parse_quantity(cpu), "pods": pods * MILLI}
    return replace(made, node=replace(made.node, allocatable=allocatable, capacity=dict(allocatable)))


def rs_pod(*args, **kwargs) -> Pod:
    return pod(*args, owner=OwnerReference("ReplicaSet", "rs"), **kwargs)


def annotated(made: Pod, value: str, started: float | None = NOW) -> Pod:
    return replace(made, annotations={DND: value}, started=started)


def emptiness_pool(name: str = "default", **options) -> NodePool:
    """emptiness_test.go's NodePool: WhenEmpty, consolidateAfter 0s, budget 100%."""
    options.setdefault("budgets", [Budget(nodes="100%")])
    return replace(nodepool(name, **options), consolidation_policy="WhenEmpty")


def drift_pool(name: str = "default", **options) -> NodePool:
    """drift_test.go's NodePool: consolidateAfter 1h, budget 100% (WhenEmptyOrUnderutilized by default)."""
    options.setdefault("budgets", [Budget(nodes="100%")])
    options.setdefault("consolidate_after", "1h")
    return nodepool(name, **options)


def drifted(made, at: float = NOW - 60):
    """Drift's BeforeEach: Drifted=True and the Consolidatable condition cleared."""
    return replace(made, drifted=DRIFTED, drifted_at=at, consolidatable=False)


def view_of(nodes, pools, pending=(), pdbs=(), now=NOW, buffer_nodes=frozenset(), catalog=None) -> ClusterView:
    catalog = list(catalog if catalog is not None else assorted_catalog())
    return ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes],
        pending=list(pending),
        pools=[PoolOffer(p, catalog) for p in pools],
        now=now,
        pdbs=list(pdbs),
        buffer_nodes=frozenset(buffer_nodes),
    )


def pass_over(nodes, pools, **view):
    return disruption_pass(view_of(nodes, pools, **view), {p.name: p for p in pools})


def decisions(result) -> list[tuple[str, str, list[str]]]:
    return [(c.reason, c.decision, [x.name for x in c.candidates]) for c in result.commands]


def start(nodes, command):
    """What the queue's StartCommand does to a command's candidates: they are marked for deletion."""
    chosen = {c.name for c in command.candidates}
    return [replace(n, node=replace(n.node, marked_for_deletion=True)) if n.name in chosen else n for n in nodes]


def fully_blocking(**labels) -> DisruptionBudgetPolicy:
    """test.PodDisruptionBudget with MaxUnavailable 0."""
    selector = LabelSelector.parse(",".join(f"{k}={v}" for k, v in labels.items()))
    return DisruptionBudgetPolicy("default", "pdb", selector, 0, fully_blocking=True)


# emptiness_test.go ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("budget", "allowed", "left"), [("50%", 2, 10), ("100%", 3, 0)])
def test_emptiness_budgets_apply_per_nodepool_in_one_command(budget, allowed, left):
    """emptiness_test.go Budgets: "should allow 2 nodes from each nodePool to be deleted" (50% of 3 rounds up to 2)
    and "should allow all nodes from each nodePool to be deleted": 10 NodePools of 3 empty nodes each."""
    pools = [emptiness_pool(f"np{i}", budgets=[Budget(nodes=budget)], consolidate_after="30s") for i in range(10)]
    nodes = [nc(f"np{i}-n{j}", LEAST_EXPENSIVE, pool=f"np{i}") for i in range(10) for j in range(3)]
    result = pass_over(nodes, [emptiness_pool(), *pools])
    assert [result.budgets[(f"np{i}", "Empty")] for i in range(10)] == [allowed] * 10
    [command] = result.commands
    assert (command.reason, command.decision, 30 - len(command.candidates)) == ("Empty", "delete", left)
    per_pool = {p.name: sum(c.claimed.nodepool == p.name for c in command.candidates) for p in pools}
    assert set(per_pool.values()) == {allowed}


def test_an_empty_and_drifted_node_is_deleted_by_emptiness_which_runs_first():
    """emptiness_test.go "can delete empty and drifted nodes": Emptiness comes before Drift in NewMethods
    (controller.go:111-117), so the node goes as Empty (the Go comment saying Drift runs first is stale)."""
    node = replace(nc("n1", LEAST_EXPENSIVE_SPOT), drifted=DRIFTED, drifted_at=NOW - 60)
    assert decisions(pass_over([node], [emptiness_pool()])) == [("Empty", "delete", ["n1"])]


def test_emptiness_ignores_a_node_not_consolidatable_yet():
    """emptiness_test.go "should ignore nodes without the consolidatable status condition" and "should ignore nodes
    with the consolidatable status condition set to false" (karpui keeps one flag for both)."""
    node = replace(nc("n1", LEAST_EXPENSIVE_SPOT), consolidatable=False)
    result = pass_over([node], [emptiness_pool()])
    assert result.commands == []
    assert result.notes["n1"] == ["consolidateAfter (0s) has not elapsed since the last pod event"]


@pytest.mark.parametrize(("value", "deleted"), [("true", []), ("false", ["n1"])])
def test_emptiness_and_the_nodes_do_not_disrupt_annotation(value, deleted):
    """emptiness_test.go "should ignore nodes with the karpenter.sh/do-not-disrupt annotation" and "should delete
    nodes with the karpenter.sh/do-not-disrupt annotation set to false"."""
    node = nc("n1", LEAST_EXPENSIVE_SPOT, annotations={DND: value})
    result = pass_over([node], [emptiness_pool()])
    assert [[c.name for c in command.candidates] for command in result.commands] == ([deleted] if deleted else [])


def test_emptiness_ignores_nodes_that_have_pods():
    """emptiness_test.go "should ignore nodes that have pods" (WhenEmpty)."""
    result = pass_over([nc("n1", LEAST_EXPENSIVE_SPOT, pods=[pod()])], [emptiness_pool()])
    assert result.commands == []
    # told by each consolidation method that asks, as Karpenter's methods each publish it
    assert set(result.notes["n1"]) == {'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'}


def test_multiple_empty_nodes_go_in_one_command():
    """emptiness_test.go "can delete multiple empty nodes"."""
    nodes = [nc("n1", LEAST_EXPENSIVE_SPOT), nc("n2", LEAST_EXPENSIVE_SPOT)]
    result = pass_over(nodes, [emptiness_pool()])
    assert [(r, d, sorted(n)) for r, d, n in decisions(result)] == [("Empty", "delete", ["n1", "n2"])]


def test_a_pending_pod_that_needs_the_large_node_keeps_it():
    """emptiness_test.go "considers pending pods when consolidating": the cheapest type of >= 64 CPUs runs a 1-CPU pod
    while a 62-CPU pod is pending; nothing is created or deleted."""
    large = "64-cpu-1-mem-amd64-linux-test-zone-1-spot"
    node = nc("large", large, cpu="64", max_pods=5, pods=[pod(cpu="1")])
    result = pass_over([node], [emptiness_pool()], pending=[pod(cpu="62")])
    assert result.commands == []


def test_a_terminating_statefulset_pod_keeps_its_node_from_being_empty():
    """emptiness_test.go "will not consider a node with a terminating StatefulSet pod as empty"."""
    leaving = replace(pod(owner=OwnerReference("StatefulSet", "ss")), deleting=True)
    result = pass_over([nc("n1", LEAST_EXPENSIVE, pods=[leaving])], [emptiness_pool()])
    assert result.commands == []


@pytest.mark.parametrize(
    ("hosting", "with_pod", "deleted"),
    [
        (set(), False, ["n1"]),  # "should disrupt a node once buffer pods are cleared" / "... zero buffer pod count"
        ({"n1"}, True, []),  # "should not consider a node with real pods AND buffer pods as empty"
    ],
)
def test_a_node_hosting_buffer_pods_is_not_empty(hosting, with_pod, deleted):
    """emptiness_test.go Buffer pod protection, one node."""
    node = nc("n1", LEAST_EXPENSIVE_SPOT, pods=[pod()] if with_pod else [])
    result = pass_over([node], [emptiness_pool()], buffer_nodes=hosting)
    assert [[c.name for c in command.candidates] for command in result.commands] == ([deleted] if deleted else [])


def test_only_the_node_hosting_buffer_pods_is_protected():
    """emptiness_test.go "should only protect the specific node with buffer pods, not others"."""
    nodes = [nc("n1", LEAST_EXPENSIVE_SPOT), nc("n2", LEAST_EXPENSIVE_SPOT)]
    result = pass_over(nodes, [emptiness_pool()], buffer_nodes={"n1"})
    assert decisions(result) == [("Empty", "delete", ["n2"])]


def test_emptiness_says_a_node_hosts_buffer_pods_empty_or_not():
    """Not a Go It (karpui's own): Emptiness publishes Unconsolidatable 'Node "n1" has buffer pods' for every node
    hosting them (emptiness.go:54-56), before it asks whether the node is empty."""
    nodes = [nc("n1", LEAST_EXPENSIVE_SPOT), nc("n2", LEAST_EXPENSIVE_SPOT, pods=[pod()])]
    result = pass_over(nodes, [emptiness_pool()], buffer_nodes={"n1", "n2"})
    assert result.notes["n1"] == ['Node "n1" has buffer pods']
    assert result.notes["n2"][0] == 'Node "n2" has buffer pods'


@pytest.mark.parametrize(
    "hosting",
    [
        {"n1"},  # "should not disrupt a node that hosts virtual buffer pods"
        {"n1", "n2"},  # "should protect multiple nodes that each host buffer pods"
    ],
)
def test_no_method_disrupts_empty_nodes_hosting_buffer_pods(hosting):
    """emptiness_test.go Buffer pod protection: Emptiness passes over a node with buffer pods (emptiness.go:54), and
    the consolidation methods pass over every empty node (consolidation.go:127, "Empty nodes are handled by
    Emptiness"), so nothing is disrupted. (The Go test, like this one, sets the buffer pod counts without any
    CapacityBuffer, so no virtual pod is pending.)"""
    nodes = [nc(name, LEAST_EXPENSIVE_SPOT) for name in sorted(hosting)]
    assert pass_over(nodes, [emptiness_pool()], buffer_nodes=hosting).commands == []


def test_a_node_whose_only_pod_costs_nothing_to_evict_is_empty():
    """emptiness_test.go Metrics "should correctly report eligible nodes" says why a node with a pod is not empty:
    "Node has a pod, so Emptiness skips it (disruption cost > base)". Candidate.IsEmpty (types.go:141-147) is
    RescheduleDisruptionCost <= 1, the cost being 1 + each reschedulable pod's max(0, EvictionCost)
    (utils/disruption/disruption.go:51-57): a pod of priority -2^25 costs 1 - 1 = 0, so its node is empty and
    Emptiness deletes it even in a WhenEmpty NodePool."""
    free = replace(rs_pod(), priority=-(2**25))
    assert eviction_cost(free) == 0.0
    result = pass_over([nc("n1", LEAST_EXPENSIVE_SPOT, pods=[free])], [emptiness_pool()])
    assert decisions(result) == [("Empty", "delete", ["n1"])]


# drift_test.go -------------------------------------------------------------------------------------------------------


def test_drift_budget_of_30_percent_of_10_nodes_allows_3():
    """drift_test.go Budgets "should only consider 3 nodes allowed to be disrupted because of budgets"."""
    nodes = [drifted(nc(f"n{i}")) for i in range(10)]
    result = pass_over(nodes, [drift_pool(budgets=[Budget(nodes="30%")])])
    assert result.budgets[("default", "Drifted")] == 3


def test_drift_disrupts_3_nodes_counting_the_commands_in_progress():
    """drift_test.go Budgets "should disrupt 3 nodes, taking into account commands in progress": 10 nodes, the first
    five drifted with a 1-CPU pod each, budget 30%; five passes start three commands."""
    nodes = [drifted(nc(f"n{i}", pods=[rs_pod(cpu="1")])) for i in range(5)]
    nodes += [replace(nc(f"n{i}"), consolidatable=False) for i in range(5, 10)]
    pools = [drift_pool(budgets=[Budget(nodes="30%")])]
    started = []
    for _ in range(5):
        result = pass_over(nodes, pools)
        for command in result.commands:
            started.append((command.reason, [c.name for c in command.candidates]))
            nodes = start(nodes, command)
    assert [reason for reason, _ in started] == ["Drifted"] * 3
    assert sum(n.node.marked_for_deletion for n in nodes) == 3


def test_drift_respects_the_budget_of_each_of_ten_nodepools():
    """drift_test.go Budgets "should respect budgets for multiple nodepools": 10 NodePools (consolidateAfter Never,
    budget 1 node), 3 drifted nodes each, 2 of them with a pod; 30 passes start 10 commands, one per NodePool. Drift
    takes empty candidates first (drift.go:71-77), so each is the NodePool's empty node, deleted."""
    pools = [drift_pool(f"np{i}", budgets=[Budget(nodes="1")], consolidate_after="Never") for i in range(10)]
    nodes = []
    for i in range(10):
        for j in range(3):
            pods = [rs_pod(cpu="1")] if j < 2 else []
            nodes.append(drifted(nc(f"np{i}-n{j}", pool=f"np{i}", pods=pods), at=NOW - 60 + j))
    started = []
    for _ in range(30):
        result = pass_over(nodes, [drift_pool(), *pools])
        for command in result.commands:
            started.append((command.reason, command.decision, [c.name for c in command.candidates]))
            nodes = start(nodes, command)
    assert sorted(started) == [("Drifted", "delete", [f"np{i}-n2"]) for i in range(10)]


def test_drift_goes_on_to_the_next_drifted_node_when_the_first_cannot_reschedule_its_pods():
    """drift_test.go "should continue to the next drifted node if the first cannot reschedule all pods": a 150-CPU pod
    fits no type; the second node (1 CPU allocatable) is replaced."""
    first = drifted(nc("n1", pods=[pod(cpu="150")]), at=NOW - 120)
    second = drifted(nc("n2", cpu="1", pods=[pod(cpu="1")]), at=NOW - 60)
    result = pass_over([first, second], [drift_pool()])
    assert decisions(result) == [("Drifted", "replace", ["n2"])]
    assert len(result.commands[0].replacements) == 1
    assert list(result.drift_blocked) == ["n1"]


def test_drift_goes_on_to_the_next_drifted_node_within_a_budget_of_one_node():
    """drift_test.go "should continue to the next drifted node if the first cannot reschedule all pods", with the
    NodePool's budget at 1 node: Drift only checks the budget is not 0 (drift.go:78-83, "We don't need to decrement
    any budget counter since drift commands can only have one candidate"), so it still tries the second node."""
    first = drifted(nc("n1", pods=[pod(cpu="150")]), at=NOW - 120)
    second = drifted(nc("n2", cpu="1", pods=[pod(cpu="1")]), at=NOW - 60)
    result = pass_over([first, second], [drift_pool(budgets=[Budget(nodes="1")])])
    assert decisions(result) == [("Drifted", "replace", ["n2"])]


def test_drift_ignores_nodes_that_have_not_drifted():
    """drift_test.go "should ignore nodes without the drifted status condition" and "... set to false"."""
    node = replace(nc("n1"), consolidatable=False)
    assert pass_over([node], [drift_pool()]).commands == []


def test_drift_ignores_a_node_with_do_not_disrupt():
    """drift_test.go "should ignore nodes with the karpenter.sh/do-not-disrupt annotation set to true"."""
    result = pass_over([drifted(nc("n1", annotations={DND: "true"}))], [drift_pool()])
    assert result.commands == []
    assert result.blocked["n1"] == [f'Disruption is blocked through the "{DND}" annotation']


@pytest.mark.parametrize(
    "node_annotations",
    [
        {DND: "false"},  # "should delete drifted nodes with the karpenter.sh/do-not-disrupt annotation set to false"
        {},  # "should delete drifted nodes"
    ],
)
def test_a_drifted_nodes_pod_moves_to_another_node_and_the_node_is_deleted(node_annotations):
    """drift_test.go: the drifted node's ReplicaSet pod fits on a second (undrifted) node: a delete."""
    old = drifted(nc("n1", pods=[rs_pod(labels={"app": "test"})], annotations=node_annotations))
    other = replace(nc("n2"), consolidatable=False)
    assert decisions(pass_over([old, other], [drift_pool()])) == [("Drifted", "delete", ["n1"])]


def test_a_drifted_node_with_an_invalid_do_not_disrupt_pod_is_deleted():
    """drift_test.go "should drift nodes with pods that have an invalid do-not-disrupt annotation format"."""
    protected = annotated(rs_pod(labels={"app": "test"}), "invalid-format")
    old = drifted(nc("n1", pods=[protected]))
    other = replace(nc("n2"), consolidatable=False)
    assert decisions(pass_over([old, other], [drift_pool()])) == [("Drifted", "delete", ["n1"])]


def test_no_replacement_for_a_drifted_node_with_a_do_not_disrupt_pod():
    """drift_test.go "should not create replacements for drifted nodes that have pods with the karpenter.sh/
    do-not-disrupt annotation set to true" (and its twin "... when the NodePool's TerminationGracePeriod is not nil",
    whose body sets no terminationGracePeriod)."""
    protected = annotated(pod(), "true")
    result = pass_over([drifted(nc("n1", pods=[protected]))], [drift_pool()])
    assert result.commands == []
    assert result.blocked["n1"] == [f'Pod has "{DND}" annotation (Pod={protected.key})']


def test_no_replacement_for_a_drifted_node_whose_pod_a_pdb_fully_blocks_under_a_grace_period():
    """drift_test.go "should not create replacements for drifted nodes that have pods with the blocking PDBs when the
    NodePool's TerminationGracePeriod is not nil": the candidate stands (eventual disruption), but SimulateScheduling
    leaves out pods a fully blocking PDB protects (helpers.go:97-110), so the command launches nothing."""
    held = pod(labels={"test": "value"})
    node = replace(drifted(nc("n1", pods=[held])), grace_period=True)
    result = pass_over([node], [drift_pool()], pdbs=[fully_blocking(test="value")])
    assert decisions(result) == [("Drifted", "delete", ["n1"])]


def test_a_timed_do_not_disrupt_pod_holds_drift_until_its_period_ends():
    """drift_test.go "should not drift nodes with pods that have a duration-based do-not-disrupt annotation that is
    still active": 2m from the pod's start; 3 minutes on, the node is replaced."""
    node = drifted(nc("n1", pods=[annotated(pod(), "2m")]))
    assert pass_over([node], [drift_pool()]).commands == []
    later = pass_over([node], [drift_pool()], now=NOW + 180)
    assert decisions(later) == [("Drifted", "replace", ["n1"])]
    assert len(later.commands[0].replacements) == 1


def test_drift_waits_for_the_longest_timed_do_not_disrupt_of_several_pods():
    """drift_test.go "should not drift nodes until the longest duration-based do-not-disrupt grace period expires
    across multiple pods": 1m and 3m; blocked at 0 and 2 minutes, replaced at 4."""
    node = drifted(nc("n1", pods=[annotated(pod(), "1m"), annotated(pod(), "3m")]))
    assert [len(pass_over([node], [drift_pool()], now=NOW + t).commands) for t in (0, 120, 240)] == [0, 0, 1]


def test_an_empty_drifted_node_is_deleted_by_drift_when_consolidation_is_disabled():
    """drift_test.go "should delete drifted nodes when they are empty and consolidation is disabled"."""
    result = pass_over([drifted(nc("n1"))], [drift_pool(consolidate_after="Never")])
    assert decisions(result) == [("Drifted", "delete", ["n1"])]


def test_drift_takes_the_empty_node_before_the_one_drifted_earlier():
    """drift_test.go "should drift empty nodes before non-empty nodes"."""
    busy = drifted(nc("n1", pods=[rs_pod(labels={"app": "test"})]), at=NOW - 120)
    empty = drifted(nc("n2"), at=NOW - 60)
    result = pass_over([busy, empty], [drift_pool(consolidate_after="Never")])
    assert decisions(result) == [("Drifted", "delete", ["n2"])]


def test_an_empty_drifted_consolidatable_node_goes_as_empty():
    """drift_test.go "should delete drifted nodes when they are empty and consolidatable": deleted; by Emptiness, which
    v1.15 runs before Drift (controller.go:111-117; the Go comment "drift runs before consolidation" predates it)."""
    node = replace(drifted(nc("n1")), consolidatable=True)
    assert decisions(pass_over([node], [drift_pool()])) == [("Empty", "delete", ["n1"])]


def test_a_drifted_node_is_replaced_by_three_nodes_when_its_pods_need_them():
    """drift_test.go "can replace drifted nodes with multiple nodes": current-on-demand (its offering unavailable,
    $0.5) runs three 2-CPU pods; replacement-on-demand has 3 CPUs ($0.3), so each pod needs its own."""
    current = instance_type("current-on-demand", "4", "4Gi", zones=[("test-zone-1a", "on-demand")], price=0.5)
    current = replace(current, offerings=tuple(replace(o, available=False) for o in current.offerings))
    replacement = instance_type("replacement-on-demand", "3", "4Gi", zones=[("test-zone-1a", "on-demand")], price=0.3)
    catalog = [current, replacement]
    pods = [rs_pod(cpu="2", labels={"app": "test"}) for _ in range(3)]
    node = drifted(nc("n1", "current-on-demand", cpu="8", catalog=catalog, pods=pods))
    result = pass_over([node], [drift_pool()], catalog=catalog)
    assert decisions(result) == [("Drifted", "replace", ["n1"])]
    assert [r.instance_type_names for r in result.commands[0].replacements] == [["replacement-on-demand"]] * 3


def test_drift_replaces_one_non_empty_node_at_a_time_the_earliest_drifted_first():
    """drift_test.go "should drift one non-empty node at a time, starting with the earliest drift": two drifted nodes
    with a 30-CPU pod each; the one drifted an hour ago goes."""
    recent = drifted(nc("n1", pods=[rs_pod(cpu="30")]), at=NOW)
    earlier = drifted(nc("n2", pods=[rs_pod(cpu="30")]), at=NOW - 3600)
    result = pass_over([recent, earlier], [drift_pool()])
    assert decisions(result) == [("Drifted", "replace", ["n2"])]


# suite_test.go -------------------------------------------------------------------------------------------------------


def test_pods_of_a_candidate_schedule_while_every_other_node_is_deleting():
    """suite_test.go Simulate Scheduling "should allow pods on deleting nodes to reschedule to uninitialized nodes":
    ten nodes of 3 CPUs, all but the candidate marked for deletion; the candidate's 2-CPU pod gets a new NodeClaim
    (no pod error)."""
    pool = nodepool(consolidate_after="Never")
    moving = pod(cpu="2", memory="100Mi")
    nodes = [nc("n0", cpu="3", pods=[moving])] + [nc(f"n{i}", cpu="3") for i in range(1, 10)]
    nodes = [n if n.name == "n0" else replace(n, node=replace(n.node, marked_for_deletion=True)) for n in nodes]
    view = view_of(nodes, [pool])
    candidates, _ = build_candidates(nodes, {pool.name: pool}, [], NOW)
    [candidate] = candidates
    outcome = simulate([candidate], view)
    assert outcome.failures == {}
    assert [p.uid for plan in outcome.new_nodeclaims for p in plan.pods] == [moving.uid]


def in_flight(plan, name: str, partition: str) -> Node:
    """A replacement NodeClaim launched but not initialized yet, as cluster state holds it (labels: its partition)."""
    it = plan.cheapest.instance_type
    return Node(
        name=name,
        labels={HOSTNAME: name, "test-partition": partition, "karpenter.sh/nodepool": "default"},
        allocatable=dict(it.allocatable),
        capacity=dict(it.capacity),
        initialized=False,
        managed=True,
        nodepool="default",
        nodeclaim=name,
    )


def test_replace_operations_happen_one_after_another_within_the_budget():
    """suite_test.go Simulate Scheduling "should allow multiple replace operations to happen successively": ten
    drifted nodes, each with one pod that only its partition (test-partition=<i>) takes; budget 3 nodes. Each pass
    replaces one node with one NodeClaim (the earlier candidates' pods land on their own, not yet initialized,
    replacements); the fourth finds the budget spent."""
    pool = nodepool("default", req("test-partition", "Exists"), budgets=[Budget(nodes="3")], consolidate_after="Never")
    nodes = [
        drifted(
            nc(
                f"n{i}",
                cpu="3",
                labels={"test-partition": str(i)},
                pods=[pod(cpu="100m", memory="100Mi", node_selector={"test-partition": str(i)})],
            ),
            at=NOW - 60 + i,
        )
        for i in range(10)
    ]
    launched: list[Node] = []
    for step in range(3):
        view = view_of(nodes, [pool])
        view = replace(view, nodes=[*view.nodes, *launched])
        result = disruption_pass(view, {pool.name: pool})
        [command] = result.commands
        assert (command.reason, command.decision, len(command.replacements)) == ("Drifted", "replace", 1)
        [candidate] = command.candidates
        partition = candidate.claimed.node.labels["test-partition"]
        launched.append(in_flight(command.replacements[0], f"replacement-{step}", partition))
        nodes = start(nodes, command)
    view = replace(view_of(nodes, [pool]), nodes=[n.node for n in nodes] + launched)
    result = disruption_pass(view, {pool.name: pool})
    assert result.commands == [] and result.budgets[("default", "Drifted")] == 0


BUDGET_REASONS = ("Empty", "Underutilized", "Drifted")


def budgets_of(nodes, budget: str, extra_nodes=()) -> list[int]:
    pool = nodepool(budgets=[Budget(nodes=budget)])
    view = replace(view_of(nodes, [pool]), nodes=[n.node for n in nodes] + list(extra_nodes))
    result = disruption_pass(view, {pool.name: pool})
    return [result.budgets[("default", reason)] for reason in BUDGET_REASONS]


def ten_nodes():
    return [nc(f"n{i}") for i in range(10)]


def test_an_unmanaged_node_is_not_counted_in_the_budget():
    """suite_test.go BuildDisruptionBudgetMapping "should not consider nodes that are not managed as part of disruption
    count"."""
    assert budgets_of(ten_nodes(), "100%", extra_nodes=[node("unmanaged")]) == [10, 10, 10]


def test_an_uninitialized_node_is_not_counted_in_the_budget():
    """suite_test.go BuildDisruptionBudgetMapping "should not consider nodes that are not initialized as part of
    disruption count"."""
    assert budgets_of([*ten_nodes(), replace(nc("n10"), initialized=False)], "100%") == [10, 10, 10]


def test_the_budget_is_never_negative():
    """suite_test.go BuildDisruptionBudgetMapping "should not return a negative disruption value": all ten nodes
    deleting, 10%."""
    assert budgets_of([replace(n, deleting=True) for n in ten_nodes()], "10%") == [0, 0, 0]


def test_deleting_and_marked_for_deletion_nodes_use_up_the_budget():
    """suite_test.go BuildDisruptionBudgetMapping "should consider nodes with a deletion timestamp set and
    MarkedForDeletion to the disruption count"."""
    nodes = ten_nodes()
    nodes[0] = replace(nodes[0], deleting=True)
    nodes[1] = replace(nodes[1], node=replace(nodes[1].node, marked_for_deletion=True))
    assert budgets_of(nodes, "100%") == [8, 8, 8]


def test_higher_deletion_costs_cost_more_to_evict():
    """suite_test.go Pod Eviction Cost "should have higher costs for higher deletion costs" (101 > 100 > 99)."""
    costs = [
        eviction_cost(replace(pod(), annotations={"controller.kubernetes.io/pod-deletion-cost": v}))
        for v in ("101", "100", "99")
    ]
    assert costs[0] > costs[1] > costs[2]


def test_disruption_cost_wins_over_pod_deletion_cost():
    """suite_test.go Pod Eviction Cost "should prefer disruption-cost over pod-deletion-cost": EvictionCost reads
    karpenter.sh/disruption-cost first and the pod-deletion-cost only without it (utils/disruption/disruption.go:97-123):
    1 + 2e9/2^27 (clamped to 10) against 1 + 100/2^27."""
    both = replace(
        pod(),
        annotations={"controller.kubernetes.io/pod-deletion-cost": "100", "karpenter.sh/disruption-cost": "2000000000"},
    )
    only_deletion = replace(pod(), annotations={"controller.kubernetes.io/pod-deletion-cost": "100"})
    assert eviction_cost(both) > eviction_cost(only_deletion)


# Candidate Filtering: which pods keep a node from being a candidate ---------------------------------------------------

MIRROR = OwnerReference("Node", "n1")
DAEMON = OwnerReference("DaemonSet", "ds")


@pytest.mark.parametrize(
    ("owner", "why"),
    [
        (MIRROR, "should not consider candidates that have do-not-disrupt mirror pods scheduled"),
        (DAEMON, "should not consider candidates that have do-not-disrupt daemonset pods scheduled"),
    ],
)
def test_do_not_disrupt_blocks_on_mirror_and_daemonset_pods_too(owner, why):
    """suite_test.go Candidate Filtering (see `why`)."""
    protected = annotated(pod(owner=owner), "true")
    node = nc("n1", pods=[protected])
    assert blockers(node, nodepool(), [], NOW) == [f'Pod has "{DND}" annotation (Pod={protected.key})']


@pytest.mark.parametrize(
    ("grace_period", "eventual", "candidate"),
    [
        (True, True, True),  # "... do-not-disrupt / PDB-blocked pods scheduled with a terminationGracePeriod set for
        #                       eventual disruption" (considered)
        (True, False, False),  # "... with a terminationGracePeriod set for graceful disruption" (not)
        (False, True, False),  # "... without a terminationGracePeriod set for eventual disruption" (not)
        (False, False, False),  # "... without a terminationGracePeriod set for graceful disruption" (not)
    ],
)
@pytest.mark.parametrize("blocker", ["do-not-disrupt", "pdb"])
def test_a_grace_period_lets_eventual_disruption_past_blocking_pods(grace_period, eventual, candidate, blocker):
    """suite_test.go Candidate Filtering, the eight terminationGracePeriod x class x blocker cases."""
    if blocker == "pdb":
        held, pdbs = pod(labels={"test": "value"}), [fully_blocking(test="value")]
        said = "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    else:
        held, pdbs = annotated(pod(), "true"), []
        said = f'Pod has "{DND}" annotation (Pod={held.key})'
    node = replace(nc("n1", pods=[held]), grace_period=grace_period)
    found, blocked = build_candidates([node], {"default": nodepool()}, pdbs, NOW, eventual=eventual)
    assert ([c.name for c in found], blocked) == ((["n1"], {}) if candidate else ([], {"n1": [said]}))


@pytest.mark.parametrize(
    "case",
    [
        "do-not-disrupt terminating",  # "should consider candidates that have do-not-disrupt terminating pods"
        "do-not-disrupt terminal",  # "should consider candidates that have do-not-disrupt terminal pods"
        "pdb mirror",  # "should consider candidates that have fully blocking PDBs on mirror pods"
        "pdb terminal",  # "should consider candidates that have fully blocking PDBs on terminal pods"
        "pdb terminating",  # "should consider candidates that have fully blocking PDBs on terminating pods"
    ],
)
def test_inactive_and_mirror_pods_do_not_block(case):
    """suite_test.go Candidate Filtering (see each case)."""
    labels = {"test": "value"}
    if case == "do-not-disrupt terminating":
        pods = [replace(annotated(pod(), "true"), deleting=True)]
    elif case == "do-not-disrupt terminal":
        pods = [annotated(pod(), "true") for _ in range(2)]
    elif case == "pdb mirror":
        pods = [pod(labels=labels, owner=MIRROR)]
    elif case == "pdb terminal":
        pods = [pod(labels=labels), pod(labels=labels)]
    else:
        pods = [replace(pod(labels=labels), deleting=True)]
    node = nc("n1", pods=pods)
    if "terminal" in case:  # claimed() binds pods as Running: Succeeded and Failed are set after
        phases = ("Succeeded", "Failed")
        node = replace(
            node,
            node=replace(
                node.node, pods=tuple(replace(p, phase=ph) for p, ph in zip(node.node.pods, phases, strict=True))
            ),
        )
    found, blocked = build_candidates([node], {"default": nodepool()}, [fully_blocking(**labels)], NOW)
    assert ([c.name for c in found], blocked) == (["n1"], {})


def test_a_fully_blocking_pdb_on_a_daemonset_pod_blocks():
    """suite_test.go Candidate Filtering "should not consider candidates that have fully blocking PDBs on daemonset
    pods"."""
    node = nc("n1", pods=[pod(labels={"test": "value"}, owner=DAEMON)])
    assert blockers(node, nodepool(), [fully_blocking(test="value")], NOW) == [
        "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    ]


def test_a_node_marked_for_deletion_is_no_candidate():
    """suite_test.go Candidate Filtering "should not consider candidates that are MarkedForDeletion"."""
    node = nc("n1")
    node = replace(node, node=replace(node.node, marked_for_deletion=True))
    assert blockers(node, nodepool(), [], NOW) == ["Node is deleting or marked for deletion"]


@pytest.mark.parametrize(
    "change",
    [
        {"capacity_type": ""},  # "should consider candidates that do not have the karpenter.sh/capacity-type label"
        {"zone": ""},  # "should consider candidates that do not have the topology.kubernetes.io/zone label"
        {"instance_type": ""},  # "should consider candidates that do not have the node.kubernetes.io/instance-type ..."
        {"instance_type": "gone"},  # "should consider candidates that have an instance type that cannot be resolved"
    ],
)
def test_a_node_missing_labels_or_an_unknown_type_is_still_a_candidate(change):
    """suite_test.go Candidate Filtering: NewCandidate does not ask for these labels (consolidation's ShouldDisrupt
    does, later)."""
    node = replace(nc("n1"), **change)
    found, blocked = build_candidates([node], {"default": nodepool()}, [], NOW)
    assert ([c.name for c in found], blocked) == (["n1"], {})


# BuildDisruptionBudgetMapping over cluster state: a NotReady node (the lab, as karpui reads Nodes) -------------------

ANTI_AFFINITY = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "inflate"}}}
            ]
        }
    }
}


def test_not_ready_nodes_use_up_the_disruption_budget():
    """suite_test.go BuildDisruptionBudgetMapping "should consider not ready nodes to the disruption count": ten
    nodes, budget 100%, two made NotReady; every reason is allowed 8. NodePoolStatsFromNodes counts a node whose
    Ready condition is not True as disrupting for every reason but Unhealthy (helpers.go:405-410)."""
    from provisioner.controllers.snapshot import cluster_view
    from provisioner.disruption.budgets import allowed_disruptions
    from tests.lab_builders import deployment, lab, nodepool_doc

    made = lab(
        nodepool_doc(disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
        deployment("inflate", 10, "1", **ANTI_AFFINITY),
    )
    made.advance(60)
    nodes = made.store.list("Node")
    assert len(nodes) == 10
    for found in nodes[:2]:
        for item in found["status"]["conditions"]:
            if item["type"] == "Ready":
                item["status"] = "False"
        made.store.update(found)
    _, claimed_nodes = cluster_view(made.ctx)
    pool = made.ctx.nodepools[0]
    assert [allowed_disruptions(pool, r, claimed_nodes, made.ctx.now) for r in BUDGET_REASONS] == [8, 8, 8]
