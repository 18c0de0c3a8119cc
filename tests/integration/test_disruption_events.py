"""Why a node is not disrupted, as Karpenter tells it: DisruptionBlocked and Unconsolidatable events on the Node and
its NodeClaim, each repeated at most every 15 minutes."""

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


def test_a_do_not_disrupt_pod_blocks_its_node_with_an_event_on_node_and_nodeclaim(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    deployment = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = 1
    deployment["spec"]["template"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    ok("apply", "-f", "-", stdin=yaml.safe_dump(deployment))
    ok("advance", "30s")
    [pod] = [r["NAME"] for r in table("get", "pods")]
    why = f'pod "default/{pod}" has "karpenter.sh/do-not-disrupt" annotation'

    assert events("DisruptionBlocked") == [
        ("Node", f"Cannot disrupt Node: {why}", 1),
        ("NodeClaim", f"Cannot disrupt NodeClaim: {why}", 1),
    ]
    assert events("Unconsolidatable") == []


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
