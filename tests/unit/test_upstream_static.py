"""Karpenter v1.15.0's static capacity suites (NodePool spec.replicas, gate StaticCapacity) ported onto karpui, each
test naming the It it follows.

Upstream: pkg/controllers/static/provisioning/suite_test.go, pkg/controllers/static/deprovisioning/suite_test.go,
pkg/controllers/disruption/staticdrift_test.go and pkg/controllers/state/statenodepool_test.go (NodePoolState).
The controllers run on a lab over the kwok catalog, reconciled once as the Go tests' ExpectObjectReconciled does;
StaticDrift runs as a disruption pass over built nodes, with the NodePoolState counts Karpenter's would hold.
karpui's one deliberate difference: a scale-down of running nodes is a DisruptionCommand (reason Overprovisioned)
the human gate decides, so where Karpenter's test sees NodeClaims deleted, this one sees them chosen, held by the
command (NodePoolState's pendingdisruption), then deleted once the command runs (`auto` mode: at once).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from provisioner.controllers.nodecounts import Counts, node_counts
from provisioner.controllers.static import StaticDeprovisioningController, StaticProvisioningController
from provisioner.disruption.consolidation import ClusterView
from provisioner.disruption.methods import disruption_pass
from provisioner.objects import Budget
from provisioner.quantity import parse_resources
from provisioner.scheduling.scheduler import PoolOffer
from tests.builders import fake_catalog, nodepool
from tests.disruption_builders import NOW, claimed
from tests.lab_builders import lab, nodepool_doc, reconfigure
from tests.unit.test_static_capacity import C2X, ON, claims, static_pool

DND = "karpenter.sh/do-not-disrupt"
DRIFTED = "Drifted"


# Static provisioning (static/provisioning/suite_test.go) ------------------------------------------------------------


def provision(made) -> bool:
    return StaticProvisioningController().reconcile(made.ctx)


def deprovision(made) -> bool:
    return StaticDeprovisioningController().reconcile(made.ctx)


def counts(made, pool="static") -> Counts:
    return node_counts(made.ctx, pool)


def running(replicas, **spec):
    """A static NodePool whose `replicas` nodes are launched, registered and initialized."""
    made = lab(static_pool(replicas, **spec), options=ON)
    made.advance(10)
    assert len(claims(made)) == replicas and counts(made) == Counts(replicas, 0, 0)
    return made


def resize(made, replicas, generation=2, **spec):
    reconfigure(made, static_pool(replicas, generation=generation, **spec), options=ON)


def unlaunched(made, name, pool="static"):
    """A NodeClaim of the pool with no providerID yet (its launch not called, or failed)."""
    claim = copy.deepcopy(claims(made, pool)[0]) if claims(made, pool) else None
    assert claim is not None
    claim["metadata"] = {"name": name, "labels": {"karpenter.sh/nodepool": pool}, "finalizers": []}
    claim.pop("status", None)
    made.store.create(claim)


def test_should_handle_create_nodeclaims_errors_gracefully(monkeypatch):
    """Reconcile: "should handle CreateNodeClaims errors gracefully" (the error is the reconcile's; nothing made)."""
    made = lab(static_pool(1), options=ON)
    create = made.store.create

    def failing(obj, *args, **kwargs):
        if obj["kind"] == "NodeClaim":
            raise RuntimeError("simulated error creating nodeclaims")
        return create(obj, *args, **kwargs)

    monkeypatch.setattr(made.store, "create", failing)
    provision(made)
    assert made.ctx.errors == 1
    [error] = [r.record for r in made.ctx.logs if r.record.message == "Reconciler error"]
    assert error.fields["controller"] == "static.provisioning"
    assert made.store.list("NodeClaim") == []


def test_should_return_early_if_nodepool_root_condition_is_not_true():
    """Reconcile: "should return early if nodepool root condition is not true": a NodePool whose node class does not
    exist is not Ready (NodeClassReady=False), so no NodeClaim is made."""
    doc = static_pool(1)
    doc["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "missing",
    }
    made = lab(doc, options=ON)
    assert provision(made) is False
    assert made.store.list("NodeClaim") == []


def test_should_return_early_if_nodepool_replicas_is_nil():
    """Reconcile: "should return early if nodepool replicas is nil" (a dynamic NodePool: neither static controller
    touches it)."""
    made = lab(nodepool_doc("static", template_spec={"requirements": C2X}), options=ON)
    assert provision(made) is False and deprovision(made) is False
    assert made.store.list("NodeClaim") == []


def test_should_return_early_if_current_node_count_exceeds_desired_replicas():
    """Reconcile: "should return early if current node count exceeds desired replicas"."""
    made = running(2)
    resize(made, 1)
    assert provision(made) is False
    assert len(made.store.list("NodeClaim")) == 2
    assert counts(made) == Counts(2, 0, 0)


def test_should_create_nodeclaims_when_current_node_count_is_less_than_desired_replicas():
    """Reconcile: "should create nodeclaims when current node count is less than desired replicas"."""
    made = lab(static_pool(2), options=ON)
    assert provision(made) is True
    made_claims = made.store.list("NodeClaim")
    assert len(made_claims) == 2
    assert counts(made) == Counts(2, 0, 0)
    for claim in made_claims:
        assert claim["spec"]["nodeClassRef"] == {
            "group": "karpenter.kwok.sh",
            "kind": "KWOKNodeClass",
            "name": "default",
        }
        assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "static"


def test_should_create_additional_nodeclaims_to_reach_desired_replicas():
    """Reconcile: "should create additional nodeclaims to reach desired replicas" (3 desired - 1 existing = 2)."""
    made = running(1)
    resize(made, 3)
    assert provision(made) is True
    assert counts(made) == Counts(3, 0, 0)
    assert len(made.store.list("NodeClaim")) == 3
    [log] = [r.record for r in made.ctx.logs if r.record.message == "provisioning nodeclaims to satisfy replica count"][
        1:
    ]
    assert (log.fields["current"], log.fields["desired"], log.fields["provision-count"]) == (1, 3, 2)


def test_should_not_create_additional_nodeclaims():
    """Reconcile: "should not create additional nodeclaims": NodeClaims launched but without a Node, or with a Node
    not registered yet, count as running as much as one with its Node."""
    made = running(1, limits={})
    resize(made, 3)
    registered = claims(made)[0]
    for name, node in (("no-node", False), ("unregistered", True)):
        claim = copy.deepcopy(registered)
        claim["metadata"] = {"name": name, "labels": {"karpenter.sh/nodepool": "static"}, "finalizers": []}
        claim["status"] = {"providerID": f"kwok://{name}"}
        made.store.create(claim)
        if node:
            made.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {}},
                    "spec": {
                        "providerID": f"kwok://{name}",
                        "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                    },
                }
            )
    for _ in range(10):
        provision(made)
    assert len(made.store.list("NodeClaim")) == 3
    assert counts(made) == Counts(3, 0, 0)


def test_should_not_create_additional_nodeclaims_when_node_limits_are_reached():
    """Reconcile: "should not create additional nodeclaims when node limits are reached" (3 desired, 1 running,
    limits.nodes 1)."""
    made = running(1)
    resize(made, 3, limits={"nodes": "1"})
    assert provision(made) is False
    assert len(made.store.list("NodeClaim")) == 1
    assert counts(made) == Counts(1, 0, 0)
    assert [r.record.message for r in made.ctx.logs].count("nodepool node limit reached") == 1


def test_should_reserve_nodepool_nodecount_during_provisioning_and_release_after():
    """Reconcile: "should reserve nodepool nodecount during provisioning and release after": 3 made under a limit
    of 10; sized up to 15, only 7 more (karpui holds no reservation between reconciles: the counts are read from the
    NodeClaims, so nothing is left to release)."""
    made = lab(static_pool(3, limits={"nodes": "10"}), options=ON)
    provision(made)
    assert len(made.store.list("NodeClaim")) == 3 and counts(made) == Counts(3, 0, 0)
    made.advance(10)
    resize(made, 15, limits={"nodes": "10"})
    provision(made)
    assert len(made.store.list("NodeClaim")) == 10 and counts(made) == Counts(10, 0, 0)
    assert provision(made) is False  # nothing more can be had


def test_should_handle_zero_replicas():
    """Reconcile: "should handle zero replicas"."""
    made = lab(static_pool(0), options=ON)
    assert provision(made) is False
    assert made.store.list("NodeClaim") == []
    assert counts(made) == Counts(0, 0, 0)


def test_should_respect_nodepool_template_specifications():
    """Reconcile: "should respect nodepool template specifications": the template's labels, annotations and
    requirements (Gt 2 written as Gte 3, minValues kept) on every NodeClaim."""
    requirements = [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "r"], "minValues": 2},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c4", "r4"], "minValues": 2},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["32"]},
        {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": ["nitro"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved", "spot"]},
    ]
    doc = nodepool_doc("static", replicas=4, template_spec={"requirements": requirements})
    doc["spec"]["template"]["metadata"] = {
        "labels": {"custom-label": "custom-value"},
        "annotations": {"custom-annotation": "custom-value"},
    }
    made = lab(doc, options=ON)
    provision(made)
    made_claims = made.store.list("NodeClaim")
    assert len(made_claims) == 4 and counts(made) == Counts(4, 0, 0)
    claim = made_claims[0]
    assert claim["metadata"]["labels"]["custom-label"] == "custom-value"
    assert claim["metadata"]["annotations"]["custom-annotation"] == "custom-value"
    expected = [dict(r) for r in requirements]
    expected[4] = {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["3"]}
    for requirement in expected:
        assert requirement in claim["spec"]["requirements"]


def test_should_handle_large_replica_counts():
    """Reconcile: "should handle large replica counts"."""
    made = lab(static_pool(1000), options=ON)
    provision(made)
    assert len(made.store.list("NodeClaim")) == 1000
    assert counts(made) == Counts(1000, 0, 0)


def test_reconciles_in_a_row_never_exceed_the_node_limit():
    """Reconcile: "handles concurrent reconciliation without exceeding NodePool limits": karpui's reconciles run one
    after another, so 50 of them make exactly the replicas (Karpenter's concurrent ones may reach the limit, 10,
    which its test allows, and its deprovisioning then takes back)."""
    made = lab(static_pool(5, limits={"nodes": "10"}), options=ON)
    for _ in range(50):
        provision(made)
        assert len(made.store.list("NodeClaim")) <= 10
    assert counts(made) == Counts(5, 0, 0)


# Static deprovisioning (static/deprovisioning/suite_test.go) --------------------------------------------------------


def command_claims(made) -> list[str]:
    [command] = made.store.list("DisruptionCommand")
    assert (command["spec"]["reason"], command["spec"]["decision"]) == ("Overprovisioned", "delete")
    return sorted(c["nodeclaim"] for c in command["spec"]["candidates"])


def bind(made, node, name, *, namespace="default", daemonset=False, annotations=None):
    """A running pod on `node` (a DaemonSet's when `daemonset`)."""
    metadata = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    if daemonset:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "test-daemonset", "uid": "test-uid"}
        ]
    made.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Running"},
        }
    )


def ordered(made) -> list[tuple[str, str]]:
    """The pool's (NodeClaim, Node) names in creation order."""
    listed = sorted(claims(made), key=lambda c: (int(c["metadata"]["resourceVersion"]), c["metadata"]["name"]))
    return [(c["metadata"]["name"], c["status"]["nodeName"]) for c in listed]


def test_deprovisioning_should_return_early_if_current_node_count_is_less_than_or_equal_to_desired_replicas():
    """Reconcile: "should return early if current node count is less than or equal to desired replicas"."""
    made = running(2)
    resize(made, 3)
    assert deprovision(made) is False
    assert len(made.store.list("NodeClaim")) == 2 and made.store.list("DisruptionCommand") == []


def test_should_only_consider_running_nodeclaims_and_not_deleting_nodeclaims():
    """Reconcile: "should only consider running nodeclaims and not deleting nodeclaims": 4 NodeClaims, 3 of them
    being deleted, 1 desired: nothing more to delete."""
    made = running(4)
    resize(made, 1)
    for name, _ in ordered(made)[:3]:
        made.store.patch("NodeClaim", name, None, {"metadata": {"finalizers": ["hold"]}})
        made.store.delete("NodeClaim", name)
    assert counts(made) == Counts(1, 3, 0)
    assert deprovision(made) is False
    assert len(made.store.list("NodeClaim")) == 4 and made.store.list("DisruptionCommand") == []
    assert counts(made) == Counts(1, 3, 0)


def test_should_terminate_excess_nodeclaims_when_current_count_exceeds_desired_replicas():
    """Reconcile: "should terminate excess nodeclaims when current count exceeds desired replicas" (4 - 2 = 2)."""
    made = running(4)
    resize(made, 2)
    assert deprovision(made) is True
    assert len(command_claims(made)) == 2
    assert counts(made) == Counts(2, 0, 2)  # held by the command until it runs
    made.advance(30)
    assert len(made.store.list("NodeClaim")) == 2 and counts(made) == Counts(2, 0, 0)


def test_should_handle_zero_replicas_by_terminating_all_nodeclaims():
    """Reconcile: "should handle zero replicas by terminating all nodeclaims"."""
    made = running(3)
    resize(made, 0)
    deprovision(made)
    assert command_claims(made) == sorted(name for name, _ in ordered(made))
    assert counts(made) == Counts(0, 0, 3)
    made.advance(30)
    assert made.store.list("NodeClaim") == [] and counts(made) == Counts(0, 0, 0)


def test_should_handle_no_active_nodeclaims_gracefully():
    """Reconcile: "should handle no active nodeclaims gracefully"."""
    made = lab(static_pool(0), options=ON)
    assert deprovision(made) is False
    assert made.store.list("NodeClaim") == [] and made.store.list("DisruptionCommand") == []


def test_should_prioritize_nodeclaims_that_have_unresolved_provider_id():
    """Deprovision Candidate Selection: "should prioritize nodeclaims that have unresolved providerID": the two not
    launched are deleted at once, the two running stay."""
    made = running(2)
    launched = {name for name, _ in ordered(made)}
    unlaunched(made, "unresolved-1")
    unlaunched(made, "unresolved-2")
    assert counts(made) == Counts(4, 0, 0)
    deprovision(made)
    assert made.store.list("DisruptionCommand") == []
    assert {c["metadata"]["name"] for c in claims(made)} == launched
    assert all(c["status"]["providerID"] for c in claims(made))
    assert counts(made) == Counts(2, 0, 0)  # deleted outright (no finalizer held them)


def test_should_prioritize_empty_nodes_with_only_daemonset_pods_for_termination():
    """Deprovision Candidate Selection: "should prioritize empty nodes (with only daemonset pods) for termination"."""
    made = running(4)
    nodes = ordered(made)
    for i, (_, node) in enumerate(nodes):
        ds = i in (0, 2)
        bind(made, node, f"pod-{i}", namespace="kube-system" if ds else "default", daemonset=ds)
    resize(made, 2)
    deprovision(made)
    assert command_claims(made) == sorted([nodes[0][0], nodes[2][0]])
    assert counts(made) == Counts(2, 0, 2)


def test_should_terminate_non_empty_nodes_when_empty_nodes_are_insufficient():
    """Deprovision Candidate Selection: "should terminate non-empty nodes when empty nodes are insufficient": both
    empty nodes and one of the two busy ones (equal costs: the first by name, where Go's sort may take either)."""
    made = running(4)
    nodes = ordered(made)
    bind(made, nodes[0][1], "pod-1")
    bind(made, nodes[2][1], "pod-2")
    resize(made, 1)
    deprovision(made)
    chosen = command_claims(made)
    busy = sorted([nodes[0][0], nodes[2][0]])
    assert chosen == sorted([nodes[1][0], nodes[3][0], busy[0]])
    made.advance(30)
    assert [c["metadata"]["name"] for c in claims(made)] == [busy[1]]


@pytest.mark.parametrize(
    ("replicas", "kept"),
    [
        pytest.param(6, [0, 1, 2, 4, 5, 6], id="to 6 (drops DS-only first)"),
        pytest.param(4, [1, 2, 5, 6], id="to 4 (drops low next)"),
        pytest.param(2, [2, 6], id="to 2 (drops high next)"),
        pytest.param(0, [], id="to 0 (drops do-not-disrupt last)"),
    ],
)
def test_scales_down_in_disruption_cost_order(replicas, kept):
    """Deprovision Candidate Selection, disruption cost ordering: "scales down in disruption cost order": two each of
    low (one pod), high (two pods), dnd (a do-not-disrupt pod) and ds (a DaemonSet pod)."""
    made = running(8)
    nodes = ordered(made)
    for i in range(2):
        for j, kind in enumerate(("low", "high", "dnd", "ds")):
            node = nodes[i * 4 + j][1]
            if kind == "low":
                bind(made, node, f"system-pod-low-{i}", namespace="kube-system")
            elif kind == "high":
                bind(made, node, f"system-pod-high-{i}", namespace="kube-system")
                bind(made, node, f"app-pod-high-{i}")
            elif kind == "dnd":
                bind(made, node, f"app-pod-dnd-{i}", annotations={DND: "true"})
            else:
                bind(made, node, f"dmn-pod-{i}", namespace="kube-system", daemonset=True)
    resize(made, replicas)
    deprovision(made)
    assert counts(made) == Counts(replicas, 0, 8 - replicas)
    assert command_claims(made) == sorted(nodes[i][0] for i in range(8) if i not in kept)


def test_a_finished_pod_makes_its_node_no_empty_one_and_its_do_not_disrupt_still_counts():
    """Candidate selection as static deprovisioning's code does it (controller.go:216-262): a node's pods are all
    those bound to it (nodeutils.GetPods, finished ones too), so a node with a Succeeded pod is not empty, and
    do-not-disrupt on it still puts its node last (IsDoNotDisruptActive reads no phase)."""
    made = running(3)
    finished, idle, busy = (c["status"]["nodeName"] for c in claims(made))
    bind(made, busy, "app")
    bind(made, finished, "job")
    made.store.patch("Pod", "job", "default", {"status": {"phase": "Succeeded"}})
    resize(made, 2)
    deprovision(made)
    assert [c["node"] for c in made.store.list("DisruptionCommand")[0]["spec"]["candidates"]] == [idle]

    made = running(3)
    protected, first, second = (c["status"]["nodeName"] for c in claims(made))
    bind(made, protected, "job", annotations={DND: "true"})
    made.store.patch("Pod", "job", "default", {"status": {"phase": "Succeeded"}})
    bind(made, first, "app-1")
    bind(made, second, "app-2")
    resize(made, 1)
    deprovision(made)
    chosen = {c["node"] for c in made.store.list("DisruptionCommand")[0]["spec"]["candidates"]}
    assert chosen == {first, second}


def test_lifetime_remaining_is_the_nodeclaims_own_expire_after():
    """Disruption cost ordering as LifetimeRemaining computes it (utils/disruption/disruption.go:71-80): from the
    NodeClaim's spec.expireAfter, not the NodePool's (changed since, here to Never): of two nodes with one pod each,
    the one nearer its expiry costs less and goes first."""
    made = running(2)
    sooner = claims(made)[-1]["metadata"]["name"]
    made.store.patch("NodeClaim", sooner, None, {"spec": {"expireAfter": "100s"}})
    for i, claim in enumerate(claims(made)):
        bind(made, claim["status"]["nodeName"], f"app-{i}")
    changed = static_pool(1, generation=2)
    changed["spec"]["template"]["spec"]["expireAfter"] = "Never"
    reconfigure(made, changed, options=ON)
    deprovision(made)
    assert command_claims(made) == [sooner]


def test_a_launched_nodeclaim_without_its_node_is_an_empty_candidate():
    """Candidate selection as static deprovisioning's code does it (controller.go:170-176, 216-224): a NodeClaim
    launched (it has a providerID) is a state node before its Node registers, with no pods, so an empty one: it
    goes before a node running pods."""
    made = running(3)
    for i, claim in enumerate(claims(made)):
        bind(made, claim["status"]["nodeName"], f"app-{i}")
    claim = copy.deepcopy(claims(made)[0])
    claim["metadata"] = {"name": "launching", "labels": {"karpenter.sh/nodepool": "static"}, "finalizers": []}
    claim["status"] = {"providerID": "kwok://launching"}
    made.store.create(claim)
    assert counts(made) == Counts(4, 0, 0)
    deprovision(made)
    assert command_claims(made) == ["launching"]
    made.advance(30)
    assert len(claims(made)) == 3 and made.store.get("NodeClaim", "launching") is None
    assert sorted(p["status"]["phase"] for p in made.store.list("Pod")) == ["Running"] * 3


# NodePoolState (state/statenodepool_test.go) ------------------------------------------------------------------------


def test_node_counts_account_for_running_and_deleting_nodeclaims():
    """NodePoolState, ReserveNodeCount: "should account for running NodeClaims" and "should account for deleting
    NodeClaims": a running NodeClaim is active, one being deleted is deleting; both take a slot of limits.nodes."""
    made = running(1, limits={"nodes": "2"})
    [(name, _)] = ordered(made)
    made.store.patch("NodeClaim", name, None, {"metadata": {"finalizers": ["hold"]}})
    made.store.delete("NodeClaim", name)
    assert counts(made) == Counts(0, 1, 0)
    resize(made, 3, limits={"nodes": "2"})
    provision(made)
    assert counts(made) == Counts(1, 1, 0)  # 2 - 1 deleting = 1 slot


# StaticDrift (disruption/staticdrift_test.go) -----------------------------------------------------------------------


def static_np(name="default", replicas=1, budgets=None, limits=None):
    """test.StaticNodePool with the suite's budget (100%, unless given) and replicas."""
    pool = nodepool(name, budgets=list(budgets or [Budget(nodes="100%")]))
    return replace(pool, replicas=replicas, limits=parse_resources(limits or {}))


def drifted_nodes(count, pool="default", prefix=None, drifted=True):
    made = []
    for i in range(count):
        node = claimed(f"{prefix or pool}-{i}", pool=pool)
        made.append(replace(node, drifted="NodePoolDrifted", drifted_at=NOW - 60) if drifted else node)
    return made


def drift_pass(nodes, pools, static_counts=None):
    """One disruption pass with the NodePoolState counts (active, deleting, pendingdisruption) Karpenter would hold:
    each pool's nodes running, unless given."""
    view = ClusterView(
        claimed=list(nodes),
        nodes=[n.node for n in nodes],
        pending=[],
        pools=[PoolOffer(p, fake_catalog()) for p in pools],
        now=NOW,
        pdbs=[],
    )
    if static_counts is None:
        static_counts = {p.name: (sum(1 for n in nodes if n.nodepool == p.name), 0, 0) for p in pools}
    return disruption_pass(view, {p.name: p for p in pools}, static_counts=static_counts)


def drifted_commands(result) -> dict[str, int]:
    per_pool: dict[str, int] = {}
    for command in result.commands:
        assert (command.reason, command.method, len(command.candidates)) == (DRIFTED, "static-drift", 1)
        assert len(command.replacements) == 1 and command.replacements[0].static
        per_pool[command.candidates[0].nodepool.name] = per_pool.get(command.candidates[0].nodepool.name, 0) + 1
    return per_pool


@pytest.mark.parametrize(
    ("budget", "allowed"),
    [
        pytest.param("2", 2, id="should respect disruption budgets (Nodes Count) for static drift"),
        pytest.param("20%", 1, id="should respect disruption budgets (Nodes Percentage) for static drift"),
    ],
)
def test_static_drift_respects_disruption_budgets(budget, allowed):
    """StaticDrift, Budgets: "should respect disruption budgets (Nodes Count|Nodes Percentage) for static drift"."""
    pool = static_np(replicas=5, budgets=[Budget(nodes=budget, reasons=(DRIFTED,))])
    result = drift_pass(drifted_nodes(5), [pool])
    assert result.budgets[("default", DRIFTED)] == allowed
    assert drifted_commands(result) == {"default": allowed}


def test_static_drift_should_respect_budgets_for_multiple_static_nodepools():
    """StaticDrift, Budgets: "should respect budgets for multiple static nodepools"."""
    pools = [
        static_np("static-nodepool-1", 4, [Budget(nodes="1", reasons=(DRIFTED,))]),
        static_np("static-nodepool-2", 3, [Budget(nodes="2", reasons=(DRIFTED,))]),
        static_np("static-nodepool-3", 2, [Budget(nodes="100%", reasons=(DRIFTED,))]),
    ]
    nodes = [n for p in pools for n in drifted_nodes(2, p.name)]
    result = drift_pass(nodes, pools)
    assert [result.budgets[(p.name, DRIFTED)] for p in pools] == [1, 2, 2]
    assert drifted_commands(result) == {"static-nodepool-1": 1, "static-nodepool-2": 2, "static-nodepool-3": 2}


def test_static_drift_should_not_drift_nodes_when_we_cannot_acquire_limits():
    """StaticDrift, Limits and Scaling: "should not drift nodes when we cannot acquire limits": no command, and the
    budget-allowed candidates are told DisruptionBlocked (staticdrift.go:122-124, unreplaceableCommands)."""
    pool = static_np(replicas=5, limits={"nodes": "5"})
    nodes = drifted_nodes(5)
    result = drift_pass(nodes, [pool])
    assert result.commands == []
    message = "static NodePool is at its node limit and cannot stage a replacement"
    assert result.drift_blocked == {n.name: [message] for n in nodes}


def test_static_drift_should_drift_nodes_when_we_can_acquire_limits():
    """StaticDrift, Limits and Scaling: "should drift nodes when we can acquire limits" (2 of 5 under a limit of 5)."""
    pool = static_np(replicas=5, limits={"nodes": "5"})
    result = drift_pass(drifted_nodes(2), [pool])
    assert drifted_commands(result) == {"default": 2}
    assert result.drift_blocked == {}


def test_static_drift_should_drift_partially_when_we_can_acquire_some_limits():
    """StaticDrift, Limits and Scaling: "should drift partially when we can acquire some limits" (5 running, limit
    7: two replacements)."""
    pool = static_np(replicas=5, limits={"nodes": "7"})
    result = drift_pass(drifted_nodes(5), [pool])
    assert result.budgets[("default", DRIFTED)] == 5
    assert drifted_commands(result) == {"default": 2}


def test_static_drift_should_keep_drifting_partially_for_each_reconcile():
    """StaticDrift, Limits and Scaling: "should keep drifting partially when we can acquire some limits for each
    reconcile": with limit 6, one node a pass, five passes, never over 6 NodeClaims."""
    pool = static_np(replicas=5, limits={"nodes": "6"})
    nodes = drifted_nodes(5)
    for i in range(5):
        result = drift_pass(nodes, [pool])
        assert drifted_commands(result) == {"default": 1}
        [command] = result.commands
        # The replacement is made, then the drifted node deleted: the pool is back at 5, one fewer drifted.
        gone = command.candidates[0].name
        nodes = [n for n in nodes if n.name != gone] + drifted_nodes(1, prefix=f"replacement-{i}", drifted=False)
    assert not any(n.drifted for n in nodes)
    assert drift_pass(nodes, [pool]).commands == []


def test_static_drift_should_wait_until_nodes_are_deprovisioned_when_we_are_overscaled():
    """StaticDrift, Limits and Scaling: "should wait until nodes are deprovisioned when we are overscaled"."""
    pool = static_np(replicas=1)
    nodes = drifted_nodes(2)
    assert drift_pass(nodes, [pool]).commands == []
    assert drifted_commands(drift_pass(nodes[:1], [pool])) == {"default": 1}


def test_static_drift_should_handle_drift_for_multiple_static_nodepools_independently():
    """StaticDrift, Multiple NodePools: "should handle drift for multiple static NodePools independently" (the second
    is at its node limit)."""
    pools = [static_np("nodepool-1", 3), static_np("nodepool-2", 2, limits={"nodes": "2"}), static_np("nodepool-3", 2)]
    nodes = [n for p in pools for n in drifted_nodes(2, p.name)]
    result = drift_pass(nodes, pools)
    assert [result.budgets[(p.name, DRIFTED)] for p in pools] == [2, 2, 2]
    assert drifted_commands(result) == {"nodepool-1": 2, "nodepool-3": 2}


def test_static_drift_should_handle_zero_replicas():
    """StaticDrift, Edge Cases: "should handle zero replicas"."""
    assert drift_pass(drifted_nodes(1), [static_np(replicas=0)]).commands == []


def test_static_drift_should_handle_missing_node_limits_gracefully():
    """StaticDrift, Edge Cases: "should handle missing node limits gracefully"."""
    assert drifted_commands(drift_pass(drifted_nodes(5), [static_np(replicas=5)])) == {"default": 5}


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(claimed("default-0"), id="should ignore nodes without the drifted status condition"),
        pytest.param(
            replace(claimed("default-0"), annotations={DND: "true"}, drifted="NodePoolDrifted", drifted_at=NOW - 60),
            id="should ignore nodes with the karpenter.sh/do-not-disrupt annotation",
        ),
    ],
)
def test_static_drift_ignores_nodes(node):
    """StaticDrift, Edge Cases: "should ignore nodes without the drifted status condition" (Drifted False is the
    same to karpui: its ClaimedNode holds a drift reason only when Drifted=True) and "should ignore nodes with the
    karpenter.sh/do-not-disrupt annotation"."""
    assert drift_pass([node], [static_np(replicas=1)]).commands == []


def test_static_drift_at_the_node_limit_is_told_as_disruption_blocked():
    """StaticDrift, Limits and Scaling: "should not drift nodes when we cannot acquire limits", end to end: the
    drifted nodes of a static NodePool at limits.nodes stay, each told DisruptionBlocked on its Node and NodeClaim."""
    spec = {"limits": {"nodes": "2"}, "disruption": {"budgets": [{"nodes": "100%"}]}}
    made = running(2, **spec)
    changed = static_pool(2, generation=2, **spec)
    changed["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}  # the template hash changes: drift
    reconfigure(made, changed, options=ON)
    made.advance(120)
    assert made.store.list("DisruptionCommand") == []
    told = sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"])
        for e in made.store.list("Event")
        if e["reason"] == "DisruptionBlocked"
        and e["message"] == "static NodePool is at its node limit and cannot stage a replacement"
    )
    assert told == sorted([("NodeClaim", c) for c, _ in ordered(made)] + [("Node", n) for _, n in ordered(made)])


def test_a_node_being_deleted_under_a_nodeclaim_that_is_not_stays_a_scale_down_candidate():
    """getDeprovisioningCandidates skips MarkedForDeletion nodes, and StateNode.Deleted() (statenode.go:544-547)
    reads only the NodeClaim's deletion when the Node has one: a Node held by a finalizer while its NodeClaim is not
    deleting is still a candidate, and the empty one is taken first."""
    made = running(3)
    (first, first_node), (second, second_node), (third, third_node) = ordered(made)
    bind(made, first_node, "a")
    bind(made, third_node, "c")
    made.store.patch("Node", second_node, None, {"metadata": {"finalizers": ["hold"]}})
    made.store.delete("Node", second_node)
    resize(made, 1)
    assert deprovision(made) is True
    assert command_claims(made) == sorted([second, min(first, third)])  # the busy two cost the same: by name
