"""Host port usage on one node: a pod cannot bind a port another pod (or a daemon) already holds."""

from __future__ import annotations

from collections.abc import Iterable

from provisioner.pods import HostPort


class HostPortUsage:
    def __init__(self, ports: Iterable[HostPort] = ()) -> None:
        self._ports = list(ports)

    def conflict(self, ports: Iterable[HostPort]) -> HostPort | None:
        for port in ports:
            for held in self._ports:
                if port.conflicts(held):
                    return port
        return None

    def add(self, ports: Iterable[HostPort]) -> None:
        self._ports.extend(ports)
