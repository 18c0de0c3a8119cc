"""The domains one topology key can take on nodes the NodePools could launch, each with the taints it comes with."""

from __future__ import annotations

from collections.abc import Iterator

from provisioner.taints import Taint, Toleration, tolerates_all


class DomainGroup:
    """Domain -> the taint sets of the NodePools offering it (Karpenter's TopologyDomainGroup).

    A spread constraint with NodeTaintsPolicy=Honor only counts domains its pods could land in, so a domain offered
    only by NodePools whose taints the pod does not tolerate is not one of its domains.
    """

    def __init__(self) -> None:
        self._taints: dict[str, list[tuple[Taint, ...]]] = {}

    def insert(self, domain: str, taints: tuple[Taint, ...]) -> None:
        """Record that a NodePool with `taints` offers `domain` (topologydomaingroup.go Insert)."""
        sets = self._taints.get(domain)
        # An untainted NodePool makes the domain reachable for every pod: the empty set replaces any others, and
        # once held, no other set can widen it.
        if sets is None or not taints:
            self._taints[domain] = [taints]
        elif sets[0] and taints not in sets:
            sets.append(taints)

    def tolerated(self, tolerations: tuple[Toleration, ...] | None) -> Iterator[str]:
        """The domains a pod with `tolerations` may land in; None (NodeTaintsPolicy=Ignore) means every domain."""
        for domain, sets in self._taints.items():
            if tolerations is None or any(tolerates_all(taints, tolerations) for taints in sets):
                yield domain

    def __len__(self) -> int:
        return len(self._taints)
