"""Karpenter's pod-events controller: a NodeClaim's `lastPodEventTime` moves when the set of its node's
non-DaemonSet pods changes (a bind, a pod finishing or being deleted), unless it moved less than 10 s ago;
consolidateAfter counts from it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from provisioner.cluster.objects import parse_timestamp, timestamp
from provisioner.controllers.context import ClusterContext

# Karpenter's dedupeTimeout (nodeclaim/podevents/controller.go): a pod event within 10 s of the recorded one is not
# written, to spare the API server; consolidateAfter then counts from the first event of a burst. Pods deleted a
# few seconds after they were bound (a quick scale-down) leave their nodes consolidatable as if still bound.
DEDUPE_SECONDS = 10.0


class PodEventsController:
    """Remembers a digest of each node's pod set to notice changes between reconciles."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.pod_sets: dict[str, str] = dict(state.get("pod_sets") or {})
        self._seen: tuple[int, int] | None = None  # Pod and NodeClaim versions at the last run
        self._uids: dict[str, list[str]] = {}  # node -> the sorted pod uids its digest in pod_sets was made from

    def to_state(self) -> dict[str, Any]:
        return {"pod_sets": self.pod_sets}

    def reconcile(self, ctx: ClusterContext) -> bool:
        versions = (ctx.api.kind_version("Pod"), ctx.api.kind_version("NodeClaim"))
        if versions == self._seen:
            return False  # no pod or NodeClaim was written: no pod set can have changed
        changed = False
        by_node: dict[str, list[str]] = {}
        for pod in ctx.api.scan("Pod"):  # read only, and every pod: a cache's copies would cost more than the rest
            node = pod["spec"].get("nodeName")
            owners = pod["metadata"].get("ownerReferences") or []
            if (
                node
                and not any(
                    o.get("kind") == "DaemonSet" and o.get("apiVersion", "apps/v1") == "apps/v1" for o in owners
                )
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not pod["metadata"].get("deletionTimestamp")
            ):
                by_node.setdefault(node, []).append(pod["metadata"]["uid"])
        nodes = set()
        # Karpenter reads the pod's Node first and leaves the NodeClaim alone when it is not there
        # (podevents/controller.go Reconcile): the event is spent, not kept for when the Node appears.
        existing = {node["metadata"]["name"] for node in ctx.api.scan("Node")}
        for claim in ctx.api.list("NodeClaim"):
            node = (claim.get("status") or {}).get("nodeName")
            if not node:
                continue
            nodes.add(node)
            uids = sorted(by_node.get(node, []))
            if node in self.pod_sets and self._uids.get(node) == uids:
                continue  # the same pods as when its digest was made
            self._uids[node] = uids
            digest = hashlib.sha256(json.dumps(uids).encode()).hexdigest()[:16]
            if self.pod_sets.get(node) != digest:
                last = claim["status"].get("lastPodEventTime")
                recent = last is not None and ctx.now - parse_timestamp(last) < DEDUPE_SECONDS
                if (node in self.pod_sets or by_node.get(node)) and not recent and node in existing:
                    claim["status"]["lastPodEventTime"] = timestamp(ctx.now)
                    ctx.api.update(claim)
                    changed = True
                self.pod_sets[node] = digest
        # Nodes whose NodeClaim is gone are never looked at again: a warm engine (and its saved state) would
        # otherwise keep every node it ever saw.
        self.pod_sets = {node: digest for node, digest in self.pod_sets.items() if node in nodes}
        self._uids = {node: uids for node, uids in self._uids.items() if node in nodes}
        self._seen = (ctx.api.kind_version("Pod"), ctx.api.kind_version("NodeClaim"))
        return changed
