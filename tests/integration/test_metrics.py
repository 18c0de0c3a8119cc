"""/metrics: the cluster's state for Prometheus, read at scrape time, optionally behind a bearer token."""

from prometheus_client.parser import text_string_to_metric_families

from tests.karp import EXAMPLES, ok
from tests.lab_manifests import nodepool


def scrape(client, **headers):
    """The scrape as {(name, ((label, value), ...)): value}, labels sorted; every series names its cluster."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def of(values, name, cluster="lab", **labels):
    return values[name, tuple(sorted({"cluster": cluster, **labels}.items()))]


def test_metrics_report_nodepool_usage_limits_cost_pending_pods_and_commands(client, lab):
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "60s")  # four c-4x on-demand in the capped pool (16 CPU), two pods wait

    values = scrape(client)  # no login needed: it changes nothing and holds no secrets

    assert of(values, "karpui_cluster_info", mode="lab") == 1.0
    assert of(values, "karpenter_nodepools_usage", nodepool="capped", resource_type="cpu") == 16.0
    assert of(values, "karpenter_nodepools_limit", nodepool="capped", resource_type="cpu") == 16.0
    assert of(values, "karpui_nodeclaims", nodepool="capped") == 4.0
    assert of(values, "karpui_nodepool_cost_dollars_per_hour", nodepool="capped") == round(4 * 0.10859, 6)
    assert of(values, "karpenter_scheduler_unschedulable_pods_count") == 2.0
    assert of(values, "karpui_disruption_paused") == 0.0


def test_a_configured_token_is_required(client, lab, settings):
    settings.KARPUI_METRICS_TOKEN = "s3cret-scrape-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    values = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert of(values, "karpenter_scheduler_unschedulable_pods_count") == 0.0


def test_commands_waiting_for_a_person_are_counted_by_phase(client, lab):
    from tests.integration.test_dashboard import awaiting_command

    awaiting_command()
    assert of(scrape(client), "karpui_disruption_commands", phase="AwaitingApproval") == 1.0


def test_every_cluster_is_reported_with_its_mode(client, lab):
    from karpui import models

    models.Cluster.objects.create(name="prod", mode=models.Cluster.Mode.OBSERVE)
    values = scrape(client)
    assert of(values, "karpui_cluster_info", cluster="prod", mode="observe") == 1.0
    assert of(values, "karpenter_scheduler_unschedulable_pods_count", cluster="prod") == 0.0


# Karpenter's NodePool metrics (pkg/controllers/metrics/nodepool/suite_test.go) ---------------------------------------

LIMITED = nodepool("limited", limits={"cpu": "10", "memory": "10Mi", "ephemeral-storage": "100Gi"})


def test_nodepool_limit_metrics_are_named_as_karpenters(client, lab):
    """should update the nodepool limit metrics (resource_type lower case, dashes as underscores)"""
    ok("apply", "-f", "-", stdin=LIMITED)
    values = scrape(client)
    assert {labels: v for (n, labels), v in values.items() if n == "karpenter_nodepools_limit"} == {
        (("cluster", "lab"), ("nodepool", "limited"), ("resource_type", "cpu")): 10.0,
        (("cluster", "lab"), ("nodepool", "limited"), ("resource_type", "ephemeral_storage")): 100 * 2**30,
        (("cluster", "lab"), ("nodepool", "limited"), ("resource_type", "memory")): 10 * 2**20,
    }


def test_the_nodepool_cost_is_its_nodeclaims_offering_prices(client, lab):
    """karpenter_nodepools_cost_total (v1.10): each NodePool's NodeClaims at their offering's price, 0 with none"""
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("apply", "-f", "-", stdin=LIMITED)
    ok("advance", "60s")  # four c-4x-amd64-linux on demand at $0.10859/h in the capped pool; nothing in limited
    values = scrape(client)
    assert of(values, "karpenter_nodepools_cost_total", nodepool="capped") == round(4 * 0.10859, 6)
    assert of(values, "karpenter_nodepools_cost_total", nodepool="limited") == 0.0


def test_a_deleted_nodepool_has_no_metrics(client, lab):
    """should delete the nodepool state metrics on nodepool delete"""
    ok("apply", "-f", "-", stdin=LIMITED)
    names = ("karpenter_nodepools_limit", "karpenter_nodepools_cost_total")
    assert {n for (n, labels) in scrape(client) if ("nodepool", "limited") in labels} == set(names)
    ok("delete", "nodepool", "limited")
    assert not [n for (n, labels) in scrape(client) if ("nodepool", "limited") in labels]
