"""Static NodePools (spec.replicas, Karpenter v1.8/v1.11, gate StaticCapacity): the CRD's rules, the static
provisioning and deprovisioning controllers, StaticDrift, and the human gate on scale-down.

Ported from sigs.k8s.io/karpenter@v1.14.1 pkg/apis/v1/nodepool_validation_cel_test.go (static NodePools),
pkg/controllers/static/provisioning/suite_test.go, pkg/controllers/static/deprovisioning/suite_test.go
("Deprovision Candidate Selection") and pkg/controllers/disruption/staticdrift_test.go.
"""

import pytest

from provisioner.manifests import ManifestError
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.options import KarpenterOptions, parse_feature_gates
from tests.builders import with_spec
from tests.lab_builders import deployment, lab, nodepool_doc, reconfigure

ON = KarpenterOptions(feature_gates=parse_feature_gates("StaticCapacity=true"))
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# Karpenter's kwok provider launches a static NodeClaim among the instance types its NodePool names.
C2X = [{"key": INSTANCE_TYPE, "operator": "In", "values": ["c-2x-amd64-linux"]}]


def static_pool(replicas, name="static", generation=1, **spec):
    return nodepool_doc(name, generation=generation, replicas=replicas, template_spec={"requirements": C2X}, **spec)


def manual_pool(replicas, generation):
    """A static NodePool whose voluntary disruptions wait for a person (the human gate's manual mode)."""
    pool = static_pool(replicas, generation=generation)
    pool["metadata"]["annotations"] = {"karpui.dev/approval-mode": "manual"}
    return pool


def claims(made, pool="static"):
    return [
        c
        for c in made.store.list("NodeClaim")
        if c["metadata"]["labels"].get("karpenter.sh/nodepool") == pool and not c["metadata"].get("deletionTimestamp")
    ]


# The CRD (nodepool_validation_cel_test.go) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"replicas": 2, "limits": {"cpu": "10"}}, "only 'limits.nodes' is supported on static NodePools"),
        ({"replicas": 2, "weight": 10}, "'weight' is not supported on static NodePools"),
    ],
)
def test_a_static_nodepool_takes_only_a_node_limit_and_no_weight(spec, message):
    doc = with_spec("spec.replicas", spec.pop("replicas"))
    for key, value in spec.items():
        doc["spec"][key] = value
    with pytest.raises(ManifestError) as error:
        parse_nodepool(doc)
    assert (error.value.field, error.value.message) == ("spec", message)


def test_replicas_are_a_non_negative_integer_kept_in_the_manifest():
    pool = parse_nodepool(with_spec("spec.limits", {"nodes": "5"}) | {})
    assert pool.replicas is None and not pool.static
    static = parse_nodepool({**with_spec("spec.replicas", 3)})
    assert (static.replicas, static.static) == (3, True)
    with pytest.raises(ManifestError) as error:
        parse_nodepool(with_spec("spec.replicas", -1))
    assert error.value.field == "spec.replicas"


# Static provisioning ------------------------------------------------------------------------------------------------


def test_a_static_nodepool_gets_its_replicas_whatever_the_pods():
    """ "should create nodeclaims when current node count is less than desired replicas", with Karpenter's static
    NodeClaim: the template's requirements only, no requests, no min-values annotation."""
    made = lab(static_pool(3), options=ON)
    made.advance(5)
    made_claims = claims(made)
    assert len(made_claims) == 3
    claim = made_claims[0]
    assert claim["spec"]["resources"]["requests"] == {}
    assert {"key": INSTANCE_TYPE, "operator": "In", "values": ["c-2x-amd64-linux"]} in claim["spec"]["requirements"]
    assert "karpenter.sh/nodeclaim-min-values-relaxed" not in claim["metadata"]["annotations"]
    assert {c["metadata"]["labels"][INSTANCE_TYPE] for c in made_claims} == {"c-2x-amd64-linux"}
    assert len(made.store.list("Node")) == 3
    [log] = [r.record for r in made.logs if r.record.message == "provisioning nodeclaims to satisfy replica count"]
    assert (log.fields["current"], log.fields["desired"], log.fields["provision-count"]) == (0, 3, 3)


def test_without_the_gate_a_static_nodepool_gets_nothing_and_pods_do_not_use_it():
    made = lab(static_pool(2), deployment(replicas=1))
    made.advance(30)
    assert made.store.list("NodeClaim") == []  # nor does the dynamic provisioner use a static NodePool


def test_the_node_limit_caps_static_replicas():  # "should not create additional nodeclaims when node limits ..."
    made = lab(static_pool(5, limits={"nodes": "2"}), options=ON)
    made.advance(5)
    assert len(claims(made)) == 2
    assert [r.record.message for r in made.logs].count("nodepool node limit reached") >= 1


def test_pods_run_on_static_nodes_but_never_on_new_ones_of_a_static_nodepool():
    made = lab(static_pool(1), deployment(replicas=1, cpu="1"), options=ON)
    made.advance(30)
    assert len(made.store.list("NodeClaim")) == 1
    assert [p["status"]["phase"] for p in made.store.list("Pod")] == ["Running"]
    made.store.patch("Deployment", "inflate", "default", {"spec": {"replicas": 3}})
    made.advance(30)
    assert len(made.store.list("NodeClaim")) == 1  # no dynamic NodePool: the other pods wait
    assert sorted(p["status"]["phase"] for p in made.store.list("Pod")) == ["Pending", "Pending", "Running"]


def test_static_nodes_are_never_consolidated_even_empty():
    made = lab(static_pool(2), options=ON)
    made.advance(600)
    assert len(claims(made)) == 2 and made.store.list("DisruptionCommand") == []
    assert all("Consolidatable" not in [c["type"] for c in claim["status"]["conditions"]] for claim in claims(made))


# Static deprovisioning, through the gate ---------------------------------------------------------------------------


def _scaled(made, replicas):
    reconfigure(made, static_pool(replicas, generation=2), options=ON)


def test_scaling_down_deletes_empty_nodes_first_in_auto_mode_as_karpenter_does():
    """ "should prioritize empty nodes (with only daemonset pods) for termination" and "should terminate excess
    nodeclaims when current count exceeds desired replicas"."""
    made = lab(static_pool(3), deployment(replicas=1, cpu="1"), options=ON)
    made.advance(30)
    busy = next(p["spec"]["nodeName"] for p in made.store.list("Pod"))
    _scaled(made, 1)
    reasons = set()
    for _ in range(300):
        made.advance(0.1)
        reasons |= {c["type"] for claim in claims(made) for c in claim["status"]["conditions"] if c["status"] == "True"}
    [command] = made.store.list("DisruptionCommand")
    assert (command["spec"]["reason"], command["spec"]["decision"], command["status"]["phase"]) == (
        "Overprovisioned",
        "delete",
        "Succeeded",
    )
    assert busy not in [c["node"] for c in command["spec"]["candidates"]]
    assert [c["status"]["nodeName"] for c in claims(made)] == [busy]
    # As Karpenter's static deprovisioning, which only deletes: no DisruptionReason condition on the NodeClaims and
    # no DisruptionTerminating event (the command's own record says why).
    assert "DisruptionReason" not in reasons
    assert [e for e in made.store.list("Event") if e["reason"] == "DisruptionTerminating"] == []


def test_a_manual_nodepool_waits_for_a_person_before_scaling_down():
    made = lab(static_pool(2), options=ON)
    made.advance(10)
    reconfigure(made, manual_pool(1, generation=2), options=ON)
    made.advance(30)
    [command] = made.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "AwaitingApproval" and len(claims(made)) == 2
    command["spec"]["approval"] = {"decision": "approved", "by": "alice", "at": "2027-01-15T09:00:00Z"}
    made.store.update(command)
    made.advance(30)
    assert len(claims(made)) == 1
    assert made.store.get("DisruptionCommand", command["metadata"]["name"])["status"]["phase"] == "Succeeded"
    assert len(made.store.list("DisruptionCommand")) == 1  # the pool is at its replicas: nothing more proposed


def test_scaling_back_up_before_approval_expires_the_scale_down():
    made = lab(static_pool(2), options=ON)
    made.advance(10)
    reconfigure(made, manual_pool(1, generation=2), options=ON)
    made.advance(10)
    reconfigure(made, manual_pool(2, generation=3), options=ON)
    made.advance(10)
    [command] = made.store.list("DisruptionCommand")
    assert command["status"]["phase"] == "Expired"
    assert command["status"]["message"].startswith("expired: churn (NodePool static now wants 2 replicas")
    assert len(claims(made)) == 2


# StaticDrift (staticdrift_test.go) ----------------------------------------------------------------------------------


def test_a_drifted_static_node_is_replaced_by_a_new_nodeclaim_of_its_nodepool():
    made = lab(static_pool(2), options=ON)
    made.advance(10)
    before = {c["metadata"]["name"] for c in claims(made)}
    changed = static_pool(2, generation=2)
    changed["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}  # the template hash changes: drift
    reconfigure(made, changed, options=ON)
    made.advance(300)
    after = claims(made)
    assert len(after) == 2 and not before & {c["metadata"]["name"] for c in after}
    assert {c["metadata"]["labels"]["team"] for c in after} == {"a"}
    reasons = {c["spec"]["reason"] for c in made.store.list("DisruptionCommand")}
    assert reasons == {"Drifted"}
