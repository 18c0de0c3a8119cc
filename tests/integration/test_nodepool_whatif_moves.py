"""The editor's what-if says which pending and future pods a change would move to another NodePool: a weight
change reorders the NodePools every pod both could use is offered to."""

from __future__ import annotations

from tests.integration.test_nodepool_editor import editor, form_for
from tests.karp import ok, table
from tests.lab_manifests import ON_DEMAND, deployment, documents, nodepool

# alpha and beta of equal weight, both open to web's pods; pinned selects beta itself (no pods, no requests).
POOLS = documents(
    nodepool("alpha", requirements=ON_DEMAND, consolidation_policy=None, consolidate_after=None),
    nodepool("beta", requirements=ON_DEMAND, consolidation_policy=None, consolidate_after=None, node_class=False),
    deployment("web", 3, grace_period=None),
    deployment("pinned", 0, cpu=None, nodepool="beta", grace_period=None),
)


def test_a_weight_change_says_which_pending_and_future_pods_would_launch_on_the_other_nodepool(lab):
    ok("apply", "-f", "-", stdin=POOLS)
    ok("advance", "0s")  # the pods wait for the provisioning batch, which has not closed yet
    assert [p["STATUS"] for p in table("get", "pods")] == ["Pending"] * 3
    client = editor("change_nodepool")
    response = client.post("/nodepools/alpha/", {**form_for(client, "alpha"), "spec.weight": "10", "action": "preview"})
    whatif = response.context["whatif"]
    # Equal weights go to the later name first (Karpenter's OrderByWeight): beta, until alpha weighs more.
    [moved] = whatif["pending_moves"]
    assert (moved["owner"].split(" ")[0], moved["before"], moved["after"], moved["count"]) == (
        "ReplicaSet",
        "beta",
        "alpha",
        3,
    )
    assert whatif["future_moves"] == [{"workload": "Deployment default/web", "before": "beta", "after": "alpha"}]
    body = response.content.decode()
    assert "Future pods of Deployment default/web would launch on <b>alpha</b> instead of beta" in body
    assert "3 pending pods of ReplicaSet default/web-" in body
    # The pinned workload selects beta itself: no weight moves it.
    assert all("pinned" not in m["workload"] for m in whatif["future_moves"])
