"""Karpenter v1.15.0's NodeClaim expiration suite (pkg/controllers/nodeclaim/expiration/suite_test.go) ported onto
karpui's expiration controller, each test naming the It it follows.

A test makes a NodeClaim by hand (expireAfter 30s unless it says otherwise), steps the clock and runs the controller
once; the lab's other controllers do not run, so a NodeClaim deleted with its termination finalizer stays (deleting).
"""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.controllers import lifecycle
from provisioner.controllers.expiration import ExpirationController
from provisioner.lab import Lab
from tests.lab_builders import KWOK_REF, lab, nodepool_doc

UNMANAGED_REF = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"}


def _claim(
    made: Lab, expire_after: str = "30s", *, node_class_ref: dict[str, str] | None = None, finalizers: bool = False
) -> dict[str, Any]:
    """test.NodeClaimAndNode's NodeClaim of NodePool `default`, created in the lab's store now."""
    return made.store.create(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "nodeclaim",
                "labels": {"karpenter.sh/nodepool": "default"},
                "finalizers": [lifecycle.TERMINATION_FINALIZER] if finalizers else [],
            },
            "spec": {"nodeClassRef": dict(node_class_ref or KWOK_REF), "expireAfter": expire_after},
            "status": {},
        }
    )


def _expire(made: Lab, controller: ExpirationController | None = None, after: float = 0.0) -> dict[str, Any] | None:
    """Step the clock `after` seconds, ExpectObjectReconciled(expirationController), then the NodeClaim (or None)."""
    made.now += after
    made.ctx.now = made.now
    (controller or ExpirationController()).reconcile(made.ctx)
    return made.store.get("NodeClaim", "nodeclaim")


@pytest.mark.parametrize(
    "managed",
    [
        pytest.param(True, id="should remove nodeclaims that are expired"),
        pytest.param(False, id="should ignore expired NodeClaims that are not managed"),
    ],
)
def test_expiration_table(managed):
    """Expiration DescribeTable "Expiration": "should remove nodeclaims that are expired" and "should ignore expired
    NodeClaims that are not managed by this Karpenter instance"."""
    made = lab(nodepool_doc())
    _claim(made, node_class_ref=None if managed else UNMANAGED_REF)
    assert (_expire(made, after=60) is None) is managed


def test_should_not_remove_the_nodeclaims_when_expiration_is_disabled():
    """Expiration: "should not remove the NodeClaims when expiration is disabled"."""
    made = lab(nodepool_doc())
    _claim(made, "Never")
    assert _expire(made, after=10**7) is not None


def test_should_not_remove_non_expired_nodeclaims():
    """Expiration: "should not remove non-expired NodeClaims"."""
    made = lab(nodepool_doc())
    _claim(made, "200s")
    assert _expire(made, after=199) is not None


def test_should_delete_nodeclaims_if_the_nodeclaim_is_expired_but_the_node_isnt():
    """Expiration: "should delete NodeClaims if the nodeClaim is expired but the node isn't" (the Node made after)."""
    made = lab(nodepool_doc())
    _claim(made)
    made.now += 60
    made.store.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node", "labels": {}}, "spec": {}, "status": {}}
    )
    assert _expire(made) is None


def test_should_return_the_requeue_interval_for_the_time_until_the_nodeclaim_expires():
    """Expiration: "should return the requeue interval for the time between now and when the nodeClaim expires"."""
    made = lab(nodepool_doc())
    _claim(made, "200s")
    controller = ExpirationController()
    assert _expire(made, controller, after=100) is not None
    assert [t - made.now for t in controller.next_due(made.ctx)] == [100.0]


def test_shouldnt_expire_the_same_nodeclaim_multiple_times():
    """Expiration: "shouldn't expire the same NodeClaim multiple times" (the disruption it counts, as one record on
    the queue and one log line)."""
    made = lab(nodepool_doc())
    _claim(made, finalizers=True)
    controller = ExpirationController()
    assert _expire(made, controller, after=60)["metadata"]["deletionTimestamp"]
    assert _expire(made, controller) is not None
    commands = [c["spec"]["reason"] for c in made.store.list("DisruptionCommand")]
    logged = [r.record.fields["command"] for r in made.logs if r.record.message == "disrupting node(s)"]
    assert (commands, logged) == (["Expired"], ["Expired: delete: [nodeclaim]"])
