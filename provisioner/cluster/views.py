"""Stored objects as the engine's domain values (Pods, Nodes), parsed once per object version."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from provisioner.cluster.api import ClusterReader
from provisioner.cluster.conditions import is_true
from provisioner.cluster.objects import Obj, parse_timestamp
from provisioner.labels import INITIALIZED, REGISTERED
from provisioner.manifests.pod import pod_from_manifest
from provisioner.nodes import Node
from provisioner.pods import Pod
from provisioner.quantity import Resources, parse_resources
from provisioner.taints import Taint


class UnreadablePod(ValueError):
    """A stored pod karpui cannot read (a field its parser refuses): skipped by whoever lists pods, reported once."""


class Views:
    """Caches parsed pods by uid and resourceVersion: most objects do not change between steps. When only a pod's
    status or node changes (the common case: bound, started, marked unschedulable), the parse of its spec is
    kept and only the status is read again."""

    def __init__(self) -> None:
        # uid -> (resourceVersion, the object, why it cannot be read): kept until the pod changes or goes, so it is
        # reported once (an Event on it, a log record) and every controller skips it, never stopping for it.
        self.unreadable: dict[str, tuple[str | None, Obj, str]] = {}
        self.reported: set[tuple[str, str | None]] = set()
        self._pods: dict[str, tuple[str | None, Pod]] = {}
        # uid -> (the spec without nodeName, the namespace and labels it was parsed with, the spec's view)
        self._specs: dict[str, tuple[tuple[str, dict[str, Any], dict[str, str]], Pod]] = {}

    def pod(self, obj: Obj) -> Pod:
        meta = obj["metadata"]
        uid = meta["uid"]
        cached = self._pods.get(uid)
        if cached is not None and cached[0] == meta.get("resourceVersion"):
            return cached[1]
        created = parse_timestamp(meta["creationTimestamp"]) if meta.get("creationTimestamp") else 0.0
        spec = obj.get("spec") or {}
        shape = (
            meta.get("namespace") or "default",
            {key: value for key, value in spec.items() if key != "nodeName"},
            dict(meta.get("labels") or {}),
        )
        known = self._specs.get(uid)
        spec_view = known[1] if known is not None and known[0] == shape else None
        try:
            pod = pod_from_manifest(obj, created=created, spec_view=spec_view)
        except ValueError as error:  # ManifestError, QuantityError: a field karpui cannot read
            self.unreadable[uid] = (meta.get("resourceVersion"), obj, str(error))
            raise UnreadablePod(f"pod {meta.get('namespace', 'default')}/{meta.get('name')}: {error}") from None
        self.unreadable.pop(uid, None)
        # The newest version's shape, even when equal to the one kept: the kept one's spec belongs to an older object
        # the cache has let go of, which it would otherwise hold on to (a copy of every pod's spec, at thousands).
        self._specs[uid] = (shape, pod)
        self._pods[uid] = (meta.get("resourceVersion"), pod)
        return pod

    def readable(self, objs: Iterable[Obj]) -> Iterator[tuple[Obj, Pod]]:
        """Each pod with its view, leaving out those that cannot be read (kept in `unreadable`)."""
        for obj in objs:
            try:
                yield obj, self.pod(obj)
            except UnreadablePod:
                continue

    def unreported(self) -> list[tuple[Obj, str]]:
        """Unreadable pods not reported yet at their current version: each is reported once."""
        fresh = []
        for uid, (version, obj, error) in self.unreadable.items():
            if (uid, version) not in self.reported:
                self.reported.add((uid, version))
                fresh.append((obj, error))
        return fresh

    def forget(self, uid: str) -> None:
        """Drop a deleted pod's cached views (a long-running engine would otherwise keep every pod it ever saw)."""
        self._pods.pop(uid, None)
        self._specs.pop(uid, None)
        self.unreadable.pop(uid, None)

    def pods_by_node(self, store: ClusterReader) -> dict[str, list[Pod]]:
        result: dict[str, list[Pod]] = {}
        known = self._pods
        # Read, never changed: the store's own objects (a cache's `list` would copy every pod), in `list`'s order.
        bound = sorted((obj for obj in store.scan("Pod") if obj["spec"].get("nodeName")), key=pod_order)
        for obj in bound:
            node = obj["spec"]["nodeName"]
            # `pod`'s cache hit, inline: this runs for every bound pod each time a snapshot is built.
            meta = obj["metadata"]
            cached = known.get(meta["uid"])
            if cached is not None and cached[0] == meta.get("resourceVersion"):
                pod = cached[1]
            else:
                try:
                    pod = self.pod(obj)
                except UnreadablePod:
                    continue
            result.setdefault(node, []).append(pod)
        return result


def unbound_pods(store: ClusterReader) -> list[Obj]:
    """The pods bound to no node, in `list`'s order: `list("Pod", fields={"spec.nodeName": ""})` without the copies a
    cache's `list` makes, for callers that only read them (every step, while thousands wait)."""
    return sorted((obj for obj in store.scan("Pod") if not (obj.get("spec") or {}).get("nodeName")), key=pod_order)


def pod_order(obj: Obj) -> tuple[str, str]:
    """Where `list` puts a pod: by namespace, then name."""
    return (obj["metadata"].get("namespace") or "default", obj["metadata"]["name"])


def node_view(obj: Obj, pods: list[Pod], nodeclaim: Obj | None, *, under_consolidate_after: bool = False) -> Node:
    """A Node for the scheduler; a Karpenter node counts as initialized once its Node carries the initialized label."""
    status = obj.get("status") or {}
    node_labels = labels = obj["metadata"].get("labels") or {}
    node_taints = taints = tuple(Taint.from_spec(t) for t in (obj.get("spec") or {}).get("taints") or [])
    if nodeclaim is not None and node_labels.get(REGISTERED) != "true":
        # Karpenter's StateNode.Labels and Taints (statenode.go:380, :406): until the Node is registered (its
        # NodeClaim synced onto it) the NodeClaim's are the ones that hold; the Node's own name stays its hostname.
        labels = {"kubernetes.io/hostname": obj["metadata"]["name"], **(nodeclaim["metadata"].get("labels") or {})}
        claim_taints = ((nodeclaim.get("spec") or {}).get("taints")) or []
        taints = tuple(Taint.from_spec(t) for t in claim_taints)
    startup = tuple(Taint.from_spec(t) for t in ((nodeclaim or {}).get("spec") or {}).get("startupTaints") or [])
    # Karpenter's StateNode.Initialized (statenode.go:449): the Node's label, not its NodeClaim's condition (the
    # label lands first, and a NodeClaim merely Registered still counts once it is there); a node karpui did not
    # launch is always initialized.
    initialized = node_labels.get(INITIALIZED) == "true" if nodeclaim is not None else True
    allocatable = parse_resources(status.get("allocatable") or {})
    capacity = parse_resources(status.get("capacity") or status.get("allocatable") or {})
    if not initialized and nodeclaim is not None:
        # Karpenter's StateNode.Allocatable and Capacity (statenode.go:459-491): until the node is initialized the
        # kubelet may still report an extended resource as zero (its device plugin not up yet), so the NodeClaim's
        # figures stand in for zero or missing ones; otherwise its pods would launch a second node.
        claimed = (nodeclaim or {}).get("status") or {}
        allocatable = _unzeroed(allocatable, parse_resources(claimed.get("allocatable") or {}))
        capacity = _unzeroed(capacity, parse_resources(claimed.get("capacity") or {}))
    return Node(
        name=obj["metadata"]["name"],
        labels=labels,
        allocatable=allocatable,
        capacity=capacity,
        taints=taints,
        startup_taints=startup,
        pods=tuple(pods),
        initialized=initialized,
        managed=nodeclaim is not None,
        nodepool=labels.get("karpenter.sh/nodepool", ""),
        # Karpenter's MarkedForDeletion: a command took it (the disrupted taint), or it or its NodeClaim is deleting.
        marked_for_deletion=bool(obj["metadata"].get("deletionTimestamp"))
        or bool((nodeclaim or {}).get("metadata", {}).get("deletionTimestamp"))
        or any(t.key == "karpenter.sh/disrupted" for t in node_taints),
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        under_consolidate_after=under_consolidate_after,
    )


def _unzeroed(reported: Resources, claimed: Resources) -> Resources:
    """The Node's resources with each zero or missing one the NodeClaim has a figure for taken from the NodeClaim."""
    return {**reported, **{name: value for name, value in claimed.items() if not reported.get(name)}}


def is_ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions")
    if not conditions:
        return True  # a static node manifest without conditions is taken as Ready
    return is_true(node, "Ready")
