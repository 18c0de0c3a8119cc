"""/metrics: the cluster's state for Prometheus, read at scrape time, optionally behind a bearer token."""

from prometheus_client.parser import text_string_to_metric_families

from tests.karp import EXAMPLES, ok


def scrape(client, **headers):
    response = client.get("/metrics", **headers)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_metrics_report_nodepool_usage_limits_cost_pending_pods_and_commands(client, lab):
    ok("apply", "-f", str(EXAMPLES / "limits"))
    ok("advance", "60s")  # four c-4x on-demand in the capped pool (16 CPU), two pods wait

    values = scrape(client)  # no login needed: it changes nothing and holds no secrets

    assert values["karpenter_nodepools_usage", (("nodepool", "capped"), ("resource_type", "cpu"))] == 16.0
    assert values["karpenter_nodepools_limit", (("nodepool", "capped"), ("resource_type", "cpu"))] == 16.0
    assert values["karpui_nodeclaims", (("nodepool", "capped"),)] == 4.0
    assert values["karpui_nodepool_cost_dollars_per_hour", (("nodepool", "capped"),)] == round(4 * 0.10859, 6)
    assert values["karpenter_scheduler_unschedulable_pods_count", ()] == 2.0
    assert values["karpui_disruption_paused", ()] == 0.0


def test_a_configured_token_is_required(client, lab, settings):
    settings.KARPUI_METRICS_TOKEN = "s3cret-scrape-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    values = scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-scrape-token")
    assert values["karpenter_scheduler_unschedulable_pods_count", ()] == 0.0


def test_commands_waiting_for_a_person_are_counted_by_phase(client, lab):
    from tests.integration.test_dashboard import awaiting_command

    awaiting_command()
    assert scrape(client)["karpui_disruption_commands", (("phase", "AwaitingApproval"),)] == 1.0
