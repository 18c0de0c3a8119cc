"""What a NodePool change would do, computed before saving: pods that would (stop being able to) schedule, pending
and future pods that would launch on another NodePool, nodes that would drift and what would replace them, limits
already exceeded, and the cost per hour before and after.

A web process keeps the lab it last previewed (one cluster, for READ_LAB_SECONDS after its last use) and brings it
up to date from the change log, as the warm engine does: a person previews one change after another, and loading
2,000 pods' manifests for each cost most of a preview.
"""

from __future__ import annotations

import dataclasses
import difflib
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import yaml

from karpui import models
from karpui.clusters import configuration, lab, store, warm
from provisioner import labels as wk
from provisioner.apimachinery.apply import LAST_APPLIED
from provisioner.controllers.provisioning import HASH_VERSION, nodepool_hash, scheduling_input
from provisioner.disruption.budgets import schedule_parses
from provisioner.disruption.drift import drift_reason
from provisioner.lab import Lab
from provisioner.manifests.errors import ManifestError
from provisioner.manifests.pod import pod_from_spec
from provisioner.objects import NodePool
from provisioner.pods import Pod, PodAffinityTerm
from provisioner.quantity import format_quantity, parse_resources
from provisioner.scheduling.results import SchedulingResult
from provisioner.scheduling.rounds import solve_rounds
from provisioner.scheduling.scheduler import SchedulingInput, solve
from provisioner.selectors import LabelSelector


def nodepool_diff(row: models.NodePool | None, proposed: dict[str, Any]) -> str:
    current = store.nodepool_manifest(row) if row else {}
    return manifest_diff(current, proposed, "current", "proposed")


# What the server writes into a manifest on its own: not a person's change, so no line of a diff.
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def manifest_diff(before: Any, after: Any, before_name: str = "before", after_name: str = "after") -> str:
    """A unified diff of two manifests (or any two JSON values) as YAML, leaving out status and what the server
    writes; nothing before (a creation) is all added, nothing after (a deletion) all removed."""
    lines = []
    for manifest in (before, after):
        if isinstance(manifest, dict) and manifest:
            manifest = {k: v for k, v in manifest.items() if k not in ("status", LAST_APPLIED)}
            if isinstance(manifest.get("metadata"), dict):
                metadata = {k: v for k, v in manifest["metadata"].items() if k not in SERVER_FIELDS}
                if isinstance(metadata.get("annotations"), dict):
                    metadata["annotations"] = {k: v for k, v in metadata["annotations"].items() if k != LAST_APPLIED}
                manifest["metadata"] = metadata
        lines.append(yaml.safe_dump(manifest, sort_keys=True).splitlines() if manifest else [])
    return "\n".join(difflib.unified_diff(lines[0], lines[1], before_name, after_name, lineterm=""))


def over_limits(proposed: NodePool, current: NodePool | None, usage: Mapping[str, int]) -> list[dict[str, str]]:
    """Limits this change sets (new or changed) that the NodePool's NodeClaims already exceed. A limit left as it
    was is not news: whatever it blocks, it blocked before the edit. Karpenter never removes nodes for a limit, so
    a pool over it keeps its nodes and launches nothing more."""
    before = current.limits if current is not None else {}
    return [
        {"resource": name, "usage": format_quantity(usage[name], name), "limit": format_quantity(limit, name)}
        for name, limit in sorted(proposed.limits.items())
        if usage.get(name, 0) > limit and before.get(name) != limit
    ]


def unreadable_budgets(nodepool: NodePool) -> list[dict[str, Any]]:
    """Budgets whose schedule the CRD's loose pattern let through but Karpenter's cron parser cannot read. Karpenter
    fails closed on them (Budget.IsActive errors, GetAllowedDisruptions gives 0): the NodePool then allows no
    disruption for the budget's reasons, and only a log line says why. Numbered from 1, as a person counts them."""
    return [
        {
            "number": number,
            "schedule": budget.schedule,
            "reasons": ", ".join(budget.reasons) if budget.reasons is not None else "any reason",
        }
        for number, budget in enumerate(nodepool.budgets, start=1)
        if budget.schedule is not None and budget.duration is not None and not schedule_parses(budget.schedule)
    ]


def _scheduled(result: SchedulingResult) -> set[str]:
    return {p.uid for nc in result.new_nodeclaims for p in nc.pods} | {
        p.uid for ps in result.placements.values() for p in ps
    }


def _price(claim: dict[str, Any]) -> float:
    return float((claim["metadata"].get("annotations") or {}).get("karpui.dev/price", 0) or 0)


READ_LAB_SECONDS = 600.0


@dataclasses.dataclass
class _ReadLab:
    cluster: int
    lab: Lab
    version: int
    key: tuple[Any, ...]
    used: float


_read_lab: list[_ReadLab] = []  # at most one: the memory a lab holds is the whole cluster's
_read_lock = threading.Lock()  # one preview at a time in a process: it borrows the lab and changes its NodePools


@contextmanager
def _reading(cluster: models.Cluster) -> Iterator[Lab]:
    """The cluster's lab as it is now, for a preview that writes nothing: kept from the last preview and caught up
    from the change log where it can be, else loaded (and kept)."""
    with _read_lock:
        kept = _read_lab[0] if _read_lab else None
        fresh = kept is not None and kept.cluster == cluster.pk and time.monotonic() - kept.used < READ_LAB_SECONDS
        if kept is not None and fresh and cluster.compacted_resource_version <= kept.version:
            running = kept.lab
            warm.catch_up(cluster, running.store, kept.version)
            key = configuration.config_key(cluster)
            if key != kept.key or running.store.kind_version("DRAConfig") != running.declared_from:
                running.reconfigure(configuration.lab_config(cluster))
        else:
            _read_lab.clear()
            running = lab.load(cluster)
            warm.catch_up(cluster, running.store, cluster.resource_version)
            key = configuration.config_key(cluster)
        running.begin_run(cluster.clock.timestamp())
        _read_lab[:] = [_ReadLab(cluster.pk, running, running.store.resource_version, key, time.monotonic())]
        pools = list(running.ctx.nodepools)
        try:
            yield running
        finally:
            running.ctx.nodepools = pools  # the preview put its changed NodePool in


def forget_read_lab() -> None:
    """Drop the kept lab (tests that rewrite rows behind the change log's back)."""
    with _read_lock:
        _read_lab.clear()


def preview(cluster: models.Cluster, nodepool: NodePool) -> dict[str, Any]:
    with _reading(cluster) as running:
        return _preview(running, nodepool)


def _preview(running: Lab, nodepool: NodePool) -> dict[str, Any]:
    """The change's effect on the cluster as it is now.

    Drift is simulated as its end state: every NodeClaim of the pool that the change drifts is gone, and its pods
    are scheduled (with the pending pods, by the real scheduler, under the changed NodePool) onto the remaining
    nodes first, then onto new NodeClaims. The cost after counts those NodeClaims' cheapest offerings instead of the
    drifted nodes' prices. Karpenter replaces drifted nodes one at a time, so on the way there may briefly be more
    nodes; consolidation then packs them as this simulation does.

    Both sides run as many provisioning rounds as change anything (`solve_rounds`): a raised limit that one round
    fills pessimistically (each NodeClaim counted as its largest option) is filled by what launched, as the
    provisioner does over its next batches.
    """
    ctx = running.ctx
    running.manager.overlays.reconcile(ctx, write=False)  # the NodeOverlays' prices, as the controllers see them
    unbound = ctx.api.list("Pod", fields={"spec.nodeName": ""})
    pending = [pod for _, pod in ctx.views.readable(unbound) if pod.is_provisionable()]
    future = future_pods(ctx)
    # One input a side, its NodePools' offers shared by its solves: a NodePool's instance-type index is built once
    # per offer, not once per solve (it was most of a preview).
    asked = scheduling_input(ctx, pending)
    before = solve_rounds(asked)
    future_before = _future_nodepools(asked, future)
    current = next((np for np in ctx.nodepools if np.name == nodepool.name), None)
    ctx.nodepools = [*(np for np in ctx.nodepools if np.name != nodepool.name), nodepool]
    running.manager.overlays.reconcile(ctx, write=False)  # an overlay may reach the changed NodePool differently
    claims = ctx.api.list("NodeClaim")
    types = ctx.instance_types_for(nodepool) or []
    drifting, gone, drifted_cost = [], set(), 0.0
    for claim in claims:
        labels = claim["metadata"].get("labels") or {}
        if labels.get("karpenter.sh/nodepool") != nodepool.name or claim["metadata"].get("deletionTimestamp"):
            continue
        reason = drift_reason(
            nodepool, nodepool_hash(nodepool), claim["metadata"].get("annotations") or {}, labels, types, HASH_VERSION
        )
        if reason:
            node = (claim.get("status") or {}).get("nodeName") or claim["metadata"]["name"]
            drifting.append({"node": node, "reason": reason, "price": _price(claim)})
            gone |= {node, claim["metadata"]["name"]}
            drifted_cost += _price(claim)
    moving = [
        pod
        for obj in ctx.api.list("Pod")
        if (obj.get("spec") or {}).get("nodeName") in gone and (pod := ctx.views.pod(obj)).is_reschedulable()
    ]
    request = scheduling_input(ctx, [*pending, *moving])
    after = solve_rounds(dataclasses.replace(request, nodes=[n for n in request.nodes if n.name not in gone]))
    future_after = _future_nodepools(request, future)
    now_cost = sum(_price(c) for c in claims)
    scheduled_before, scheduled_after = _scheduled(before), _scheduled(after)
    names = {p.uid: p.key for p in [*pending, *moving]}
    waiting, moved = {p.uid for p in pending}, {p.uid for p in moving}
    usage = parse_resources((running.nodepool_status().get(nodepool.name) or {}).get("resources") or {})
    return {
        "over_limits": over_limits(nodepool, current, usage),
        "unreadable_budgets": unreadable_budgets(nodepool),
        "newly_schedulable": sorted(names[u] for u in (scheduled_after - scheduled_before) & waiting),
        "newly_unschedulable": sorted(names[u] for u in (scheduled_before - scheduled_after) & waiting),
        # Pods of drifted nodes that no node, old or new, could take: drift would leave them pending.
        "stranded": sorted(p.key for p in moving if p.uid not in scheduled_after),
        "drifting": drifting,
        "replacements": sum(1 for nc in after.new_nodeclaims if any(p.uid in moved for p in nc.pods)),
        "cost_before": now_cost + sum(nc.cheapest.price for nc in before.new_nodeclaims),
        "cost_after": now_cost - drifted_cost + sum(nc.cheapest.price for nc in after.new_nodeclaims),
        "new_nodeclaims_after": [
            (nc.nodepool, nc.cheapest.instance_type.name, len(nc.pods)) for nc in after.new_nodeclaims
        ],
        "pending_moves": _moves(_nodepool_of(before), _nodepool_of(after), pending),
        "future_moves": [
            {"workload": label, "before": future_before.get(pod.uid, ""), "after": future_after.get(pod.uid, "")}
            for label, pod in future
            if future_before.get(pod.uid, "") != future_after.get(pod.uid, "")
        ],
    }


def _nodepool_of(result: SchedulingResult) -> dict[str, str]:
    """The NodePool each pod would launch a NodeClaim of ("" for a pod placed on a node that exists)."""
    return {pod.uid: plan.nodepool for plan in result.new_nodeclaims for pod in plan.pods}


def _moves(before: Mapping[str, str], after: Mapping[str, str], pending: list[Pod]) -> list[dict[str, Any]]:
    """Pending pods that would launch on another NodePool after the change, by owner: how many, from where to
    where (a pod of no NodeClaim either side, placed on a node or left pending, is no move)."""
    moved: dict[tuple[str, str, str], list[str]] = {}
    for pod in pending:
        was, now = before.get(pod.uid, ""), after.get(pod.uid, "")
        if was and now and was != now:
            owner = f"{pod.owner.kind} {pod.namespace}/{pod.owner.name}" if pod.owner else f"pods in {pod.namespace}"
            moved.setdefault((owner, was, now), []).append(pod.key)
    return [
        {"owner": owner, "before": was, "after": now, "count": len(pods), "pods": sorted(pods)[:5]}
        for (owner, was, now), pods in sorted(moved.items())
    ]


WHAT_IF_LABEL = "karpui.dev/what-if"


def future_pods(ctx: Any) -> list[tuple[str, Pod]]:
    """One pod as each workload would make it next (its template), labelled and kept apart from the others by
    required hostname anti-affinity, so each gets a NodeClaim of its own: the NodePool it would come from is the
    one that workload's next pods launch on."""
    pods = []
    for kind in ("Deployment", "StatefulSet", "ReplicaSet", "Job"):
        for obj in ctx.api.list(kind):
            meta = obj["metadata"]
            owners = meta.get("ownerReferences") or []
            if kind == "ReplicaSet" and any(o.get("kind") == "Deployment" for o in owners):
                continue  # its Deployment speaks for it
            template = (obj.get("spec") or {}).get("template") or {}
            labels = {**((template.get("metadata") or {}).get("labels") or {}), WHAT_IF_LABEL: str(len(pods))}
            try:
                pod = pod_from_spec(
                    template.get("spec") or {}, "spec.template.spec", namespace=meta.get("namespace", ""), labels=labels
                )
            except ManifestError:
                continue
            apart = PodAffinityTerm(wk.HOSTNAME, LabelSelector.parse(WHAT_IF_LABEL))
            pod = dataclasses.replace(
                pod,
                name=f"{meta['name']}-next",
                uid=f"what-if/{kind}/{meta.get('namespace', '')}/{meta['name']}",
                anti_affinity=(*pod.anti_affinity, apart),
                unschedulable=True,
            )
            pods.append((f"{kind} {meta.get('namespace', '')}/{meta['name']}", pod))
    return pods


def _future_nodepools(asked: SchedulingInput, future: list[tuple[str, Pod]]) -> dict[str, str]:
    """Where each workload's next pod would launch a NodeClaim, on an empty cluster (nodes that exist fill and go;
    the NodePool order, requirements, taints and limits are what decide)."""
    if not future:
        return {}
    return _nodepool_of(solve(dataclasses.replace(asked, pods=[pod for _, pod in future], nodes=[], node_devices={})))
