"""Nodes and DaemonSets as the scheduler sees them (existing capacity and per-node overhead)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from provisioner.pods import Pod
from provisioner.quantity import Resources
from provisioner.taints import Taint


@dataclass(frozen=True)
class Node:
    """A node that exists or is being launched (an in-flight NodeClaim counts as a node that is not initialized)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    capacity: Resources = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    pods: tuple[Pod, ...] = ()
    initialized: bool = True
    managed: bool = False  # created by karpui/Karpenter (has a NodeClaim)
    nodepool: str = ""
    marked_for_deletion: bool = False
    unschedulable: bool = False
    # In a consolidation simulation only: the node is still inside its NodePool's consolidateAfter window, so pods
    # moving off a candidate may not land on it (Karpenter >= 1.14, kubernetes-sigs/karpenter#3006).
    under_consolidate_after: bool = False
    # An in-flight NodeClaim's name while no Node stands for it (Karpenter's state node made from a NodeClaim alone).
    nodeclaim: str = ""
    # The drivers its CSINode publishes, each with its attachment limit (None: unbounded); () before the CSINode is.
    csi_drivers: tuple[tuple[str, int | None], ...] = ()

    @property
    def hostname(self) -> str:
        return self.labels.get("kubernetes.io/hostname", self.name)

    @cached_property
    def anti_affinity_pods(self) -> tuple[Pod, ...]:
        """Its pods with required pod anti-affinity, which keep matching pods out of their domains. Kept: every
        simulation asks every node, and single-node consolidation runs one per candidate (20,000 pods each time)."""
        return tuple(p for p in self.pods if p.anti_affinity)

    @cached_property
    def csi_volumes(self) -> dict[str, frozenset[str]]:
        """The PVCs per CSI driver its pods attach, a shared one once; a terminal pod's are released (Karpenter's
        cluster state forgets a pod once it is terminal). Kept, as every simulation over the node asks."""
        used: dict[str, frozenset[str]] = {}
        for pod in self.pods:
            if pod.csi_volumes and not pod.is_terminal():
                for driver, claims in pod.csi_volumes:
                    used[driver] = used[driver] | claims if driver in used else claims
        return used


@dataclass(frozen=True)
class DaemonSet:
    """A DaemonSet's pod template, used for per-node overhead."""

    name: str
    namespace: str
    template: Pod


def state_node_name(nodeclaim: str | None, node: str | None) -> str:
    """How Karpenter names a node in its messages: "nodeclaim/x, node/y", as far as each exists."""
    return ", ".join([*([f"nodeclaim/{nodeclaim}"] if nodeclaim else []), *([f"node/{node}"] if node else [])])
