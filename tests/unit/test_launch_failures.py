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
