"""A warm engine does work in proportion to what changed: passes, validations and cluster components whose inputs
did not change are answered from what they found last time, and answer exactly what they would have computed."""

from dataclasses import replace

from provisioner.catalog.kwok import kwok_catalog
from provisioner.controllers import commands, disruption
from provisioner.controllers import drift as drift_controller
from provisioner.disruption import methods
from provisioner.lab import Lab, LabConfig
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass
from provisioner.scheduling.existing import ExistingNode
from provisioner.scheduling.nodeclaim import NodeClaimTemplate
from provisioner.scheduling.scheduler import PoolOffer, SchedulingInput, solve
from provisioner.sim import cluster, garbage
from tests import builders, disruption_builders

START = 1_800_000_000.0


def nodepool(**annotations):
    return parse_nodepool(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default", "annotations": annotations},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                        "requirements": [
                            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": ["8"]},
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10s"},
            },
        }
    )


def lab(**annotations):
    config = LabConfig(
        nodepools=[nodepool(**annotations)],
        nodepool_uids={"default": "uid-default"},
        nodeclasses={("KWOKNodeClass", "default"): NodeClass("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass", "default")},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types)},
    )
    return Lab([], config, {}, now=START)


def deployment(name, replicas, cpu="700m"):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]},
            },
        },
    }


def counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_pass_a_budget_held_back_is_replayed_while_nothing_it_reads_changes(monkeypatch):
    running = lab()
    running.store.create(deployment("full", 110))  # ten full 8-vCPU nodes: none can go, the budget admits one
    running.advance(15)
    passes = counting(monkeypatch, disruption, "disruption_pass")
    running.advance(10)  # the pass at 20 s, the first with consolidatable nodes
    assert len(passes) == 1
    first = running.manager.disruption.last_result
    assert any("disruption budget" in r for reasons in first.notes.values() for r in reasons)
    running.advance(60)  # six more polls over an unchanged cluster
    assert len(passes) == 1
    assert running.manager.disruption.last_result is first
    stored = running.store.must_get("Deployment", "full", "default")
    stored["spec"]["replicas"] = 109
    running.store.update(stored, spec_changed=True)
    running.advance(10)
    assert len(passes) == 2


def test_a_walk_over_more_candidates_than_one_pass_simulates_goes_on_over_the_same_inputs_and_ends(monkeypatch):
    running = lab()
    running.store.create(deployment("full", 330))  # thirty full 8-vCPU nodes: none can go
    running.advance(15)
    passes = counting(monkeypatch, disruption, "disruption_pass")
    went_on = counting(monkeypatch, disruption, "continue_pass")
    single: list[str] = []
    original = methods.compute

    def compute(candidates, view, method, reason):
        if method == "single":
            single.extend(c.name for c in candidates)
        return original(candidates, view, method, reason)

    monkeypatch.setattr(methods, "compute", compute)
    running.advance(10)  # the pass at 20 s: the first with consolidatable nodes, stopped at its bound
    nodes = sorted(n["metadata"]["name"] for n in running.store.list("Node"))
    assert (len(nodes), len(passes), len(went_on), len(single)) == (30, 1, 0, methods.MAX_SINGLE_SIMULATIONS)
    assert running.manager.disruption.last_result.resume is not None
    running.advance(10)  # the walk goes on with the other ten, without emptiness, drift or multi-node again
    assert (len(passes), len(went_on), sorted(single)) == (1, 1, nodes)
    assert running.manager.disruption.last_result.resume is None
    running.advance(120)  # the walk is whole: a budget held multi-node back, so the whole pass is replayed
    assert (len(passes), len(went_on), len(single)) == (1, 1, 30)
    told = [e["message"] for e in running.store.list("Event") if e["reason"] == "Unconsolidatable"]
    # each Node and NodeClaim told once why it stays (before consolidateAfter had passed, nothing: as Karpenter's
    # ShouldDisrupt, that is the dashboard's to say, not an event's)
    assert told == ["Can't replace with a cheaper node"] * 60


def test_a_nodeclaims_drift_is_judged_again_only_when_what_it_is_judged_from_changed(monkeypatch):
    running = lab()
    running.store.create(deployment("web", 30))  # three 8-vCPU nodes
    running.advance(15)
    judged = counting(monkeypatch, drift_controller, "drift_reason")
    claim = running.store.list("NodeClaim")[0]
    claim["metadata"].setdefault("annotations", {})["example.com/note"] = "written"
    running.store.update(claim)
    running.advance(1)
    assert judged == []  # a NodeClaim was written, but not its labels or NodePool hash
    claim = running.store.must_get("NodeClaim", claim["metadata"]["name"])
    claim["metadata"]["labels"]["karpenter.kwok.sh/instance-cpu"] = "16"  # the NodePool asks for 8
    running.store.update(claim)
    running.advance(1)
    assert len(judged) == 1
    claim = running.store.must_get("NodeClaim", claim["metadata"]["name"])
    drifted = next(c for c in claim["status"]["conditions"] if c["type"] == "Drifted")
    assert (drifted["status"], drifted["reason"]) == ("True", "RequirementsDrifted")


def test_a_command_awaiting_approval_is_validated_again_only_when_something_changed(monkeypatch):
    running = lab(**{"karpui.dev/approval-mode": "manual"})
    running.store.create(deployment("web", 20))
    running.advance(30)
    stored = running.store.must_get("Deployment", "web", "default")
    stored["spec"]["replicas"] = 2
    running.store.update(stored, spec_changed=True)
    running.advance(40)
    [command] = running.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "AwaitingApproval"
    validations = counting(monkeypatch, commands, "recheck")
    running.advance(30)
    assert validations == []
    running.store.create(deployment("other", 1))
    running.advance(1)
    assert len(validations) == 1


def test_the_cluster_side_skips_components_when_nothing_was_written(monkeypatch):
    running = lab()
    running.store.create(deployment("web", 30))
    running.advance(5)
    collections = counting(monkeypatch, garbage, "collect_garbage")
    running.advance(1)
    running.advance(1)
    assert collections == []
    running.store.delete("Deployment", "web", "default")
    running.advance(1)
    assert collections
    assert not running.store.list("ReplicaSet") and not running.store.list("Pod")
    assert "garbage-collector" in cluster.STORE_DRIVEN


def test_a_warm_engine_forgets_the_nodes_that_are_gone():
    running = lab()
    running.store.create(deployment("web", 30))
    running.advance(5)
    assert len(running.manager.podevents.pod_sets) == 3
    stored = running.store.must_get("Deployment", "web", "default")
    stored["spec"]["replicas"] = 0
    running.store.update(stored, spec_changed=True)
    running.advance(120)  # emptied, consolidated, drained and deleted
    assert not running.store.list("Node")
    state = running.to_state()
    assert state["podevents"]["pod_sets"] == {}
    assert running.manager.termination.drained_at == {} and state["termination"]["draining"] == {}
    assert all(until > running.now for until in running.ctx.nominations.values())


def solve_counting_fits(monkeypatch, pods, nodes):
    """Solve over `nodes` with the fake catalog, and how many times a pod was fitted against an existing node. The
    same (empty) daemonsets every time, as one snapshot's simulations share theirs."""
    calls = []
    fit = ExistingNode.fit
    monkeypatch.setattr(ExistingNode, "fit", lambda self, *args: calls.append(self.name) or fit(self, *args))
    request = SchedulingInput(pods=pods, pools=[PoolOffer(builders.nodepool(), builders.fake_catalog())], nodes=nodes)
    result = solve(request)
    monkeypatch.setattr(ExistingNode, "fit", fit)
    return result, calls


def test_a_pod_class_that_does_not_fit_a_node_is_not_fitted_there_again_over_the_same_node(monkeypatch):
    full = builders.node("full", cpu="1", scheduled=[builders.pod(cpu="1", node_name="full")])
    first, calls = solve_counting_fits(monkeypatch, [builders.pod(cpu="1")], [full])
    assert (first.placements, len(first.new_nodeclaims), calls) == ({}, 1, ["full"])
    again, calls = solve_counting_fits(monkeypatch, [builders.pod(cpu="1")], [full])
    assert (again.placements, len(again.new_nodeclaims), calls) == ({}, 1, [])


def test_a_node_full_only_after_a_placement_in_one_simulation_takes_the_class_in_the_next(monkeypatch):
    roomy = builders.node("roomy", cpu="1500m")
    first, calls = solve_counting_fits(monkeypatch, [builders.pod(cpu="1"), builders.pod(cpu="1")], [roomy])
    assert ([len(p) for p in first.placements.values()], len(first.new_nodeclaims), calls) == ([1], 1, ["roomy"] * 2)
    again, calls = solve_counting_fits(monkeypatch, [builders.pod(cpu="1")], [roomy])
    assert (list(again.placements), again.new_nodeclaims, calls) == (["roomy"], [], ["roomy"])


def test_a_host_port_taken_on_an_existing_node_in_one_simulation_is_free_in_the_next(monkeypatch):
    roomy = builders.node("roomy")
    first, _ = solve_counting_fits(monkeypatch, [builders.pod(host_ports=[80]), builders.pod(host_ports=[80])], [roomy])
    assert ([len(p) for p in first.placements.values()], len(first.new_nodeclaims)) == ([1], 1)
    again, _ = solve_counting_fits(monkeypatch, [builders.pod(host_ports=[80])], [roomy])
    assert (list(again.placements), again.new_nodeclaims) == (["roomy"], [])


def test_simulations_with_the_same_offers_and_daemonsets_build_each_nodepool_template_once(monkeypatch):
    built = []
    build = NodeClaimTemplate.build.__func__
    monkeypatch.setattr(
        NodeClaimTemplate, "build", classmethod(lambda cls, *a: built.append(a[0].name) or build(cls, *a))
    )
    offers = [PoolOffer(builders.nodepool(), builders.fake_catalog())]
    daemonsets = [builders.daemonset("100m", "10Mi")]
    plans = [
        solve(SchedulingInput(pods=[builders.pod(cpu="1")], pools=offers, daemonsets=ds))
        .new_nodeclaims[0]
        .requests_text()
        for ds in (daemonsets, daemonsets, list(daemonsets))
    ]
    assert (built, plans) == (["default", "default"], [{"cpu": "1100m", "memory": "10Mi", "pods": "2"}] * 3)


def test_a_pass_builds_drift_candidates_apart_only_when_a_node_has_a_termination_grace_period(monkeypatch):
    built = []
    build = methods.build_candidates
    monkeypatch.setattr(
        methods,
        "build_candidates",
        lambda *a, eventual=False, **kw: built.append(eventual) or build(*a, eventual=eventual, **kw),
    )
    node = disruption_builders.claimed("a", pods=[builders.pod(cpu="1")])
    disruption_builders.run([node])
    disruption_builders.run([replace(node, grace_period=True)])
    assert built == [False, False, True]


def test_a_pass_works_out_each_candidates_consolidation_blockers_once_and_notes_them_for_each_method(monkeypatch):
    asked = counting(monkeypatch, methods, "consolidation_blockers")
    young = replace(disruption_builders.claimed("a", pods=[builders.pod(cpu="1")]), consolidatable=False)
    result = disruption_builders.run([young, replace(young, nodeclaim="b", node=replace(young.node, name="b"))])
    reason = "consolidateAfter (0s) has not elapsed since the last pod event"
    assert result.notes == {"a": [reason, reason], "b": [reason, reason]}  # multi-node, then single-node
    assert len(asked) == 2


def test_a_reason_noted_by_two_methods_is_told_once_per_object_and_pass(monkeypatch):
    running = lab()
    running.store.create(deployment("app", 30))
    told = []
    event = running.ctx.event
    monkeypatch.setattr(
        running.ctx,
        "event",
        lambda obj, *a, **kw: told.append((obj["kind"], obj["metadata"]["name"], *a)) or event(obj, *a, **kw),
    )
    running.advance(10)  # the pass at 10 s: the nodes are inside consolidateAfter, which is no event
    assert [t for t in told if t[3] == "Unconsolidatable"] == []
    running.advance(10)  # the pass at 20 s, past consolidateAfter: full nodes, each unconsolidatable
    unconsolidatable = [t for t in told if t[3] == "Unconsolidatable"]
    assert unconsolidatable and len(unconsolidatable) == len(set(unconsolidatable))
    assert {kind for kind, *_ in unconsolidatable} == {"Node", "NodeClaim"}
    assert all(e["count"] == 1 for e in running.store.list("Event") if e["reason"] == "Unconsolidatable")


def test_a_snapshot_builds_nodes_under_consolidate_after_marked_and_claimed_nodes_with_their_nominations():
    from provisioner.cluster.conditions import is_true
    from provisioner.controllers.snapshot import cluster_view

    running = lab()
    running.store.create(deployment("app", 30))
    running.advance(5)
    view, claimed = cluster_view(running.ctx)
    claims = {c["status"]["nodeName"]: c for c in running.store.list("NodeClaim")}
    marked = {n.name for n in view.nodes if n.under_consolidate_after}
    assert marked and marked == {
        name for name, c in claims.items() if is_true(c, "Initialized") and not is_true(c, "Consolidatable")
    }
    assert [c.nominated_until for c in claimed] == [running.ctx.nominations.get(c.name, 0.0) for c in claimed]
    running.advance(30)  # past consolidateAfter: nothing is marked any more
    view, _ = cluster_view(running.ctx)
    assert not any(n.under_consolidate_after for n in view.nodes)
