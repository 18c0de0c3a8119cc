"""The engine of a real cluster (kwok or observe mode): karpui's controllers over the cluster's Kubernetes API
through the kube adapter, one leader at a time by a Lease in that cluster, with the dashboard's read model mirrored
into the database.

Each engine owns one cluster in a long-lived process (`manage.py engine`): warm informer caches, then every tick,
if it leads, under the cluster row's lock:

1. bring the caches up to date, and karpui's own objects (DisruptionCommands: people decide them in the web
   processes, which write only the database) from the change log;
2. build the configuration from the cluster: its NodePools and node classes, and karpui's catalogs;
3. run the manager (kwok: every controller, with the kwok cloud provider creating Nodes as Karpenter's kwok provider
   does; observe: the disruption proposer and the command queue only, executing an approved command by deleting
   its NodeClaims, which Karpenter then drains and terminates) until nothing changes;
4. write karpui's objects, the mirror of the cluster's (objects, NodePools), logs and cost samples to the database.

Writes that the database alone cannot carry (a NodePool edited in the dashboard) go to the cluster's API at once
(`karpui.remote`), and come back through the informers.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from karpui import costs, lab, models, remote
from provisioner.adapters.direct import DirectAPI
from provisioner.adapters.kinds import KINDS
from provisioner.adapters.kube import KubeCluster
from provisioner.adapters.transport import Transport
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cluster import dra
from provisioner.cluster.composite import OBSERVE, CompositeCluster
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Key, Obj, key_of
from provisioner.controllers import commands
from provisioner.controllers.context import ClusterContext
from provisioner.controllers.manager import Manager
from provisioner.leaderelection import ElectionConfig, LeaderElector
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeclass import NODE_CLASS_KINDS
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass, NodePool

logger = logging.getLogger(__name__)

# The cluster's kinds the dashboard reads, mirrored into KubeObject rows (NodePools and node classes go to theirs).
MIRRORED = frozenset(k.kind for k in KINDS) - {"NodePool", "Lease", *NODE_CLASS_KINDS}
LEASE_NAME = "karpui-engine"
MAX_ROUNDS = 12  # as a lab's settle: a handful of steps react to each other, more is a component that spins


def identity() -> str:
    """This process's name among the candidates: host and a random part, as client-go's default."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def transport_for(cluster: models.Cluster) -> Transport:
    return remote.transport(cluster)


@dataclass
class Engine:
    """One cluster's engine in this process."""

    cluster_id: int
    mode: str
    kube: KubeCluster
    elector: LeaderElector
    local: ObjectStore
    api: CompositeCluster
    local_version: int  # the change log version karpui's own objects are caught up to
    mirrored: dict[Key, str] = field(default_factory=dict)  # what the mirror holds: key -> resourceVersion
    manager: Manager | None = None
    ctx: ClusterContext | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # noqa: S311 - names, not secrets
    steps: int = 0

    @classmethod
    def open(
        cls,
        row: models.Cluster,
        *,
        transport: Transport | None = None,
        lease_transport: Transport | None = None,
        candidate: str | None = None,
        lease_namespace: str = "default",
        election: ElectionConfig | None = None,
    ) -> Engine:
        """Connect to the cluster, start the informers and the leader election (nothing is decided before the
        informers have listed and the lease is held)."""
        if row.mode not in (models.Cluster.Mode.KWOK, models.Cluster.Mode.OBSERVE):
            raise ValueError(f"cluster {row.name} is a {row.mode} cluster; engines drive kwok and observe clusters")
        transport = transport or transport_for(row)
        kube = KubeCluster(transport)
        kube.start()
        config = election or ElectionConfig(
            identity=candidate or identity(), name=LEASE_NAME, namespace=lease_namespace
        )
        elector = LeaderElector(DirectAPI(lease_transport or transport), config).start()
        local_kinds = ("DisruptionCommand", "Event") if row.mode == OBSERVE else ("DisruptionCommand",)
        bodies = list(
            models.KubeObject.objects.filter(cluster=row, kind__in=local_kinds).values_list("body", flat=True)
        )
        local = ObjectStore(bodies, resource_version=row.resource_version, clock=lambda: 0.0)
        api = CompositeCluster(kube, local, mode=row.mode, local_kinds=local_kinds)
        engine = cls(row.pk, row.mode, kube, elector, local, api, row.resource_version)
        engine.mirrored = {
            (kind, namespace, name): str(version)
            for kind, namespace, name, version in models.KubeObject.objects.filter(cluster=row, kind__in=MIRRORED)
            .exclude(kind__in=local_kinds)
            .values_list("kind", "namespace", "name", "resource_version")
        }
        return engine

    def stop(self, release: bool = True) -> None:
        self.elector.stop(release=release)
        self.kube.stop()

    @property
    def leading(self) -> bool:
        return self.elector.is_leader()

    def step(self, now: float) -> bool:
        """One tick at wall time `now`: True if this engine led and ran its controllers."""
        self.kube.sync()
        if not self.kube.synced() or not self.leading:
            return False
        with transaction.atomic():
            row = models.Cluster.objects.select_for_update().defer("lab_state").get(pk=self.cluster_id)
            self.local_version = _catch_up(row, self.local, self.local_version)
            self.local._clock = lambda: now
            ctx = self._context(row, now)
            for _ in range(MAX_ROUNDS):
                with ctx.guard("engine"):
                    changed = self._run(ctx)
                self.kube.sync()
                if not changed:
                    break
            self.local.expire_events()
            lab.persist(row, self.local)
            self.local.forget_writes()
            self.local_version = models.Cluster.objects.values_list("resource_version", flat=True).get(pk=row.pk)
            self._mirror(row)
            self._save(row, ctx, now)
        self.steps += 1
        return True

    # One step's parts -------------------------------------------------------------------------------------------

    def _run(self, ctx: ClusterContext) -> bool:
        assert self.manager is not None
        if self.mode == OBSERVE:
            changed = False
            with ctx.guard("disruption"):
                changed |= self.manager.disruption.reconcile(ctx)
            with ctx.guard("disruption.queue"):
                changed |= commands.reconcile(ctx)
            return changed
        return bool(self.manager.step(ctx))

    def _context(self, row: models.Cluster, now: float) -> ClusterContext:
        nodepools, uids, problems = nodepools_of(self.kube.list("NodePool"), observe=self.mode == OBSERVE)
        nodeclasses = {
            (obj["kind"], obj["metadata"]["name"]): NodeClass(
                obj.get("apiVersion", ""), obj["kind"], obj["metadata"]["name"], obj.get("spec") or {}
            )
            for kind in NODE_CLASS_KINDS
            for obj in self.kube.list(kind)
        }
        catalogs = dra.declare(lab.catalogs_by_node_class(), dra.driver_pools(self.api))
        if self.manager is None:
            state = models.Cluster.objects.values_list("lab_state", flat=True).get(pk=row.pk) or {}
            self.manager = Manager(state)
            if "rng" in state:
                self.rng.setstate(_tuples(state["rng"]))
        cloud = KwokCloudProvider(self.api, nodeclasses, catalogs, self.rng)
        if self.ctx is None:
            self.ctx = ClusterContext(
                api=self.api,
                cloud=cloud,
                now=now,
                rng=self.rng,
                nodepools=nodepools,
                nodepool_uids=uids,
                nodeclasses=nodeclasses,
                catalogs=catalogs,
                observe=self.mode == OBSERVE,
            )
        ctx = self.ctx
        ctx.now, ctx.cloud, ctx.nodepools, ctx.nodepool_uids = now, cloud, nodepools, uids
        ctx.nodeclasses, ctx.catalogs = nodeclasses, catalogs
        ctx.feature_gates = settings.KARPUI_FEATURE_GATES
        ctx.paused_until = row.paused_until.timestamp() if row.paused_until else 0.0
        ctx.ignore_dra_requests = settings.KARPUI_IGNORE_DRA_REQUESTS
        ctx.logs.clear()
        for manifest, error in problems:
            with ctx.guard("nodepool", manifest):
                raise ManifestError(f"NodePool {manifest['metadata']['name']} left out until fixed: {error}")
        return ctx

    def _mirror(self, row: models.Cluster) -> None:
        """Write what changed in the cluster's objects since the last mirror, and remove what is gone."""
        seen: dict[Key, Obj] = {}
        for kind in MIRRORED:
            if kind in self.api.local_kinds:
                continue
            for obj in self.kube.list(kind):
                seen[key_of(obj)] = obj
        changed = [obj for key, obj in seen.items() if self.mirrored.get(key) != obj["metadata"].get("resourceVersion")]
        gone = [key for key in self.mirrored if key not in seen]
        models.KubeObject.objects.bulk_create(
            [_row(row, obj) for obj in changed],
            update_conflicts=True,
            unique_fields=["cluster", "kind", "namespace", "name"],
            update_fields=["uid", "resource_version", "body", "updated_at", *models.KubeObject.SUMMARY_FIELDS],
        )
        for kind, namespace, name in gone:
            models.KubeObject.objects.filter(cluster=row, kind=kind, namespace=namespace, name=name).delete()
        self.mirrored = {key: str(obj["metadata"].get("resourceVersion", "")) for key, obj in seen.items()}
        _mirror_configuration(row, self.kube)

    def _save(self, row: models.Cluster, ctx: ClusterContext, now: float) -> None:
        models.LogEntry.objects.bulk_create(
            models.LogEntry(
                cluster=row,
                time=datetime.fromtimestamp(entry.time, UTC),
                level=entry.record.level,
                logger=entry.record.logger,
                message=entry.record.message,
                fields=dict(entry.record.fields),
            )
            for entry in ctx.logs
        )
        assert self.manager is not None
        row.clock = datetime.fromtimestamp(now, UTC)
        row.ticked_at = row.clock
        row.lab_state = {
            **self.manager.to_state(),
            "rng": self.rng.getstate(),
            "nominations": {node: until for node, until in ctx.nominations.items() if until > now},
        }
        claims = self.api.list("NodeClaim")
        costs.record(row, [(row.clock, costs.by_nodepool(claims, self.api.list("DisruptionCommand")))], claims)
        row.save(update_fields=["clock", "ticked_at", "lab_state", "cost_state"])


def nodepools_of(
    manifests: Iterable[Obj], *, observe: bool = False
) -> tuple[list[NodePool], dict[str, str], list[tuple[Obj, str]]]:
    """The cluster's NodePools as the engine's values, their uids, and those that do not parse (left out).

    In observe mode a budget of `nodes: "0"` for some reasons is the handover: it stops Karpenter disrupting for
    those reasons, and leaves the decisions to karpui, which proposes under the NodePool's other budgets."""
    pools, uids, problems = [], {}, []
    for manifest in manifests:
        uids[manifest["metadata"]["name"]] = str(manifest["metadata"].get("uid", ""))
        try:
            pool = parse_nodepool({k: v for k, v in manifest.items() if k != "status"})
        except ManifestError as error:
            problems.append((manifest, f"{error.field}: {error.message}"))
            continue
        if observe:
            handover = tuple(b for b in pool.budgets if not (b.nodes == "0" and b.reasons))
            pool = dataclasses.replace(pool, budgets=handover)
        pools.append(pool)
    return pools, uids, problems


def _catch_up(row: models.Cluster, store: ObjectStore, since: int) -> int:
    """karpui's own objects changed by others (a decision made in the web) since `since`: replayed into `store`."""
    lab.catch_up(row, store, since)
    return row.resource_version


def _row(cluster: models.Cluster, obj: Obj) -> models.KubeObject:
    return models.KubeObject(
        cluster=cluster,
        kind=obj["kind"],
        namespace=key_of(obj)[1],
        name=obj["metadata"]["name"],
        uid=obj["metadata"].get("uid", ""),
        resource_version=int(obj["metadata"].get("resourceVersion") or 0),
        body=obj,
        **models.KubeObject.summary(obj),
    )


def _mirror_configuration(row: models.Cluster, kube: KubeCluster) -> None:
    """The cluster's NodePools and node classes into their tables, where the dashboard and the admin read them."""
    pools = {obj["metadata"]["name"]: obj for obj in kube.list("NodePool")}
    for name, obj in pools.items():
        meta = obj["metadata"]
        fields = {
            "uid": meta.get("uid") or uuid.uuid4(),
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
            "spec": obj.get("spec") or {},
            "status": obj.get("status") or {},
            "generation": int(meta.get("generation") or 1),
            "weight": (obj.get("spec") or {}).get("weight"),
        }
        current = models.NodePool.objects.filter(cluster=row, name=name).first()
        if current is None:
            models.NodePool.objects.create(cluster=row, name=name, **fields)
        elif any(getattr(current, key) != value for key, value in fields.items() if key != "uid"):
            for key, value in fields.items():
                setattr(current, key, value)
            current.save()
    models.NodePool.objects.filter(cluster=row).exclude(name__in=list(pools)).delete()
    classes = {(obj["kind"], obj["metadata"]["name"]): obj for kind in NODE_CLASS_KINDS for obj in kube.list(kind)}
    for (kind, name), obj in classes.items():
        fields = {
            "api_version": obj.get("apiVersion", ""),
            "labels": obj["metadata"].get("labels") or {},
            "annotations": obj["metadata"].get("annotations") or {},
            "spec": obj.get("spec") or {},
            "generation": int(obj["metadata"].get("generation") or 1),
        }
        current_class = models.NodeClass.objects.filter(cluster=row, kind=kind, name=name).first()
        if current_class is None:
            models.NodeClass.objects.create(cluster=row, kind=kind, name=name, **fields)
        elif any(getattr(current_class, key) != value for key, value in fields.items()):
            for key, value in fields.items():
                setattr(current_class, key, value)
            current_class.save()
    for stale in models.NodeClass.objects.filter(cluster=row):
        if (stale.kind, stale.name) not in classes:
            stale.delete()


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
