"""What a reconcile step sees: the cluster's objects, the clock, the NodePools and catalogs, and where logs go."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from provisioner.catalog import InstanceType
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Obj, parse_timestamp, timestamp
from provisioner.cluster.views import Views
from provisioner.objects import NodeClass, NodePool
from provisioner.scheduling.logs import LogRecord


@dataclass(frozen=True)
class TimedRecord:
    time: float
    record: LogRecord

    def as_dict(self) -> dict[str, object]:
        return {"time": timestamp(self.time), **self.record.as_dict()}


@dataclass
class ClusterContext:
    store: ObjectStore
    now: float
    rng: random.Random
    nodepools: list[NodePool]
    nodepool_uids: Mapping[str, str]
    nodeclasses: Mapping[tuple[str, str], NodeClass]  # (kind, name) -> node class
    catalogs: Mapping[str, list[InstanceType]]  # node class kind -> instance types
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    paused_until: float = 0.0  # voluntary disruption is paused until then (a person said so)
    ignore_dra_requests: bool = False  # Karpenter's IGNORE_DRA_REQUESTS: pods with claims are never provisioned
    nominations: dict[str, float] = field(default_factory=dict)  # node -> until when a pending pod is headed there
    views: Views = field(default_factory=Views)
    logs: list[TimedRecord] = field(default_factory=list)

    def log(self, record: LogRecord) -> None:
        self.logs.append(TimedRecord(self.now, record))

    def instance_types_for(self, nodepool: NodePool) -> list[InstanceType] | None:
        """The pool's catalog, or None when its node class does not exist (the NodePool is not Ready)."""
        ref = nodepool.node_class_ref
        if (ref.kind, ref.name) not in self.nodeclasses:
            return None
        return self.catalogs.get(ref.kind, [])

    def event(self, involved: Obj, kind: str, reason: str, message: str, *, dedupe_seconds: float = 0.0) -> None:
        """Record a Kubernetes Event, counting repeats of the same reason and message; a repeat within
        `dedupe_seconds` of the last one is dropped, as Karpenter's deduplicating recorder does."""
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        # The kind is part of the name: a Node and its NodeClaim often share a name and get the same message.
        digest = hashlib.sha256(f"{involved['kind']}\n{reason}\n{message}".encode()).hexdigest()[:8]
        name = f"{meta['name']}.{digest}"
        existing = self.store.get("Event", name, namespace)
        if (
            existing is not None
            and dedupe_seconds
            and self.now - parse_timestamp(existing.get("lastTimestamp") or "1970-01-01T00:00:00Z") < dedupe_seconds
        ):
            return
        if existing is not None and existing.get("message") == message:
            existing["count"] = int(existing.get("count", 1)) + 1
            existing["lastTimestamp"] = timestamp(self.now)
            self.store.update(existing)
            return
        self.store.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "kind": involved["kind"],
                    "name": meta["name"],
                    "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                },
                "type": kind,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": timestamp(self.now),
                "lastTimestamp": timestamp(self.now),
                "source": {"component": "karpenter"},
            }
        )
