"""One NodePool never stops its cluster's disruption (issue 27, point 3): a budget duration past Go's largest is
refused where it is written, and any error evaluating one NodePool is that NodePool's alone (a Warning Event and a
ValidationSucceeded=False condition on it), while the others' nodes are still disrupted."""

import json

import pytest

from karpui import models
from provisioner.disruption import budgets
from tests.karp import EXAMPLES, karp, ok, table

BUDGET = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: ["amd64"]}}
  disruption:
    consolidateAfter: 10s
    budgets:
      - {{nodes: "0", schedule: "0 0 * * *", duration: {duration}}}
"""


@pytest.mark.parametrize("duration", ["2562048h", "999999999999h", "2562047h48m"])
def test_a_budget_duration_past_gos_largest_is_refused_by_karp_apply(lab, duration):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    code, _, err = karp("apply", "-f", "-", stdin=BUDGET.format(name="long", duration=duration))
    assert code == 1
    assert err.strip() == (
        f"error: document 1 NodePool/long: spec.disruption.budgets[0].duration: invalid duration '{duration}': "
        "longer than 2562047h47m16s, Go's largest"
    )
    assert not models.NodePool.objects.filter(name="long").exists()


def test_the_longest_duration_go_reads_is_accepted(lab):
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    ok("apply", "-f", "-", stdin=BUDGET.format(name="long", duration="2562047h"))
    assert models.NodePool.objects.get(name="long").spec["disruption"]["budgets"][0]["duration"] == "2562047h"


def test_the_editor_refuses_a_budget_duration_past_gos_largest_at_its_field(lab, admin_client):
    ok("apply", "-f", str(EXAMPLES / "provisioning"))
    form = admin_client.get("/nodepools/default/").context["form"]
    data = {field: ("" if value is None else value) for field, value in form.initial.items()}
    data["manifest"] = BUDGET.format(name="default", duration="2562048h")
    response = admin_client.post("/nodepools/default/", {**data, "action": "save"})
    assert response.status_code == 400
    assert "invalid duration &#x27;2562048h&#x27;: longer than 2562047h47m16s, Go&#x27;s largest" in (
        response.content.decode()
    )
    assert models.NodePool.objects.get(name="default").spec["disruption"]["budgets"] == [{"nodes": "10%"}]


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {arch}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {arch}}}}}
  template:
    metadata: {{labels: {{app: {arch}}}}}
    spec:
      nodeSelector: {{kubernetes.io/arch: {arch}}}
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def _empty_node_in_each_of_two_pools():
    """Two NodePools (amd64 and arm64) with one node each, both nodes empty after the scale-down."""
    ok("apply", "-f", str(EXAMPLES / "provisioning" / "nodepool.yaml"))
    other = (EXAMPLES / "provisioning" / "nodepool.yaml").read_text().split("---")[1]
    ok("apply", "-f", "-", stdin=other.replace("  name: default\n", "  name: other\n", 1).replace("amd64", "arm64"))
    ok("apply", "-f", "-", stdin=DEPLOYMENT.format(arch="amd64") + "---\n" + DEPLOYMENT.format(arch="arm64"))
    ok("advance", "30s")
    assert sorted(r["NAME"].rsplit("-", 1)[0] for r in table("get", "nodeclaims")) == ["default", "other"]
    ok("scale", "deploy/amd64", "--replicas", "0")
    ok("scale", "deploy/arm64", "--replicas", "0")


def test_an_error_evaluating_one_nodepool_is_reported_on_it_and_the_other_nodepools_node_is_still_disrupted(
    lab, monkeypatch
):
    _empty_node_in_each_of_two_pools()
    real = budgets.budget_active

    def failing(budget, now):
        if budget.nodes == "7":
            raise OverflowError("date value out of range")
        return real(budget, now)

    monkeypatch.setattr(budgets, "budget_active", failing)
    row = models.NodePool.objects.get(name="other")
    models.NodePool.objects.filter(pk=row.pk).update(
        spec={**row.spec, "disruption": {**row.spec["disruption"], "budgets": [{"nodes": "7"}]}}
    )
    ok("advance", "60s")
    commands = json.loads(ok("get", "disruptioncommands", "-o", "json"))["items"]
    assert [(c["spec"]["reason"], c["spec"]["nodepools"]) for c in commands] == [("Empty", ["default"])]
    events = json.loads(ok("get", "events", "-o", "json"))["items"]
    warnings = [e for e in events if e["involvedObject"]["kind"] == "NodePool" and e["type"] == "Warning"]
    assert {(e["involvedObject"]["name"], e["reason"]) for e in warnings} == {("other", "NodePoolValidationFailed")}
    assert warnings[0]["message"] == "disruption cannot evaluate this NodePool: OverflowError: date value out of range"
    status = json.loads(ok("get", "nodepool", "other", "-o", "json"))["status"]
    condition = next(c for c in status["conditions"] if c["type"] == "ValidationSucceeded")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "NodePoolValidationFailed",
        "disruption cannot evaluate this NodePool: OverflowError: date value out of range",
    )
    healthy = json.loads(ok("get", "nodepool", "default", "-o", "json"))["status"]
    assert [c["type"] for c in healthy["conditions"] if c["status"] != "True"] == []
    # Once it can be evaluated again, it is disrupted as well, and its condition turns True.
    monkeypatch.setattr(budgets, "budget_active", real)
    ok("advance", "60s")
    commands = json.loads(ok("get", "disruptioncommands", "-o", "json"))["items"]
    assert sorted(c["spec"]["nodepools"][0] for c in commands) == ["default", "other"]
    status = json.loads(ok("get", "nodepool", "other", "-o", "json"))["status"]
    assert next(c for c in status["conditions"] if c["type"] == "ValidationSucceeded")["status"] == "True"
