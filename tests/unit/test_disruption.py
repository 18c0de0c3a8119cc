"""Karpenter's disruption behaviour (reference/disruption-dra.md §5), on the pure engine."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from provisioner.disruption.budgets import allowed_disruptions, budget_active
from provisioner.disruption.candidates import disruption_cost
from provisioner.disruption.drift import (
    INSTANCE_TYPE_NOT_FOUND,
    NODEPOOL_DRIFTED,
    REQUIREMENTS_DRIFTED,
    drift_reason,
    expired,
)
from provisioner.disruption.logs import command_text, disrupting
from provisioner.disruption.types import Candidate, eviction_cost
from provisioner.objects import Budget
from provisioner.pods import OwnerReference
from tests.builders import HOSTNAME, fake_catalog, instance_type, nodepool, pod, req, term
from tests.disruption_builders import NOW, claimed, pdb, run


def names(command):
    return [c.name for c in command.candidates]


def rs_pod(*args, **kwargs):
    return pod(*args, owner=OwnerReference("ReplicaSet", "rs"), **kwargs)


# 1. and 2. Budgets ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("nodes", "left"), [("30%", 7), ("100%", 0), ("0%", 10)])
def test_empty_nodes_are_deleted_in_one_command_within_the_budget(nodes, left):
    pool = nodepool(budgets=[Budget(nodes=nodes)])
    result = run([claimed(f"n{i:02d}") for i in range(10)], pools=[pool])
    deleted = sum(len(c.candidates) for c in result.commands)
    assert (10 - deleted, len(result.commands) <= 1) == (left, True)
    assert result.budgets[("default", "Empty")] == 10 - left
    if result.commands:
        assert result.commands[0].decision == "delete" and result.commands[0].reason == "Empty"


def test_multi_node_consolidation_deletes_as_many_as_the_budget_allows():
    pool = nodepool(budgets=[Budget(nodes="30%")])
    types = [instance_type("big", "32", "64Gi", pods=110)]
    nodes = [claimed(f"n{i:02d}", "big", types=types, pods=[rs_pod(cpu="100m")]) for i in range(10)]
    [command] = run(nodes, pools=[pool], types=types).commands
    assert (command.method, command.decision, len(command.candidates)) == ("multi", "delete", 3)


def test_multi_node_consolidation_takes_at_most_101_candidates():
    # multinodeconsolidation.go: maxParallel = min(candidates, 100) is the binary search's last index, not its
    # window's length, so with more candidates than that the largest window is candidates[0:101].
    types = [instance_type("big", "32", "64Gi", pods=110)]
    nodes = [claimed(f"n{i:03d}", "big", types=types, pods=[rs_pod(cpu="100m")]) for i in range(150)]
    [command] = run(nodes, pools=[nodepool(budgets=[Budget(nodes="100%")])], types=types).commands
    assert (command.method, command.decision, len(command.candidates)) == ("multi", "delete", 101)


def test_budgets_count_percentages_up_and_take_the_minimum():
    pool = nodepool(budgets=[Budget(nodes="30%"), Budget(nodes="5")])
    nodes = [claimed(f"n{i}") for i in range(10)]
    assert allowed_disruptions(pool, "Empty", nodes, NOW) == 3
    assert allowed_disruptions(nodepool(budgets=[Budget(nodes="10%")]), "Empty", nodes[:3], NOW) == 1


def test_nodes_already_disrupting_use_up_the_budget():
    nodes = [claimed(f"n{i}") for i in range(10)]
    nodes[0] = replace(nodes[0], deleting=True)
    assert allowed_disruptions(nodepool(budgets=[Budget(nodes="2")]), "Empty", nodes, NOW) == 1


def test_not_ready_nodes_use_up_every_budget_but_repairs():
    """helpers.go:405-410: a NotReady node counts as disrupting for every reason except Unhealthy, whose trigger
    NotReady is."""
    nodes = [claimed(f"n{i}") for i in range(10)]
    nodes[0] = replace(nodes[0], ready=False)
    pool = nodepool(budgets=[Budget(nodes="2")])
    assert [allowed_disruptions(pool, r, nodes, NOW) for r in ("Empty", "Drifted", "Underutilized")] == [1, 1, 1]
    assert allowed_disruptions(pool, "Unhealthy", nodes, NOW) == 2


def test_scheduled_budgets_apply_only_inside_their_window():
    business_hours = Budget(nodes="0", schedule="0 9 * * 1-5", duration="8h")
    monday_10 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC).timestamp()
    monday_18 = datetime(2026, 11, 30, 18, 0, tzinfo=UTC).timestamp()
    sunday = datetime(2026, 11, 29, 12, 0, tzinfo=UTC).timestamp()
    assert [budget_active(business_hours, t) for t in (monday_10, monday_18, sunday)] == [True, False, False]
    pool = nodepool(budgets=[Budget(nodes="10"), business_hours])
    nodes = [claimed(f"n{i}") for i in range(4)]
    assert allowed_disruptions(pool, "Underutilized", nodes, monday_10) == 0
    assert allowed_disruptions(pool, "Underutilized", nodes, sunday) == 10  # a count is not capped by the node count


def test_budget_reasons_limit_only_their_reason():
    pool = nodepool(budgets=[Budget(nodes="0", reasons=("Drifted",)), Budget(nodes="100%")])
    nodes = [claimed(f"n{i}") for i in range(4)]
    assert allowed_disruptions(pool, "Drifted", nodes, NOW) == 0
    assert allowed_disruptions(pool, "Empty", nodes, NOW) == 4


# 4.-7. What a delete picks and what blocks it --------------------------------------------------------------------


def two_nodes(a_extra=None, b_extra=None, b_pod=None):
    a = claimed("node-a", pods=[rs_pod(cpu="100m"), rs_pod(cpu="100m")], **(a_extra or {}))
    b = claimed("node-b", pods=[b_pod or rs_pod(cpu="100m", labels={"app": "b"})], **(b_extra or {}))
    return [a, b]


def test_the_node_with_fewer_pods_is_deleted_when_the_pods_fit_elsewhere():
    [command] = run(two_nodes()).commands
    assert (command.decision, names(command), command.replacements) == ("delete", ["node-b"], ())
    assert command.savings == pytest.approx(claimed("x").price)


def test_a_pdb_with_no_disruptions_left_steers_consolidation_to_the_other_node():
    result = run(two_nodes(), pdbs=[pdb(app="b")])
    [command] = result.commands
    assert names(command) == ["node-a"]
    assert result.blocked["node-b"] == ["Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


@pytest.mark.parametrize("where", ["node", "pod"])
def test_do_not_disrupt_steers_consolidation_to_the_other_node(where):
    if where == "node":
        nodes = two_nodes(b_extra={"annotations": {"karpenter.sh/do-not-disrupt": "true"}})
    else:
        protected = replace(rs_pod(cpu="100m"), annotations={"karpenter.sh/do-not-disrupt": "true"})
        nodes = two_nodes(b_pod=protected)
    [command] = run(nodes).commands
    assert names(command) == ["node-a"]


def test_do_not_disrupt_false_on_a_node_does_not_block():
    [command] = run(two_nodes(b_extra={"annotations": {"karpenter.sh/do-not-disrupt": "false"}})).commands
    assert names(command) == ["node-b"]


@pytest.mark.parametrize(("value", "age", "commands"), [("2m", 0, 0), ("2m", 180, 1), ("invalid-format", 0, 1)])
def test_a_do_not_disrupt_duration_blocks_only_while_the_pod_is_younger(value, age, commands):
    protected = replace(rs_pod(cpu="100m"), annotations={"karpenter.sh/do-not-disrupt": value}, started=NOW)
    expensive = claimed("lonely", "arm-instance-type", pods=[protected])
    pool = nodepool()
    assert len(run([expensive], pools=[pool], now=NOW + age).commands) == commands


# 9.-11. Prices and spot --------------------------------------------------------------------------------------


def test_a_replacement_is_never_pricier_at_its_worst_offering():
    types = [
        instance_type("current", "4", "4Gi", zones=[("test-zone-1", "on-demand")], price=0.50),
        instance_type(
            "cheap",
            "4",
            "4Gi",
            zones=[("test-zone-1", "spot"), ("test-zone-2", "spot"), ("test-zone-3", "spot")],
            price=0.2,
        ),
    ]
    types[1] = replace(
        types[1],
        offerings=tuple(replace(o, price=p) for o, p in zip(types[1].offerings, (1.00, 0.20, 0.40), strict=True)),
    )
    node = claimed("n1", "current", types=types, pods=[rs_pod(cpu="1")], price=0.50)
    result = run([node], types=types)
    assert result.commands == []
    assert result.notes["n1"][-1] == "Can't replace with a cheaper node"


def test_a_cheaper_replacement_is_taken_and_pinned_to_spot():
    [command] = run([claimed("n1", "arm-instance-type", pods=[rs_pod(cpu="100m")])]).commands
    assert command.decision == "replace"
    assert command.replacements[0].requirements["karpenter.sh/capacity-type"].values == frozenset({"spot"})
    assert command.savings > 0


def spot_types(cheaper):
    """A 16-CPU spot type running the candidate, and `cheaper` smaller spot types."""
    current = instance_type("spot-big", "16", "16Gi", zones=[("test-zone-1", "spot")], price=2.0)
    return [current] + [
        instance_type(f"spot-small-{i:02d}", "2", "2Gi", zones=[("test-zone-1", "spot")], price=0.1 + i / 100)
        for i in range(cheaper)
    ]


def test_spot_to_spot_is_off_by_default():
    types = spot_types(20)
    result = run([claimed("n1", "spot-big", types=types, capacity_type="spot", pods=[rs_pod(cpu="100m")])], types=types)
    assert result.commands == []
    assert "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node" in result.notes["n1"]


def test_spot_to_spot_needs_fifteen_cheaper_types():
    types = spot_types(1)
    result = run(
        [claimed("n1", "spot-big", types=types, capacity_type="spot", pods=[rs_pod(cpu="100m")])],
        types=types,
        spot_to_spot=True,
    )
    assert result.commands == []
    assert (
        result.notes["n1"][-1]
        == "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 1"
    )


def test_spot_to_spot_launches_from_exactly_the_fifteen_cheapest():
    types = spot_types(20)
    [command] = run(
        [claimed("n1", "spot-big", types=types, capacity_type="spot", pods=[rs_pod(cpu="100m")])],
        types=types,
        spot_to_spot=True,
    ).commands
    assert command.replacements[0].instance_type_names == [f"spot-small-{i:02d}" for i in range(15)]


def test_a_spot_node_can_still_be_deleted_with_spot_to_spot_off():
    a = claimed("a", pods=[rs_pod(cpu="100m")], capacity_type="spot")
    b = claimed("b", pods=[rs_pod(cpu="100m"), rs_pod(cpu="100m")], capacity_type="spot")
    [command] = run([a, b]).commands
    assert (command.decision, names(command)) == ("delete", ["a"])


# 14.-16. Simulation -------------------------------------------------------------------------------------------


def test_pods_that_would_only_fit_on_an_uninitialized_node_block_the_delete():
    candidate = claimed("candidate", "small-instance-type", pods=[rs_pod(cpu="1")])
    uninitialized = claimed("fresh", initialized=False)
    result = run([candidate, uninitialized], extra_nodes=[])
    assert result.commands == []


def test_required_anti_affinity_keeps_every_node():
    nodes = [
        claimed(
            f"n{i}",
            "small-instance-type",
            pods=[rs_pod(cpu="100m", labels={"app": "x"}, anti_affinity=[term(HOSTNAME, app="x")])],
        )
        for i in range(3)
    ]
    assert run(nodes).commands == []


def test_a_daemonset_only_node_is_empty():
    daemon = pod(cpu="100m", owner=OwnerReference("DaemonSet", "ds"))
    [command] = run([claimed("n1", pods=[daemon])]).commands
    assert (command.reason, names(command)) == ("Empty", ["n1"])


def test_terminating_pods_do_not_make_a_node_busy():
    leaving = replace(rs_pod(cpu="100m"), deleting=True)
    [command] = run([claimed("n1", pods=[leaving])]).commands
    assert command.reason == "Empty"


def test_a_node_nominated_for_a_pending_pod_is_kept():
    large = replace(claimed("large", "arm-instance-type", pods=[rs_pod(cpu="100m")]), nominated_until=NOW + 20)
    small = claimed("small", "small-instance-type", pods=[rs_pod(cpu="100m")])
    result = run([large, small], pending=[pod(cpu="12", node_selector={"kubernetes.io/arch": "arm64"})])
    assert result.blocked["large"] == ["Node is nominated for a pending pod"]
    assert all("large" not in names(c) for c in result.commands)
    assert run([replace(large, nominated_until=NOW - 1), small]).commands[0].candidates[0].name == "large"


# Drift, expiration, logs ----------------------------------------------------------------------------------------


def test_drift_replaces_a_drifted_node_with_what_its_pods_need():
    drifted = replace(claimed("old", pods=[rs_pod(cpu="1")]), drifted=NODEPOOL_DRIFTED, drifted_at=NOW - 60)
    [command] = run([drifted]).commands
    assert (command.reason, command.decision, len(command.replacements)) == ("Drifted", "replace", 1)


def test_a_drifted_node_whose_pods_cannot_be_placed_is_blocked_not_unconsolidatable():
    # drift.go: a drifted candidate whose pods would not all schedule is told as DisruptionBlocked (with the
    # scheduling error) and drift goes on to the next; the NodePool's limits leave no room for the replacement. The
    # candidate's own capacity is not counted against the limit (the simulation leaves candidates out). Consolidation,
    # which runs next, notes the same for its Unconsolidatable.
    drifted = replace(claimed("old", pods=[rs_pod(cpu="1", name="web")]), drifted=NODEPOOL_DRIFTED, drifted_at=NOW - 60)
    result = run([drifted], pools=[nodepool(limits={"cpu": "1"})])
    assert result.commands == [] and result.blocked == {}
    assert result.drift_blocked == {
        "old": [
            'Not all pods would schedule, default/web => incompatible with nodepool "default", all available '
            "instance types exceed limits for nodepool (remaining cpu=1) "
        ]
    }


def test_drift_reasons():
    pool = nodepool("default", req("kubernetes.io/arch", "In", "amd64"))
    labels = {
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "default-instance-type",
        "topology.kubernetes.io/zone": "test-zone-1",
        "karpenter.sh/capacity-type": "spot",
    }
    stamped = {"karpenter.sh/nodepool-hash": "111", "karpenter.sh/nodepool-hash-version": "v3"}
    types = fake_catalog()
    assert drift_reason(pool, "111", stamped, labels, types, "v3") is None
    assert drift_reason(pool, "222", stamped, labels, types, "v3") == NODEPOOL_DRIFTED
    assert (
        drift_reason(pool, "222", {**stamped, "karpenter.sh/nodepool-hash-version": "v2"}, labels, types, "v3") is None
    )
    assert (
        drift_reason(pool, "111", stamped, {**labels, "kubernetes.io/arch": "arm64"}, types, "v3")
        == REQUIREMENTS_DRIFTED
    )
    assert (
        drift_reason(pool, "111", stamped, {**labels, "node.kubernetes.io/instance-type": "gone"}, types, "v3")
        == INSTANCE_TYPE_NOT_FOUND
    )


def test_expiration():
    assert expired(None, NOW - 10**9, NOW) is False
    assert expired(3600, NOW - 3599, NOW) is False
    assert expired(3600, NOW - 3600, NOW) is True


def test_the_disrupting_log_line_has_karpenters_fields():
    [command] = run([claimed("node-1")]).commands
    record = disrupting(command, "3f1c").as_dict()
    assert record["message"] == "disrupting node(s)"
    assert record["command"] == "Empty/3f1c: delete: nodepools=[default]: [node-1] (savings: $0.83)"
    assert (
        record["decision"],
        record["disrupted-node-count"],
        record["replacement-node-count"],
        record["pod-count"],
    ) == ("delete", 1, 0, 0)
    replaced = run([claimed("n1", "arm-instance-type", pods=[rs_pod(cpu="100m")])]).commands[0]
    assert command_text(replaced, "ab").startswith(
        "Underutilized/ab: replace: nodepools=[default]: [n1] -> [1 replacement] (savings: $"
    )


# consolidateAfter on destinations (Karpenter >= 1.14, kubernetes-sigs/karpenter#3006) ------------------------------


def test_pods_moving_off_a_candidate_do_not_land_on_a_node_inside_its_consolidate_after_window():
    types = [instance_type("big", "8", "16Gi", pods=110)]
    old = claimed("old", "big", types=types, pods=[rs_pod(cpu="1")])
    fresh = claimed("fresh", "big", types=types, pods=[rs_pod(cpu="1")])
    fresh = replace(fresh, consolidatable=False, node=replace(fresh.node, under_consolidate_after=True))
    result = run([old, fresh], types=types)
    assert [(c.decision, names(c)) for c in result.commands] == []
    # Once the window has passed, one node's pod moves onto the other and that node goes (both are alike).
    ripe = replace(fresh, consolidatable=True, node=replace(fresh.node, under_consolidate_after=False))
    [command] = run([old, ripe], types=types).commands
    assert (command.decision, len(command.candidates)) == ("delete", 1)


def test_pending_pods_may_still_land_on_a_node_inside_its_consolidate_after_window():
    from provisioner.scheduling.scheduler import SchedulingInput, solve

    types = [instance_type("big", "8", "16Gi", pods=110)]
    fresh = claimed("fresh", "big", types=types)
    node = replace(fresh.node, under_consolidate_after=True)
    result = solve(SchedulingInput(pods=[pod(cpu="1")], pools=[], nodes=[node]))
    assert list(result.placements) == ["fresh"]


def test_single_node_consolidation_stops_at_its_bound_and_its_walk_goes_on_where_it_stopped():
    """Karpenter's single-node pass has a 3-minute timeout; the lab's bound is MAX_SINGLE_SIMULATIONS candidates, so
    a pass over thousands of nodes never blocks a tick for minutes, and over the same inputs the walk goes on at the
    candidate where it stopped (`resume`), as Karpenter's pass would have."""
    from provisioner.disruption import methods

    types = [instance_type("only", "4", "4Gi", zones=[("test-zone-1", "on-demand")], price=0.50)]
    count = methods.MAX_SINGLE_SIMULATIONS + 10
    nodes = [
        claimed(f"n{i:03}", "only", types=types, pods=[rs_pod(cpu="3")], price=0.50) for i in range(count)
    ]  # each pod fills most of its node: none can move, and no cheaper node exists
    pool = nodepool(budgets=(Budget(nodes="100%"),))
    first = run(nodes, pools=[pool], types=types)
    assert first.commands == []
    tried = sorted(n for n, notes in first.notes.items() if any("cheaper" in r or "schedule" in r for r in notes))
    assert len(tried) == methods.MAX_SINGLE_SIMULATIONS and first.resume is not None
    assert first.resume not in tried
    view_nodes, pools = nodes, [pool]
    from provisioner.disruption.consolidation import ClusterView
    from provisioner.scheduling.scheduler import PoolOffer

    view = ClusterView(
        claimed=list(view_nodes),
        nodes=[n.node for n in view_nodes],
        pending=[],
        pools=[PoolOffer(p, types) for p in pools],
        now=NOW,
        pdbs=[],
        spot_to_spot=False,
    )
    second = methods.disruption_pass(view, {pool.name: pool}, resume=first.resume)
    again = sorted(n for n, notes in second.notes.items() if any("cheaper" in r or "schedule" in r for r in notes))
    assert first.resume in again and set(again) - set(tried)  # it went on with the candidates not yet tried


def test_a_pass_that_goes_on_with_its_walk_finds_what_a_whole_pass_over_the_same_inputs_finds():
    """continue_pass skips emptiness, drift, multi-node consolidation and building the candidates; its result must be
    exactly that of a whole pass resuming at the same candidate. n025's four 750m pods each fit beside another
    node's 3-CPU pod; its higher rescheduling cost orders it last, so the walk's second stretch deletes it
    (multi-node's prefixes, which start at n000, cannot)."""
    from provisioner.disruption import methods
    from provisioner.disruption.consolidation import ClusterView
    from provisioner.scheduling.scheduler import PoolOffer

    types = [instance_type("only", "4", "4Gi", zones=[("test-zone-1", "on-demand")], price=0.50)]
    nodes = [
        claimed(
            f"n{i:03}",
            "only",
            types=types,
            pods=[rs_pod(cpu="750m") for _ in range(4)] if i == 25 else [rs_pod(cpu="3")],
            price=0.50,
        )
        for i in range(40)
    ]
    pool = nodepool(budgets=(Budget(nodes="50%"),))  # multi-node notes the 20 it cannot admit
    view = ClusterView(
        claimed=nodes,
        nodes=[n.node for n in nodes],
        pending=[],
        pools=[PoolOffer(pool, types)],
        now=NOW,
    )
    pools = {pool.name: pool}
    first = methods.disruption_pass(view, pools)
    assert first.commands == [] and first.resume == "n020"
    assert first.walk is not None and sorted(c.name for c in first.walk.candidates) == [n.name for n in nodes]

    over_budget = sorted(n for n, notes in first.walk.notes.items() if any("budget" in r for r in notes))
    assert len(over_budget) == 20 and "n025" in over_budget
    went_on = methods.continue_pass(first, view)
    whole = methods.disruption_pass(view, pools, resume=first.resume)
    assert [names(c) for c in went_on.commands] == [names(c) for c in whole.commands] == [["n025"]]
    assert [c.decision for c in went_on.commands] == ["delete"]
    assert went_on.commands == whole.commands
    assert went_on.notes == whole.notes
    assert (went_on.blocked, went_on.budgets, went_on.resume) == (whole.blocked, whole.budgets, whole.resume)
    assert went_on.resume is None  # a command ends the walk

    with pytest.raises(ValueError, match="single-node bound"):
        methods.continue_pass(went_on, view)  # a pass that found a command has nothing to go on with


def test_a_walk_that_went_through_every_candidate_ends():
    """Karpenter's single-node consolidation tries every candidate in one pass (unless 3 minutes pass); the lab's
    walk is spread over passes of MAX_SINGLE_SIMULATIONS, and ends once it has tried each candidate once, so a
    cluster where nothing can go is "consolidated" after one walk instead of being walked for ever."""
    from provisioner.disruption import methods
    from provisioner.disruption.consolidation import ClusterView
    from provisioner.scheduling.scheduler import PoolOffer

    types = [instance_type("only", "4", "4Gi", zones=[("test-zone-1", "on-demand")], price=0.50)]
    nodes = [claimed(f"n{i:03}", "only", types=types, pods=[rs_pod(cpu="3")], price=0.50) for i in range(50)]
    pool = nodepool(budgets=(Budget(nodes="100%"),))
    view = ClusterView(
        claimed=nodes, nodes=[n.node for n in nodes], pending=[], pools=[PoolOffer(pool, types)], now=NOW
    )

    def tried(result):
        return sorted(n for n, notes in result.notes.items() if any("cheaper" in r for r in notes))

    first = methods.disruption_pass(view, {pool.name: pool})
    assert tried(first) == [f"n{i:03}" for i in range(20)] and first.resume == "n020"
    assert first.unseen_nodepools == frozenset()  # its one NodePool was reached
    second = methods.continue_pass(first, view)
    assert tried(second) == [f"n{i:03}" for i in range(20, 40)] and second.resume == "n040"
    third = methods.continue_pass(second, view)
    assert tried(third) == [f"n{i:03}" for i in range(40, 50)]  # ten left: the walk is through
    assert (third.resume, third.commands, third.unseen_nodepools) == (None, [], frozenset())


# Costs (Karpenter's pkg/utils/disruption) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "priority", "cost"),
    [
        (None, 0, 1.0),
        ("0", 0, 1.0),
        ("", 0, 1.0),  # unreadable: no deletion cost
        ("x", 0, 1.0),
        (str(2**27), 0, 2.0),
        (None, 2**25, 2.0),
        (str(-(2**27)), -(2**25), -1.0),
        ("+" + str(2**27), 0, 2.0),
        (str(2**31 - 1), 2**30, 10.0),  # clamped
        (None, -(2**30), -10.0),
        # Not an int32, so no cost (strconv.ParseInt(value, 10, 32) fails): out of range, a fraction, spaces.
        (str(2**40), 0, 1.0),
        (str(-(2**31) - 1), 0, 1.0),
        ("1.5", 0, 1.0),
        (" 5", 0, 1.0),
    ],
)
def test_a_pods_eviction_cost_is_karpenters(annotation, priority, cost):
    annotations = {} if annotation is None else {"controller.kubernetes.io/pod-deletion-cost": annotation}
    assert eviction_cost(replace(pod(cpu="1"), annotations=annotations, priority=priority)) == cost


def test_consolidation_leaves_a_node_whose_pods_cost_nothing_to_emptiness():
    """consolidation.go:126-129: multi- and single-node consolidation pass over every empty candidate, and a node
    whose pods all cost nothing to evict is empty (IsEmpty, types.go:145-147); with Emptiness held by its budget,
    nothing takes it."""
    free = replace(rs_pod(cpu="100m"), priority=-(2**25))
    pool = nodepool(budgets=[Budget(nodes="0", reasons=("Empty",)), Budget(nodes="100%")])
    result = run([claimed("n1", pods=[free])], pools=[pool])
    assert result.commands == []
    assert result.notes["n1"] == ['disruption budget of NodePool "default" for Empty allows no more nodes now']


@pytest.mark.parametrize(
    ("annotations", "cost"),
    [
        ({"karpenter.sh/disruption-cost": str(2**27)}, 2.0),
        ({"karpenter.sh/disruption-cost": str(2**27), "controller.kubernetes.io/pod-deletion-cost": "0"}, 2.0),
        # An unreadable disruption-cost is no cost: the pod-deletion-cost is read only without the annotation.
        ({"karpenter.sh/disruption-cost": "x", "controller.kubernetes.io/pod-deletion-cost": str(2**27)}, 1.0),
    ],
)
def test_a_pods_disruption_cost_annotation_comes_before_its_deletion_cost(annotations, cost):
    """utils/disruption/disruption.go:97-123: karpenter.sh/disruption-cost first, the pod-deletion-cost without it."""
    assert eviction_cost(replace(pod(cpu="1"), annotations=annotations)) == cost


def test_a_candidates_costs_share_one_eviction_cost_per_pod():
    pods = (
        replace(pod(cpu="1"), priority=2**25),
        replace(pod(cpu="1"), annotations={"controller.kubernetes.io/pod-deletion-cost": str(-(2**30))}),
        pod(cpu="1"),
    )
    node = claimed("n1", pods=pods)
    pool = replace(nodepool(), expire_after="2h")
    built = Candidate.with_costs(node, pool, pods, 0.5)
    plain = Candidate(node, pool, pods, disruption_cost(node, pool, pods, NOW))
    assert (built.disruption_cost, built.reschedule_cost) == (plain.disruption_cost, plain.reschedule_cost)
    assert (built.disruption_cost, built.reschedule_cost) == ((2.0 - 7.0 + 1.0) * 0.5, 1 + 2.0 + 0.0 + 1.0)
