"""The human gate over a real Karpenter (observe mode): hold its voluntary disruption in the NodePools a person gates,
and release exactly what a person approved, using only what Karpenter honours.

* **Hold.** A gated NodePool (approval mode manual, auto-below or dry-run) carries a budget of `nodes: "0"` for every
  reason, added by karpui (`provisioner.disruption.holds`): Karpenter proposes nothing there (it says so with a
  `DisruptionBlocked` event on the NodePool), and karpui proposes instead, simulating Karpenter's decision on the
  NodePool's own budgets. A pause holds every NodePool, gated or not, with a budget scheduled to end when the pause
  does. Which way the gate fails while karpui is down is a setting (`HoldOptions.fail_open`): closed, the hold has no
  schedule and stays; open, it is a lease karpui renews, which ends by itself `lease_seconds` after karpui's last
  renewal.
* **Release.** An approved command is not carried out by karpui: it is released to Karpenter. First every other node
  of its NodePools gets `karpenter.sh/do-not-disrupt: "true"` (marked `karpui.dev/held-by`, so karpui takes away only
  what it put), so the approved candidates are the only ones Karpenter may pick; once those annotations are seen,
  the hold lets the command's reason through, and a scheduled budget brings it back by itself at the release's end.
  Karpenter then decides on its own within that room, validates for 15 s, taints, replaces and drains as it always
  does. When it has taken every candidate (the disrupted taint, a DisruptionReason, a deleting NodeClaim) or the
  release ends, the hold comes back first and the annotations go after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from provisioner.cluster.conditions import is_true
from provisioner.cluster.objects import Conflict, Obj, parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext
from provisioner.disruption.holds import (
    FROM_THEN_ON,
    GATE_ANNOTATION,
    HELD_BY,
    REASONS,
    Hold,
    HoldOptions,
    Recorded,
    budgets_with,
    ceil_minute,
    floor_minute,
    own_budgets,
    whole_minutes,
)
from provisioner.labels import APPROVAL_MODE, DO_NOT_DISRUPT, NODEPOOL
from provisioner.scheduling.logs import LogRecord
from provisioner.taints import has_disrupted_taint

# The approval modes under which karpui, not Karpenter, decides a NodePool's voluntary disruption.
GATED_MODES = ("manual", "auto-below", "dry-run")
DISRUPTION_REASON = "DisruptionReason"
LOGGER = "controller.disruption.gate"


def is_gated(manifest: Mapping[str, Any]) -> bool:
    """Whether a NodePool manifest's approval mode hands its voluntary disruption to karpui's gate."""
    mode = ((manifest.get("metadata") or {}).get("annotations") or {}).get(APPROVAL_MODE, "auto")
    return mode in GATED_MODES


@dataclass(frozen=True)
class Release:
    """An approved command released to Karpenter: its reason, the gated NodePools it opens, its candidates, until."""

    command: str
    reason: str
    pools: frozenset[str]
    nodes: frozenset[str]
    until: float


def open_releases(ctx: ClusterContext) -> list[Release]:
    found = []
    for command in ctx.api.list("DisruptionCommand", fields={"status.phase": "Executing"}):
        release = command["status"].get("release") or {}
        if release.get("open"):
            found.append(
                Release(
                    command["metadata"]["name"],
                    str(release["reason"]),
                    frozenset(release.get("pools") or ()),
                    frozenset(c["node"] for c in command["spec"]["candidates"]),
                    parse_timestamp(release["until"]),
                )
            )
    return found


def reconcile(ctx: ClusterContext) -> bool:
    """Bring every NodePool's holds and every node's release marks to what the gate, the pauses and the open
    releases say now. A write that meets a newer version of its object (409) is tried again at the next round."""
    releases = open_releases(ctx)
    marked = _nodes_to_mark(ctx, releases)
    ready = {r.command for r in releases if all(_marked(ctx.api.get("Node", n)) for n in marked.get(r.command, ()))}
    changed = False
    for manifest in ctx.api.list("NodePool"):
        try:
            changed |= _hold(ctx, manifest, [r for r in releases if r.command in ready])
        except Conflict:
            changed = True
    return _mark_nodes(ctx, marked) or changed


# NodePools ----------------------------------------------------------------------------------------------------------


def wanted_holds(ctx: ClusterContext, manifest: Obj, releases: Iterable[Release]) -> list[Hold]:
    """The holds a NodePool should carry now."""
    name = manifest["metadata"]["name"]
    recorded = Recorded.of(manifest)
    previous = {h.why: h for h in recorded.holds}
    options: HoldOptions = ctx.holding
    holds = []
    if is_gated(manifest):
        released = sorted({r.reason for r in releases if name in r.pools})
        reasons = () if not released else tuple(r for r in REASONS if r not in released)
        start, seconds = None, None
        if options.fail_open:
            lease = whole_minutes(options.lease_seconds)
            before = previous.get("gate")
            # Renewed once half the lease has passed: a NodePool write every few minutes, not every tick.
            if before is not None and before.start is not None and ctx.now < before.start + lease / 2:
                start = before.start
            else:
                start = floor_minute(ctx.now)
            seconds = lease
        holds.append(Hold("gate", reasons, start, seconds))
        for reason in released:
            # The reason is held again from the release's end, by Karpenter's clock, whatever karpui does by then.
            until = max(r.until for r in releases if name in r.pools and r.reason == reason)
            length = whole_minutes(options.lease_seconds) if options.fail_open else FROM_THEN_ON
            holds.append(Hold("release", (reason,), ceil_minute(until), length))
    if ctx.paused:
        before = previous.get("pause")
        start = before.start if before is not None and before.start is not None else floor_minute(ctx.now)
        holds.append(Hold("pause", (), start, whole_minutes(ctx.paused_until - start)))
    return holds


def _hold(ctx: ClusterContext, manifest: Obj, releases: list[Release]) -> bool:
    recorded = Recorded.of(manifest)
    spec = manifest.get("spec") or {}
    current = list((spec.get("disruption") or {}).get("budgets") or [])
    holds = wanted_holds(ctx, manifest, releases)
    wanted = budgets_with(own_budgets(current, recorded), holds)
    annotations = dict(manifest["metadata"].get("annotations") or {})
    if holds:
        annotations[GATE_ANNOTATION] = Recorded(tuple(holds), tuple(h.budget() for h in holds)).annotation()
    else:
        annotations.pop(GATE_ANNOTATION, None)
    if wanted == current and annotations == (manifest["metadata"].get("annotations") or {}):
        return False
    updated = {
        **manifest,
        "metadata": {**manifest["metadata"], "annotations": annotations},
        "spec": {**spec, "disruption": {**(spec.get("disruption") or {}), "budgets": wanted}},
    }
    ctx.api.update(updated, spec_changed=wanted != current)
    ctx.log(
        LogRecord(
            "held nodepool" if holds else "released nodepool",
            {"NodePool": {"name": manifest["metadata"]["name"]}, "holds": [h.to_record() for h in holds]},
            logger=LOGGER,
        )
    )
    return True


def relaxed(manifest: Obj | None) -> bool:
    """Whether a NodePool's gate hold, as last written, lets some reason through (a release is open)."""
    if manifest is None or not is_gated(manifest):
        return False
    return any(h.why == "gate" and h.reasons for h in Recorded.of(manifest).holds)


# Nodes --------------------------------------------------------------------------------------------------------------


def _marked(node: Obj | None) -> bool:
    """A node Karpenter will not pick: gone, or carrying do-not-disrupt (karpui's or its owner's)."""
    return node is None or (node["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"


def _nodes_to_mark(ctx: ClusterContext, releases: list[Release]) -> dict[str, set[str]]:
    """Per open release, the nodes of its NodePools that must carry do-not-disrupt: every one but the candidates of
    any open release (two releases in one NodePool must not hold each other's candidates)."""
    candidates = {n for r in releases for n in r.nodes}
    pools = {p for r in releases for p in r.pools}
    by_pool: dict[str, set[str]] = {}
    for node in ctx.api.list("Node"):
        pool = (node["metadata"].get("labels") or {}).get(NODEPOOL)
        if pool in pools and node["metadata"]["name"] not in candidates:
            by_pool.setdefault(pool, set()).add(node["metadata"]["name"])
    return {r.command: {n for p in r.pools for n in by_pool.get(p, ())} for r in releases}


def _mark_nodes(ctx: ClusterContext, marked: Mapping[str, set[str]]) -> bool:
    """Put karpui's do-not-disrupt on the nodes open releases need held, and take it off the others once their
    NodePool's hold is whole again (the hold comes back before the annotation goes)."""
    wanted: dict[str, set[str]] = {}
    for command, names in marked.items():
        for name in names:
            wanted.setdefault(name, set()).add(command)
    changed = False
    for node in ctx.api.list("Node"):
        meta = node["metadata"]
        name, annotations = meta["name"], meta.get("annotations") or {}
        mine = HELD_BY in annotations
        if name in wanted:
            if annotations.get(DO_NOT_DISRUPT) == "true" and not mine:
                continue  # its owner's do-not-disrupt already holds it, and stays theirs
            held_by = ",".join(sorted(wanted[name]))
            if annotations.get(HELD_BY) != held_by or annotations.get(DO_NOT_DISRUPT) != "true":
                ctx.api.patch(
                    "Node", name, "", {"metadata": {"annotations": {DO_NOT_DISRUPT: "true", HELD_BY: held_by}}}
                )
                changed = True
        elif mine and not relaxed(ctx.api.get("NodePool", (meta.get("labels") or {}).get(NODEPOOL, ""))):
            ctx.api.patch("Node", name, "", {"metadata": {"annotations": {DO_NOT_DISRUPT: None, HELD_BY: None}}})
            changed = True
    return changed


# Commands -----------------------------------------------------------------------------------------------------------


def release(ctx: ClusterContext, command: Obj) -> None:
    """Hand an approved command to Karpenter: from the next round, the gate lets its reason through for its
    candidates alone, until `release_seconds` from now."""
    spec, status = command["spec"], command["status"]
    pools = sorted(
        {
            c["nodepool"]
            for c in spec["candidates"]
            if (pool := ctx.api.get("NodePool", c["nodepool"])) is not None and is_gated(pool)
        }
    )
    until = ctx.now + ctx.holding.release_seconds
    status.update(
        phase="Executing",
        startedAt=timestamp(ctx.now),
        replacementNodeClaims=[],
        release={"open": True, "reason": spec["reason"], "pools": pools, "until": timestamp(until), "taken": []},
        message=f"released to Karpenter until {timestamp(until)}: waiting for it to disrupt "
        + ", ".join(c["node"] for c in spec["candidates"]),
    )
    ctx.log(
        LogRecord(
            "released command to karpenter",
            {"command": spec["text"], "nodepools": pools, "until": timestamp(until)},
            logger=LOGGER,
        )
    )


def taken(ctx: ClusterContext, candidate: Mapping[str, Any]) -> bool:
    """Whether Karpenter has begun disrupting a candidate: its node tainted `karpenter.sh/disrupted`, its NodeClaim
    carrying a DisruptionReason, deleting, or gone."""
    claim = ctx.api.get("NodeClaim", candidate["nodeclaim"])
    if claim is None or claim["metadata"].get("deletionTimestamp") or is_true(claim, DISRUPTION_REASON):
        return True
    node = ctx.api.get("Node", candidate["node"])
    return node is None or has_disrupted_taint(node)


def follow(ctx: ClusterContext, command: Obj) -> tuple[str, str] | None:
    """Follow a released command through Karpenter's hands: the phase it ends in and why, or None while it goes on
    (or goes back to Approved to wait out a pause). The command is changed in place; the caller writes it."""
    status, candidates = command["status"], command["spec"]["candidates"]
    state = status["release"]
    took = set(state.get("taken") or ())
    took |= {c["node"] for c in candidates if taken(ctx, c)}
    if sorted(took) != list(state.get("taken") or ()):
        state["taken"] = sorted(took)
        status["message"] = f"Karpenter is disrupting {', '.join(sorted(took))}"
        said = karpenter_said(ctx, sorted(took))
        if said:
            state["karpenter"] = said
    if state.get("open"):
        if ctx.paused and not took:
            state["open"] = False
            paused = f"waiting: voluntary disruption is paused until {timestamp(ctx.paused_until)}"
            status.update(phase="Approved", message=paused)
            status.pop("release")
            return None
        if len(took) == len(candidates) or ctx.now >= parse_timestamp(state["until"]):
            state.update(open=False, closedAt=timestamp(ctx.now))
            if not took:
                words = karpenter_said(ctx, [c["node"] for c in candidates], latest=True)
                return "Failed", (
                    f"Karpenter did not disrupt {', '.join(c['node'] for c in candidates)} within "
                    f"{ctx.holding.release_seconds}s of the release"
                    + (f"; its last word on them: {'; '.join(words)}" if words else "")
                )
        return None
    gone = [c for c in candidates if c["node"] in took and ctx.api.get("NodeClaim", c["nodeclaim"]) is None]
    back = [c["node"] for c in candidates if c["node"] in took and not taken(ctx, c)]
    if back:
        return "Failed", f"Karpenter gave {', '.join(back)} back without disrupting them"
    if len(gone) < len(took):
        return None
    left = [c["node"] for c in candidates if c["node"] not in took]
    return "Succeeded", "Karpenter disrupted " + ", ".join(sorted(took)) + (
        f"; it left {', '.join(left)} (not taken before the release ended)" if left else ""
    )


# What Karpenter's events say of a command's nodes: its decision, or why it made none.
TOLD = ("ConsolidationCandidate", "DisruptionTerminating", "ConsolidationRejected", "Unconsolidatable",
        "DisruptionBlocked")  # fmt: skip


def karpenter_said(ctx: ClusterContext, nodes: list[str], *, latest: bool = False) -> list[str]:
    """Karpenter's own Events about `nodes` (its source is `karpenter`), newest first: the command it formed
    ("Consolidation candidate: Underutilized/…: replace: …"), or with `latest` only the newest of each node."""
    wanted = set(nodes)
    said = []
    for event in ctx.api.list("Event"):
        involved = event.get("involvedObject") or {}
        if (
            involved.get("kind") == "Node"
            and involved.get("name") in wanted
            and (event.get("source") or {}).get("component") == "karpenter"
            and event.get("reason") in TOLD
        ):
            said.append((event.get("lastTimestamp") or "", involved["name"], f"{event['reason']}: {event['message']}"))
    said.sort(reverse=True)
    told: list[str] = []
    for _, node, message in said:
        if latest and any(line.startswith(f"{node}: ") for line in told):
            continue
        told.append(f"{node}: {message}")
    return told[:5]
