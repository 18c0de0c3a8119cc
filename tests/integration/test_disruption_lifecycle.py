"""How commands run over time: the validation wait, drift replacement, failed replacements, drain order."""

import json
import re
from datetime import datetime, timedelta

import yaml

from tests.karp import EXAMPLES, logs, ok, rows, table
from tests.lab_builders import deployment


def commands():
    return table("get", "disruptioncommands")


def nodes():
    return [n["NAME"] for n in table("get", "nodes")]


def claim_of(node):
    """The NodeClaim whose Node is `node` (kwok names the Node apart from it: kwok-<nodeclaim>-...)."""
    [claim] = [c["NAME"] for c in table("get", "nodeclaims") if c["NODE"] == node]
    return claim


def provisioned(replicas="1"):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", replicas)
    ok("advance", "5s")


def slow_registration(delay):
    """From now on kwok takes `delay` to register new nodes (the KWOKNodeClass's nodeRegistrationDelay)."""
    ok(
        "apply",
        "-f",
        "-",
        stdin=f"apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {{name: default}}\nspec: {{nodeRegistrationDelay: {delay}}}\n",
    )


def test_nothing_is_deleted_before_the_15_second_validation_wait(lab):
    provisioned()
    ok("scale", "deploy/inflate", "--replicas", "0")
    while not commands():
        ok("advance", "1s")
    ok("advance", "14s")
    assert len(nodes()) == 1 and commands()[0]["PHASE"] == "Proposed"
    ok("advance", "17s")
    assert nodes() == [] and commands()[0]["PHASE"] == "Succeeded"


def drift_pool():
    pool = yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text())
    docs = list(pool)
    docs[1]["spec"]["template"]["metadata"] = {"labels": {"team": "payments"}}  # changes the template hash
    return yaml.safe_dump(docs[1])  # the NodePool only: the node class keeps whatever delay a test gave it


def test_a_drifted_node_is_replaced_and_deleted_once_the_replacement_is_initialized(lab):
    provisioned()
    [old] = nodes()
    ok("apply", "-f", "-", stdin=drift_pool())
    ok("advance", "1s")  # Karpenter starts a drift command at its next pass, with no validation wait
    claim = json.loads(ok("get", "nodeclaim", claim_of(old), "-o", "json"))
    drifted = next(c for c in claim["status"]["conditions"] if c["type"] == "Drifted")
    assert (drifted["status"], drifted["reason"]) == ("True", "NodePoolDrifted")
    ok("advance", "30s")
    [command] = commands()
    assert [command["REASON"], command["DECISION"]] == ["Drifted", "replace"] and command["PHASE"] == "Succeeded"
    [new] = nodes()
    assert new != old
    assert json.loads(ok("get", "node", new, "-o", "json"))["metadata"]["labels"]["team"] == "payments"
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"]


# Two pods that may not share a node: two nodes.
SPREAD = deployment(
    "spread",
    2,
    affinity={
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "spread"}}}
            ]
        }
    },
)


def test_drift_starts_without_a_validation_wait_and_one_command_at_a_time(lab):
    """Karpenter starts a drift command as soon as its pass decides it (no 15 s validation, unlike consolidation),
    and decides one command per pass: under a budget of 100 % the second drifted node is replaced by the next pass,
    which comes at once as the first command started (controller.go's RequeueImmediately)."""
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("apply", "-f", "-", stdin=json.dumps(SPREAD))
    ok("advance", "5s")
    old = nodes()
    assert len(old) == 2
    pool = yaml.safe_load(drift_pool())
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
    ok("apply", "-f", "-", stdin=yaml.safe_dump(pool))
    ok("advance", "40s")
    started = {line["command"].split("/")[1].split(":")[0]: line["time"] for line in logs("disrupting node(s)")}
    first, second = (json.loads(ok("get", "dc", name, "-o", "json")) for name in started)
    assert [first["spec"]["reason"], second["spec"]["reason"]] == ["Drifted", "Drifted"]
    assert [first["status"]["phase"], second["status"]["phase"]] == ["Succeeded", "Succeeded"]
    # Each started in the second it was proposed: no validation wait.
    assert [started[dc["metadata"]["name"]] for dc in (first, second)] == [
        dc["status"]["proposedAt"] for dc in (first, second)
    ]
    assert [len(dc["spec"]["candidates"]) for dc in (first, second)] == [1, 1]
    proposed = [datetime.fromisoformat(dc["status"]["proposedAt"]) for dc in (first, second)]
    assert proposed[1] - proposed[0] == timedelta(seconds=0)
    assert len(nodes()) == 2 and not set(nodes()) & set(old)


def test_a_replacement_that_disappears_before_initializing_fails_the_command_and_untaints(lab):
    provisioned()
    slow_registration("30s")
    [old] = nodes()
    ok("apply", "-f", "-", stdin=drift_pool())
    ok("advance", "30s")  # proposed, validated, replacement launched (its node needs 30 s)
    [command] = commands()
    assert command["PHASE"] == "Executing"
    replacement = json.loads(ok("get", "dc", command["NAME"], "-o", "json"))["status"]["replacementNodeClaims"][0]
    taints = json.loads(ok("get", "node", old, "-o", "json"))["spec"]["taints"]
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in taints
    ok("delete", "nodeclaim", replacement)
    ok("advance", "2s")
    status = json.loads(ok("get", "dc", command["NAME"], "-o", "json"))["status"]
    assert status["phase"] == "Failed"
    assert json.loads(ok("get", "node", old, "-o", "json"))["spec"]["taints"] == []
    assert old in nodes()


def test_a_replacement_that_never_initializes_times_out_after_ten_minutes(lab):
    provisioned()
    slow_registration("20m")
    [old] = nodes()
    ok("apply", "-f", "-", stdin=drift_pool())
    ok("advance", "9m")
    assert commands()[0]["PHASE"] == "Executing"
    ok("advance", "2m")
    assert commands()[0]["PHASE"] == "Failed"
    assert json.loads(ok("get", "node", old, "-o", "json"))["spec"]["taints"] == []


def test_drain_evicts_normal_pods_before_critical_ones_and_waits_at_least_five_seconds(lab):
    provisioned("1")
    [node] = nodes()
    claim = claim_of(node)
    critical = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    critical["metadata"]["name"] = "critical"
    critical["spec"]["replicas"] = 1
    critical["spec"]["selector"]["matchLabels"] = critical["spec"]["template"]["metadata"]["labels"] = {
        "app": "critical"
    }
    critical["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
    critical["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": claim}  # kwok's hostname label
    critical["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100m"
    ok("apply", "-f", "-", stdin=yaml.safe_dump(critical))
    ok("delete", "nodeclaim", claim)
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    evicted = [e["involvedObject"]["name"] for e in events if e["reason"] == "Evicted"]
    assert len(evicted) == 1 and evicted[0].startswith("inflate-")  # the critical pod waits for the next pass
    ok("advance", "1s")
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    assert sorted(e["involvedObject"]["name"].split("-")[0] for e in events if e["reason"] == "Evicted") == [
        "critical",
        "inflate",
    ]
    assert node in nodes()  # drained, but not yet 5 s since draining began
    ok("advance", "5s")
    assert node not in nodes()


def grace_lab(pod_grace):
    pool = yaml.safe_load_all((EXAMPLES / "provisioning" / "nodepool.yaml").read_text())
    docs = list(pool)
    docs[1]["spec"]["template"]["spec"]["terminationGracePeriod"] = "300s"
    ok("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    deploy = yaml.safe_load((EXAMPLES / "provisioning" / "deployment.yaml").read_text())
    deploy["spec"]["replicas"] = 1
    deploy["spec"]["template"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = pod_grace
    ok("apply", "-f", "-", stdin=yaml.safe_dump(deploy))
    ok("advance", "5s")
    [node] = nodes()
    ok("delete", "nodeclaim", claim_of(node))
    return node


def pods_on(node):
    return [p["NAME"] for p in table("get", "pods", "-o", "wide") if p["NODE"] == node]


def test_a_do_not_disrupt_pod_is_deleted_when_the_grace_period_runs_out(lab):
    node = grace_lab(60)
    [held] = pods_on(node)
    ok("advance", "90s")
    assert pods_on(node) == [held]  # blocked by do-not-disrupt, well before deadline - 60 s
    ok("advance", "175s")  # +265 s: past 300 - 60
    assert held not in pods_on(node)
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    assert any(e["reason"] == "Disrupted" and e["involvedObject"]["name"] == held for e in events)


def test_a_deleting_nodeclaim_with_a_grace_period_is_stamped_with_its_deadline_and_says_it(lab):
    """Karpenter's annotateTerminationGracePeriod: karpenter.sh/nodeclaim-termination-timestamp = deletionTimestamp
    + terminationGracePeriod, logged, and a TerminationGracePeriodExpiring Warning on the NodeClaim and (every 2
    minutes while it drains) on its Node."""
    node = grace_lab(60)
    [claim] = json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]
    deleted = datetime.fromisoformat(claim["metadata"]["deletionTimestamp"].replace("Z", "+00:00"))
    stamp = f"{deleted + timedelta(seconds=300):%Y-%m-%dT%H:%M:%SZ}"
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] == stamp
    ok("advance", "2m30s")
    told = sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"], e["count"])
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "TerminationGracePeriodExpiring"
    )
    expiring = f"All pods will be deleted by {stamp}"
    assert told == [
        ("Node", node, "Warning", expiring, 2),
        ("NodeClaim", claim["metadata"]["name"], "Warning", expiring, 1),
    ]
    [annotated] = [json.loads(line) for line in ok("logs").splitlines() if '"annotated nodeclaim"' in line]
    assert annotated["karpenter.sh/nodeclaim-termination-timestamp"] == stamp


def test_a_waiting_drain_says_so_on_the_node_and_the_deadline_deletion_says_what_it_bypasses(lab):
    """NodeFailedToDrain ("N pods are waiting to be evicted", on the Node, once in 2 minutes) and DisruptPodDelete's
    words for the pod deleted at the deadline (terminator/events/events.go)."""
    node = grace_lab(60)
    [held] = pods_on(node)
    ok("advance", "30s")
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    assert [
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"])
        for e in events
        if e["reason"] == "FailedDraining"
    ] == [("Node", node, "Warning", "Failed to drain node, 1 pods are waiting to be evicted")]
    ok("advance", "4m")
    [disrupted] = [
        e
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "Disrupted" and e["involvedObject"]["name"] == held
    ]
    assert disrupted["type"] == "Normal"
    assert re.fullmatch(
        r"Deleting the pod to accommodate the terminationTime \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000 UTC of the node\. "
        r"The pod was granted (59|60) seconds of grace-period of its 60 terminationGracePeriodSeconds\. "
        r"This bypasses the PDB of the pod and the do-not-disrupt annotation\.",
        disrupted["message"],
    ), disrupted["message"]


def test_a_pod_evicted_from_a_nodeclaim_deleted_by_hand_is_told_it_was_a_forceful_termination(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "1")
    ok("advance", "20s")
    [node] = nodes()
    [pod] = pods_on(node)
    ok("delete", "nodeclaim", claim_of(node))
    ok("advance", "10s")
    evicted = [
        e["message"]
        for e in json.loads(ok("get", "events", "-o", "json"))["items"]
        if e["reason"] == "Evicted" and e["involvedObject"]["name"] == pod
    ]
    assert evicted == ["Evicted pod: Forceful Termination"]


def test_a_pod_whose_grace_covers_the_whole_period_is_deleted_at_once(lab):
    node = grace_lab(300)
    ok("advance", "1s")
    assert pods_on(node) == []


def test_deleting_a_nodepool_drains_and_removes_its_nodes_and_its_pods_wait(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    ok("advance", "5s")
    assert len(rows("get", "nodes")) == 1
    assert ok("delete", "nodepool", "default").strip() == 'nodepool.karpenter.sh "default" deleted'
    ok("advance", "60s")

    assert rows("get", "nodeclaims") == [] and rows("get", "nodes") == []
    assert [p["STATUS"] for p in table("get", "pods")] == ["Pending"] * 3


def test_deleting_a_karpenter_node_deletes_its_nodeclaim_found_by_provider_id(lab):
    """The termination controller's rule: the Node's NodeClaim (the one with its providerID, named apart from it) goes
    too, its pods to a NodeClaim of their own."""
    provisioned()
    [node] = nodes()
    claim = claim_of(node)
    assert ok("delete", "node", node) == f'node "{node}" deleted\n'
    ok("advance", "10s")
    [replacement] = table("get", "nodeclaims")
    assert node not in nodes() and replacement["NAME"] != claim
    assert {p["NODE"] for p in table("get", "pods", "-o", "wide")} == {replacement["NODE"]}
