"""Karpenter's chaos suite ("Runaway Scale-Up"): when new nodes never become useful, the NodeClaim count stays
below 35 over five virtual minutes, instead of launching a node per batch forever."""

import yaml

from karpui import models
from provisioner.sim.cluster import SimulatedCluster
from tests.karp import EXAMPLES, ok


def nodeclaims():
    return models.KubeObject.objects.filter(kind="NodeClaim").count()


def pool(consolidate_after):
    docs = list(yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text()))
    docs[1]["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": consolidate_after,
    }
    return yaml.safe_dump_all(docs)


def run_for_five_minutes():
    counts = []
    for _ in range(30):
        ok("advance", "10s")
        counts.append(nodeclaims())
    return counts


def test_nodes_that_never_register_do_not_multiply(lab):
    ok("apply", "-f", "-", stdin=pool("0s"))
    ok(
        "apply",
        "-f",
        "-",
        stdin="apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\nspec: {nodeRegistrationDelay: 1h}\n",
    )
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "100")
    counts = run_for_five_minutes()
    assert max(counts) < 35
    assert counts[-1] == counts[0]  # in-flight NodeClaims count as capacity: nothing more is launched


def test_nodes_tainted_by_a_chaos_controller_do_not_multiply(lab, monkeypatch):
    """Every new node gets a NoExecute taint no pod tolerates, so pods never land; consolidation removes the empty
    nodes (consolidateAfter 0s) while the provisioner keeps trying."""
    step = SimulatedCluster.step

    def chaos(self, now):
        for node in self.store.list("Node"):
            taints = node["spec"].setdefault("taints", [])
            if not any(t.get("key") == "chaos" for t in taints):
                taints.append({"key": "chaos", "value": "true", "effect": "NoExecute"})
                self.store.update(node)
        return step(self, now)

    monkeypatch.setattr(SimulatedCluster, "step", chaos)
    ok("apply", "-f", "-", stdin=pool("0s"))
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "deployment.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "100")
    counts = run_for_five_minutes()
    assert max(counts) < 35
