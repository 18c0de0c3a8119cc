"""Host port usage on one node: a pod cannot bind a port another pod (or a daemon) already holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from provisioner.pods import HostPort


@dataclass(frozen=True, slots=True)
class HostPortUsage:
    """Immutable, so every simulation over an existing node can start from the same one."""

    ports: tuple[HostPort, ...] = ()

    def conflict(self, ports: Iterable[HostPort]) -> HostPort | None:
        for port in ports:
            for held in self.ports:
                if port.conflicts(held):
                    return port
        return None

    def added(self, ports: Iterable[HostPort]) -> HostPortUsage:
        return HostPortUsage((*self.ports, *ports))
