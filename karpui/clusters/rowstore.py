"""A lab's objects read from their rows as a write asks for them: the API server's view for a write that touches
a few objects while the cluster's engine runs elsewhere, so the write never loads the whole cluster.

It is the in-memory store (`provisioner.cluster.memory.ObjectStore`, with every rule of the API server's writes)
filled lazily: `get` reads one row, `list` reads the rows of a kind (in a namespace, when given). The caller holds
the cluster's row lock, so what it reads stays current until it commits; `karpui.clusters.saves.persist` then writes what
changed, with the change log the engine catches up from.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from karpui import models
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Key, Obj, namespace_of
from provisioner.selectors import LabelSelector


class RowStore(ObjectStore):
    def __init__(self, cluster: models.Cluster) -> None:
        clock = cluster.clock.timestamp()
        super().__init__(resource_version=cluster.resource_version, clock=lambda: clock)
        self._cluster = cluster
        self._read_keys: set[Key] = set()
        self._read_kinds: set[tuple[str, str | None]] = set()  # (kind, namespace or None for all)

    def _rows(self, kind: str) -> Any:
        return models.KubeObject.objects.filter(cluster=self._cluster, kind=kind)

    def _take(self, body: Obj, key: Key) -> None:
        """Add a row's object unless this write already has its own version of it (changed, or deleted)."""
        if key in self._read_keys or key in self.removed:
            return
        self._read_keys.add(key)
        if self.get_loaded(key) is None:
            self._add(body)

    def get_loaded(self, key: Key) -> Obj | None:
        return super().get(key[0], key[2], key[1])

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        key = (kind, namespace_of(kind, namespace), name)
        if key not in self._read_keys and (kind, None) not in self._read_kinds:
            body = self._rows(kind).filter(namespace=key[1], name=name).values_list("body", flat=True).first()
            self._read_keys.add(key)
            if body is not None and key not in self.removed:
                self._add(body)
        return super().get(kind, name, namespace)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> builtins.list[Obj]:
        self._read_kind(kind, None if namespace is None else namespace_of(kind, namespace))
        return super().list(kind, namespace, selector, fields)

    def scan(self, kind: str) -> builtins.list[Obj]:
        self._read_kind(kind, None)
        return super().scan(kind)

    def _read_kind(self, kind: str, namespace: str | None) -> None:
        if (kind, None) in self._read_kinds or (kind, namespace) in self._read_kinds:
            return
        rows = self._rows(kind) if namespace is None else self._rows(kind).filter(namespace=namespace)
        for row_namespace, name, body in rows.values_list("namespace", "name", "body"):
            self._take(body, (kind, row_namespace, name))
        self._read_kinds.add((kind, namespace))

    def create(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        self.get(obj["kind"], str(meta.get("name", "")), str(meta.get("namespace") or "default"))
        return super().create(obj)
