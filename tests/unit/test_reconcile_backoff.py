"""A reconcile that fails is held back as controller-runtime's default rate limiter holds a failed item: retried
after 5 ms, doubling with each failure in a row up to 1000 s, at once when the object changes, and forgotten once
it succeeds. Before, an object that kept failing was retried, and logged, at every step: about four lines a second
per NodeClaim in kwok mode while the API server was down."""

from typing import Any

from provisioner.cluster.objects import Conflict
from provisioner.controllers.context import Backoff
from provisioner.lab import Lab
from tests.lab_builders import START, condition, deployment, lab, nodepool_doc

KEY = ("nodeclaim.lifecycle", "NodeClaim//poison")


def poisoned() -> Lab:
    """A lab holding a NodeClaim whose requirements are not a list: its lifecycle reconcile raises every time (after
    its first failure is written on its Launched condition, as launch.go does)."""
    made = lab(nodepool_doc())
    made.store.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            # Labelled as launched NodeClaims are, so the hydration controller has nothing to write on it.
            "metadata": {
                "name": "poison",
                "labels": {"karpenter.kwok.sh/kwoknodeclass": "default"},
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": "not-a-list",
            },
            "status": {},
        }
    )
    return made


def error_times(made: Lab) -> list[float]:
    return [round(t.time - START, 3) for t in made.ctx.logs if t.record.message == "Reconciler error"]


def test_a_failing_nodeclaim_is_retried_after_5_ms_doubling():
    made = poisoned()
    made.advance(200)
    # 0.005 * (2**n - 1) after the first failure: the lab wakes for each retry.
    assert error_times(made) == [
        0.0, 0.005, 0.015, 0.035, 0.075, 0.155, 0.315, 0.635, 1.275, 2.555, 5.115, 10.235, 20.475, 40.955, 81.915,
        163.835,
    ]  # fmt: skip
    assert made.ctx.backoffs[KEY] == Backoff(16, "3", START + 163.835 + 0.005 * 2**15)


def test_the_delay_stops_doubling_at_1000_s():
    made = poisoned()
    made.advance(290)  # the registration timeout deletes it at 300 s
    made.ctx.backoffs[KEY] = Backoff(30, "3", made.now)
    made.advance(0)
    assert made.ctx.backoffs[KEY] == Backoff(31, "3", START + 290 + 1000.0)


def test_a_change_to_the_object_retries_it_at_once_and_the_failures_go_on_counting():
    made = poisoned()
    made.advance(100)
    assert error_times(made)[-1] == 81.915
    claim = made.store.get("NodeClaim", "poison")
    claim["metadata"]["labels"] = {"touched": "yes"}
    made.store.update(claim)
    made.advance(0)
    assert error_times(made)[-1] == 100.0
    version = made.store.get("NodeClaim", "poison")["metadata"]["resourceVersion"]
    assert made.ctx.backoffs[KEY] == Backoff(16, version, START + 100 + 0.005 * 2**15)


def test_a_success_forgets_the_failures():
    made = poisoned()
    made.advance(100)
    claim = made.store.get("NodeClaim", "poison")
    claim["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-4x-amd64-linux"]}
    ]
    made.store.update(claim)
    made.advance(0)
    assert error_times(made)[-1] == 81.915
    assert KEY not in made.ctx.backoffs
    assert made.store.get("NodeClaim", "poison")["status"]["providerID"].startswith("kwok://")


def test_a_conflict_is_retried_without_an_error_or_an_event() -> None:
    """registration.go:108-110: a Node patch that lost the optimistic-lock race (kwok wrote the Node's status in
    between) requeues the NodeClaim; controller-runtime logs nothing for a requeue."""
    made = lab(nodepool_doc(), deployment(replicas=1))
    update, conflicts = made.store.update, list[float]()

    def racing_kwok(obj: Any, **kwargs: Any) -> Any:
        registering = obj["kind"] == "Node" and "karpenter.sh/registered" in obj["metadata"].get("labels", {})
        if registering and not conflicts:
            conflicts.append(made.now)
            raise Conflict(f'Operation cannot be fulfilled on nodes "{obj["metadata"]["name"]}"')
        return update(obj, **kwargs)

    made.store.update = racing_kwok  # type: ignore[method-assign]
    made.advance(60)
    [claim] = made.store.list("NodeClaim")
    name = claim["metadata"]["name"]
    assert len(conflicts) == 1
    assert condition(claim, "Registered") == ("True", "Registered", "")
    assert error_times(made) == []
    assert [e["reason"] for e in made.store.list("Event") if e["reason"] == "ReconcileError"] == []
    [registered] = [t for t in made.ctx.logs if t.record.message == "registered nodeclaim"]
    # Retried in the same step: the consistency controller's status write changed the NodeClaim, which retries it
    # at once, as the watch event enqueues it in controller-runtime.
    assert registered.time == conflicts[0]
    assert ("nodeclaim.lifecycle", f"NodeClaim//{name}") not in made.ctx.backoffs
