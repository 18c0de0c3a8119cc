"""The editor's what-if says which pending and future pods a change would move to another NodePool: a weight
change reorders the NodePools every pod both could use is offered to."""

from __future__ import annotations

from tests.integration.test_nodepool_editor import editor, form_for
from tests.karp import ok, table

POOLS = """\
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: alpha}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: beta}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: pause, resources: {requests: {cpu: "1"}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned}
spec:
  replicas: 0
  selector: {matchLabels: {app: pinned}}
  template:
    metadata: {labels: {app: pinned}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: beta}
      containers: [{name: app, image: pause}]
"""


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
