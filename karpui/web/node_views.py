"""A node's page: its pods, its lifecycle kept after it is gone, and why it is (not) being consolidated."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from karpui import models
from karpui.clusters import lab, store
from karpui.insight import drilldown
from karpui.insight.repair import node_repair
from karpui.kinds import printers
from karpui.web.views import _cluster
from karpui.writes import nodes
from provisioner.cluster.objects import parse_timestamp
from provisioner.controllers.snapshot import cluster_view
from provisioner.disruption.budgets import allowed_disruptions
from provisioner.disruption.candidates import build_candidates, consolidation_blockers
from provisioner.disruption.consolidation import compute
from provisioner.disruption.methods import balanced_verdict, describe, refusals, upper_bound
from provisioner.disruption.scoring import nodepool_totals
from provisioner.disruption.types import UNDERUTILIZED, Command
from provisioner.objects import NodePool

# A simulation is kept for its cluster revision, which any write moves on; the hour only bounds what the cache holds.
SIMULATION_KEPT_SECONDS = 3600


def why_not_consolidated(cluster: models.Cluster, node: str) -> tuple[dict[str, Any], datetime]:
    """`simulate_consolidation`'s answer and the cluster time it was simulated at, kept per node and cluster
    resourceVersion: at 20,000 pods a simulation takes seconds, and until something is written it cannot change,
    except for the consolidateAfter countdown, which counts down on the clock. A "not yet" waiting on that countdown
    is simulated again once it has run out, when the verdict may change."""
    digest = hashlib.sha256(f"{cluster.pk}/{cluster.resource_version}/{node}".encode()).hexdigest()
    key = f"node-why-not:{digest}"
    kept = cache.get(key)
    if kept is not None:
        why, simulated_at = kept
        countdown = why.get("countdown")
        if not countdown:
            return why, simulated_at
        left = countdown - (cluster.clock - simulated_at).total_seconds()
        if left > 0:
            return {**why, "countdown": left}, simulated_at
    why = simulate_consolidation(cluster, node)
    cache.set(key, (why, cluster.clock), SIMULATION_KEPT_SECONDS)
    return why, cluster.clock


def simulate_consolidation(cluster: models.Cluster, node: str) -> dict[str, Any]:
    """The engine's own answer for this node: blockers, countdowns, budget, and the single-node simulation."""
    running = lab.load(cluster)
    view, claimed = cluster_view(running.ctx)
    mine = next((c for c in claimed if c.name == node), None)
    if mine is None:
        return {"verdict": "not a karpui-managed node (no NodeClaim), or not registered yet", "reasons": []}
    pools = {np.name: np for np in running.ctx.nodepools}
    candidates, blocked = build_candidates(claimed, pools, view.pdbs, view.now)
    if node in blocked:
        return {"verdict": "blocked", "reasons": blocked[node]}
    candidate = next(c for c in candidates if c.name == node)
    pool = candidate.nodepool
    reasons = consolidation_blockers(mine, pool, candidate.is_empty)
    countdown = consolidate_after_left(running.store.get("NodeClaim", mine.nodeclaim), pool, view.now)
    budget = allowed_disruptions(pool, UNDERUTILIZED, claimed, view.now)
    if budget <= 0:
        reasons.append(f'the disruption budget of NodePool "{pool.name}" allows no more Underutilized disruptions now')
    if reasons:
        return {"verdict": "not yet", "reasons": reasons, "countdown": countdown, "budget": budget}
    totals = nodepool_totals(claimed, candidates)
    bound = upper_bound(candidate, totals)
    if bound is not None and not bound.approved:
        reason = f"Balanced: even deleting it {describe(bound)} in NodePool {pool.name}"
        return {"verdict": "kept", "reasons": [reason], "budget": budget}
    outcome = compute([candidate], view, "single", UNDERUTILIZED)
    if isinstance(outcome, Command):
        approved, scores = balanced_verdict(outcome, totals)
        if not approved:
            return {"verdict": "kept", "reasons": refusals(scores, "this move"), "budget": budget}
        said = [f"Balanced: this move {describe(s)} in NodePool {name}" for name, s in sorted(scores.items())]
        return {
            "verdict": f"would be consolidated: {outcome.decision}, saving ${outcome.savings:.4f}/h",
            "reasons": said,
            "budget": budget,
        }
    return {"verdict": "kept", "reasons": outcome, "budget": budget}


EXPLAINED = ("DisruptionBlocked", "Unconsolidatable")


def consolidate_after_left(claim: dict[str, Any] | None, pool: NodePool | None, now: float) -> float | None:
    """Seconds until consolidateAfter has passed since the claim's last pod event; None if it never will count."""
    last = ((claim or {}).get("status") or {}).get("lastPodEventTime")
    if not last or pool is None or pool.consolidate_after_seconds is None:
        return None
    return max(parse_timestamp(last) + pool.consolidate_after_seconds - now, 0.0)


def last_pass(cluster: models.Cluster, node: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What is known without simulating: what the last disruption pass said about the node and when (the
    controller keeps it: its DisruptionBlocked and Unconsolidatable events are told at most every 15 minutes, so an
    event's time is when a reason was first told, and a line 10 minutes old may no longer hold), each earlier event
    with its time, and how long until consolidateAfter lets consolidation consider it."""
    explained = ((cluster.lab_state or {}).get("disruption") or {}).get("explained") or {}
    at = explained.get("at")
    told = [
        {"message": e["message"], "last": e.get("lastTimestamp", ""), "count": e.get("count", 1)}
        for e in events
        if e["involvedObject"]["kind"] == "Node" and e["reason"] in EXPLAINED
    ]
    claim = (
        models.KubeObject.objects.filter(cluster=cluster, kind="NodeClaim", body__status__nodeName=node)
        .values_list("body", flat=True)
        .first()
    )
    pool = None
    if claim is not None:
        name = (claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
        row = models.NodePool.objects.filter(cluster=cluster, name=name).first()
        pool = store.nodepool_domain(row) if row else None
    return {
        "pass_at": datetime.fromtimestamp(at, UTC) if at is not None else None,
        "pass_age": cluster.clock.timestamp() - at if at is not None else None,
        "said": (explained.get("nodes") or {}).get(node, []) if at is not None else None,
        "events": told,
        "countdown": consolidate_after_left(claim, pool, cluster.clock.timestamp()) or None,
    }


def timeline(cluster: models.Cluster, node: str, claims: list[str] | None = None) -> list[dict[str, Any]]:
    """Everything recorded about the node and its NodeClaim (created and launched before the node had a name),
    oldest first; log records outlive the node itself."""
    claims = drilldown.claims_of_node(cluster, node) if claims is None else claims
    entries = drilldown.named_in_logs(cluster).filter(
        Q(named_claim__in=[node, *claims])
        | Q(named_node=node)
        | Q(fields__command__icontains=f"[{node}")
        | Q(fields__command__icontains=f" {node}]")
        | Q(fields__command__icontains=f", {node}")
    )
    return [e.as_dict() for e in entries.order_by("time", "id")[:200]]


def _events(cluster: models.Cluster, node: str, claims: list[str]) -> list[dict[str, Any]]:
    """The events of the node and of its NodeClaims, newest first."""
    return sorted(
        (
            row.body
            for row in models.KubeObject.objects.filter(cluster=cluster, kind="Event", node_name__in=[node, *claims])
        ),
        key=lambda e: (e.get("lastTimestamp", ""), e["involvedObject"]["kind"]),
        reverse=True,
    )


def _facts(cluster: models.Cluster, node: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    claim = drilldown.node_claim(cluster, node["metadata"]["name"])
    return {
        "facts": drilldown.node_facts(node=node, claim=claim),
        "repair": node_repair(cluster, node),
        **drilldown.pods_requested(pods, node),
    }


def _live(request: HttpRequest, cluster: models.Cluster, name: str, node: dict[str, Any], part: str) -> HttpResponse:
    """One of the page's live regions: the facts and actions, or what the last disruption pass said."""
    context: dict[str, Any] = {"cluster": cluster, "name": name, "node": node, "why": None}
    if part == "live":
        pods = drilldown.node_pods(cluster=cluster, node=name)
        context.update(_facts(cluster, node, pods), pods=pods, can_act=request.user.has_perm(nodes.PERMISSION))
        return render(request, "karpui/nodes/detail.html#node-live", context)
    events = _events(cluster, name, drilldown.claims_of_node(cluster, name))
    context["known"] = last_pass(cluster, name, events)
    return render(request, "karpui/nodes/detail.html#why", context)


def _yaml(node: dict[str, Any] | None) -> dict[str, Any]:
    """The Node's YAML for the fold at the foot of the page, as kubectl prints it less last-applied."""
    if node is None:
        return {}
    shown, last_applied = drilldown.shown_manifest(node)
    return {"yaml": printers.as_yaml(shown), "last_applied": last_applied}


@require_GET
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    """The page shows what the last disruption passes said about the node at once; simulating its consolidation
    (about 2 s at 20,000 pods) is a button, answered by htmx in place (or the whole page with ?why=1)."""
    cluster = _cluster(request)
    node = models.KubeObject.objects.filter(cluster=cluster, kind="Node", name=name).first()
    if node is None and (named := drilldown.node_of_claim(cluster, name)) and named != name:
        # A NodeClaim's name (a log record's link, a NodeClaim list): its node's page, whose name kwok makes longer.
        query = request.GET.urlencode()  # the cluster and anything else asked, as they came
        return redirect(reverse("node-detail", args=[named]) + (f"?{query}" if query else ""))
    wanted = node is not None and request.GET.get("why") == "1"
    if request.htmx and wanted:  # type: ignore[attr-defined]
        why, simulated_at = why_not_consolidated(cluster, name)
        context = {"cluster": cluster, "name": name, "node": node, "why": why, "simulated_at": simulated_at}
        return render(request, "karpui/nodes/detail.html#why", context)
    part = request.GET.get("part", "")
    if request.htmx and part in ("live", "why"):  # type: ignore[attr-defined]
        if node is None:  # gone since the page loaded: the regions say so and stop polling
            context = {"cluster": cluster, "name": name, "node": None, "why": None, "known": None}
            return render(request, f"karpui/nodes/detail.html#{'node-live' if part == 'live' else 'why'}", context)
        return _live(request, cluster, name, node.body, part)
    pods = drilldown.node_pods(cluster=cluster, node=name)
    commands = [
        c.body
        for c in models.KubeObject.objects.filter(cluster=cluster, kind="DisruptionCommand")
        if any(x["node"] == name for x in c.body["spec"]["candidates"])
    ]
    claims = drilldown.claims_of_node(cluster, name)
    events = _events(cluster, name, claims)
    history = timeline(cluster, name, claims)
    if node is None and not (pods or commands or events or history):
        # A node that existed keeps its page ("gone", with its record); a name nothing ever recorded is not a node.
        raise Http404(f'node "{name}" was never seen in cluster "{cluster.name}"')
    why, simulated_at = why_not_consolidated(cluster, name) if wanted else (None, cluster.clock)
    context = {
        "cluster": cluster,
        "name": name,
        "node": node.body if node else None,
        "pods": pods,
        **(_facts(cluster, node.body, pods) if node else {}),
        "can_act": request.user.has_perm(nodes.PERMISSION),
        "commands": commands,
        "timeline": history,
        "events": events,
        "known": last_pass(cluster, name, events) if node else None,
        **_yaml(node.body if node else None),
        "why": why,
        "simulated_at": simulated_at,
    }
    return render(request, "karpui/nodes/detail.html", context)
