"""NodePool conditions and NodeRegistrationHealthy, launch and registration timeouts, in a lab over the kwok catalog.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness_test.go ("should delete the
NodeClaim when the NodeClaim hasn't launched past the launch timeout", "should use the status condition transition
time for registration timeout", "should update NodeRegistrationHealthy status condition to False if it was previously
set to Unknown and there are >=2 registration failures"), registration_test.go ("should set NodeRegistrationHealthy
status condition on nodePool as True if the first node registration was successful", "should not add
NodeRegistrationHealthy=true on the nodePool if registration succeeds once and if it had previously failed twice"),
pkg/controllers/nodepool/registrationhealth/suite_test.go ("should set NodeRegistrationHealthy status condition on
nodePool as Unknown if the nodePool is updated") and pkg/state/nodepoolhealth's buffer of four.
"""

import random

import pytest

from provisioner.cloudprovider.types import CloudProviderError
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.lifecycle import LifecycleController
from provisioner.controllers.nodepools import NodePoolController, health
from tests.lab_builders import KWOK_CLASS, START, condition, deployment, lab, nodepool_doc, reconfigure


@pytest.mark.parametrize(
    ("buffer", "status"),
    [
        ([], "Unknown"),
        ([True], "Healthy"),
        ([False], "Healthy"),  # one failure in four is tolerated
        ([False, True], "Healthy"),
        ([False, False], "Unhealthy"),
        ([False, True, False], "Unhealthy"),
        ([False, False, True, True], "Unhealthy"),
        ([True, True, True, False], "Healthy"),
    ],
)
def test_registration_health_is_the_share_of_failures_among_the_last_four(buffer, status):
    assert health(buffer) == status


def _status(made, name="default"):
    """The NodePool as an object with its status, for `condition`."""
    return {"status": made.nodepool_status()[name]}


def test_a_new_nodepool_is_ready_with_registration_health_unknown_then_true_after_a_node_registers():
    made = lab(nodepool_doc(), deployment(replicas=0))
    made.advance(1)
    conditions = _status(made)["status"]["conditions"]
    assert [c["type"] for c in conditions][-1] == "Ready"
    assert {c["type"]: (c["status"], c["reason"]) for c in conditions} == {
        "ValidationSucceeded": ("True", "ValidationSucceeded"),
        "NodeClassReady": ("True", "NodeClassReady"),
        "NodeRegistrationHealthy": ("Unknown", "AwaitingReconciliation"),
        "Ready": ("True", "Ready"),
    }
    made.store.patch("Deployment", "inflate", "default", {"spec": {"replicas": 1}})
    made.advance(30)
    assert condition(_status(made), "NodeRegistrationHealthy") == ("True", "NodeRegistrationHealthy", "")
    assert _status(made)["status"]["nodes"] == 1


def _never_registering():
    """Nodes that would register after 20 minutes: every NodeClaim times out at 15."""
    return lab(nodepool_doc(), deployment(replicas=1), {**KWOK_CLASS, "spec": {"nodeRegistrationDelay": "20m"}})


def test_a_nodeclaim_not_registered_in_15_minutes_is_deleted_and_replaced():
    made = _never_registering()
    made.advance(10)
    [first] = [c["metadata"]["name"] for c in made.store.list("NodeClaim")]
    made.advance(14 * 60)
    assert made.store.get("NodeClaim", first) is not None  # 14m10s after its Registered condition was set
    made.advance(70)
    assert made.store.get("NodeClaim", first) is None
    [timeout] = [r for r in made.logs if r.record.message == "terminating due to timeout"]
    assert timeout.record.fields == {"NodeClaim": {"name": first}, "timeout": "15m0s", "reason": "registration_timeout"}
    assert len(made.store.list("NodeClaim")) == 1  # the pod got another


def test_two_registration_failures_make_the_nodepool_unhealthy_and_a_later_success_does_not_heal_it():
    made = _never_registering()
    made.advance(16 * 60)
    # One failure of four: tolerated.
    assert condition(_status(made), "NodeRegistrationHealthy")[0] == "Unknown"
    made.advance(16 * 60)
    assert condition(_status(made), "NodeRegistrationHealthy") == (
        "False",
        "RegistrationFailed",
        "Failed to register node",
    )
    assert condition(_status(made), "Ready")[0] == "True"  # informational: the NodePool still provisions
    # The node class is fixed (a new generation of it): health starts again, and the next registration makes it True.
    reconfigure(made, nodepool_doc(), {**KWOK_CLASS, "metadata": {"name": "default", "generation": 2}})
    made.advance(1)
    assert condition(_status(made), "NodeRegistrationHealthy") == ("True", "NodeRegistrationHealthy", "")


def test_a_success_after_two_failures_is_not_enough():
    made = _never_registering()
    made.advance(32 * 60)
    assert condition(_status(made), "NodeRegistrationHealthy")[0] == "False"
    # The same node class, now registering at once: [false, false, true] is still half failures.
    reconfigure(made, nodepool_doc(), KWOK_CLASS)
    made.advance(60)
    assert [c["metadata"]["name"] for c in made.store.list("Node")]
    assert condition(_status(made), "NodeRegistrationHealthy")[0] == "False"


def test_an_updated_nodepool_starts_its_registration_health_again():
    made = lab(nodepool_doc(), deployment(replicas=1))
    made.advance(30)
    assert condition(_status(made), "NodeRegistrationHealthy")[0] == "True"
    reconfigure(made, nodepool_doc(generation=2, weight=10))
    made.advance(1)
    assert condition(_status(made), "NodeRegistrationHealthy") == (
        "Unknown",
        "AwaitingReconciliation",
        "object is awaiting reconciliation",
    )


def test_a_missing_node_class_makes_the_nodepool_not_ready():
    made = lab(
        nodepool_doc(
            template_spec={
                "nodeClassRef": {
                    **KWOK_CLASS["metadata"],
                    "group": "karpenter.kwok.sh",
                    "kind": "KWOKNodeClass",
                    "name": "missing",
                }
            }
        )
    )
    made.advance(1)
    assert condition(_status(made), "NodeClassReady") == (
        "False",
        "NodeClassNotFound",
        "NodeClass not found on cluster",
    )
    assert condition(_status(made), "Ready") == ("False", "UnhealthyDependents", "NodeClassReady=False")


class _FailingCloud:
    """A provider whose launches fail (not for capacity): the NodeClaim stays unlaunched."""

    name = "failing"

    def create(self, claim):
        raise CloudProviderError("the API is down")

    def registered_by(self, claim):
        return None


def test_a_nodeclaim_not_launched_in_five_minutes_is_deleted():  # "... hasn't launched past the launch timeout"
    store = ObjectStore(clock=lambda: START)
    claim = store.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "stuck", "creationTimestamp": timestamp(START - 5 * 60)},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}},
            "status": {},
        }
    )
    outcomes = NodePoolController()
    # The first failed launch, at its creation, sets the Launched condition the five minutes count from.
    ctx = ClusterContext(store, _FailingCloud(), START - 5 * 60, random.Random(0), [], {}, {}, {})
    LifecycleController(outcomes).reconcile(ctx)
    ctx.now = START - 1
    ctx.backoffs.clear()
    LifecycleController(outcomes).reconcile(ctx)
    assert store.get("NodeClaim", "stuck") is not None  # a second before the deadline: the launch is tried again
    ctx.now = START
    LifecycleController(outcomes).reconcile(ctx)
    # Deleted; the termination finalizer the lifecycle controller added goes at the next run (no instance to end).
    assert store.get("NodeClaim", "stuck")["metadata"]["deletionTimestamp"] == timestamp(START)
    LifecycleController(outcomes).reconcile(ctx)
    assert store.get("NodeClaim", "stuck") is None
    [record] = [r.record for r in ctx.logs if r.record.message == "terminating due to timeout"]
    assert record.fields == {
        "NodeClaim": {"name": claim["metadata"]["name"]},
        "timeout": "5m0s",
        "reason": "launch_timeout",
    }


def test_kwok_mode_puts_the_nodepool_status_back_when_another_writer_overwrote_it():
    """Karpenter's status patch compares with the object as it is: a NodePool status someone else replaced after
    karpui wrote it is written again at the next reconcile, not taken as still written."""
    from provisioner.manifests.nodepool import parse_nodepool

    store = ObjectStore(clock=lambda: START)
    stored = store.create(nodepool_doc())
    ctx = ClusterContext(
        store, _FailingCloud(), START, random.Random(0), [parse_nodepool(nodepool_doc())],
        {"default": stored["metadata"]["uid"]}, {}, {},
    )  # fmt: skip
    controller = NodePoolController()
    assert controller._write(ctx) is True
    written = store.get("NodePool", "default")["status"]
    assert (written["nodes"], [c["type"] for c in written["conditions"]]) == (0, ["ValidationSucceeded", "Ready"])
    assert controller._write(ctx) is False  # nothing changed: no write
    overwritten = store.get("NodePool", "default")
    overwritten["status"] = {}
    store.update(overwritten)
    assert controller._write(ctx) is True
    assert store.get("NodePool", "default")["status"] == written
