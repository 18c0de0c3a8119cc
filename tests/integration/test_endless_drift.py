"""No endless drift: a NodePool whose requirements no type of its node class can meet is refused at apply, a
NodeClaim that would be Drifted the moment it launches is never launched, and a drifted node whose replacement would
drift too is not replaced. The issue's case: seed 004 applied over a KWOKNodeClass left from seed 000, whose kwok
types lack `karpenter.k8s.aws/instance-category`, launched NodeClaims that drifted at once and were replaced about
every 20 s, forever, past the NodePool's cpu limit (12 of 10)."""

import json
from pathlib import Path

from django.db.models import F

from karpui import models
from provisioner.quantity import parse_resources
from tests.karp import EXAMPLES, karp, ok, table, workload_objects

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
CATEGORY = {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}
TEN_MINUTES_IN_20S = 30


def claims() -> dict[str, dict]:
    return {c["metadata"]["name"]: c for c in json.loads(ok("get", "nodeclaims", "-o", "json"))["items"]}


def cpu(claims: dict[str, dict]) -> int:
    """Millicores of the NodeClaims' capacity: what a NodePool's cpu limit counts."""
    return sum(parse_resources(c["status"].get("capacity") or {}).get("cpu", 0) for c in claims.values())


def events(reason: str) -> list[dict]:
    return [e for e in json.loads(ok("get", "events", "-A", "-o", "json"))["items"] if e["reason"] == reason]


def require_in_stored_nodepool(requirement: dict) -> None:
    """Add a requirement to the stored NodePool as an older karpui let through: the rows a lab kept across an
    upgrade are not checked again."""
    row = models.NodePool.objects.get(name="default")
    row.spec["template"]["spec"]["requirements"].append(requirement)
    models.NodePool.objects.filter(pk=row.pk).update(spec=row.spec, generation=F("generation") + 1)


def test_a_kwok_nodepool_requiring_an_ec2_label_is_refused_at_apply_and_nothing_is_written(lab):
    nodepool = (SEEDS / "exp1-nodepool.yaml").read_text()
    asked = nodepool.replace(
        "      requirements:\n",
        "      requirements:\n        - key: karpenter.k8s.aws/instance-category\n"
        '          operator: In\n          values: ["c", "m", "r"]\n',
    )
    assert karp("apply", "-f", "-", stdin=asked)[2] == (
        "error: document 1 NodePool/default: spec.template.spec.requirements[0]: no instance type of the 144 this "
        "NodePool's node class offers satisfies karpenter.k8s.aws/instance-category In [c, m, r]\n"
    )
    assert workload_objects() == 0 and not models.NodePool.objects.exists()


def test_seed_004_over_a_leftover_kwoknodeclass_runs_ten_virtual_minutes_without_a_drift_loop(lab):
    ok("apply", "-f", str(SEEDS / "exp1-nodepool.yaml"), "-f", str(SEEDS / "exp1-inflate.yaml"))
    ok("delete", "deployment", "inflate")
    ok("delete", "nodepool.karpenter.sh", "default")
    ok("apply", "-f", str(SEEDS / "spottospot.yaml"))
    ok("apply", "-f", str(SEEDS / "spot-consolidation.yaml"))
    ok("advance", "20s")
    first = claims()
    assert sorted(c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in first.values()) == [
        "c5.2xlarge",
        "c5.large",
    ]
    seen = set(first)
    for _ in range(TEN_MINUTES_IN_20S - 1):
        ok("advance", "20s")
        now = claims()
        seen |= set(now)
        assert cpu(now) <= 10_000  # the NodePool's limit: cpu 10
        assert not [name for name, c in now.items() if _drifted(c)]
    assert seen == set(first)  # at most the first ones: never a replacement, never a loop
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 8


def test_a_nodepool_kept_from_before_the_rule_never_launches_a_nodeclaim_that_would_drift(lab):
    ok("apply", "-f", str(SEEDS / "exp1-nodepool.yaml"))
    require_in_stored_nodepool(CATEGORY)
    ok("apply", "-f", str(SEEDS / "exp1-inflate.yaml"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    for _ in range(TEN_MINUTES_IN_20S):
        ok("advance", "20s")
        assert claims() == {}
    assert [p["STATUS"] for p in table("get", "pods")] == ["Pending"] * 3
    why = (
        'Failed to schedule pod, incompatible with nodepool "default", no instance type of the NodePool\'s node class defines '
        "karpenter.k8s.aws/instance-category, which the NodePool requires: a node would be Drifted the moment it "
        "launched"
    )
    assert {e["message"] for e in events("FailedScheduling") if e["involvedObject"]["kind"] == "Pod"} >= {why}


def test_a_drifted_node_whose_replacement_would_drift_too_is_not_replaced(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    ok("scale", "deploy/inflate", "--replicas", "3")
    ok("advance", "10s")
    [name] = claims()
    require_in_stored_nodepool(CATEGORY)  # every kwok node now drifts, and so would any kwok replacement
    ok("advance", "20s")
    assert _drifted(claims()[name])
    for _ in range(TEN_MINUTES_IN_20S):
        ok("advance", "20s")
        assert list(claims()) == [name]
    assert not [c for c in json.loads(ok("get", "disruptioncommands", "-o", "json"))["items"]]
    said = {e["message"] for e in events("Unconsolidatable") if e["involvedObject"]["name"] == name}
    assert any(
        "no instance type of the NodePool's node class defines karpenter.k8s.aws/instance-category" in m for m in said
    ), said
    assert [p["STATUS"] for p in table("get", "pods")] == ["Running"] * 3


def _drifted(claim: dict) -> bool:
    return any(c["type"] == "Drifted" and c["status"] == "True" for c in claim["status"].get("conditions") or [])
