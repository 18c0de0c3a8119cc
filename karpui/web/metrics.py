"""`/metrics` for Prometheus: the cluster's state read from the database at scrape time, with Karpenter's metric
names where Karpenter has one and `karpui_` where the number is ours (cost, savings, the human gate)."""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from karpui import models, requests
from provisioner.quantity import parse_resources


class ClusterCollector(Collector):
    """Reads every value when scraped, so each web process reports the same numbers without shared state. Every
    series carries a `cluster` label (and `mode`, on karpui_cluster_info): one karpui reports all its clusters."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        clusters = list(models.Cluster.objects.order_by("name"))  # a scrape reads; it never makes a cluster
        info = GaugeMetricFamily(
            "karpui_cluster_info", "The clusters karpui manages, by mode.", labels=["cluster", "mode"]
        )
        usage = GaugeMetricFamily(
            "karpenter_nodepools_usage",
            "Resources the NodePool's NodeClaims hold.",
            labels=["cluster", "nodepool", "resource_type"],
        )
        limit = GaugeMetricFamily(
            "karpenter_nodepools_limit", "The NodePool's spec.limits.", labels=["cluster", "nodepool", "resource_type"]
        )
        claims = GaugeMetricFamily("karpui_nodeclaims", "NodeClaims per NodePool.", labels=["cluster", "nodepool"])
        # Karpenter v1.10's metric: every NodePool's cost, 0 for one with no NodeClaims, gone with the NodePool.
        cost_total = GaugeMetricFamily(
            "karpenter_nodepools_cost_total",
            "Total cost of the nodepool from Karpenter's perspective (the offering prices its NodeClaims launched at, "
            "NodeOverlays' price changes included), $/h. Not an authoritative source for billing.",
            labels=["cluster", "nodepool"],
        )
        cost = GaugeMetricFamily(
            "karpui_nodepool_cost_dollars_per_hour",
            "Sum of the NodeClaims' offering prices.",
            labels=["cluster", "nodepool"],
        )
        saved = GaugeMetricFamily(
            "karpui_consolidation_saved_dollars_per_hour",
            "Price difference of the executed consolidation commands.",
            labels=["cluster", "nodepool"],
        )
        pending = GaugeMetricFamily(
            "karpenter_scheduler_unschedulable_pods_count", "Pods the scheduler could not place.", labels=["cluster"]
        )
        commands = GaugeMetricFamily(
            "karpui_disruption_commands",
            "Disruption commands by phase (AwaitingApproval waits for a person).",
            labels=["cluster", "phase"],
        )
        paused = GaugeMetricFamily(
            "karpui_disruption_paused", "1 while voluntary disruption is paused.", labels=["cluster"]
        )
        for cluster in clusters:
            name = cluster.name
            info.add_metric([name, cluster.mode], 1)
            last = (cluster.cost_state or {}).get("last") or {}
            for row in models.NodePool.objects.filter(cluster=cluster).order_by("name"):
                for resource, amount in sorted(parse_resources((row.status or {}).get("resources") or {}).items()):
                    usage.add_metric([name, row.name, resource_type(resource)], _base(amount))
                for resource, amount in sorted(parse_resources((row.spec or {}).get("limits") or {}).items()):
                    limit.add_metric([name, row.name, resource_type(resource)], _base(amount))
                cost_total.add_metric([name, row.name], last[row.name]["value"][0] if row.name in last else 0.0)
            for pool, entry in sorted(last.items()):
                cost_per_hour, count, saved_per_hour = entry["value"]
                claims.add_metric([name, pool], count)
                cost.add_metric([name, pool], cost_per_hour)
                saved.add_metric([name, pool], saved_per_hour)
            unschedulable = models.KubeObject.objects.filter(cluster=cluster, kind="Pod", unschedulable=True).count()
            pending.add_metric([name], unschedulable)
            phases = (
                models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand")
                .values("phase")
                .annotate(n=Count("id"))
                .order_by("phase")
            )
            for row in phases:
                commands.add_metric([name, row["phase"]], row["n"])
            paused.add_metric([name], int(cluster.is_paused(cluster.clock)))
        yield from (info, usage, limit, cost_total, claims, cost, saved, pending, commands, paused)
        errors = CounterMetricFamily(
            "karpui_http_internal_errors",
            "Requests that failed inside karpui (answered 500 with a request id, logged with it), in every web process "
            "sharing the cache (Redis when REDIS_URL is set; else this process's).",
        )
        errors.add_metric([], requests.internal_errors())
        yield errors


def resource_type(resource: str) -> str:
    """The resource_type label as Karpenter writes it: lower case, dashes as underscores (ephemeral_storage)."""
    return resource.lower().replace("-", "_")


def _base(milli: int) -> float:
    """Prometheus wants base units (cores, bytes, pods), not our milli-units."""
    return milli / 1000


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(ClusterCollector())


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Open unless KARPUI_METRICS_TOKEN is set; then a scraper sends `Authorization: Bearer <token>`."""
    token = settings.KARPUI_METRICS_TOKEN
    if token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return HttpResponse("a bearer token is required\n", status=401, content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
