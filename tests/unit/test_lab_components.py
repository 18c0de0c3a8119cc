"""Pieces of the lab and controllers on their own: the batcher, ReplicaSet scale-down, the store."""

import random

import pytest

from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import AlreadyExists
from provisioner.controllers.batcher import Batcher
from provisioner.sim.replicasets import _scale_down_order


def test_the_batch_window_closes_after_idle_time_without_new_pods():
    batcher = Batcher(idle=5, maximum=10)
    batcher.trigger("pod-a", now=1)
    assert batcher.closes_at == 6
    batcher.trigger("pod-a", now=3)  # the same pod again does not extend the window
    assert batcher.closes_at == 6
    batcher.trigger("pod-b", now=3)  # a new pod does
    assert batcher.closes_at == 8
    assert not batcher.due(7.9) and batcher.due(8)


def test_the_batch_window_never_exceeds_its_maximum():
    batcher = Batcher(idle=5, maximum=10)
    for second in range(0, 20, 2):
        batcher.trigger(f"pod-{second}", now=second)
    assert batcher.closes_at == 10


def test_the_batcher_state_survives_a_round_trip():
    batcher = Batcher()
    batcher.trigger("a", now=100)
    restored = Batcher.from_state(batcher.to_state())
    assert (restored.closes_at, restored.seen) == (101, {"a"})


def pod(name, node, phase="Running", created="2026-01-01T00:00:00Z"):
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def test_scale_down_removes_unscheduled_then_pods_on_fuller_nodes_then_newest():
    pods = [
        pod("on-small-1", "small"),
        pod("on-big-old", "big", created="2026-01-01T00:00:00Z"),
        pod("on-big-new", "big", created="2026-01-01T00:05:00Z"),
        pod("on-big-3", "big", created="2026-01-01T00:01:00Z"),
        pod("unscheduled", None, phase="Pending"),
    ]
    assert [p["metadata"]["name"] for p in _scale_down_order(None, pods)] == [
        "unscheduled",
        "on-big-new",
        "on-big-3",
        "on-big-old",
        "on-small-1",
    ]


def test_the_store_assigns_identity_and_refuses_duplicates():
    store = ObjectStore(clock=lambda: 1_800_000_000.0)
    created = store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert (
        created["metadata"]["resourceVersion"] == "1"
        and created["metadata"]["creationTimestamp"] == "2027-01-15T08:00:00Z"
    )
    with pytest.raises(AlreadyExists):
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    # As kubectl's: the first apply of an object made by create adds the last-applied annotation, the next is a no-op.
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    assert [store.apply(manifest)[1], store.apply(manifest)[1]] == ["configured", "unchanged"]


def test_finalizers_hold_deletion_until_removed():
    store = ObjectStore(clock=lambda: 0.0)
    store.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}}
    )
    marked = store.delete("Node", "n1")
    assert marked["metadata"]["deletionTimestamp"] == "1970-01-01T00:00:00Z" and store.get("Node", "n1") is not None
    store.remove_finalizer(marked, "karpenter.sh/termination")
    assert store.get("Node", "n1") is None and ("Node", "", "n1") in store.removed


def test_events_expire_an_hour_after_they_were_last_seen():
    now = [0.0]
    store = ObjectStore(clock=lambda: now[0])
    for name, last in (("old", "1970-01-01T00:00:00Z"), ("recent", "1970-01-01T00:30:00Z")):
        store.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name}, "lastTimestamp": last})
    now[0] = 3600.0
    assert store.expire_events() == 0  # exactly an hour: still kept
    now[0] = 3601.0
    assert store.expire_events() == 1
    assert [e["metadata"]["name"] for e in store.list("Event")] == ["recent"]
    assert ("Event", "default", "old") in store.removed


def _lab(components, consolidate_after=None, advance=60):
    from provisioner.catalog.kwok import kwok_catalog
    from provisioner.lab import Lab, LabConfig
    from provisioner.manifests.nodepool import parse_nodepool
    from provisioner.objects import NodeClass

    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [],
                }
            },
            **({"disruption": {"consolidateAfter": consolidate_after}} if consolidate_after else {}),
        },
    }
    config = LabConfig(
        nodepools=[parse_nodepool(nodepool)],
        nodepool_uids={"default": "uid-default"},
        nodeclasses={("KWOKNodeClass", "default"): NodeClass("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass", "default")},
        catalogs={"KWOKNodeClass": list(kwok_catalog().instance_types)},
        components=components,
    )
    lab = Lab([], config, {}, now=1_800_000_000.0)
    lab.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "inflate"}},
                "template": {
                    "metadata": {"labels": {"app": "inflate"}},
                    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
                },
            },
        }
    )
    lab.advance(advance)
    return lab


@pytest.mark.parametrize(("after_bind", "last_pod_event", "consolidatable"), [(7, 1, 31), (19, 20, 50)])
def test_a_pod_event_within_10_s_of_the_last_one_does_not_move_the_nodeclaims_last_pod_event(
    after_bind, last_pod_event, consolidatable
):
    # Karpenter's dedupeTimeout (nodeclaim/podevents/controller.go:84-88): both pods bind 1 s in; one is deleted
    # 7 s later, inside the 10 s, so consolidateAfter (30 s) still counts from the bind; 19 s later, from the delete.
    from provisioner.cluster.objects import parse_timestamp

    lab = _lab("all", consolidate_after="30s", advance=1 + after_bind)
    deployment = lab.store.get("Deployment", "inflate", "default")
    deployment["spec"]["replicas"] = 1
    lab.store.update(deployment, spec_changed=True)
    lab.advance(60)
    [claim] = lab.store.list("NodeClaim")
    [condition] = [c for c in claim["status"]["conditions"] if c["type"] == "Consolidatable"]
    since = 1_800_000_000.0
    assert parse_timestamp(claim["status"]["lastPodEventTime"]) - since == last_pod_event
    assert (condition["status"], parse_timestamp(condition["lastTransitionTime"]) - since) == ("True", consolidatable)
    assert len(lab.store.list("Pod")) == 1


def test_a_lab_running_only_its_cluster_side_makes_pods_but_never_nodeclaims():
    everything, cluster_side, bare = _lab("all"), _lab("cluster"), _lab("none")
    assert len(everything.store.list("NodeClaim")) == 1
    assert len(everything.store.list("Pod", fields={"status.phase": "Running"})) == 2
    # The Deployment and ReplicaSet controllers and the scheduler ran; no karpui controller did.
    assert len(cluster_side.store.list("Pod")) == 2
    assert cluster_side.store.list("NodeClaim") == []
    assert [(p["status"]["phase"], p["spec"].get("nodeName", "")) for p in cluster_side.store.list("Pod")] == [
        ("Pending", ""),
        ("Pending", ""),
    ]
    assert [o["kind"] for o in bare.store.all_objects()] == ["Deployment"]


def test_an_unknown_components_setting_is_refused():
    with pytest.raises(ValueError, match="components must be one of all, cluster, none, got 'some'"):
        _lab("some")


def test_the_manager_runs_karpenters_controllers_in_its_order_on_any_cluster():
    """The manager is outside the lab: it runs over the cluster port whatever implements it, in Karpenter's order
    (provisioning first, then what follows from NodeClaims, termination, the disruption queue, the proposer, the
    cloud provider, and the NodeClaim lifecycle last)."""
    from provisioner.cloudprovider.kwok import KwokCloudProvider
    from provisioner.controllers.context import ClusterContext
    from provisioner.controllers.manager import Manager

    ran: list[str] = []
    manager = Manager({})
    for name in ("provisioning", "podevents", "consolidatable", "drift", "expiration", "termination", "disruption"):
        controller = getattr(manager, name)
        controller.reconcile = lambda ctx, name=name: ran.append(name) or False
    manager.lifecycle.reconcile = lambda ctx: ran.append("lifecycle") or False
    store = ObjectStore(clock=lambda: 0.0)
    cloud = KwokCloudProvider(store, {}, {}, random.Random(0))
    cloud.reconcile = lambda now: ran.append("cloudprovider") or False
    ctx = ClusterContext(
        api=store,
        cloud=cloud,
        now=0.0,
        rng=random.Random(0),
        nodepools=[],
        nodepool_uids={},
        nodeclasses={},
        catalogs={},
    )
    assert manager.step(ctx) == []
    assert ran == [
        "provisioning",
        "podevents",
        "consolidatable",
        "drift",
        "expiration",
        "termination",
        "disruption",  # commands.reconcile (the queue) runs between termination and the proposer, unpatched
        "cloudprovider",
        "lifecycle",
    ]


def test_the_kube_scheduler_explains_a_class_of_pods_no_node_can_take_once_while_nothing_binds(monkeypatch):
    """Pods of one Deployment that fit no node all get the same message; the nodes are filtered for it once per
    class (it was once per pod: 1,000 pods scaled up on a full 1,819-node cluster took 39 s of one step)."""
    from provisioner.sim import kubescheduler

    store = ObjectStore(clock=lambda: 0.0)
    for name in ("full-a", "full-b", "full-c"):
        store.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}},
            }
        )
    for index in range(5):
        store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"app-{index}", "namespace": "default", "labels": {"app": "app"}},
                "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]},
                "status": {"phase": "Pending"},
            }
        )
    filtered = []
    original = kubescheduler._filter

    def counting(*args):
        filtered.append(args[1].name)
        return original(*args)

    monkeypatch.setattr(kubescheduler, "_filter", counting)
    assert kubescheduler.KubeScheduler().schedule(store, store.views, now=0.0)
    assert len(filtered) == 6  # three nodes for the class's queue, three for its explanation
    messages = {
        condition["message"]
        for pod in store.list("Pod")
        for condition in pod["status"]["conditions"]
        if condition["type"] == "PodScheduled"
    }
    assert messages == {"0/3 nodes are available: 3 Insufficient cpu."}
