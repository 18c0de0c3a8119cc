"""`/metrics` for Prometheus: the cluster's state read from the database at scrape time, with Karpenter's metric
names, labels and values where Karpenter has one (its NodePool, node and pod metrics) and `karpui_` where the
number is ours (cost, savings, the human gate)."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from karpui import models, requests
from provisioner import labels as wk
from provisioner.cluster.objects import parse_timestamp
from provisioner.manifests.pod import pod_from_manifest
from provisioner.quantity import MILLI, add, parse_resources


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
        yield from state_metrics(clusters)
        errors = CounterMetricFamily(
            "karpui_http_internal_errors",
            "Requests that failed inside karpui (answered 500 with a request id, logged with it), in every web process "
            "sharing the cache (Redis when REDIS_URL is set; else this process's).",
        )
        errors.add_metric([], requests.internal_errors())
        yield errors


# Karpenter's v1.WellKnownLabels (with the kwok and AWS providers' own) as the node metrics' label names: the part
# after the slash, lower case, dashes as underscores (metrics/node/controller.go getWellKnownLabels). Keys that come
# to the same name (both providers' instance-family) share one label: whichever the node has.
WELL_KNOWN = sorted(
    {key.split("/")[1].lower().replace("-", "_") for key in wk.WELL_KNOWN_LABELS if key.count("/") == 1}
)
NODE_LABELS = ["cluster", *WELL_KNOWN, "node_name", "phase", "managed"]
# metrics/pod/controller.go labelNames
POD_LABELS = [
    "cluster",
    "name",
    "namespace",
    "owner",
    "node",
    "scheduled",
    "nodepool",
    "zone",
    "arch",
    "capacity_type",
    "instance_type",
    "phase",
    "ready",
    "managed",
]


def state_metrics(clusters: list[models.Cluster]) -> Iterator[GaugeMetricFamily]:
    """Karpenter's node and pod metrics (pkg/controllers/metrics/node and pod), from the Nodes, NodeClaims and Pods
    stored for each cluster, at its clock."""
    by_resource = [*NODE_LABELS, "resource_type"]
    families = {
        "allocatable": GaugeMetricFamily(
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            labels=by_resource,
        ),
        "requests": GaugeMetricFamily(
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
            labels=by_resource,
        ),
        "daemon": GaugeMetricFamily(
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
            labels=by_resource,
        ),
        "overhead": GaugeMetricFamily(
            "karpenter_nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the "
            "node's capacity and allocatable values are reported by the status.",
            labels=by_resource,
        ),
    }
    lifetime = GaugeMetricFamily("karpenter_nodes_current_lifetime_seconds", "Node age in seconds", labels=NODE_LABELS)
    utilization = GaugeMetricFamily(
        "karpenter_cluster_utilization_percent",
        "Utilization of allocatable resources by pod requests",
        labels=["cluster", "resource_type"],
    )
    pod_state = GaugeMetricFamily(
        "karpenter_pods_state",
        "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod "
        "name, namespace, owner, node, whether the pod is scheduled, nodepool name, zone, architecture, capacity "
        "type, instance type, pod phase, pod readiness, and whether the node is Karpenter-managed.",
        labels=POD_LABELS,
    )
    unstarted = GaugeMetricFamily(
        "karpenter_pods_unstarted_time_seconds",
        "The time from pod creation until the pod is running.",
        labels=["cluster", "name", "namespace"],
    )
    unbound = GaugeMetricFamily(
        "karpenter_pods_unbound_time_seconds",
        "The time from pod creation until the pod is bound.",
        labels=["cluster", "name", "namespace", "dynamic_resources"],
    )
    for cluster in clusters:
        _cluster_state(cluster, families, lifetime, utilization, pod_state, unstarted, unbound)
    yield from (*families.values(), lifetime, utilization, pod_state, unstarted, unbound)


def _bodies(cluster: models.Cluster, kind: str) -> list[dict[str, Any]]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind=kind).order_by("namespace", "name")
    return list(rows.values_list("body", flat=True))


def _cluster_state(
    cluster: models.Cluster,
    families: dict[str, GaugeMetricFamily],
    lifetime: GaugeMetricFamily,
    utilization: GaugeMetricFamily,
    pod_state: GaugeMetricFamily,
    unstarted: GaugeMetricFamily,
    unbound: GaugeMetricFamily,
) -> None:
    now = cluster.clock.timestamp()
    nodes = {n["metadata"]["name"]: n for n in _bodies(cluster, "Node")}
    claims = {
        c["status"]["providerID"]: c for c in _bodies(cluster, "NodeClaim") if (c.get("status") or {}).get("providerID")
    }
    pods = _bodies(cluster, "Pod")
    # StateNode.PodRequests and DaemonSetRequests: every pod bound to the node that has not finished.
    requests: dict[str, dict[str, int]] = {}
    daemon: dict[str, dict[str, int]] = {}
    for body in pods:
        node = (body.get("spec") or {}).get("nodeName")
        if not node or node not in nodes or (body.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            pod = pod_from_manifest(body)
        except ValueError:
            continue  # a pod karpui cannot read is left out of every count, as the engine leaves it out
        requests[node] = add(requests.get(node, {}), pod.requests)
        if pod.is_daemonset_pod():
            daemon[node] = add(daemon.get(node, {}), pod.requests)
    allocatable_total: dict[str, int] = {}
    requested_total: dict[str, int] = {}
    for name, node in sorted(nodes.items()):
        status = node.get("status") or {}
        claim = claims.get((node.get("spec") or {}).get("providerID"))
        labels = [cluster.name, *_well_known(node), name, status.get("phase", ""), _bool(claim is not None)]
        allocatable = parse_resources(status.get("allocatable") or {})
        series = {
            "allocatable": allocatable,
            "requests": requests.get(name, {}),
            "daemon": daemon.get(name, {}),
            # resources.Subtract: over the capacity's resources only
            "overhead": {
                k: v - allocatable.get(k, 0) for k, v in parse_resources(status.get("capacity") or {}).items()
            },
        }
        for family, resources in series.items():
            for resource, amount in sorted(resources.items()):
                families[family].add_metric([*labels, resource_type(resource)], _value(resource, amount))
        created = node["metadata"].get("creationTimestamp")
        lifetime.add_metric(labels, now - parse_timestamp(created) if created else 0.0)
        allocatable_total = add(allocatable_total, _state_allocatable(node, claim))
        requested_total = add(requested_total, requests.get(name, {}))
    # buildClusterUtilizationMetric: requests over allocatable, by each resource some node has any of.
    for resource, amount in sorted(allocatable_total.items()):
        if _whole(amount) == 0:
            continue
        used = requested_total.get(resource, 0)
        share = used / amount if resource == "cpu" else _whole(used) / _whole(amount)
        utilization.add_metric([cluster.name, resource_type(resource)], 100 * share)
    for body in pods:
        _pod_metrics(cluster.name, now, body, nodes, pod_state, unstarted, unbound)


def _pod_metrics(
    cluster: str,
    now: float,
    body: dict[str, Any],
    nodes: dict[str, dict[str, Any]],
    pod_state: GaugeMetricFamily,
    unstarted: GaugeMetricFamily,
    unbound: GaugeMetricFamily,
) -> None:
    """makeLabels, recordPodStartupMetric and recordPodBoundMetric for one pod, as the pod controller would have
    left them by now."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    name, namespace = meta["name"], meta.get("namespace", "")
    owners = meta.get("ownerReferences") or []
    owner = (
        f"/apis/{owners[0].get('apiVersion', '')}/namespaces/{namespace}/{owners[0].get('kind', '').lower()}s/"
        f"{owners[0].get('name', '')}"
        if owners
        else ""
    )
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    node_name = spec.get("nodeName") or ""
    node_labels = ((nodes.get(node_name) or {}).get("metadata") or {}).get("labels") or {}
    phase = status.get("phase") or ""
    pod_state.add_metric(
        [
            cluster,
            name,
            namespace,
            owner,
            node_name,
            _bool(bool(node_name)),
            node_labels.get(wk.NODEPOOL, ""),
            node_labels.get(wk.ZONE, ""),
            node_labels.get(wk.ARCH, ""),
            node_labels.get(wk.CAPACITY_TYPE, ""),
            node_labels.get(wk.INSTANCE_TYPE, ""),
            phase,
            _bool(ready),
            _bool(bool(node_labels.get(wk.NODEPOOL))),
        ],
        1,
    )
    created = meta.get("creationTimestamp")
    age = now - parse_timestamp(created) if created else 0.0
    if phase == "Pending" or (phase == "Running" and not ready):
        unstarted.add_metric([cluster, name, namespace], age)  # deleted once Ready, or terminal
    scheduled = conditions.get("PodScheduled") or {}
    if phase == "Pending":
        dynamic = _bool(_has_dra_requirements(spec))
        if scheduled.get("status") != "True":
            unbound.add_metric([cluster, name, namespace, dynamic], age)
        elif scheduled.get("lastTransitionTime") and created:
            # Bound but not running: Karpenter stops updating the gauge, which keeps its value from the bind.
            bound = parse_timestamp(scheduled["lastTransitionTime"]) - parse_timestamp(created)
            unbound.add_metric([cluster, name, namespace, dynamic], bound)


def _has_dra_requirements(spec: dict[str, Any]) -> bool:
    """podutils.HasDRARequirements: pod-level resource claims, or any container's."""
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return bool(spec.get("resourceClaims")) or any((c.get("resources") or {}).get("claims") for c in containers)


def _well_known(node: dict[str, Any]) -> list[str]:
    """The node's value for each of WELL_KNOWN ("" where it has none)."""
    values: dict[str, str] = {}
    for key, value in sorted(((node.get("metadata") or {}).get("labels") or {}).items()):
        if key in wk.WELL_KNOWN_LABELS and key.count("/") == 1 and value:
            values.setdefault(key.split("/")[1].lower().replace("-", "_"), value)
    return [values.get(label, "") for label in WELL_KNOWN]


def _state_allocatable(node: dict[str, Any], claim: dict[str, Any] | None) -> dict[str, int]:
    """StateNode.Allocatable: an uninitialized managed Node's allocatable with its NodeClaim's filling what it
    reports as zero."""
    allocatable = parse_resources((node.get("status") or {}).get("allocatable") or {})
    initialized = ((node.get("metadata") or {}).get("labels") or {}).get(wk.INITIALIZED) == "true"
    if claim is None or initialized:
        return allocatable
    from_claim = parse_resources((claim.get("status") or {}).get("allocatable") or {})
    return {**from_claim, **{name: amount for name, amount in allocatable.items() if amount}}


def _whole(milli: int) -> int:
    """Quantity.Value(): whole units, rounded up."""
    return -(-milli // MILLI)


def _value(resource: str, milli: int) -> float:
    """The node metrics' value: cores for CPU (MilliValue()/1000), whole units (Value()) for the rest."""
    return milli / MILLI if resource == "cpu" else float(_whole(milli))


def _bool(value: bool) -> str:
    return "true" if value else "false"


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
