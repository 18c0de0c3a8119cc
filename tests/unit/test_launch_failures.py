"""A launch the node class refuses (NodeClassNotReady) is logged and its NodeClaim deleted, with no event: Karpenter's
launch.go tells InsufficientCapacityError only for a capacity error."""

from tests.unit.test_engine_memos import deployment, lab


def test_a_nodeclaim_whose_node_class_is_gone_is_logged_as_failed_and_deleted_without_an_event():
    running = lab()
    running.store.create(deployment("web", 1, cpu="1"))
    running.advance(1)
    [made] = running.store.list("NodeClaim")
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "orphan", "labels": dict(made["metadata"]["labels"]), "finalizers": []},
        "spec": {**made["spec"], "nodeClassRef": {**made["spec"]["nodeClassRef"], "name": "gone"}},
        "status": {},
    }
    running.store.create(claim)
    running.advance(1)

    failed = [r.record.as_dict() for r in running.logs if r.record.message == "failed launching nodeclaim"]
    assert [(f["NodeClaim"], f["level"]) for f in failed] == [({"name": "orphan"}, "ERROR")]
    assert running.store.get("NodeClaim", "orphan") is None
    assert [e for e in running.store.list("Event") if e["reason"] == "InsufficientCapacityError"] == []


def test_a_launch_without_capacity_tells_each_pod_planned_onto_the_nodeclaim_that_is_still_pending(monkeypatch):
    """publishPodInsufficientCapacityEvents (nodeclaim/lifecycle/launch.go): the pods mapped to the NodeClaim, still
    unscheduled and alive, each get a warning naming it; a pod deleted meanwhile gets none."""
    from provisioner.cloudprovider.kwok import KwokCloudProvider
    from provisioner.cloudprovider.types import InsufficientCapacityError

    failures = ["all requested instance types were unavailable during launch"]
    create = KwokCloudProvider.create

    def short_of_capacity(self, claim):
        if failures:
            running.store.delete("Pod", pods[0]["metadata"]["name"], "default")  # gone before the launch
            raise InsufficientCapacityError(failures.pop())
        return create(self, claim)

    monkeypatch.setattr(KwokCloudProvider, "create", short_of_capacity)
    running = lab()
    running.store.create(deployment("web", 3, cpu="1"))
    running.advance(0)
    pods = sorted(running.store.list("Pod", "default"), key=lambda p: p["metadata"]["name"])
    running.advance(1)

    [on_claim] = [e for e in running.store.list("Event") if e["involvedObject"]["kind"] == "NodeClaim"]
    failed = on_claim["involvedObject"]["name"]
    assert on_claim["message"] == (
        f"NodeClaim {failed} event: all requested instance types were unavailable during launch"
    )
    told = sorted(
        (e["involvedObject"]["name"], e["type"], e["message"])
        for e in running.store.list("Event", "default")
        if e["reason"] == "InsufficientCapacityError" and e["involvedObject"]["kind"] == "Pod"
    )
    message = (
        f"NodeClaim {failed} nominated for this pod failed to launch: "
        "all requested instance types were unavailable during launch"
    )
    assert told == [(p["metadata"]["name"], "Warning", message) for p in pods[1:]]
    running.advance(30)
    assert [c for c in running.store.list("NodeClaim") if c["metadata"]["name"] == failed] == []
    assert running.store.list("NodeClaim") != []
