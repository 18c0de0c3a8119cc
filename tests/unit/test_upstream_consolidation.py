"""Karpenter v1.15.0's pkg/controllers/disruption/consolidation_test.go, ported onto karpui's pure disruption engine.

Each test names the Describe/It it follows. The upstream suite's cloud provider serves
fake.InstanceTypesAssorted() (ASSORTED below: 1,344 types, one offering each, 5 pods, price 0.1/CPU + 0.1/GB),
its NodePool consolidates WhenEmptyOrUnderutilized after 0s with a 100% budget, SpotToSpotConsolidation is on, and
its NodeClaims' allocatable is only what the It gives (`cpu: 32`, sometimes `pods: 100`): a node without `pods`
allocatable takes no pod from elsewhere.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from provisioner.catalog import InstanceType
from provisioner.cluster.objects import parse_timestamp
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.methods import disruption_pass
from provisioner.disruption.types import ClaimedNode, Command, DisruptionBudgetPolicy
from provisioner.lab import Lab
from provisioner.objects import WHEN_EMPTY, Budget, NodePool
from provisioner.options import BEST_EFFORT, IGNORE
from provisioner.pods import OwnerReference, Pod
from provisioner.quantity import parse_resources
from provisioner.scheduling.scheduler import PoolOffer
from tests.builders import HOSTNAME, ZONE, assorted_catalog, instance_type, node, nodepool, pod, r, req, spread, term
from tests.disruption_builders import NOW, pdb
from tests.lab_builders import deployment, lab, nodepool_doc

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
LABELS = {"app": "test"}


ASSORTED = assorted_catalog()
# suite_test.go's BeforeEach sorts on-demand and spot types by price; the first and last of each.
LEAST_EXPENSIVE = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"
MOST_EXPENSIVE = "64-cpu-128-mem-amd64-linux-test-zone-1-on-demand"
MOST_EXPENSIVE_SPOT = "64-cpu-128-mem-amd64-linux-test-zone-1-spot"


def with_price(it: InstanceType, price: float) -> InstanceType:
    return replace(it, offerings=tuple(replace(o, price=price) for o in it.offerings))


def rs_pod(*args, **kwargs) -> Pod:
    """A pod of the test ReplicaSet, with the suite's `app: test` labels unless told otherwise."""
    kwargs.setdefault("labels", LABELS)
    return pod(*args, owner=OwnerReference("ReplicaSet", "rs"), **kwargs)


def bound(p: Pod, name: str) -> Pod:
    return replace(p, node_name=name, unschedulable=False, phase="Running")


def nodeclaim(
    name: str,
    type_name: str = MOST_EXPENSIVE,
    *,
    types=ASSORTED,
    pods=(),
    cpu: str = "32",
    max_pods: int | None = None,
    pool: str = "default",
    labels=None,
    capacity_type: str | None = None,
    zone: str | None = None,
    price: float | None = None,
    **claim,
) -> ClaimedNode:
    """test.NodeClaimAndNode: the NodeClaim's labels (NodePool, instance type, capacity type, zone) on the Node, its
    status.allocatable as the Node's, Consolidatable and initialized."""
    it = next(t for t in types if t.name == type_name) if type_name else None
    offering = it.offerings[0] if it else None
    capacity_type = offering.capacity_type if capacity_type is None and offering else capacity_type or ""
    zone = offering.zone if zone is None and offering else zone or ""
    node_labels = {INSTANCE_TYPE: type_name, CAPACITY_TYPE: capacity_type, ZONE: zone, **(labels or {})}
    node_labels = {k: v for k, v in node_labels.items() if v}
    allocatable = {"cpu": cpu, **({"pods": str(max_pods)} if max_pods is not None else {})}
    base = node(name, labels=node_labels, scheduled=[bound(p, name) for p in pods], managed=True, nodepool_name=pool)
    base = replace(
        base,
        allocatable=parse_resources(allocatable),
        capacity=parse_resources(allocatable),
        initialized=claim.get("initialized", True),
    )
    if price is None:
        price = offering.price if offering else 0.0
    return ClaimedNode(
        node=base,
        nodeclaim=name,
        nodepool=pool,
        instance_type=type_name,
        capacity_type=capacity_type,
        zone=zone,
        price=price,
        created=claim.pop("created", NOW - 3600),
        **claim,
    )


def pool(name: str = "default", *requirements, **fields) -> NodePool:
    """The suite's NodePool: WhenEmptyOrUnderutilized, consolidateAfter 0s, a 100% budget."""
    budgets = fields.pop("budgets", [Budget(nodes="100%")])
    consolidate_after = fields.pop("consolidate_after", "0s")
    made = nodepool(name, *requirements, budgets=budgets, consolidate_after=consolidate_after)
    return replace(made, **fields) if fields else made


def disrupt(
    nodes,
    pools=None,
    types=None,
    *,
    pending=(),
    pdbs=(),
    extra_nodes=(),
    spot_to_spot=True,
    now=NOW,
    offers=None,
    problems=None,
    resume=None,
    **view_options,
):
    """One disruption pass (Karpenter's disruption controller reconciled once)."""
    pools = pools or [pool()]
    types = ASSORTED if types is None else types
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes] + list(extra_nodes),
        pending=list(pending),
        pools=offers if offers is not None else [PoolOffer(p, types) for p in pools],
        now=now,
        pdbs=list(pdbs),
        spot_to_spot=spot_to_spot,
        **view_options,
    )
    return disruption_pass(view, {p.name: p for p in pools}, problems=problems, resume=resume)


def one(result) -> Command:
    assert len(result.commands) == 1, (result.commands, result.notes, result.blocked)
    return result.commands[0]


def names(command: Command) -> list[str]:
    return sorted(c.name for c in command.candidates)


def launched(command: Command) -> set[str]:
    """The instance types the replacement NodeClaim's requirements allow."""
    [replacement] = command.replacements
    return set(replacement.requirements[INSTANCE_TYPE].values)


# Events ------------------------------------------------------------------------------------------------------------


def test_no_unconsolidatable_reason_for_a_whenemptyorunderutilized_nodepool():
    """Events: "should not fire an event for ConsolidationDisabled when the NodePool has consolidation set to
    WhenEmptyOrUnderutilized" (the empty node is deleted, nothing is noted)."""
    result = disrupt([nodeclaim("node")])
    assert (one(result).reason, result.notes) == ("Empty", {})


def test_a_whenempty_nodepools_busy_node_is_unconsolidatable_for_each_consolidation_method():
    """Events: "should fire an event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmpty":
    4 calls, Node and NodeClaim for multi-node and single-node consolidation."""
    result = disrupt(
        [nodeclaim("node", pods=[pod()])], pools=[pool(consolidation_policy=WHEN_EMPTY, consolidate_after="1m")]
    )
    assert result.commands == []
    assert result.notes["node"] == ['NodePool "default" has consolidation policy WhenEmpty, but node is not empty'] * 2


def test_consolidate_after_never_makes_a_busy_node_unconsolidatable():
    """Events: "should fire an event for ConsolidationDisabled when the NodePool has consolidateAfter set to 'Never'"
    (6 calls upstream: emptiness says it too, emptiness.go:47, even for a node with pods; karpui's notes and the
    events made from them are deduplicated, so only the reason is compared)."""
    result = disrupt([nodeclaim("node", pods=[pod()])], pools=[pool(consolidate_after="Never")])
    assert result.commands == []
    assert list(dict.fromkeys(result.notes["node"])) == ['NodePool "default" has consolidation disabled']


def test_a_candidate_without_a_resolvable_instance_type_is_unconsolidatable():
    """Events: "should fire an event when a candidate does not have a resolvable instance type"
    (consolidation.go:110: `Instance Type "" not found`)."""
    result = disrupt([nodeclaim("node", "", pods=[pod()], capacity_type="on-demand", zone="test-zone-1")])
    assert result.commands == []
    assert list(dict.fromkeys(result.notes["node"])) == ['Instance Type "" not found']


def test_an_empty_candidate_without_a_resolvable_instance_type_is_still_deleted_as_empty():
    """Not an It upstream: Emptiness's ShouldDisrupt (emptiness.go:42-58) never looks at the instance type, so the
    check above keeps such a node from consolidation only."""
    result = disrupt([nodeclaim("node", "", capacity_type="on-demand", zone="test-zone-1")])
    assert (one(result).reason, names(one(result))) == ("Empty", ["node"])


@pytest.mark.parametrize(("missing", "label"), [("capacity_type", CAPACITY_TYPE), ("zone", ZONE)])
def test_a_candidate_without_its_capacity_type_or_zone_label_is_unconsolidatable(missing, label):
    """Events: "should fire an event when a candidate does not have the capacity type label" and "... the zone
    label"."""
    result = disrupt([nodeclaim("node", pods=[pod()], **{missing: ""})])
    assert result.commands == []
    assert list(dict.fromkeys(result.notes["node"])) == [f'Node does not have label "{label}"']


# Budgets -----------------------------------------------------------------------------------------------------------


def budget_nodes(count: int, prefix: str = "node", node_pool: str = "default", pods=None) -> list[ClaimedNode]:
    """The Budgets context's NodeClaims: the most expensive type, allocatable 32 CPU and 100 pods."""
    return [
        nodeclaim(f"{prefix}-{i}", max_pods=100, pool=node_pool, pods=[pods()] if pods else ()) for i in range(count)
    ]


def deleting(nodes: list[ClaimedNode], command: Command) -> list[ClaimedNode]:
    """The queue took the command: its candidates are marked for deletion, their pods still on them."""
    gone = set(names(command))
    return [
        replace(n, deleting=True, node=replace(n.node, marked_for_deletion=True)) if n.name in gone else n
        for n in nodes
    ]


def test_single_node_consolidation_deletes_only_as_many_nodes_as_the_budget_allows_over_passes():
    """Budgets: "should only allow 3 nodes to be deleted in single node consolidation delete": ten 15-CPU pods, one
    per 32-CPU node, a 30% budget, five reconciles: 3 nodes go."""
    nodes = budget_nodes(10, pods=lambda: rs_pod(cpu="15"))
    pools = [pool(budgets=[Budget(nodes="30%")])]
    for _ in range(5):
        result = disrupt(nodes, pools)
        for command in result.commands:
            assert command.decision == "delete"
            nodes = deleting(nodes, command)
    assert sum(n.deleting for n in nodes) == 3


@pytest.mark.parametrize(("budget", "allowed", "left"), [("50%", 2, 10), ("100%", 3, 0), ("0%", 0, 30)])
def test_empty_nodes_of_ten_nodepools_are_deleted_per_nodepool_budget(budget, allowed, left):
    """Budgets: "should allow 2 nodes from each nodePool to be deleted" (3 nodes at 50% round up to 2), "should allow
    all nodes from each nodePool to be deleted" and "should allow no nodes from each nodePool to be deleted"."""
    pools = [pool(f"nodepool-{i}", budgets=[Budget(nodes=budget)]) for i in range(10)]
    nodes = [n for p in pools for n in budget_nodes(3, prefix=p.name, node_pool=p.name)]
    result = disrupt(nodes, [pool(), *pools])
    assert {p.name: result.budgets[(p.name, "Empty")] for p in pools} == {p.name: allowed for p in pools}
    deleted = sum(len(c.candidates) for c in result.commands)
    assert (len(result.commands), 30 - deleted) == (1 if allowed else 0, left)


# Replace -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_can_replace_node(spot):
    """Replace: "can replace node" (both Entries): the most expensive node's one pod goes to a cheaper NodeClaim
    that does not offer the candidate's type."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    command = one(disrupt([nodeclaim("node", current, pods=[rs_pod()])]))
    assert (command.decision, names(command)) == ("replace", ["node"])
    assert current not in launched(command)


def first_types(count: int) -> list[InstanceType]:
    """lo.Slice(fake.InstanceTypesAssorted(), 0, count) with the first made a 0.001 spot offering."""
    types = list(assorted_catalog()[:count])
    first = types[0]
    types[0] = replace(first, offerings=(replace(first.offerings[0], capacity_type="spot", price=0.001),))
    return types


def test_cannot_replace_spot_with_spot_with_fewer_than_fifteen_cheaper_types():
    """Replace: "cannot replace spot with spot if less than minimum InstanceTypes flexibility": of the first five
    assorted types only one spot type is cheaper than the candidate's."""
    types = first_types(5)
    candidate = nodeclaim("node", types[1].name, types=types, pods=[rs_pod()])
    result = disrupt([candidate], types=types)
    assert result.commands == []
    assert (
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, "
        "got 1" in result.notes["node"]
    )


def test_cannot_replace_spot_with_spot_when_the_candidate_is_among_the_fifteen_cheapest():
    """Replace: "cannot replace spot with spot if it is part of the 15 cheapest instance types."."""
    types = first_types(20)
    spot = [t for t in sorted(types, key=lambda t: t.offerings[0].price) if t.offerings[0].capacity_type == "spot"]
    candidate = nodeclaim("node", spot[1].name, types=types, pods=[rs_pod()])
    assert disrupt([candidate], types=types).commands == []


def eighteen_spot_types() -> list[InstanceType]:
    """The first 18 spot types, priced 1.0, 1.1, ... 2.7, but the 17th at 0.001."""
    spot = [t for t in assorted_catalog() if t.offerings[0].capacity_type == "spot"][:18]
    spot = [with_price(t, 1.00 + i * 0.1) for i, t in enumerate(spot)]
    spot[16] = with_price(spot[16], 0.001)
    return spot


@pytest.mark.parametrize(
    ("min_values", "kept"),
    [
        pytest.param(None, 15, id="no-min-values"),
        pytest.param(10, 15, id="min-values-below-15"),
        pytest.param(16, 16, id="min-values-above-15"),
    ],
)
def test_spot_to_spot_keeps_the_cheapest_types_ordered_by_price(min_values, kept):
    """Replace: "spot to spot consolidation should order the instance types by price before enforcing minimum
    flexibility.", "... should consider the default for truncation if minimum number of instanceTypeOptions from
    minValues in requirement is less than 15." and "... should consider the max of default and minimum number of
    instanceTypeOptions from minValues in requirement for truncation if ... greater than 15."."""
    types = eighteen_spot_types()
    requirements = [req(INSTANCE_TYPE, "Exists", min_values=min_values)] if min_values else []
    candidate = nodeclaim("node", types[17].name, types=types, pods=[rs_pod()])
    command = one(disrupt([candidate], [pool("default", *requirements)], types))
    by_price = sorted(types, key=lambda t: t.offerings[0].price)
    assert command.decision == "replace"
    assert launched(command) == {t.name for t in by_price[:kept]}
    assert types[16].name in launched(command) and types[17].name not in launched(command)


def test_a_failed_same_type_filter_under_min_values_falls_back_to_a_delete():
    """Replace: "should handle failing filterOutSameInstanceType correctly (without a panic) when minValues isn't
    satisfied": merging two current-on-demand nodes leaves one type (other-on-demand) where minValues asks for 2,
    so the command is single-node consolidation's delete (3 NodeClaims become 2 without a launch)."""
    zone = [("test-zone-1a", "on-demand")]
    types = [
        instance_type("current-on-demand", "5", "4Gi", zones=zone, price=0.5),
        instance_type("other-on-demand", "5", "4Gi", zones=zone, price=0.4),
    ]
    nodepool_ = pool("default", req(INSTANCE_TYPE, "Exists", min_values=2), req(CAPACITY_TYPE, "In", "on-demand"))
    pods = [rs_pod(cpu="2") for _ in range(4)]
    nodes = [
        nodeclaim(f"node-{i}", "current-on-demand", types=types, cpu="4", max_pods=100, pods=placed)
        for i, placed in enumerate([pods[:1], pods[1:2], pods[2:]])
    ]
    command = one(disrupt(nodes, [nodepool_], types))
    assert (command.decision, len(command.candidates)) == ("delete", 1)


@pytest.mark.parametrize(
    "spot",
    [pytest.param(False, id="on-demand"), pytest.param(True, id="spot")],
)
def test_consolidation_fails_when_the_price_filter_breaks_min_values(spot):
    """Replace: "Consolidation should fail if filterByPrice breaks the minimum requirement from the NodePools.":
    minValues 16 on instance types; the candidate is the 16th cheapest spot type. Both Entries apply the spot node
    (the on-demand Entry only appends the 18 cheapest on-demand types to the catalog instead)."""

    def cheapest(capacity_type):
        return sorted(
            (t for t in ASSORTED if t.offerings[0].capacity_type == capacity_type), key=lambda t: t.offerings[0].price
        )[:18]

    spot_types = cheapest("spot")
    types = [*ASSORTED, *(spot_types if spot else cheapest("on-demand"))]
    candidate = nodeclaim("node", spot_types[15].name, pods=[rs_pod()])
    result = disrupt([candidate], [pool("default", req(INSTANCE_TYPE, "Exists", min_values=16))], types)
    assert result.commands == []


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_can_replace_nodes_if_another_nodepool_returns_no_instance_types(spot):
    """Replace: "can replace nodes if another nodePool returns no instance types"."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    pools = [pool(), pool("nodepool-2")]
    offers = [PoolOffer(pools[0], ASSORTED), PoolOffer(pools[1], [])]
    command = one(disrupt([nodeclaim("node", current, pods=[rs_pod()])], pools, offers=offers))
    assert (command.decision, names(command)) == ("replace", ["node"])
    assert current not in launched(command)


def three_pods_on(current: str, name: str = "node", **pod_options) -> ClaimedNode:
    return nodeclaim(name, current, pods=[rs_pod(**pod_options) for _ in range(3)])


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_a_pdb_allowing_no_disruption_keeps_a_node_from_replacement(spot):
    """Replace: "can replace nodes, considers PDB": maxUnavailable 0 over the node's three pods."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    blocking = replace(pdb(allowed=0, **LABELS), fully_blocking=True)
    result = disrupt([three_pods_on(current)], pdbs=[blocking])
    assert result.commands == []
    assert result.blocked["node"] == ["Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_a_pdb_that_always_allows_unhealthy_pods_lets_their_node_be_replaced(spot):
    """Replace: "can replace nodes, considers PDB policy": the same PDB with unhealthyPodEvictionPolicy AlwaysAllow,
    the pods not Ready."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    policy = replace(pdb(allowed=0, **LABELS), fully_blocking=True, always_allow_unhealthy=True)
    unready = nodeclaim("node", current, pods=[replace(rs_pod(), unready=True) for _ in range(3)])
    command = one(disrupt([unready], pdbs=[policy]))
    assert (command.decision, names(command)) == ("replace", ["node"])
    # Ready pods are held by the same PDB: AlwaysAllow lets only unhealthy pods go.
    held = disrupt([three_pods_on(current)], pdbs=[policy])
    assert (held.commands, held.blocked["node"]) == (
        [],
        ["Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"],
    )


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_a_pdb_in_another_namespace_does_not_keep_a_node(spot):
    """Replace: "can replace nodes, PDB namespace must match"."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    elsewhere = DisruptionBudgetPolicy("other-namespace", "pdb", pdb(**LABELS).selector, 0, fully_blocking=True)
    command = one(disrupt([nodeclaim("node", current, pods=[rs_pod()])], pdbs=[elsewhere]))
    assert (command.decision, names(command)) == ("replace", ["node"])


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
@pytest.mark.parametrize("where", ["node", "pod"])
def test_do_not_disrupt_on_the_other_node_or_its_pod_leaves_the_unprotected_node_to_replace(spot, where):
    """Replace: "can replace nodes, considers karpenter.sh/do-not-disrupt set to true on nodes" and "... on pods":
    two 2-CPU pods on the candidate, a third on a 5-CPU node that is protected; only the candidate is replaced."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    candidate = nodeclaim("node", current, pods=[rs_pod(cpu="2"), rs_pod(cpu="2")])
    third = rs_pod(cpu="2")
    if where == "pod":
        third = replace(third, annotations={DO_NOT_DISRUPT: "true"})
    protected = nodeclaim(
        "protected",
        current,
        cpu="5",
        max_pods=100,
        pods=[third],
        annotations={DO_NOT_DISRUPT: "true"} if where == "node" else {},
    )
    command = one(disrupt([candidate, protected]))
    assert (command.decision, names(command)) == ("replace", ["node"])


def test_no_on_demand_replacement_pricier_at_its_worst_offering():
    """Replace: "won't replace on-demand node if on-demand replacement is more expensive": the NodePool asks for
    on-demand; the replacement's on-demand offerings cost 0.6 against the candidate's 0.5."""
    current = instance_type("current-on-demand", "4", "4Gi", zones=[("test-zone-1a", "on-demand")], price=0.5)
    current = replace(current, offerings=(replace(current.offerings[0], available=False),))
    replacement = instance_type(
        "on-demand-replacement",
        "4",
        "4Gi",
        zones=[
            ("test-zone-1a", "on-demand"),
            ("test-zone-1b", "on-demand"),
            ("test-zone-1b", "spot"),
            ("test-zone-1c", "spot"),
        ],
    )
    replacement = replace(
        replacement,
        offerings=tuple(replace(o, price=p) for o, p in zip(replacement.offerings, (0.6, 0.6, 0.2, 0.3), strict=True)),
    )
    types = [current, replacement]
    candidate = nodeclaim("node", "current-on-demand", types=types, pods=[rs_pod()], price=0.5)
    result = disrupt([candidate], [pool("default", req(CAPACITY_TYPE, "In", "on-demand"))], types)
    assert result.commands == []
    assert result.notes["node"][-1] == "Can't replace with a cheaper node"


# Delete ------------------------------------------------------------------------------------------------------------


def two_cheap_nodes(first=None, second=None, **options) -> list[ClaimedNode]:
    """The Delete context's NodeClaims: the least expensive type, allocatable 32 CPU and 100 pods; three pods, two on
    the first node and one on the second."""
    first = first if first is not None else [rs_pod(), rs_pod()]
    second = second if second is not None else [rs_pod()]
    return [
        nodeclaim("node-0", LEAST_EXPENSIVE, max_pods=100, pods=first, **options),
        nodeclaim("node-1", LEAST_EXPENSIVE, max_pods=100, pods=second, **options),
    ]


def test_can_delete_nodes_if_another_nodepool_has_no_node_template():
    """Delete: "can delete nodes if another nodePool has no node template" (that NodePool is never applied)."""
    command = one(disrupt(two_cheap_nodes()))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_can_delete_a_node_when_non_karpenter_capacity_can_fit_its_pods():
    """Delete: "can delete nodes, when non-Karpenter capacity can fit pods"."""
    candidate = nodeclaim("node-0", LEAST_EXPENSIVE, max_pods=100, pods=[rs_pod() for _ in range(3)])
    unmanaged = node("unmanaged", "32", "0", pods=100)
    command = one(disrupt([candidate], extra_nodes=[unmanaged]))
    assert (command.decision, names(command), command.destinations) == ("delete", ["node-0"], {"unmanaged": 3})


def test_do_not_disrupt_pods_block_consolidation_even_with_a_termination_grace_period():
    """Delete: "does not consolidate nodes with karpenter.sh/do-not-disrupt set to true on pods when the NodePool's
    TerminationGracePeriod is not nil"."""
    protected = [replace(rs_pod(), annotations={DO_NOT_DISRUPT: "true"}) for _ in range(3)]
    result = disrupt(two_cheap_nodes(protected[:2], protected[2:], grace_period=True))
    assert result.commands == []
    assert sorted(result.blocked) == ["node-0", "node-1"]


def test_blocking_pdbs_block_consolidation_even_with_a_termination_grace_period():
    """Delete: "does not consolidate nodes with pods with blocking PDBs when the NodePool's TerminationGracePeriod is
    not nil"."""
    result = disrupt(two_cheap_nodes(grace_period=True), pdbs=[pdb(allowed=0, **LABELS)])
    assert result.commands == []
    assert sorted(result.blocked) == ["node-0", "node-1"]


def test_pods_without_an_owner_are_evicted_too():
    """Delete: "can delete nodes, evicts pods without an ownerRef"."""
    command = one(disrupt(two_cheap_nodes([pod(), pod()], [pod()])))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_pods_may_move_onto_a_node_whose_nodepool_never_consolidates():
    """Delete: "should consolidate pods onto a destination node with consolidateAfter set to Never": the destination
    node's NodePool has consolidateAfter Never, which is no window that keeps pods off it."""
    destination_pool = pool("destination", consolidate_after="Never")
    candidate = nodeclaim("node-0", LEAST_EXPENSIVE, max_pods=100, pods=[rs_pod()])
    destination = nodeclaim("destination", LEAST_EXPENSIVE, max_pods=100, pool="destination")
    destination = replace(destination, consolidatable=False)
    command = one(disrupt([candidate, destination], [pool(), destination_pool]))
    assert (command.decision, names(command), command.destinations) == ("delete", ["node-0"], {"destination": 1})


def test_a_node_is_replaced_with_a_cheaper_one_although_its_consolidate_after_is_a_minute():
    """Delete: "should replace a node with a cheaper one even when consolidateAfter has not expired" (the NodeClaim is
    Consolidatable; the clock has moved two minutes on)."""
    result = disrupt([nodeclaim("node", pods=[rs_pod()])], [pool(consolidate_after="1m")], now=NOW + 120)
    command = one(result)
    assert (command.decision, names(command)) == ("replace", ["node"])


def test_a_permanently_pending_pod_does_not_stop_a_delete():
    """Delete: "can delete nodes with a permanently pending pod" (it selects a label no node has)."""
    pending = pod(node_selector={"non-existent": "node-label"})
    command = one(disrupt(two_cheap_nodes(), pending=[pending]))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_no_delete_that_would_make_a_running_pod_pending():
    """Delete: "won't delete nodes if it would make a non-pending pod go pending": each pod selects its node's `foo`
    label, which no NodePool offers."""
    first = [rs_pod(node_selector={"foo": "1"}), rs_pod(node_selector={"foo": "1"})]
    nodes = [
        nodeclaim("node-0", LEAST_EXPENSIVE, max_pods=100, pods=first, labels={"foo": "1"}),
        nodeclaim(
            "node-1", LEAST_EXPENSIVE, max_pods=100, pods=[rs_pod(node_selector={"foo": "2"})], labels={"foo": "2"}
        ),
    ]
    assert disrupt(nodes).commands == []


def test_can_delete_nodes_while_an_invalid_nodepool_exists():
    """Delete: "can delete nodes while an invalid node pool exists" (its instance types cannot be fetched, so it is
    left out of the pass)."""
    result = disrupt(two_cheap_nodes(), problems={"bad-nodepool": "unable to fetch instance types"})
    command = one(result)
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_can_delete_nodes():
    """Delete: "can delete nodes": two of three pods on one node, one on the other; the other goes."""
    command = one(disrupt(two_cheap_nodes()))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_initialized_nodes_are_considered_before_an_uninitialized_one():
    """Delete: "should consider initialized nodes before uninitialized nodes": 100 default-instance-type nodes (3 CPU,
    3Gi) each hold a 2-CPU 2Gi pod, one of them not initialized; a small node's 1-CPU 1Gi pod moves to an initialized
    one and the small node goes. karpui's single-node walk stops after MAX_SINGLE_SIMULATIONS candidates and the next
    pass resumes, where Karpenter's one pass has 3 minutes: passes are repeated until one finds the command."""
    types = [
        instance_type("default-instance-type", "3", "3Gi", pods=110),
        instance_type("small-instance-type", "1", "1Gi", pods=10),
    ]
    nodes = [
        nodeclaim(
            f"node-{i:03d}",
            "default-instance-type",
            types=types,
            cpu="3",
            max_pods=100,
            pods=[rs_pod(cpu="2", memory="2Gi")],
            initialized=i != 0,
        )
        for i in range(100)
    ]
    nodes = [
        replace(n, node=replace(n.node, allocatable={**n.node.allocatable, "memory": 3 * 2**30 * 1000})) for n in nodes
    ]
    small = nodeclaim(
        "small", "small-instance-type", types=types, cpu="1", max_pods=100, pods=[pod(cpu="1", memory="1Gi")]
    )
    small = replace(small, node=replace(small.node, allocatable={**small.node.allocatable, "memory": 2**30 * 1000}))
    resume = None
    for _ in range(10):
        result = disrupt([*nodes, small], types=types, resume=resume)
        if result.commands or result.resume is None:
            break
        resume = result.resume
    command = one(result)
    assert (command.decision, names(command)) == ("delete", ["small"])
    assert "node-000" not in command.destinations
    assert not any("uninitialized" in note for notes in result.notes.values() for note in notes)


# Node Lifetime Consideration, Topology Consideration ---------------------------------------------------------------


def test_the_node_with_the_best_savings_ratio_goes_first():
    """Node Lifetime Consideration: "should consolidate the node with best savings ratio first": expireAfter 3s, the
    first node made 2 s before the second; two pods on the first, one on the second: the second goes."""
    expiring = pool(expire_after="3s")
    nodes = two_cheap_nodes()
    nodes = [replace(nodes[0], created=NOW - 2), replace(nodes[1], created=NOW)]
    command = one(disrupt(nodes, [expiring]))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_a_node_is_replaced_in_its_own_zone_to_keep_a_zonal_spread():
    """Topology Consideration: "can replace node maintaining zonal topology spread": three 1-CPU nodes, one per zone,
    each with a pod of a zonal spread (maxSkew 1); the expensive one in test-zone-2 is replaced in test-zone-2."""
    labels = {"app": "test-zonal-spread"}
    constraint = spread(ZONE, 1, **labels)
    zone_1 = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"
    zone_2 = "64-cpu-128-mem-amd64-linux-test-zone-2-on-demand"
    zone_3 = "1-cpu-1-mem-amd64-linux-test-zone-3-on-demand"
    nodes = [
        nodeclaim(name, type_name, cpu="1", pods=[rs_pod(cpu="1", labels=labels, spread=[constraint])])
        for name, type_name in (("node-0", zone_1), ("node-1", zone_2), ("node-2", zone_3))
    ]
    command = one(disrupt(nodes))
    assert (command.decision, names(command)) == ("replace", ["node-1"])
    assert command.replacements[0].requirements[ZONE].values == frozenset({"test-zone-2"})


# Multi-NodeClaim ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_can_merge_three_nodes_into_one(spot):
    """Multi-NodeClaim: "can merge 3 nodes into 1": a pod on each of three of the most expensive nodes."""
    current = MOST_EXPENSIVE_SPOT if spot else MOST_EXPENSIVE
    nodes = [nodeclaim(f"node-{i}", current, max_pods=100, pods=[rs_pod()]) for i in range(3)]
    command = one(disrupt(nodes))
    assert (command.method, command.decision, names(command)) == ("multi", "replace", ["node-0", "node-1", "node-2"])


def test_can_merge_three_nodes_of_spot_and_on_demand_into_one():
    """Multi-NodeClaim: "can merge 3 nodes into 1 if the candidates have both spot and on-demand"."""
    nodes = [
        nodeclaim(f"node-{i}", current, max_pods=100, pods=[rs_pod()])
        for i, current in enumerate((MOST_EXPENSIVE, MOST_EXPENSIVE, MOST_EXPENSIVE_SPOT))
    ]
    command = one(disrupt(nodes))
    assert (command.method, command.decision, names(command)) == ("multi", "replace", ["node-0", "node-1", "node-2"])


@pytest.mark.parametrize(
    "current",
    [
        pytest.param("1-cpu-1-mem-amd64-linux-test-zone-1-spot", id="on-demand-entry-spot-nodes"),
        pytest.param(
            LEAST_EXPENSIVE,
            id="spot-entry-on-demand-nodes",
        ),
    ],
)
def test_two_nodes_are_not_merged_into_one_of_their_own_type(current):
    """Multi-NodeClaim: "won't merge 2 nodes into 1 of the same type" (its lo.Ternary puts the spot nodes in the
    "on-demand" Entry and the on-demand nodes in the "spot" one): the node with one pod is deleted instead."""
    nodes = [
        nodeclaim("node-0", current, max_pods=100, pods=[rs_pod()]),
        nodeclaim("node-1", current, max_pods=100, pods=[rs_pod(), rs_pod()]),
    ]
    command = one(disrupt(nodes))
    assert (command.decision, names(command)) == ("delete", ["node-0"])


# Preferences, MinValuesPolicy ----------------------------------------------------------------------------------------


def test_a_node_is_deleted_through_preferred_anti_affinity_when_preferences_are_ignored():
    """Preferences: "should consolidate a node through deletion when ignoring preferences": three pods preferring
    not to share a hostname, two on one 5-CPU node, one on another."""
    anti = [term(HOSTNAME, 1, app="foo")]
    pods = [pod(labels={"app": "foo"}, preferred_anti_affinity=anti) for _ in range(3)]
    nodes = [
        nodeclaim("node-0", LEAST_EXPENSIVE, cpu="5", max_pods=100, pods=pods[:2]),
        nodeclaim("node-1", LEAST_EXPENSIVE, cpu="5", max_pods=100, pods=pods[2:]),
    ]
    command = one(disrupt(nodes, preference_policy=IGNORE))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_a_node_is_replaced_past_its_pods_preferred_instance_type_when_preferences_are_ignored():
    """Preferences: "should consolidate a node through replacement when ignoring preferences": the pod prefers the
    most expensive type, which the replacement does not offer."""
    preferring = pod(labels={"app": "foo"}, preferred=[(1, [r(INSTANCE_TYPE, "In", MOST_EXPENSIVE)])])
    command = one(disrupt([nodeclaim("node", pods=[preferring])], preference_policy=IGNORE))
    assert (command.decision, names(command)) == ("replace", ["node"])
    assert MOST_EXPENSIVE not in launched(command)


def test_consolidation_does_not_relax_min_values_under_best_effort():
    """MinValuesPolicy: "should not consolidate a node by relaxing min values when policy is set to BestEffort": the
    NodePool names every assorted type with minValues 3, the cloud provider serves only two."""
    with_min_values = pool(
        "with-min-values", req(INSTANCE_TYPE, "In", *(t.name for t in ASSORTED), min_values=3), weight=100
    )
    types = [t for t in ASSORTED if t.name in (LEAST_EXPENSIVE, MOST_EXPENSIVE)]
    candidate = nodeclaim(
        "node", MOST_EXPENSIVE, types=types, cpu="5", max_pods=100, pool="with-min-values", pods=[pod()]
    )
    result = disrupt([candidate], [with_min_values], types, min_values_policy=BEST_EFFORT)
    assert result.commands == []
    assert any(
        "minValues requirement is not met for label(s) (label(s)=[node.kubernetes.io/instance-type])" in note
        for note in result.notes["node"]
    )


# Buffer Pods ---------------------------------------------------------------------------------------------------------


def test_a_node_with_only_buffer_pods_is_not_empty():
    """Buffer Pods: "should not empty-consolidate a node with only buffer pods"."""
    assert disrupt([nodeclaim("node")], buffer_nodes=frozenset({"node"})).commands == []


def test_a_node_with_real_and_buffer_pods_may_go_to_a_cheaper_instance():
    """Buffer Pods: "should allow consolidation of a node with real pods and buffer pods to a cheaper instance"."""
    node_ = nodeclaim("node", pods=[pod(cpu="1", labels=LABELS)])
    assert len(disrupt([node_], buffer_nodes=frozenset({"node"})).commands) >= 1


def test_a_buffer_only_node_is_skipped_by_single_node_consolidation():
    """Buffer Pods: "should skip buffer-only nodes in single-node consolidation but protect via emptiness"."""
    nodes = [
        nodeclaim("node-0", max_pods=100),
        nodeclaim("node-1", max_pods=100, pods=[pod(cpu="1", labels=LABELS)]),
    ]
    result = disrupt(nodes, buffer_nodes=frozenset({"node-0", "node-1"}))
    assert all("node-0" not in names(c) for c in result.commands)


def test_a_buffer_node_is_deleted_once_its_buffer_pods_are_cleared():
    """Buffer Pods: "should consolidate a buffer node once buffer pods are cleared"."""
    assert disrupt([nodeclaim("node")], buffer_nodes=frozenset({"node"})).commands == []
    command = one(disrupt([nodeclaim("node")]))
    assert (command.reason, names(command)) == ("Empty", ["node"])


# Multi-NodeClaim: empty nodes; Reserved Capacity ---------------------------------------------------------------------


@pytest.mark.parametrize("current", [MOST_EXPENSIVE_SPOT, MOST_EXPENSIVE], ids=["on-demand-entry", "spot-entry"])
def test_several_empty_nodes_go_in_one_command(current):
    """Multi-NodeClaim: "should consolidate multiple empty nodes via multi-nodeclaim consolidation" (three pods are
    applied but never bound, so they are pending and the three nodes empty; its lo.Ternary swaps the Entries' nodes):
    one command deletes all three."""
    nodes = [nodeclaim(f"node-{i}", current, max_pods=100) for i in range(3)]
    command = one(disrupt(nodes, pending=[rs_pod() for _ in range(3)]))
    assert (command.decision, names(command)) == ("delete", ["node-0", "node-1", "node-2"])


def with_reservation(it: InstanceType) -> InstanceType:
    """The Reserved Capacity context's extra offering: reserved, in the type's zone, at a millionth of its price,
    ten instances of reservation r-<type>."""
    first = it.offerings[0]
    reserved = replace(
        first,
        capacity_type="reserved",
        price=first.price / 1_000_000.0,
        reservation_id=f"r-{it.name}",
        reservation_capacity=10,
    )
    return replace(it, offerings=(*it.offerings, reserved))


@pytest.mark.parametrize("current", [MOST_EXPENSIVE, MOST_EXPENSIVE_SPOT], ids=["from-on-demand", "from-spot"])
def test_a_node_is_consolidated_into_reserved_capacity_of_the_same_instance_pool(current):
    """Reserved Capacity: "can consolidate into reserved capacity for the same instance pool": the most expensive
    type gains a reservation; its on-demand (or the most expensive spot) node is replaced by a reserved NodeClaim of
    that type in that reservation."""
    types = [with_reservation(t) if t.name == MOST_EXPENSIVE else t for t in ASSORTED]
    command = one(disrupt([nodeclaim("node", current, types=types, pods=[rs_pod()])], types=types))
    [replacement] = command.replacements
    assert (command.decision, replacement.requirements[CAPACITY_TYPE].values) == ("replace", frozenset({"reserved"}))
    assert launched(command) == {MOST_EXPENSIVE}
    assert replacement.requirements["karpenter.k8s.aws/capacity-reservation-id"].values == {f"r-{MOST_EXPENSIVE}"}


# TTL: what arrives during the 15 s validation wait (the lab, as tests/unit/test_command_validation.py drives it) ---

ON_DEMAND = [{"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
CONSOLIDATING = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "0s",
    "budgets": [{"nodes": "100%"}],
}


def lab_types(made: Lab) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][INSTANCE_TYPE] for n in made.store.list("Node")}


def lab_scale(made: Lab, name: str, replicas: int) -> None:
    found = made.store.get("Deployment", name, "default")
    found["spec"]["replicas"] = replicas
    made.store.update(found)


def lab_proposed(made: Lab) -> dict:
    while not made.store.list("DisruptionCommand"):
        made.advance(1)
    [command] = made.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "Proposed"
    return command


def delete_proposed() -> tuple[Lab, str, dict]:
    """A c-16x-amd64-linux node with room (10 of `inflate`'s one-CPU pods) and a c-4x-amd64-linux node with
    `more`'s 3: deleting the small node is proposed."""
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND}, disruption=CONSOLIDATING), deployment("inflate", 15)
    )
    made.advance(30)
    made.store.create(deployment("more", 3))
    made.advance(30)
    lab_scale(made, "inflate", 10)
    command = lab_proposed(made)
    small = next(name for name, kind in lab_types(made).items() if kind == "c-4x-amd64-linux")
    assert command["spec"]["text"].endswith(f"delete: nodepools=[default]: [{small}] (savings: $0.11)")
    return made, small, command


def replace_proposed() -> tuple[Lab, str, dict]:
    """`inflate`'s 10 one-CPU pods on a c-16x-amd64-linux, scaled down to 3: its replacement is proposed."""
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND}, disruption=CONSOLIDATING), deployment("inflate", 10)
    )
    made.advance(30)
    [big] = lab_types(made)
    lab_scale(made, "inflate", 3)
    command = lab_proposed(made)
    assert command["spec"]["text"].endswith("-> [1 replacement] (savings: $0.33)")
    return made, big, command


def arrive(made: Lab, node_name: str, guard: str) -> None:
    """Pods land on `node_name` during the wait, guarded by a do-not-disrupt annotation or a maxUnavailable 0 PDB."""
    hostname = made.store.get("Node", node_name)["metadata"]["labels"][HOSTNAME]
    pods = deployment("guard", 1, "100m", nodeSelector={HOSTNAME: hostname})
    if guard == "do-not-disrupt":
        pods["spec"]["template"]["metadata"]["annotations"] = {DO_NOT_DISRUPT: "true"}
    else:
        made.store.create(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "guard", "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guard"}}},
            }
        )
    made.store.create(pods)
    made.advance(5)
    assert [
        p["metadata"]["name"].split("-")[0] for p in made.store.list("Pod") if p["spec"].get("nodeName") == node_name
    ].count("guard") == 1


@pytest.mark.parametrize("guard", ["do-not-disrupt", "blocking-pdb"])
@pytest.mark.parametrize("proposal", ["delete", "replace"])
def test_a_command_is_rejected_when_a_protected_pod_lands_on_its_node_during_the_wait(proposal, guard):
    """TTL: "should not delete node if pods schedule with karpenter.sh/do-not-disrupt set to true during the TTL
    wait", "should not delete node if pods schedule with a blocking PDB during the TTL wait", "should not replace node
    if a pod schedules with karpenter.sh/do-not-disrupt set to true during the TTL wait" and "should not replace node
    if a pod schedules with a blocking PDB during the TTL wait"."""
    made, candidate, command = delete_proposed() if proposal == "delete" else replace_proposed()
    nodes_before = sorted(lab_types(made))
    arrive(made, candidate, guard)
    made.advance(20)
    command = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert command["status"]["phase"] == "Rejected"
    assert candidate in lab_types(made) and sorted(lab_types(made)) == nodes_before


# Gaps: Its of consolidation_test.go not ported above ---------------------------------------------------------------


@pytest.mark.parametrize(("budget", "allowed", "left"), [("30%", 3, 7), ("100%", 10, 0), ("0%", 0, 10)])
def test_empty_nodes_are_deleted_as_far_as_the_budget_allows(budget, allowed, left):
    """Budgets: "should only allow 3 empty nodes to be disrupted", "should allow all empty nodes to be disrupted" and
    "should allow no empty nodes to be disrupted": ten empty nodes of one NodePool, one command."""
    result = disrupt(budget_nodes(10), [pool(budgets=[Budget(nodes=budget)])])
    assert result.budgets[("default", "Empty")] == allowed
    deleted = sum(len(c.candidates) for c in result.commands)
    assert (len(result.commands), 10 - deleted) == (1 if allowed else 0, left)


def test_multi_node_consolidation_deletes_only_as_many_nodes_as_the_budget_allows():
    """Budgets: "should only allow 3 nodes to be deleted in multi node consolidation delete": ten 100m pods, one per
    node, a 30% budget: one command of three deletes."""
    result = disrupt(budget_nodes(10, pods=lambda: rs_pod(cpu="100m")), [pool(budgets=[Budget(nodes="30%")])])
    command = one(result)
    assert (command.method, command.decision, len(command.candidates)) == ("multi", "delete", 3)


def test_no_replacement_whose_spot_offerings_include_a_pricier_one():
    """Replace: "won't replace node if any spot replacement is more expensive": the on-demand candidate costs 0.5, the
    replacement's spot offerings 1.0, 0.2 and 0.4; the one at 1.0 rules it out."""
    current = instance_type("current-on-demand", "4", "4Gi", zones=[("test-zone-1a", "on-demand")], price=0.5)
    current = replace(current, offerings=(replace(current.offerings[0], available=False),))
    spot = instance_type(
        "potential-spot-replacement",
        "4",
        "4Gi",
        zones=[("test-zone-1a", "spot"), ("test-zone-1b", "spot"), ("test-zone-1c", "spot")],
    )
    spot = replace(
        spot, offerings=tuple(replace(o, price=p) for o, p in zip(spot.offerings, (1.0, 0.2, 0.4), strict=True))
    )
    types = [current, spot]
    candidate = nodeclaim("node", "current-on-demand", types=types, pods=[rs_pod()], price=0.5)
    result = disrupt([candidate], [pool()], types)
    assert result.commands == []
    assert result.notes["node"][-1] == "Can't replace with a cheaper node"


def test_a_pdb_keeps_its_pods_node_and_the_other_is_deleted():
    """Delete: "can delete nodes, considers PDB": only the second node's pod is under a maxUnavailable 0 PDB, so the
    first node, with two pods, goes."""
    nodes = two_cheap_nodes([rs_pod(labels={}), rs_pod(labels={})], [rs_pod()])
    result = disrupt(nodes, pdbs=[pdb(allowed=0, **LABELS)])
    command = one(result)
    assert (command.decision, names(command), command.destinations) == ("delete", ["node-0"], {"node-1": 2})
    assert result.blocked["node-1"] == ["Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"]


@pytest.mark.parametrize("on", ["node", "pod"])
def test_do_not_disrupt_keeps_its_node_and_the_other_is_deleted(on):
    """Delete: "can delete nodes, considers karpenter.sh/do-not-disrupt set to true on nodes" and "... on pods": the
    second node (or its one pod) is annotated, so the first node, with two pods, goes."""
    protected = replace(rs_pod(), annotations={DO_NOT_DISRUPT: "true"}) if on == "pod" else rs_pod()
    first, second = two_cheap_nodes(second=[protected])
    if on == "node":
        second = replace(second, annotations={DO_NOT_DISRUPT: "true"})
    command = one(disrupt([first, second]))
    assert (command.decision, names(command)) == ("delete", ["node-0"])


def timed(p: Pod, value: str) -> Pod:
    """A pod with a do-not-disrupt annotation, started now."""
    return replace(p, annotations={DO_NOT_DISRUPT: value}, started=NOW)


def test_a_still_active_timed_do_not_disrupt_keeps_its_node_and_the_other_is_deleted():
    """Delete: "does not consolidate nodes with pods that have a duration-based do-not-disrupt annotation that is still
    active": the second node's pod is held for 2m from now; the first node goes."""
    command = one(disrupt(two_cheap_nodes(second=[timed(rs_pod(), "2m")])))
    assert (command.decision, names(command)) == ("delete", ["node-0"])


def test_nodes_are_consolidated_once_their_timed_do_not_disrupt_expires():
    """Delete: "can consolidate nodes after duration-based do-not-disrupt annotation expires": every pod is held 2m;
    no command, then one 3 minutes on."""
    nodes = two_cheap_nodes([timed(rs_pod(), "2m"), timed(rs_pod(), "2m")], [timed(rs_pod(), "2m")])
    assert disrupt(nodes).commands == []
    command = one(disrupt(nodes, now=NOW + 180))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_an_invalid_do_not_disrupt_value_does_not_block():
    """Delete: "can delete nodes, considers invalid do-not-disrupt annotation format as not blocking": the second
    node's pod says "invalid-format"; that node, with one pod, goes."""
    command = one(disrupt(two_cheap_nodes(second=[timed(rs_pod(), "invalid-format")])))
    assert (command.decision, names(command)) == ("delete", ["node-1"])


def test_no_delete_that_needs_an_uninitialized_node():
    """Delete: "won't delete node if it would require pods to schedule on an uninitialized node": the first node is not
    initialized; the second's pod could only go there."""
    first, second = two_cheap_nodes()
    first = replace(first, initialized=False, node=replace(first.node, initialized=False))
    result = disrupt([first, second])
    assert result.commands == []
    assert any(
        "Not all pods would schedule" in note and "would schedule against uninitialized nodeclaim" in note
        for note in result.notes["node-1"]
    ), result.notes


def test_no_pods_go_onto_a_destination_under_its_consolidate_after_window():
    """Delete: "should not consolidate pods onto a destination node that is under its consolidateAfter window"
    (consolidateAfter 1m): while both nodes are inside their window (their NodeClaims Consolidatable all the same)
    no pod may move onto the other; two minutes on, the second node's pod moves to the first and the second goes."""
    nodes = two_cheap_nodes()
    inside = [replace(n, node=replace(n.node, under_consolidate_after=True)) for n in nodes]
    assert disrupt(inside, [pool(consolidate_after="1m")]).commands == []
    command = one(disrupt(nodes, [pool(consolidate_after="1m")], now=NOW + 120))
    assert (command.decision, names(command), command.destinations) == ("delete", ["node-1"], {"node-0": 1})


def test_no_delete_that_would_violate_pod_anti_affinity():
    """Topology Consideration: "won't delete node if it would violate pod anti-affinity": three 1-CPU nodes in
    test-zone-1..3, each with a 1-CPU pod that keeps away from the others' hostname."""
    anti = [term(HOSTNAME, **LABELS)]
    zones = ("test-zone-1", "test-zone-2", "test-zone-3")
    nodes = [
        nodeclaim(
            f"node-{i}",
            f"1-cpu-1-mem-amd64-linux-{zone}-on-demand",
            cpu="1",
            pods=[rs_pod(cpu="1", anti_affinity=anti)],
        )
        for i, zone in enumerate(zones)
    ]
    assert disrupt(nodes).commands == []


def test_static_nodepool_nodes_are_not_consolidated():
    """Static NodePool: "should not consolidate static NodePool nodes" (their NodeClaims Consolidatable all the same)."""
    static = pool("static", replicas=2)
    nodes = [nodeclaim(f"node-{i}", LEAST_EXPENSIVE, pool="static", max_pods=2) for i in range(2)]
    result = disrupt(nodes, [static])
    assert result.commands == []


@pytest.mark.parametrize("pools_count", [1, 10], ids=["one nodepool", "many nodepools"])
@pytest.mark.parametrize("busy", [False, True], ids=["empty", "multi and single node"])
def test_a_pass_held_back_by_budgets_says_so_on_every_node(busy, pools_count):
    """Budgets: "should not mark empty node consolidated if the candidates can't be disrupted due to budgets with one
    nodepool" (and "... all candidates ... with many nodepools"), and the same of multi node and single node
    consolidation: every NodePool's budget is 0%, so nothing goes, and every node is noted as held back by its budget,
    which is what keeps the disruption controller from marking the cluster consolidated (a pass that found nothing
    only because of budgets runs again)."""
    pools = [pool(f"nodepool-{i}", budgets=[Budget(nodes="0%")]) for i in range(pools_count)]
    per_pool = 10 if pools_count == 1 else 3
    pods = (lambda: rs_pod(cpu="1")) if busy else None
    nodes = [n for p in pools for n in budget_nodes(per_pool, prefix=p.name, node_pool=p.name, pods=pods)]
    result = disrupt(nodes, pools)
    assert (result.commands, result.resume) == ([], None)
    reason = "Underutilized" if busy else "Empty"
    assert {
        n.name: f'disruption budget of NodePool "{n.nodepool}" for {reason} allows no more nodes now'
        in result.notes[n.name]
        for n in nodes
    } == {n.name: True for n in nodes}


def test_a_non_empty_nodes_command_waits_the_validation_ttl_before_it_runs():
    """TTL: "should wait for the node TTL for non-empty nodes before consolidating": the delete is proposed, both
    nodes stay through the 15 s wait, then the small node goes."""
    made, small, command = delete_proposed()
    nodes = sorted(lab_types(made))
    proposed_at = parse_timestamp(command["status"]["proposedAt"])
    made.advance(proposed_at + 14 - made.now)
    waiting = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert (waiting["status"]["phase"], sorted(lab_types(made))) == ("Proposed", nodes)
    made.advance(30)
    done = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert done["status"]["phase"] == "Succeeded"
    assert sorted(lab_types(made)) == [n for n in nodes if n != small]


def test_a_multi_node_command_waits_the_validation_ttl_before_it_runs():
    """Multi-NodeClaim: "should wait for the node TTL for non-empty nodes before consolidating (multi-node)": two
    c-16x nodes down to two pods each are to be merged onto one replacement; both stay through the 15 s wait, then
    the replacement alone is left."""
    made = lab(
        nodepool_doc(template_spec={"requirements": ON_DEMAND}, disruption=CONSOLIDATING), deployment("inflate", 15)
    )
    made.advance(30)
    made.store.create(deployment("more", 15))
    made.advance(30)
    nodes = sorted(lab_types(made))
    assert list(lab_types(made).values()) == ["c-16x-amd64-linux"] * 2
    lab_scale(made, "inflate", 2)
    lab_scale(made, "more", 2)
    command = lab_proposed(made)
    assert (command["spec"]["method"], command["spec"]["decision"]) == ("multi", "replace")
    assert sorted(c["node"] for c in command["spec"]["candidates"]) == nodes
    made.advance(parse_timestamp(command["status"]["proposedAt"]) + 14 - made.now)
    waiting = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert (waiting["status"]["phase"], sorted(lab_types(made))) == ("Proposed", nodes)
    made.advance(40)
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Succeeded"
    assert list(lab_types(made).values()) == ["c-8x-amd64-linux"]


def test_an_emptiness_command_is_rejected_when_a_do_not_disrupt_pod_lands_during_the_wait():
    """TTL: "should not consolidate if the action becomes invalid during the node TTL wait": the empty node's
    deletion is proposed, and a do-not-disrupt pod binds to it during the wait."""
    made = lab(nodepool_doc(template_spec={"requirements": ON_DEMAND}, disruption=CONSOLIDATING), deployment("app", 3))
    made.advance(30)
    [node_name] = lab_types(made)
    lab_scale(made, "app", 0)
    command = lab_proposed(made)
    assert command["spec"]["reason"] == "Empty"
    arrive(made, node_name, "do-not-disrupt")
    made.advance(20)
    rejected = made.store.get("DisruptionCommand", command["metadata"]["name"])
    assert rejected["status"]["phase"] == "Rejected"
    assert list(lab_types(made)) == [node_name]


# Parallelization ---------------------------------------------------------------------------------------------------


def test_a_pod_pending_while_a_replace_runs_takes_the_replacement_and_no_extra_node():
    """Parallelization: "should not schedule an additional node when receiving pending pods while consolidating": the
    replace has launched its replacement; a new pending pod lands on it, and no third NodeClaim is launched."""
    made, big, command = replace_proposed()
    name = command["metadata"]["name"]
    while made.store.get("DisruptionCommand", name)["status"]["phase"] != "Executing":
        made.advance(1)
    [replacement] = made.store.get("DisruptionCommand", name)["status"]["replacementNodeClaims"]
    [old] = [c["metadata"]["name"] for c in made.store.list("NodeClaim") if c["metadata"]["name"] != replacement]
    late = deployment("late", 1, "100m")
    made.store.create(late)
    for _ in range(60):
        made.advance(1)
        assert {c["metadata"]["name"] for c in made.store.list("NodeClaim")} <= {old, replacement}
    [claim] = made.store.list("NodeClaim")
    [late_pod] = [p for p in made.store.list("Pod") if p["metadata"]["name"].startswith("late-")]
    assert claim["metadata"]["name"] == replacement
    assert late_pod["spec"]["nodeName"] == claim["status"]["nodeName"]
