"""Topology spread and pod (anti-)affinity: domain counts per group, and the domains a pod may still use.

Groups are deduplicated across pods (same kind, key, namespaces, selector, skew, filter) and owned by the pods
whose constraints they are. Inverse groups carry the required anti-affinity of pods already placed (or placed in
this pass) so that pods they select are kept out of their domains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from provisioner import labels as wk
from provisioner.pods import HONOR, PodAffinityTerm, TopologySpreadConstraint
from provisioner.requirements import Requirement, Requirements
from provisioner.selectors import LabelSelector, SelectorTerm
from provisioner.taints import Taint, Toleration, tolerates_all

SPREAD, AFFINITY, ANTI_AFFINITY = "spread", "affinity", "anti-affinity"


@dataclass(frozen=True)
class GroupKey:
    kind: str
    key: str
    namespaces: frozenset[str] | None  # None: every namespace
    selector: LabelSelector | None
    max_skew: int = 0
    min_domains: int | None = None
    node_filter: tuple[Requirements, ...] = ()  # spread with NodeAffinityPolicy=Honor: the owner's node affinity
    tolerations: tuple[Toleration, ...] | None = None  # spread with NodeTaintsPolicy=Honor


@dataclass
class TopologyGroup:
    spec: GroupKey
    counts: dict[str, int] = field(default_factory=dict)
    empty: set[str] = field(default_factory=set)
    owners: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return self.spec.key

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        spec = self.spec
        if spec.namespaces is not None and namespace not in spec.namespaces:
            return False
        return spec.selector is not None and spec.selector.matches(labels)

    def node_matches(self, requirements: Requirements, taints: Iterable[Taint]) -> bool:
        spec = self.spec
        if spec.node_filter and not any(requirements.compatible(term) for term in spec.node_filter):
            return False
        return spec.tolerations is None or tolerates_all(taints, spec.tolerations)

    def register(self, domain: str) -> None:
        if domain not in self.counts:
            self.counts[domain] = 0
            self.empty.add(domain)

    def record(self, domains: Iterable[str]) -> None:
        for domain in domains:
            self.counts[domain] = self.counts.get(domain, 0) + 1
            self.empty.discard(domain)

    def next_domains(
        self, self_selecting: bool, pod_domains: Requirement, node_domains: Requirement, eligible: set[str] | None
    ) -> Requirement:
        """The domains a pod may use on a node whose requirement on this key is `node_domains`."""
        if self.spec.kind == SPREAD:
            return self._next_spread(self_selecting, pod_domains, node_domains, eligible)
        if self.spec.kind == AFFINITY:
            return self._next_affinity(self_selecting, pod_domains, node_domains)
        return self._next_anti_affinity(pod_domains, node_domains)

    def allowed(self, self_selecting: bool, pod_domains: Requirement) -> set[str]:
        """Every domain some node could use for this pod now (a superset of any one node's answer)."""
        kind = self.spec.kind
        if kind == SPREAD:
            minimum = self._min_count(pod_domains, None)
            extra = 1 if self_selecting else 0
            return {
                d for d, c in self.counts.items() if pod_domains.has(d) and c + extra - minimum <= self.spec.max_skew
            }
        if kind == AFFINITY:
            matched = {d for d, c in self.counts.items() if c > 0 and pod_domains.has(d)}
            if not matched and self_selecting:
                return {d for d in self.counts if pod_domains.has(d)}  # bootstrap: any domain will do
            return matched
        return {d for d in self.empty if pod_domains.has(d)}

    def _candidates(self, node_domains: Requirement) -> list[str]:
        if node_domains.operator == "In":
            return sorted(d for d in node_domains.values if d in self.counts)
        return sorted(d for d in self.counts if node_domains.has(d))

    def _next_spread(
        self, self_selecting: bool, pod_domains: Requirement, node_domains: Requirement, eligible: set[str] | None
    ) -> Requirement:
        minimum = self._min_count(pod_domains, eligible)
        best, best_count = "", None
        for domain in self._candidates(node_domains):
            if eligible is not None and domain not in eligible:
                continue
            count = self.counts[domain] + (1 if self_selecting else 0)
            # kube-scheduler's rule: existing matches + self - global minimum <= maxSkew; the least-used valid domain wins.
            if count - minimum <= self.spec.max_skew and (best_count is None or count < best_count):
                best, best_count = domain, count
        return Requirement.in_values(self.key, best) if best else Requirement(self.key)

    def _min_count(self, pod_domains: Requirement, eligible: set[str] | None) -> int:
        if self.key == wk.HOSTNAME:
            return 0  # a new node is always a hostname with zero pods
        counts = [c for d, c in self.counts.items() if pod_domains.has(d) and (eligible is None or d in eligible)]
        if not counts or (self.spec.min_domains is not None and len(counts) < self.spec.min_domains):
            return 0
        return min(counts)

    def _next_affinity(self, self_selecting: bool, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        options = {d for d, c in self.counts.items() if c > 0 and pod_domains.has(d)}
        if not options and self_selecting:
            # Nothing matches yet but the pod matches itself: bootstrap in one domain, the node's own if it can.
            allowed = sorted(d for d in self.counts if pod_domains.has(d))
            preferred = [d for d in allowed if node_domains.has(d)]
            if preferred or allowed:
                options = {(preferred or allowed)[0]}
        return Requirement(self.key, frozenset(options))

    def _next_anti_affinity(self, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        if node_domains.operator == "In":
            options = {d for d in node_domains.values if d in self.empty and pod_domains.has(d)}
        else:
            options = {d for d in self.empty if pod_domains.has(d) and node_domains.has(d)}
        return Requirement(self.key, frozenset(options))


def spread_group_key(
    pod_namespace: str,
    pod_labels: Mapping[str, str],
    constraint: TopologySpreadConstraint,
    node_filter: tuple[Requirements, ...],
    tolerations: tuple[Toleration, ...],
) -> GroupKey:
    return GroupKey(
        kind=SPREAD,
        key=constraint.topology_key,
        namespaces=frozenset({pod_namespace}),
        selector=_with_match_label_keys(constraint.selector, constraint.match_label_keys, pod_labels),
        max_skew=constraint.max_skew,
        min_domains=constraint.min_domains,
        node_filter=node_filter if constraint.node_affinity_policy == HONOR else (),
        tolerations=tolerations if constraint.node_taints_policy == HONOR else None,
    )


def affinity_group_key(
    kind: str,
    pod_namespace: str,
    pod_labels: Mapping[str, str],
    term: PodAffinityTerm,
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> GroupKey:
    return GroupKey(
        kind=kind,
        key=term.topology_key,
        namespaces=term_namespaces(pod_namespace, term, namespace_labels),
        selector=_with_match_label_keys(term.selector, term.match_label_keys, pod_labels),
    )


def term_namespaces(
    pod_namespace: str, term: PodAffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]
) -> frozenset[str] | None:
    """Kubernetes' rule: explicit namespaces ∪ those the namespaceSelector picks; neither means the pod's own."""
    if term.namespace_selector is not None:
        if not term.namespace_selector.terms:
            return None  # an empty namespaceSelector selects every namespace
        chosen = {ns for ns, labels in namespace_labels.items() if term.namespace_selector.matches(labels)}
        return frozenset(chosen | set(term.namespaces))
    return term.namespaces or frozenset({pod_namespace})


def _with_match_label_keys(
    selector: LabelSelector | None, keys: tuple[str, ...], labels: Mapping[str, str]
) -> LabelSelector | None:
    if selector is None or not keys:
        return selector
    extra = tuple(SelectorTerm(k, "In", frozenset({labels[k]})) for k in keys if k in labels)
    return LabelSelector(selector.terms + extra)
