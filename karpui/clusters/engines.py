"""The engine of a real cluster (kwok or observe mode): karpui's controllers over the cluster's Kubernetes API
through the kube adapter, one leader at a time by a Lease in that cluster, with the dashboard's read model mirrored
into the database.

Each engine owns one cluster in a long-lived process (`manage.py engine`): warm informer caches, then every tick,
if it leads:

1. bring the caches up to date, and karpui's own objects (DisruptionCommands: people decide them in the web
   processes, which write only the database) from the change log;
2. build the configuration from the cluster: its NodePools and node classes, and karpui's catalogs;
3. run the manager (kwok: every controller, with the kwok cloud provider creating Nodes as Karpenter's kwok provider
   does; observe: the disruption proposer and the command queue only, executing an approved command by deleting
   its NodeClaims, which Karpenter then drains and terminates) until nothing changes;
4. under the cluster row's lock, write karpui's objects, the mirror of the cluster's (objects, NodePools) and cost
   samples to the database.

Leadership fences every write (`LeaderElector.fence`): a write is sent only while the Lease was renewed within its
renew deadline, so a leader paused mid-step (and overtaken meanwhile) writes nothing when it wakes; the step ends
there and its unrecorded decisions are dropped. Records go with writes: each log line is committed (and printed) as
it is written, and before each write karpui's own objects changed so far are committed, so a step cut short by a
crash or by the fence leaves a record of every write it made. The records are fenced too: an engine that begins to
lead bumps the cluster row's `engine_term`, and commits under the row's lock only while the term is still the one it
set, so a former leader waking mid-step cannot commit over its successor's records either.

Writes that the database alone cannot carry (a NodePool edited in the dashboard) go to the cluster's API at once
(`karpui.clusters.remote`), and come back through the informers.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from karpui import models
from karpui.clusters import configuration, remote, saves, store, warm
from karpui.clusters.karpenter_logs import KarpenterLog
from karpui.clusters.karpenter_options import cluster_options
from karpui.history import costs
from provisioner.adapters.direct import DirectAPI
from provisioner.adapters.kinds import KINDS
from provisioner.adapters.kube import KubeCluster
from provisioner.adapters.transport import Transport
from provisioner.catalog import InstanceType
from provisioner.cloudprovider.kwok import KwokCloudProvider
from provisioner.cluster import dra
from provisioner.cluster.composite import OBSERVE, CompositeCluster
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Key, NotLeading, Obj, key_of
from provisioner.controllers import commands, holds
from provisioner.controllers.context import ClusterContext, TimedRecord
from provisioner.controllers.manager import Manager
from provisioner.disruption.holds import HoldOptions, own_manifest
from provisioner.leaderelection import ElectionConfig, LeaderElector
from provisioner.manifests import ManifestError
from provisioner.manifests.nodeclass import NODE_CLASS_KINDS
from provisioner.manifests.nodepool import parse_nodepool
from provisioner.objects import NodeClass, NodePool
from provisioner.options import RESERVED_CAPACITY

logger = logging.getLogger(__name__)

# The cluster's kinds the dashboard reads, mirrored into KubeObject rows (NodePools and node classes go to theirs).
MIRRORED = frozenset(k.kind for k in KINDS) - {"NodePool", "Lease", *NODE_CLASS_KINDS}
LEASE_NAME = "karpui-engine"
OWN_EVENTS = "karpui"  # observe mode: the source of karpui's own Events, kept apart from the cluster's
DELETE_CHUNK = 500  # names in one DELETE of mirror rows: well under SQLite's limit of bound variables
WRITE_CHUNK = 250  # mirror rows in one INSERT ... ON CONFLICT
# Rows the mirror writes in one step at most (about half a second on SQLite), the rest in the steps after: an engine
# that starts beside 20,000 pending pods and their 20,000 FailedScheduling Events would spend about 10 s of one step
# mirroring them while its controllers wait (bench/burst.py). The dashboard catches up a few steps later.
MIRROR_LIMIT = 2000
# The mirror's kinds, the few objects first and the many (pods, their Events) last, so that the limit holds those.
MIRROR_ORDER = sorted(MIRRORED, key=lambda kind: (kind in ("Pod", "Event"), kind))
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
    mirrored: dict[str, dict[Key, str]] = field(default_factory=dict)  # the mirror's: kind -> key -> resourceVersion
    mirrored_versions: dict[str, int] = field(default_factory=dict)  # kind -> the cache's kind version mirrored
    manager: Manager | None = None
    ctx: ClusterContext | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # noqa: S311 - names, not secrets
    kwok_names_made: int = 0  # the kwok provider's node names so far (RandomName's sequence number)
    steps: int = 0
    term: int = 0  # the elector's transitions when the controllers' state was loaded
    engine_term: int | None = None  # the cluster row's engine_term this engine set when it began to lead
    recording: ClusterContext | None = None  # the step under way, whose records go before its writes
    echo: Callable[[str], None] | None = None  # where log lines are printed (manage.py engine: its stdout)
    cluster_name: str = ""
    karpenter_log: KarpenterLog | None = None  # observe mode: Karpenter's log file, where the operator named one
    configuration_versions: tuple[int, ...] | None = None  # NodePools' and node classes' kind versions mirrored
    catalogs_built: tuple[tuple[Any, ...], dict[str, list[InstanceType]]] | None = None  # (key, catalogs by kind)

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
        config = election or ElectionConfig(
            identity=candidate or identity(), name=LEASE_NAME, namespace=lease_namespace
        )
        # The elector's own requests (its Lease) are never fenced; every other write is.
        elector = LeaderElector(DirectAPI(lease_transport or transport), config)
        engine: Engine | None = None

        def fence() -> None:
            assert engine is not None
            engine._before_write()

        kube = KubeCluster(transport.fenced(fence))
        kube.start()
        elector.start()
        local, api, version = _local_store(row, kube)
        engine = cls(row.pk, row.mode, kube, elector, local, api, version, cluster_name=row.name)
        path = settings.KARPUI_KARPENTER_LOGS.get(row.name)
        if path and row.mode == OBSERVE:
            state = models.Cluster.objects.values_list("lab_state", flat=True).get(pk=row.pk) or {}
            engine.karpenter_log = KarpenterLog.at(path, state.get("karpenter_log"))
        # What the mirror holds of the cluster's own objects: in observe mode karpui's own Events are rows beside
        # the cluster's, and only the cluster's are the mirror's to remove.
        for kind, namespace, name, version in (
            models.KubeObject.objects.filter(cluster=row, kind__in=MIRRORED)
            .exclude(kind="Event", body__source__component=OWN_EVENTS)
            .values_list("kind", "namespace", "name", "resource_version")
        ):
            engine.mirrored.setdefault(kind, {})[(kind, namespace, name)] = str(version)
        return engine

    def stop(self, release: bool = True) -> None:
        self.elector.stop(release=release)
        self.kube.stop()

    @property
    def leading(self) -> bool:
        return self.elector.is_leader()

    def step(self, now: float) -> bool:
        """One tick at wall time `now`: True if this engine led and ran its controllers to the end."""
        self.kube.sync()
        if not self.kube.synced() or not self.leading:
            return False
        if self.elector.transitions != self.term:
            self._new_term(leading=True)
        row = models.Cluster.objects.defer("lab_state").get(pk=self.cluster_id)
        self.local_version = _catch_up(row, self.local, self.local_version)
        self.local._clock = lambda: now
        ctx = self._context(row, now)
        self.recording = ctx
        try:
            for _ in range(MAX_ROUNDS):
                with ctx.guard("engine"):
                    changed = self._run(ctx)
                self.kube.sync()
                if not changed:
                    break
            self.recording = None
            with transaction.atomic():
                row = models.Cluster.objects.select_for_update().defer("lab_state").get(pk=self.cluster_id)
                self.local.expire_events()
                self._record(row)
                self._mirror(row)
                self._save(row, ctx, now)
        except NotLeading as error:
            logger.warning(
                "%s stopped mid-step, writing nothing more: %s", self.elector.config.identity, error,
                extra={"cluster_id": self.cluster_id},
            )  # fmt: skip
            self._new_term(leading=False)
            return False
        finally:
            self.recording = None
        self.steps += 1
        return True

    def _new_term(self, *, leading: bool) -> None:
        """Leading anew (or no longer): what this process decided in an earlier term may be stale, as another engine
        may have led meanwhile. The controllers' state and karpui's objects are read again from the database; leading
        anew, the row's engine_term is bumped, which fences out the records of any engine that led before."""
        self.term = self.elector.transitions
        self.configuration_versions = None  # another engine may have written the rows meanwhile
        self.manager, self.ctx = None, None
        if leading:
            with transaction.atomic():
                models.Cluster.objects.filter(pk=self.cluster_id).update(engine_term=F("engine_term") + 1)
                self.engine_term = models.Cluster.objects.values_list("engine_term", flat=True).get(pk=self.cluster_id)
        row = models.Cluster.objects.defer("lab_state").get(pk=self.cluster_id)
        self.local, self.api, self.local_version = _local_store(row, self.kube)

    def _before_write(self) -> None:
        """Run before every write to the cluster: what the step decided so far is recorded first (a write never
        goes out ahead of the record that explains it), then the fence: the Lease must still be ours."""
        if self.recording is not None and (self.local.changed or self.local.removed):
            with transaction.atomic():
                self._record(models.Cluster.objects.select_for_update().defer("lab_state").get(pk=self.cluster_id))
        self.elector.fence()

    def _record(self, row: models.Cluster) -> None:
        """Commit karpui's own objects changed since the last record, after the writes others made meanwhile (a
        person's decision on the same command stands). `row` is locked; it must still carry this engine's term."""
        if row.engine_term != self.engine_term:
            raise NotLeading(
                f"cluster {row.name}: another engine has led since this one began (term {row.engine_term}, "
                f"this engine's {self.engine_term}): its records are not committed"
            )
        if row.resource_version != self.local_version and not warm.rebase_store(row, self.local, self.local_version):
            raise RuntimeError(f"cluster {row.name}: the change log was compacted under a running step")
        if self.local.changed or self.local.removed:
            saves.persist(row, self.local)
            self.local.forget_writes()
        self.local_version = models.Cluster.objects.values_list("resource_version", flat=True).get(pk=row.pk)

    def _log(self, entry: TimedRecord) -> None:
        """A controller's log line: committed at once (it records a write just made, or about to be), and printed
        as Karpenter prints its own, one JSON object per line."""
        store.logs_save(models.Cluster(pk=self.cluster_id), [entry])
        if self.echo is not None:
            self.echo(json.dumps({"cluster": self.cluster_name, **entry.as_dict()}, default=str))

    # One step's parts -------------------------------------------------------------------------------------------

    def _run(self, ctx: ClusterContext) -> bool:
        assert self.manager is not None
        if self.mode == OBSERVE:
            manager = self.manager
            # (name, reconcile, whether what it did is a change the step goes on for)
            controllers: tuple[tuple[str, Callable[[ClusterContext], object], bool], ...] = (
                ("nodeoverlay", lambda c: manager.overlays.reconcile(c, write=False), False),  # Karpenter writes
                ("provisioning", manager.provisioning.reconcile, False),  # explains waiting pods: Karpenter launches
                ("disruption", manager.disruption.reconcile, True),
                ("disruption.queue", commands.reconcile, True),
                ("disruption.gate", holds.reconcile, True),  # holds and releases, after the queue released what it may
            )
            changed = False
            for name, reconcile, counts in controllers:
                if ctx.backing_off(name):
                    continue
                with ctx.guard(name):
                    done = reconcile(ctx)
                    changed |= counts and bool(done)
            return changed
        return bool(self.manager.step(ctx))

    def _context(self, row: models.Cluster, now: float) -> ClusterContext:
        nodepools, uids, problems = nodepools_of(self.kube.list("NodePool"), observe=self.mode == OBSERVE)
        nodeclasses = {
            (obj["kind"], obj["metadata"]["name"]): NodeClass(
                obj.get("apiVersion", ""),
                obj["kind"],
                obj["metadata"]["name"],
                obj.get("spec") or {},
                generation=int(obj["metadata"].get("generation") or 1),
            )
            for kind in NODE_CLASS_KINDS
            for obj in self.kube.list(kind)
        }
        catalogs = dra.declare(self._catalogs(), dra.driver_pools(self.api))
        if self.manager is None:
            state = models.Cluster.objects.values_list("lab_state", flat=True).get(pk=row.pk) or {}
            self.manager = Manager(state)
            if "rng" in state:
                self.rng.setstate(_tuples(state["rng"]))
            self.kwok_names_made = int(state.get("kwok_names_made", 0))
        # Made anew each step, from the configuration as it now is; its count of names goes on from the last.
        cloud = KwokCloudProvider(self.api, nodeclasses, catalogs, self.rng, names_made=self.kwok_names_made)
        cloud.reserved_capacity = cluster_options(row).gate(RESERVED_CAPACITY)
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
                writes_nodepool_status=self.mode != OBSERVE,
                holding=HoldOptions(
                    fail_open=settings.KARPUI_GATE_FAILURE == "open",
                    lease_seconds=settings.KARPUI_GATE_LEASE,
                    release_seconds=settings.KARPUI_GATE_RELEASE,
                ),
                event_source=OWN_EVENTS if self.mode == OBSERVE else "karpenter",
            )
        ctx = self.ctx
        ctx.now, ctx.cloud, ctx.nodepools, ctx.nodepool_uids = now, cloud, nodepools, uids
        ctx.nodeclasses, ctx.catalogs = nodeclasses, catalogs
        ctx.options = cluster_options(row)
        ctx.paused_until = row.paused_until.timestamp() if row.paused_until else 0.0
        ctx.logs.clear()
        ctx.on_log = self._log
        for manifest, error in problems:
            with ctx.guard("nodepool", manifest):
                raise ManifestError(f"NodePool {manifest['metadata']['name']} left out until fixed: {error}")
        return ctx

    def _catalogs(self) -> dict[str, list[InstanceType]]:
        """The catalogs by node class kind, built again only when a catalog or a device declaration changed: building
        them from their rows took longer than the rest of an idle step, and the same lists from step to step keep
        what is keyed on them warm."""
        key = configuration.catalogs_key()
        if self.catalogs_built is None or self.catalogs_built[0] != key:
            self.catalogs_built = (key, configuration.catalogs_by_node_class())
        return self.catalogs_built[1]

    def _mirror(self, row: models.Cluster) -> None:
        """Write what changed in the cluster's objects since the last mirror, and remove what is gone. A kind whose
        cached objects have not changed since (the cache's kind version) is not read at all: at thousands of pods
        and their Events, comparing every object each step cost more than the rest of an idle step."""
        changed: list[Obj] = []
        gone: list[Key] = []
        mirrored: dict[str, dict[Key, str]] = {}
        versions = dict(self.mirrored_versions)
        room = MIRROR_LIMIT
        for kind in MIRROR_ORDER:
            version = self.kube.kind_version(kind)
            if self.mirrored_versions.get(kind) == version and kind in self.mirrored:
                continue
            before = self.mirrored.get(kind, {})
            seen = self.kube.peek_all(kind)
            now = mirrored[kind] = {}
            left = False  # changes past this step's room, written by the next steps
            for key, obj in seen.items():
                resource_version = str(obj["metadata"].get("resourceVersion", ""))
                if before.get(key) == resource_version:
                    now[key] = resource_version
                elif room:
                    changed.append(obj)
                    now[key] = resource_version
                    room -= 1
                else:
                    left = True
                    if key in before:
                        now[key] = before[key]
            gone.extend(key for key in before if key not in seen)
            if not left:
                versions[kind] = version
        # Each body with the managedFields the cache keeps apart (decoded again here), a few hundred rows a query: a
        # scale-up changes thousands of pods and Events in one step, whose decoded copies and JSON should not all be
        # held at once.
        for start in range(0, len(changed), WRITE_CHUNK):
            models.KubeObject.objects.bulk_create(
                [_row(row, self.kube.served(obj)) for obj in changed[start : start + WRITE_CHUNK]],
                update_conflicts=True,
                unique_fields=["cluster", "kind", "namespace", "name"],
                update_fields=["uid", "resource_version", "body", "updated_at", *models.KubeObject.SUMMARY_FIELDS],
            )
        _delete_rows(row, gone)
        self.mirrored.update(mirrored)
        self.mirrored_versions = versions
        # The NodePools' and node classes' rows are compared with the cluster's objects only when those changed in
        # the cache (the web writes them to the cluster, which sends them back), or in a new term.
        configuration_versions = tuple(self.kube.kind_version(kind) for kind in ("NodePool", *NODE_CLASS_KINDS))
        if configuration_versions != self.configuration_versions:
            _mirror_configuration(row, self.kube)
            self.configuration_versions = configuration_versions

    def _save(self, row: models.Cluster, ctx: ClusterContext, now: float) -> None:
        assert self.manager is not None
        row.clock = datetime.fromtimestamp(now, UTC)
        row.ticked_at = row.clock
        if isinstance(ctx.cloud, KwokCloudProvider):
            self.kwok_names_made = ctx.cloud.names_made
        row.lab_state = {
            **self.manager.to_state(),
            "informers": self.kube.failing(),  # /readyz reads it: a mirror whose watches are refused goes stale
            "rng": self.rng.getstate(),
            "kwok_names_made": self.kwok_names_made,
            "nominations": {node: until for node, until in ctx.nominations.items() if until > now},
            "buffer_nodes": dict(ctx.buffer_nodes),
        }
        if self.karpenter_log is not None:
            store.logs_save(row, self.karpenter_log.read())  # Karpenter's own lines, beside the controllers'
            row.lab_state["karpenter_log"] = self.karpenter_log.state()
        claims = self.api.list("NodeClaim")
        costs.record(row, [(row.clock, costs.by_nodepool(claims, self.api.list("DisruptionCommand")))], claims)
        row.save(update_fields=["clock", "ticked_at", "lab_state", "cost_state"])


def nodepools_of(
    manifests: Iterable[Obj], *, observe: bool = False
) -> tuple[list[NodePool], dict[str, str], list[tuple[Obj, str]]]:
    """The cluster's NodePools as the engine's values, their uids, and those that do not parse (left out).

    In observe mode each is read as its owner wrote it, without the budgets karpui's gate holds Karpenter with
    (`holds.own_manifest`): karpui simulates Karpenter's decision under the NodePool's own budgets."""
    pools, uids, problems = [], {}, []
    for manifest in manifests:
        uids[manifest["metadata"]["name"]] = str(manifest["metadata"].get("uid", ""))
        own = own_manifest(manifest) if observe else manifest
        try:
            pool = parse_nodepool({k: v for k, v in own.items() if k != "status"})
        except ManifestError as error:
            problems.append((manifest, f"{error.field}: {error.message}"))
            continue
        pools.append(pool)
    return pools, uids, problems


def _local_store(row: models.Cluster, kube: KubeCluster) -> tuple[ObjectStore, CompositeCluster, int]:
    """karpui's own objects of the cluster (DisruptionCommands; in observe mode its Events too) from their rows, the
    composite the controllers see (the cluster's objects from `kube`, karpui's from the store), and the version."""
    local_kinds = ("DisruptionCommand", "Event") if row.mode == OBSERVE else ("DisruptionCommand",)
    bodies = list(models.KubeObject.objects.filter(cluster=row, kind__in=local_kinds).values_list("body", flat=True))
    local = ObjectStore(bodies, resource_version=row.resource_version, clock=lambda: 0.0)
    return local, CompositeCluster(kube, local, mode=row.mode, local_kinds=local_kinds), row.resource_version


def _catch_up(row: models.Cluster, store: ObjectStore, since: int) -> int:
    """karpui's own objects changed by others (a decision made in the web) since `since`: replayed into `store`."""
    warm.catch_up(row, store, since)
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


def _delete_rows(cluster: models.Cluster, keys: Iterable[Key]) -> None:
    """Remove the mirror's rows of these objects, a few hundred names of one kind and namespace a query (a scale-down
    removes thousands of pods and their Events in one step)."""
    names: dict[tuple[str, str], list[str]] = {}
    for kind, namespace, name in keys:
        names.setdefault((kind, namespace), []).append(name)
    for (kind, namespace), all_names in names.items():
        for start in range(0, len(all_names), DELETE_CHUNK):
            chunk = all_names[start : start + DELETE_CHUNK]
            models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=chunk).delete()


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
