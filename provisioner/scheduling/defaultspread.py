"""Cluster default topology spread constraints on pods without their own, with the selector kube-scheduler deduces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from provisioner.cluster.api import ClusterReader
from provisioner.cluster.objects import Obj
from provisioner.pods import OwnerReference, Pod, TopologySpreadConstraint
from provisioner.selectors import LabelSelector

# The controllers kube-scheduler's helper.DefaultSelector reads a selector from (defaultconstraints.go:39), by
# (group, kind): anything else (a Job, a DaemonSet, a custom resource) contributes nothing.
REPLICATION_CONTROLLER = ("", "ReplicationController")
REPLICA_SET = ("apps", "ReplicaSet")
STATEFUL_SET = ("apps", "StatefulSet")
_VERSIONS = {REPLICATION_CONTROLLER: "v1", REPLICA_SET: "v1", STATEFUL_SET: "v1"}

Selector = dict[str, Any]  # a metav1.LabelSelector: matchLabels and matchExpressions, each only when not empty


@dataclass(frozen=True, slots=True)
class _Owner:
    """What a pod's controller adds (ownerContribution): a ReplicationController's labels overwrite the Services'
    (labels.Merge), a ReplicaSet's or StatefulSet's expressions are ANDed on (selector.Add)."""

    match_labels: Mapping[str, str]
    match_expressions: tuple[Mapping[str, Any], ...]


def _group_version(api_version: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion: `v1` is the core group, `group/version` a named one; more slashes are an error."""
    if not api_version:
        return ("", "")
    parts = api_version.split("/")
    if len(parts) == 1:
        return ("", parts[0])
    if len(parts) == 2:
        return (parts[0], parts[1])
    return None


class DefaultSpreadInjector:
    """Karpenter's DefaultTopologySpreadInjector for one pass over the pods about to be scheduled: it reads each
    namespace's Services and each controller once, and deduces a selector once per (namespace, controller, labels)."""

    def __init__(self, api: ClusterReader) -> None:
        self.api = api
        self._services: dict[str, list[Obj]] = {}
        self._owners: dict[str, _Owner | None] = {}
        self._selectors: dict[tuple[str, str, tuple[tuple[str, str], ...]], Selector | None] = {}

    def inject(self, pods: Sequence[Pod], defaults: Sequence[TopologySpreadConstraint]) -> list[Pod]:
        """Inject (defaultconstraints.go:111): a pod with no constraints of its own gets every default, each with its
        deduced selector; a pod with any of its own, or none deducible, is left as it is (all or nothing, as the
        PodTopologySpread plugin does). The pods are scheduling copies: nothing is written back."""
        if not defaults:
            return list(pods)
        result = []
        for pod in pods:
            selector = None if pod.spread else self.selector(pod)
            if selector is None:
                result.append(pod)
                continue
            parsed = LabelSelector.from_spec(selector)
            result.append(replace(pod, spread=tuple(replace(c, selector=parsed) for c in defaults)))
        return result

    def selector(self, pod: Pod) -> Selector | None:
        """The selector kube-scheduler deduces for the pod (getDefaultSelector), None when it deduces none."""
        owner = _controller(pod)
        key = (pod.namespace, owner.uid if owner else "", tuple(sorted(pod.labels.items())))
        if key not in self._selectors:
            self._selectors[key] = self._deduce(pod, owner)
        return self._selectors[key]

    def _deduce(self, pod: Pod, owner: OwnerReference | None) -> Selector | None:
        """helper.DefaultSelector (defaultconstraints.go:174): every Service in the pod's namespace that selects it
        merged as labels, then its controller's selector. Empty means none: an empty selector would count every pod."""
        match_labels: dict[str, str] = {}
        for service in self._namespace_services(pod.namespace):
            chosen = (service.get("spec") or {}).get("selector")
            if chosen is None:  # a nil selector selects nothing; an empty one everything, but adds no label
                continue
            if all(pod.labels.get(k) == v for k, v in chosen.items()):
                match_labels.update(chosen)  # a key two Services set takes the later one's value, as labels.Merge
        expressions: list[Mapping[str, Any]] = []
        contribution = self._owner(pod.namespace, owner) if owner is not None else None
        if contribution is not None:
            match_labels.update(contribution.match_labels)
            expressions.extend(contribution.match_expressions)
        if not match_labels and not expressions:
            return None
        selector: Selector = {}
        if match_labels:
            selector["matchLabels"] = match_labels
        if expressions:
            selector["matchExpressions"] = expressions
        return selector

    def _namespace_services(self, namespace: str) -> list[Obj]:
        if namespace not in self._services:
            self._services[namespace] = list(self.api.list("Service", namespace=namespace))
        return self._services[namespace]

    def _owner(self, namespace: str, owner: OwnerReference) -> _Owner | None:
        """resolveOwnerContribution (defaultconstraints.go:255), cached by the controller's uid; a controller that is
        gone, or of another kind, adds nothing (Karpenter logs and goes on without it, as kube-scheduler does)."""
        if owner.uid not in self._owners:
            self._owners[owner.uid] = self._resolve(namespace, owner)
        return self._owners[owner.uid]

    def _resolve(self, namespace: str, owner: OwnerReference) -> _Owner | None:
        group_version = _group_version(owner.api_version)
        if group_version is None:
            return None
        group, version = group_version
        kind = (group, owner.kind)
        if _VERSIONS.get(kind) != version:
            return None
        found = self.api.get(owner.kind, owner.name, namespace)
        if found is None:
            return None
        spec = found.get("spec") or {}
        if kind == REPLICATION_CONTROLLER:
            labels = spec.get("selector") or {}
            return _Owner(dict(labels), ()) if labels else None
        return _Owner({}, _expressions(spec.get("selector")))


def _controller(pod: Pod) -> OwnerReference | None:
    """metav1.GetControllerOfNoCopy: only an owner reference marked as the controller counts."""
    return pod.owner if pod.owner is not None and pod.owner.controller else None


def _expressions(selector: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], ...]:
    """requirementsFrom (defaultconstraints.go:292): each matchLabels entry as a one-value In, then the expressions
    as written (labels sorted by key, where Go takes them in map order)."""
    if selector is None:
        return ()
    labels = selector.get("matchLabels") or {}
    as_in = [{"key": k, "operator": "In", "values": [labels[k]]} for k in sorted(labels)]
    return (*as_in, *(dict(e) for e in selector.get("matchExpressions") or ()))
