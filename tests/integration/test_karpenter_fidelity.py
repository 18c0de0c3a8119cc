"""Where the lab used to differ from Karpenter and Kubernetes (issue 13): each test fails on the old behaviour."""

import json

import yaml

from tests.karp import EXAMPLES, ok, rows, table


def test_a_nodepool_template_do_not_disrupt_annotation_protects_its_empty_node(lab):
    """Karpenter copies NodeClaim annotations to the Node at registration, so the template's do-not-disrupt
    reaches the node (the lab used to delete the empty node)."""
    docs = list(yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()))
    docs[1]["spec"]["template"]["metadata"] = {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}
    ok("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "2")
    ok("advance", "5s")
    [node] = [n["NAME"] for n in table("get", "nodes")]
    annotations = json.loads(ok("get", "node", node, "-o", "json"))["metadata"]["annotations"]
    assert annotations["karpenter.sh/do-not-disrupt"] == "true"
    ok("scale", "deploy/inflate", "--replicas", "0")
    ok("advance", "2m")
    assert [n["NAME"] for n in table("get", "nodes")] == [node]
    assert rows("get", "disruptioncommands") == []


ZONE_PODS = """
apiVersion: v1
kind: Pod
metadata: {name: z-%(zone)s, labels: {app: pinned}}
spec:
  nodeSelector: {topology.kubernetes.io/zone: test-zone-%(zone)s}
  containers: [{name: c, image: pause, resources: {requests: {cpu: "1"}}}]
"""

ANTI_POD = """
apiVersion: v1
kind: Pod
metadata: {name: a-anti}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: pinned}}
          topologyKey: topology.kubernetes.io/zone
  containers: [{name: c, image: pause, resources: {requests: {cpu: "1"}}}]
"""


def test_pods_applied_together_bind_in_arrival_order_not_name_order(lab):
    """kube-scheduler's queue orders by priority, then arrival. The anti-affinity pod is applied last but its
    name sorts first: binding it first into zone c left the zone-c pod Pending forever."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    manifest = "---".join([*(ZONE_PODS % {"zone": z} for z in "abc"), ANTI_POD])
    ok("apply", "-f", "-", stdin=manifest)
    ok("advance", "30s")
    pods = {p["NAME"]: p["STATUS"] for p in table("get", "pods")}
    assert pods == {"a-anti": "Running", "z-a": "Running", "z-b": "Running", "z-c": "Running"}
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in json.loads(ok("get", "nodes", "-o", "json"))["items"]
    }
    placed = {
        p["metadata"]["name"]: zones[p["spec"]["nodeName"]]
        for p in json.loads(ok("get", "pods", "-o", "json"))["items"]
    }
    assert placed == {"z-a": "test-zone-a", "z-b": "test-zone-b", "z-c": "test-zone-c", "a-anti": "test-zone-d"}


def test_nominated_events_are_rate_limited_as_karpenters_ten_at_once_then_five_a_second(lab):
    """Karpenter's PodNominationRateLimiter (a token bucket of burst 10, 5 a second, shared by every pod): a batch
    of 40 pods records 10 Nominated events, and a batch seconds later 10 more, the bucket having refilled (the lab
    recorded one per pod: at 20,000 pods, 20,000 of the 23,643 objects one provisioning step wrote)."""
    from karpui import models

    def nominated():
        return models.KubeObject.objects.filter(kind="Event", body__reason="Nominated").count()

    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "40")
    ok("advance", "5s")
    assert len(rows("get", "pods")) == 40 and nominated() == 10
    ok("scale", "deploy/inflate", "--replicas", "80")
    ok("advance", "2s")
    assert nominated() == 20
