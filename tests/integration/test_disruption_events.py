"""Why a node is not disrupted, as Karpenter tells it: DisruptionBlocked and Unconsolidatable events on the Node and
its NodeClaim (DisruptionBlocked at most every 2 minutes, Unconsolidatable every 15), and the do-not-disrupt Events on
pods, in Karpenter v1.15's words."""

from datetime import datetime, timedelta

import yaml

from karpui import models
from tests.karp import EXAMPLES, ok, table


def events(reason):
    found = models.KubeObject.objects.filter(kind="Event").order_by("name")
    return sorted(
        (e.body["involvedObject"]["kind"], e.body["message"], e.body["count"])
        for e in found
        if e.body["reason"] == reason
    )


def one_annotated_pod(do_not_disrupt):
    """The example NodePool and one pod of the example Deployment with `do_not_disrupt`, 30 s on."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    deployment = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = 1
    deployment["spec"]["template"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": do_not_disrupt}
    ok("apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    ok("advance", "30s")


def test_a_do_not_disrupt_pod_blocks_its_node_with_an_event_on_node_and_nodeclaim(lab):
    one_annotated_pod("true")
    [pod] = [r["NAME"] for r in table("get", "pods")]
    why = f'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/{pod})'  # v1.15's words, verbatim

    assert events("DisruptionBlocked") == [("Node", why, 1), ("NodeClaim", why, 1)]
    assert events("Unconsolidatable") == []
    ok("advance", "1m20s")  # a pass every 10 s: the recorder tells an object's DisruptionBlocked once in 2 minutes
    assert events("DisruptionBlocked") == [("Node", why, 1), ("NodeClaim", why, 1)]
    ok("advance", "30s")
    assert events("DisruptionBlocked") == [("Node", why, 2), ("NodeClaim", why, 2)]


def test_a_spot_node_that_could_only_become_spot_is_unconsolidatable_and_the_event_is_not_repeated(lab):
    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok("advance", "30s")
    spot = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
    once = [("Node", spot, 1), ("Node", spot, 1), ("NodeClaim", spot, 1), ("NodeClaim", spot, 1)]  # two nodes

    assert events("Unconsolidatable") == once
    ok("advance", "14m")  # a pass every 10 s, and the same explanation each time: no repeat within 15 minutes
    assert events("Unconsolidatable") == once
    ok("advance", "2m")
    assert events("Unconsolidatable") == [(kind, spot, 2) for kind, _, _ in once]
    assert events("DisruptionBlocked") == []


def test_a_node_page_lists_its_events_newest_first(lab):
    from tests.integration.test_dashboard import logged_in, user

    ok("apply", "-f", str(EXAMPLES / "disruption"))
    ok("advance", "30s")
    node = table("get", "nodes")[0]["NAME"]
    [claim] = [c["NAME"] for c in table("get", "nodeclaims") if c["NODE"] == node]
    listed = logged_in(user()).get(f"/nodes/{node}/").context["events"]

    assert [(e["involvedObject"]["kind"], e["reason"]) for e in listed] == [
        ("NodeClaim", "Unconsolidatable"),
        ("Node", "Unconsolidatable"),
        ("NodeClaim", "Launched"),
    ]
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in listed} == {
        ("NodeClaim", claim),
        ("Node", node),
    }


def pod_events():
    found = models.KubeObject.objects.filter(kind="Event").order_by("name")
    return sorted(
        (e.body["type"], e.body["reason"], e.body["message"], e.body["count"])
        for e in found
        if e.body["involvedObject"]["kind"] == "Pod" and "DoNotDisrupt" in e.body["reason"]
    )


def test_a_timed_do_not_disrupt_tells_on_the_pod_until_when_then_that_it_elapsed_and_an_invalid_one_warns(lab):
    one_annotated_pod("3m")
    [pod] = models.KubeObject.objects.filter(kind="Pod")
    until = datetime.fromisoformat(pod.body["status"]["startTime"].replace("Z", "+00:00")) + timedelta(minutes=3)
    elapse = f"The karpenter.sh/do-not-disrupt grace period will elapse at {until:%Y-%m-%dT%H:%M:%SZ}"
    assert pod_events() == [("Normal", "DoNotDisruptUntil", elapse, 1)]
    blocked = f'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/{pod.name.split("/")[-1]})'
    assert {m for _, m, _ in events("DisruptionBlocked")} == {blocked}

    ok("advance", "3m")  # the protection has run out: said once, and the node is a candidate like any other
    told = pod_events()
    assert told[0][:3] == ("Normal", "DoNotDisruptGracePeriodElapsed", GRACE_ELAPSED)
    assert told[1][:3] == ("Normal", "DoNotDisruptUntil", elapse)

    ok("annotate", "pod", pod.name.split("/")[-1], "karpenter.sh/do-not-disrupt=0s", "--overwrite")
    ok("advance", "20s")
    assert ("Warning", "InvalidDoNotDisruptAnnotation", INVALID_ZERO, 1) in pod_events()


GRACE_ELAPSED = "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"
INVALID_ZERO = 'Invalid karpenter.sh/do-not-disrupt annotation: duration "0s" must be positive, ignoring annotation'


GUARDED = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: guard
spec:
  maxUnavailable: 0
  selector:
    matchLabels:
      app: guarded
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: guarded
spec:
  replicas: 1
  selector:
    matchLabels:
      app: guarded
  template:
    metadata:
      labels:
        app: guarded
    spec:
      containers:
        - name: app
          image: registry.k8s.io/pause:3.9
          resources:
            requests:
              cpu: "1"
"""


def test_a_settled_cluster_goes_on_telling_disruption_blocked_every_two_minutes(lab):
    """Karpenter builds candidates every pass, even when the cluster is consolidated and no simulation runs: the
    blocked node's event is told again each time the recorder's 2 minutes are up (as seen on v1.15, 04:12-04:16)."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    ok("apply", "-f", "-", stdin=GUARDED)
    ok("advance", "30s")
    why = "Pdb prevents pod evictions (PodDisruptionBudget=[default/guard])"
    assert events("DisruptionBlocked") == [("Node", why, 1), ("NodeClaim", why, 1)]
    ok("advance", "4m")
    assert events("DisruptionBlocked") == [("Node", why, 3), ("NodeClaim", why, 3)]


def test_a_nodeclaim_whose_node_has_not_registered_is_blocked_on_the_nodeclaim_alone(lab):
    """ValidateNodeDisruptable's "nodeclaim does not have an associated node": a NodeClaim is a state node from its
    creation, and until its Node registers it is told so (every 2 minutes), on the NodeClaim only."""
    from tests.lab_manifests import deployment, documents, nodepool

    slow = (
        "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\n"
        "spec: {nodeRegistrationDelay: 3m}\n"
    )
    ok("apply", "-f", "-", stdin=documents(slow, nodepool(node_class=False), deployment("web", 1)))
    ok("advance", "30s")
    told = "Nodeclaim does not have an associated node"
    assert events("DisruptionBlocked") == [("NodeClaim", told, 1)]
    ok("advance", "2m")
    assert events("DisruptionBlocked") == [("NodeClaim", told, 2)]
    ok("advance", "1m")  # registered: the Node is there, nothing blocks it
    assert events("DisruptionBlocked") == [("NodeClaim", told, 2)]
