"""The topology state of one simulation: groups, their counts, and the requirements they add for a pod."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from provisioner import labels as wk
from provisioner.nodes import Node
from provisioner.pods import Pod
from provisioner.requirements import Requirement, Requirements
from provisioner.scheduling.poddata import PodData, PodState
from provisioner.scheduling.topologydomains import DomainGroup
from provisioner.scheduling.topologygroup import (
    AFFINITY,
    ANTI_AFFINITY,
    SPREAD,
    GroupKey,
    TopologyGroup,
    affinity_group_key,
    spread_group_key,
)
from provisioner.taints import Taint


class TopologyError(Exception):
    """No domain satisfies a topology constraint; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Topology:
    def __init__(
        self,
        universe: Mapping[str, DomainGroup],
        nodes: Sequence[Node],
        namespace_labels: Mapping[str, Mapping[str, str]],
        moving: frozenset[str] = frozenset(),
    ) -> None:
        self._universe = dict(universe)
        self._nodes = nodes
        # Bound pods this simulation places again (a deleting node's) count where they land, not where they are
        # (Karpenter's Topology excludedPods).
        self._moving = moving
        self._namespace_labels = namespace_labels
        self._groups: dict[GroupKey, TopologyGroup] = {}
        self._inverse: dict[GroupKey, TopologyGroup] = {}
        self._owned: dict[str, list[TopologyGroup]] = {}
        self._inverse_owned: dict[str, list[TopologyGroup]] = {}
        self._independent: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
        # Existing pods with required anti-affinity keep matching pods out of their domains, a terminating one too:
        # Karpenter's cluster state forgets a pod's binding only once it is terminal or gone, and its
        # ForPodsWithAntiAffinity (cluster.go:252) yields every pod it still binds (topology.go:313).
        for node in nodes:
            for pod in node.anti_affinity_pods:
                if not pod.is_terminal() and pod.id not in self._moving:
                    self._add_inverse(pod, node.labels)

    # Ownership ------------------------------------------------------------------------------------------------

    def update(self, state: PodState, data: PodData) -> None:
        """(Re-)register the groups a pod owns, as currently relaxed."""
        pod = state.pod
        for group in self._owned.pop(pod.id, []):
            group.owners.discard(pod.id)
        keys: list[GroupKey] = []
        for constraint in state.spread:
            keys.append(spread_group_key(pod.namespace, pod.labels, constraint, data.node_filter, data.tolerations))
        for kind, terms in (
            (AFFINITY, [*pod.affinity, *state.preferred_affinity]),
            (ANTI_AFFINITY, [*pod.anti_affinity, *state.preferred_anti_affinity]),
        ):
            for term in terms:
                keys.append(affinity_group_key(kind, pod.namespace, pod.labels, term, self._namespace_labels))
        owned = []
        for key in keys:
            existing = self._groups.get(key)
            group = existing if existing is not None else self._new_group(key)
            self._groups[key] = group
            group.owners.add(pod.id)
            owned.append(group)
        self._owned[pod.id] = owned
        if pod.anti_affinity and pod.id not in self._inverse_owned:
            self._add_inverse(pod, None)

    def _blank_group(self, key: GroupKey) -> TopologyGroup:
        """A group knowing its domains, all at zero: see `_new_group`, without counting the nodes' pods."""
        return self._new_group(key, count_pods=False)

    def _new_group(self, key: GroupKey, *, count_pods: bool = True) -> TopologyGroup:
        """A group knowing every domain a pod under its node filter could use, and the pods already in each.

        Under NodeTaintsPolicy=Honor a NodePool's domain joins only if the pod tolerates the taints of a NodePool
        offering it (topologygroup.go NewTopologyGroup: ForEachDomain). An existing node's domain joins only if
        the node passes the filter (topology.go countDomains: tg.nodeFilter.Matches). Either way a domain the pods
        could never use, at zero pods, would otherwise hold the global minimum down and cap every other domain.
        """
        group = TopologyGroup(key)
        offered = self._universe.get(key.key)
        for tolerated in sorted(offered.tolerated(key.tolerations) if offered is not None else ()):
            group.register(tolerated)
        filtered = bool(key.node_filter) or key.tolerations is not None  # (anti-)affinity groups take every node
        for node in self._nodes:
            domain = node.labels.get(key.key)
            if domain is None:
                continue
            if filtered and not group.node_matches(Requirements.from_labels(node.labels), node.taints):
                continue
            group.register(domain)
            if not count_pods:
                continue
            matching = sum(1 for pod in node.pods if self._counts(pod) and group.selects(pod.namespace, pod.labels))
            if matching:
                group.counts[domain] += matching
                group.empty.discard(domain)
        return group

    def _counts(self, pod: Pod) -> bool:
        return not pod.is_terminal() and not pod.deleting and pod.id not in self._moving

    def _add_inverse(self, pod: Pod, node_labels: Mapping[str, str] | None) -> None:
        groups = []
        for term in pod.anti_affinity:
            key = affinity_group_key(ANTI_AFFINITY, pod.namespace, pod.labels, term, self._namespace_labels)
            group = self._inverse.get(key)
            if group is None:
                group = self._blank_group(key)
                self._inverse[key] = group
            group.owners.add(pod.id)
            if node_labels is not None and term.topology_key in node_labels:
                group.record([node_labels[term.topology_key]])
            groups.append(group)
        self._inverse_owned[pod.id] = groups

    def register(self, key: str, domain: str) -> None:
        """A new domain (a new NodeClaim's hostname) exists for every group on `key`."""
        # Every group on the key learns it, whatever its filter (topology.go Register), and so do groups made later.
        self._universe.setdefault(key, DomainGroup()).insert(domain, ())
        for group in (*self._groups.values(), *self._inverse.values()):
            if group.key == key:
                group.register(domain)

    # Queries ----------------------------------------------------------------------------------------------------

    def matching(self, pod: Pod) -> list[TopologyGroup]:
        """Groups that constrain the pod: those it owns and inverse anti-affinity groups that select it."""
        groups = list(self._owned.get(pod.id, ()))
        groups.extend(g for g in self._inverse.values() if g.selects(pod.namespace, pod.labels))
        return groups

    def add_requirements(
        self, pod: Pod, data: PodData, node_requirements: Requirements, groups: Iterable[TopologyGroup]
    ) -> Requirements:
        """The requirements the topology adds on a node; raises TopologyError when a constraint leaves no domain."""
        added = []
        for group in groups:
            pod_domains = data.strict.get(group.key) or Requirement(group.key, frozenset(), True)
            node_domains = node_requirements.get(group.key) or Requirement(group.key, frozenset(), True)
            self_selecting = group.selects(pod.namespace, pod.labels)
            domains = group.next_domains(self_selecting, pod_domains, node_domains, None)
            if len(domains) == 0:
                raise TopologyError(_describe(group, node_domains))
            added.append(domains)
        return Requirements(added)

    def allowed_domains(self, pod: Pod, data: PodData, groups: Iterable[TopologyGroup]) -> dict[str, set[str]]:
        """Per non-hostname key, the domains any node could offer this pod now; raises TopologyError if none.

        Outside hostname keys what a group allows does not depend on the node (a node only narrows it), so an
        empty set means no node can take the pod and the scan can be skipped, and a small set means only
        NodeClaims pinned to those domains (or not pinned yet) need to be tried.
        """
        allowed: dict[str, set[str]] = {}
        for group in groups:
            if group.key == wk.HOSTNAME:
                continue
            pod_domains = data.strict.get(group.key) or Requirement(group.key, frozenset(), True)
            domains = group.allowed(group.selects(pod.namespace, pod.labels), pod_domains)
            domains = domains if group.key not in allowed else domains & allowed[group.key]
            if not domains:
                raise TopologyError(_describe(group, Requirement(group.key, frozenset(), True)))
            allowed[group.key] = domains
        return allowed

    def independent(self, pod: Pod) -> bool:
        """No group owns the pod or counts it: moving it to another node changes no topology constraint."""
        if pod.spread or pod.affinity or pod.anti_affinity or pod.preferred_affinity or pod.preferred_anti_affinity:
            return False
        if not self._groups and not self._inverse:
            return True
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        known = self._independent.get(key)
        if known is None:
            known = self._independent[key] = not any(
                g.selects(pod.namespace, pod.labels) for g in (*self._groups.values(), *self._inverse.values())
            )
        return known

    def universe_size(self, key: str) -> int:
        return len(self._universe.get(key, ()))

    def hostname_candidates(self, groups: Iterable[TopologyGroup], pod: Pod) -> set[str] | None:
        """Hostnames a pod could use at all, when a hostname constraint narrows them (None: no narrowing)."""
        allowed: set[str] | None = None
        for group in groups:
            if group.key != wk.HOSTNAME:
                continue
            spec = group.spec
            if spec.kind == ANTI_AFFINITY:
                domains = group.empty
            elif spec.kind == AFFINITY and not group.selects(pod.namespace, pod.labels):
                domains = {d for d, c in group.counts.items() if c > 0}
            elif spec.kind == SPREAD and spec.max_skew == 1 and group.selects(pod.namespace, pod.labels):
                domains = group.empty
            else:
                continue
            allowed = set(domains) if allowed is None else allowed & domains
        return allowed

    # Recording --------------------------------------------------------------------------------------------------

    def record(self, pod: Pod, requirements: Requirements, taints: Sequence[Taint]) -> None:
        """Count a placed pod in every group that selects it; anti-affinity counts every domain still possible."""
        for group in self._groups.values():
            if not group.selects(pod.namespace, pod.labels) or not group.node_matches(requirements, taints):
                continue
            domains = requirements.get(group.key)
            if domains is None or domains.complement:
                continue
            if group.spec.kind == ANTI_AFFINITY or len(domains.values) == 1:
                group.record(domains.values)
        for group in self._inverse_owned.get(pod.id, ()):
            domains = requirements.get(group.key)
            if domains is not None and not domains.complement:
                group.record(domains.values)


def _describe(group: TopologyGroup, node_domains: Requirement) -> str:
    spec = group.spec
    selector = (
        " ".join(f"{t.key} {t.operator} {sorted(t.values)}" for t in spec.selector.terms) if spec.selector else ""
    )
    if spec.kind == SPREAD:
        counts = ", ".join(f"{d}={c}" for d, c in sorted(group.counts.items()) if node_domains.has(d)) or "none"
        what = f"topology spread on {spec.key} (maxSkew {spec.max_skew}; counts {counts})"
    elif spec.kind == AFFINITY:
        what = (
            f"pod affinity on {spec.key} to pods matching {selector or 'nothing'} (no such pod in a reachable domain)"
        )
    else:
        what = (
            f"pod anti-affinity on {spec.key} to pods matching {selector or 'nothing'} (every reachable domain has one)"
        )
    return f"unsatisfiable topology constraint: {what}"
