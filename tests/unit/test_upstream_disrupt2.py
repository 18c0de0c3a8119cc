"""Four disruption parity gaps against Karpenter v1.15.0, each test naming the upstream It or the Go file:line it
follows: single-node consolidation's timeout (pkg/controllers/disruption/singlenodeconsolidation.go,
singlenodeconsolidation_test.go), NodePoolState's pending disruption (pkg/controllers/disruption/queue.go), the
NodePool limits a consolidation replacement is held to (helpers.go SimulateScheduling, provisioning/provisioner.go
Create) and the grace period of a force delete (pkg/controllers/node/termination/terminator/eviction.go).
"""

from __future__ import annotations

from typing import Any

from provisioner.controllers.nodecounts import Counts, node_counts
from tests.lab_builders import lab, nodepool_doc
from tests.unit.test_static_capacity import ON
from tests.unit.test_upstream_state import nodeclaim_doc
from tests.unit.test_upstream_static import running

# NodePoolState's pending disruption (queue.go:337-340) ------------------------------------------------------------


def live_command(name: str, pool: str, *nodeclaims: str) -> dict[str, Any]:
    """A DisruptionCommand started and not done yet (Executing), holding `nodeclaims` of `pool`."""
    return {
        "apiVersion": "karpui.dev/v1alpha1",
        "kind": "DisruptionCommand",
        "metadata": {"name": name},
        "spec": {"candidates": [{"nodeclaim": c, "nodepool": pool} for c in nodeclaims]},
        "status": {"phase": "Executing"},
    }


def test_a_dynamic_nodepools_command_candidates_stay_running_in_node_counts():
    """queue.go:337-340 (markDisrupted): only a candidate OwnedByStaticNodePool is marked pending disruption; a
    dynamic NodePool's candidate is counted running until it is marked for deletion."""
    made = lab(nodepool_doc(), options=ON)
    made.store.create(nodeclaim_doc("claim-1"))
    made.store.create(nodeclaim_doc("claim-2"))
    made.store.create(live_command("underutilized-1", "default", "claim-1"))
    assert node_counts(made.ctx, "default") == Counts(active=2, deleting=0, pending_disruption=0)


def test_a_static_nodepools_command_candidates_are_pending_disruption():
    """queue.go:337-340: a static NodePool's candidate is marked pending disruption (not running) while its command
    has not deleted it."""
    made = running(2)
    [first, _] = sorted(c["metadata"]["name"] for c in made.store.list("NodeClaim"))
    made.store.create(live_command("drifted-1", "static", first))
    assert node_counts(made.ctx, "static") == Counts(active=1, deleting=0, pending_disruption=1)
