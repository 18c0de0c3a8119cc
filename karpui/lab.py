"""Running a lab cluster: load its objects into the engine, run the controllers, write back what changed.

Every run stores its result in one transaction that locks the cluster's row, so the saves of one cluster are
serial and a crash leaves the last committed state, from which the next run simply continues (names and the RNG
state are part of that state, so a retried run makes the same decisions and never a duplicate NodeClaim). A
worker's tick runs the engine before it takes that lock (`run_detached`), so writes wait for its save, not its
work, and the tick's result is put after them (`rebase`) or, if the lab ran elsewhere meanwhile, dropped.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from karpui import bulk, costs, leases, models, services, store
from karpui.kubeapi import changelog
from karpui.rowstore import RowStore
from provisioner.catalog import InstanceType
from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.memory import ObjectStore
from provisioner.cluster.objects import Key, key_of
from provisioner.cluster.views import UnreadablePod
from provisioner.dra.declarations import declare
from provisioner.lab import Lab, LabConfig
from provisioner.manifests import ManifestError
from provisioner.objects import NodeClass

T = TypeVar("T")
logger = logging.getLogger(__name__)


def catalogs_by_node_class() -> dict[str, list[InstanceType]]:
    """Every catalog's instance types, with the devices DeviceDeclarations give them, by the node class kind that
    launches them: what any cluster's engine picks instance types from."""
    catalogs: dict[str, list[InstanceType]] = {}
    declarations = services.device_declarations()
    for row in store.catalogs_with_types():
        types = declare(row.name, store.catalog_domain(row).instance_types, declarations)
        for kind in row.node_class_kinds:
            catalogs.setdefault(kind, []).extend(types)
    return catalogs


def lab_config(cluster: models.Cluster, problems: list[tuple[dict[str, Any], str]] | None = None) -> LabConfig:
    """What the cluster's controllers work from. A stored NodePool that no longer parses (written before a rule
    existed, or by hand) is left out, with its error in `problems`: one bad NodePool never stops the others."""
    nodepools = list(models.NodePool.objects.filter(cluster=cluster))
    domains = []
    for row in nodepools:
        try:
            domains.append(store.nodepool_domain(row))
        except ManifestError as error:
            if problems is not None:
                problems.append((store.nodepool_manifest(row), f"{error.field}: {error.message}"))
    nodeclasses = {
        (row.kind, row.name): NodeClass(row.api_version, row.kind, row.name, row.spec)
        for row in models.NodeClass.objects.filter(cluster=cluster)
    }
    catalogs = catalogs_by_node_class()
    return LabConfig(
        nodepools=domains,
        # Every row's uid, parsed or not: the garbage collector must not take a bad NodePool's nodes for orphans.
        nodepool_uids={row.name: str(row.uid) for row in nodepools},
        nodeclasses=nodeclasses,
        catalogs=catalogs,
        feature_gates=settings.KARPUI_FEATURE_GATES,
        paused_until=cluster.paused_until.timestamp() if cluster.paused_until else 0.0,
        ignore_dra_requests=settings.KARPUI_IGNORE_DRA_REQUESTS,
        components=cluster.lab_components,
    )


def load(cluster: models.Cluster, *, components: str | None = None) -> Lab:
    lab, problems = _loaded(cluster, components)
    _report(lab, problems)
    return lab


Problems = list[tuple[dict[str, Any], str]]  # NodePools left out, with why


def _loaded(cluster: models.Cluster, components: str | None = None) -> tuple[Lab, Problems]:
    # Bodies only: building 20,000 model instances costs more than decoding their JSON. Streamed in chunks, so the
    # driver never holds every row's text beside the decoded objects (on PostgreSQL a cold load at 20,000 pods
    # peaked at 400-405 MiB with the whole result fetched at once).
    rows = models.KubeObject.objects.filter(cluster=cluster).values_list("body", flat=True)
    objects = list(rows.iterator(chunk_size=2000))
    state = {**cluster.lab_state, "resource_version": cluster.resource_version}
    problems: Problems = []
    config = lab_config(cluster, problems)
    if components is not None:
        config.components = components
    return Lab(objects, config, state, now=cluster.clock.timestamp()), problems


# The warm engine ------------------------------------------------------------------------------------------------
#
# A process keeps the lab it last ran, with the token that run wrote on the cluster's row. Its next run goes on
# from memory while the token is still its own: the only writes since were single writes (`writing` while an
# engine is alive, `run_rows`), which left the token alone and logged every change, so catching up is replaying
# the change log since the version it saved (and, for a tick's run made without the row lock, `rebase`). A run anywhere else (a `karp advance`, a write with no engine
# alive) wrote a new token, and the lab is loaded again; so is one whose change log was compacted meanwhile, or
# reset. A failed run drops the warm lab: it may hold half a change the database never saw.


@dataclass
class _Warm:
    lab: Lab
    token: str
    version: int  # the cluster's resourceVersion after this process's save
    config_key: tuple[Any, ...]
    dra_version: int  # the version of the DRAConfig objects the catalogs' devices were declared from


_warm: dict[int, _Warm] = {}
_warm_lock = threading.Lock()
CONFIG_KINDS = frozenset({"NodePool", "KWOKNodeClass", "EC2NodeClass", "DeviceDeclaration"})
# A worker that ticked within this many tick periods is taken to be running.
ENGINE_ALIVE_TICKS = 5


def config_key(cluster: models.Cluster) -> tuple[Any, ...]:
    """What the lab's configuration is built from, in a few small queries: equal keys, equal configuration."""
    return (
        tuple(
            models.NodePool.objects.filter(cluster=cluster)
            .order_by("name")
            .values_list("name", "uid", "generation", "labels", "annotations")
        ),
        tuple(
            models.NodeClass.objects.filter(cluster=cluster)
            .order_by("kind", "name")
            .values_list("kind", "name", "generation")
        ),
        tuple(models.Catalog.objects.order_by("name").values_list("name", "updated_at")),
        tuple(models.DeviceDeclaration.objects.order_by("name").values_list("name", "resource_version")),
        cluster.paused_until,
        cluster.lab_components,
    )


@dataclass
class Engine:
    """A cluster's lab for one run: the configuration key it was built with, and the cluster's resourceVersion
    every object in it is at (the run's own writes, a left-out NodePool's Event among them, come after)."""

    lab: Lab
    config_key: tuple[Any, ...]
    seen: int


def engine(cluster: models.Cluster) -> Engine:
    """The cluster's lab for a run: warm from memory where this process has it, else loaded."""
    with _warm_lock:
        warm = _warm.pop(cluster.pk, None)
    try:
        key = config_key(cluster)
        if (
            warm is not None
            and warm.token
            and warm.token == cluster.engine_token
            and cluster.compacted_resource_version <= warm.version
        ):
            lab = warm.lab
            lab.begin_run(cluster.clock.timestamp())  # first: it clears the log the NodePools' problems go to
            catch_up(cluster, lab.store, warm.version)
            if _compacted(cluster) <= warm.version:
                seen = lab.store.resource_version
                if key != warm.config_key or lab.store.kind_version("DRAConfig") != warm.dra_version:
                    problems: Problems = []
                    lab.reconfigure(lab_config(cluster, problems))
                    _report(lab, problems)
                return Engine(lab, key, seen)
            # This runs without the row lock: the log was pruned past the lab's version between the check above
            # and the catch-up's read, so what the catch-up missed is gone from it. The lab is loaded again.
            logger.info("warm lab dropped: the change log was compacted past it", extra={"cluster": cluster.name})
            del lab
    except BaseException:
        _let_go()  # the warm lab is dropped: its objects must not stay frozen
        raise
    if warm is not None or _frozen.size:
        del warm
        _collect_dropped_lab()
    lab, problems = _loaded(cluster)
    # Read without the row lock (`run_detached`), the rows may be newer than the cluster's version read before
    # them: replaying the log after that version brings every object to one moment, whatever it read.
    catch_up(cluster, lab.store, cluster.resource_version)
    seen = lab.store.resource_version
    _report(lab, problems)
    return Engine(lab, key, seen)


# A warm lab this large is moved out of the cycle collector's reach (gc.freeze) when kept, and again each time it
# has doubled since: at 20,000 pods its ~700,000 objects made each full collection, which a run's allocations set
# off every few ticks, cost 0.4-0.65 s on a loaded machine. Frozen objects are never collected, so whatever drops a
# lab unfreezes them first (`_collect_dropped_lab`, `_let_go`).
FREEZE_AT_OBJECTS = 10_000


@dataclass
class _Frozen:
    size: int = 0  # objects in the lab last frozen (0: nothing is)


_frozen = _Frozen()


def _freeze_if_grown(lab: Lab) -> None:
    size = lab.store.size()
    if size < FREEZE_AT_OBJECTS or size < 2 * _frozen.size:
        return
    gc.collect()  # what is garbage now must not be frozen with the lab
    gc.freeze()
    _frozen.size = size


def _collect_dropped_lab() -> None:
    """A lab is full of reference cycles (its controllers, context and store point at each other), so dropping it
    frees nothing until the cycle collector runs: collect it before its successor is loaded, or both are in memory
    at once (a cold load at 20,000 pods peaked at 614 MiB, 430 MiB with the old lab collected first)."""
    _let_go()
    gc.collect()


def _let_go() -> None:
    """A run's lab is being dropped (the run failed, or could not be stored): its objects go back to the collector,
    which frees them in its own time."""
    gc.unfreeze()
    _frozen.size = 0


def _compacted(cluster: models.Cluster) -> int:
    """The cluster's compacted resourceVersion as committed now (not as `cluster` was read)."""
    return int(models.Cluster.objects.values_list("compacted_resource_version", flat=True).get(pk=cluster.pk))


def catch_up(cluster: models.Cluster, store: ObjectStore, since: int) -> int:
    """Replay the change log after `since` into `store` (configuration kinds are not the store's); how many."""
    entries = _log_after(cluster, since)
    _replay(store, entries)
    store.resource_version = max(store.resource_version, cluster.resource_version)
    return len(entries)


LogRow = tuple[str, str, str, str, int, dict[str, Any]]  # type, kind, namespace, name, resourceVersion, body


def _log_after(cluster: models.Cluster, since: int) -> list[LogRow]:
    """The store's kinds' changes logged after version `since`, oldest first."""
    return list(
        models.ChangeLogEntry.objects.filter(cluster=cluster, resource_version__gt=since)
        .exclude(kind__in=CONFIG_KINDS)
        .order_by("resource_version")
        .values_list("type", "kind", "namespace", "name", "resource_version", "body")
    )


def _replay(store: ObjectStore, entries: list[LogRow]) -> None:
    for entry_type, kind, namespace, name, version, body in entries:
        if entry_type == models.ChangeLogEntry.Type.DELETED:
            store.observe_deleted((kind, namespace, name), version)
        else:
            store.observe(body)


def _keep_warm(cluster: models.Cluster, lab: Lab, key: tuple[Any, ...]) -> None:
    """Keep the lab for this process's next run, once (and only if) this run's transaction commits."""
    kept = _Warm(lab, cluster.engine_token, cluster.resource_version, key, lab.declared_from)

    def keep() -> None:
        with _warm_lock:
            _warm[cluster.pk] = kept
        _freeze_if_grown(lab)

    transaction.on_commit(keep)


def forget(cluster: models.Cluster | None = None) -> None:
    """Drop the warm lab of one cluster (or all): for code that changed its rows some other way."""
    with _warm_lock:
        dropped = bool(_warm) if cluster is None else cluster.pk in _warm
        if cluster is None:
            _warm.clear()
        else:
            _warm.pop(cluster.pk, None)
    if dropped:  # a full collection walks every object the process holds: only when a lab was let go
        _collect_dropped_lab()


def _report(lab: Lab, problems: list[tuple[dict[str, Any], str]]) -> None:
    for nodepool, error in problems:
        with lab.ctx.guard("nodepool", nodepool):
            raise ManifestError(f"NodePool {nodepool['metadata']['name']} left out until fixed: {error}")


Summaries = dict[Key, dict[str, Any]]


def summaries(store: ObjectStore, keys: Iterable[Key] | None = None) -> Summaries:
    """The summary columns of the objects at `keys` (default: every object the store changed). Pods are read
    through the store's views, which the engine has mostly parsed already at their current version (parsing each
    again cost 0.4 s per 3,000 pods)."""
    found: Summaries = {}
    for kind, namespace, name in store.changed if keys is None else keys:
        obj = store.get(kind, name, namespace)
        if obj is None:
            continue
        pod = None
        if kind == "Pod" and obj["metadata"].get("uid"):
            with suppress(UnreadablePod):  # then the summary's own parse says why, as it always did
                pod = store.views.pod(obj)
        found[kind, namespace, name] = models.KubeObject.summary(obj, pod)
    return found


def persist(cluster: models.Cluster, store: ObjectStore, known: Summaries | None = None) -> None:
    """Write the objects a run or a write changed and removed, with their change-log entries; the cluster's
    resourceVersion follows (`changelog.record_lab_run`). `known`: summaries worked out beforehand (they do not
    depend on resourceVersions), so a run can work them out before it takes the row lock."""
    changed = [obj for obj in (store.get(kind, name, namespace) for kind, namespace, name in store.changed) if obj]
    texts: dict[int, str] = {}  # each changed body's JSON, encoded once for its log entry and its row
    changelog.record_lab_run(cluster, changed, store.removed, store.resource_version, texts)
    columns = dict(known or {})
    columns.update(summaries(store, [key for key in store.changed if key not in columns]))
    _upsert(cluster, changed, columns, texts)
    # One DELETE per kind and namespace, not per object: a scale-down removes hundreds of pods at once.
    removed: dict[tuple[str, str], list[str]] = defaultdict(list)
    for kind, namespace, name in store.removed:
        removed[kind, namespace].append(name)
    for (kind, namespace), names in removed.items():
        models.KubeObject.objects.filter(cluster=cluster, kind=kind, namespace=namespace, name__in=names).delete()


def _upsert(
    cluster: models.Cluster, bodies: list[dict[str, Any]], summarised: Summaries, texts: dict[int, str] | None = None
) -> None:
    """Insert or replace these objects' rows in bulk (`karpui.bulk`): the ORM's bulk_create spent most of a
    provisioning tick's save building SQL (1.8 s of 3.2 s for 11,565 rows at 5,000 pods)."""
    summaries = models.KubeObject.SUMMARY_FIELDS
    columns = ("cluster_id", "kind", "namespace", "name", "uid", "resource_version", "body", "updated_at", *summaries)
    # The defaults of the summary columns, for kinds whose summary leaves them out.
    defaults = {field: models.KubeObject._meta.get_field(field).get_default() for field in summaries}
    updated = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = []
    for obj in bodies:
        summary = {**defaults, **summarised[key_of(obj)]}
        rows.append(
            (
                cluster.pk,
                obj["kind"],
                key_of(obj)[1],
                obj["metadata"]["name"],
                obj["metadata"].get("uid", ""),
                int(obj["metadata"].get("resourceVersion", 0)),
                changelog.encoded(obj, texts),
                updated,
                *(summary[field] for field in summaries),
            )
        )
    bulk.upsert(models.KubeObject._meta.db_table, columns, rows, unique=("cluster_id", "kind", "namespace", "name"))


def save(
    cluster: models.Cluster,
    lab: Lab,
    lease: leases.Lease | None = None,
    costs_seen: list[tuple[datetime, dict[str, costs.PoolCost]]] | None = None,
    known: Summaries | None = None,
) -> None:
    if lease is not None and not lease.still_held():
        raise leases.LeaseLost(f"lease on cluster {cluster.name} lapsed; abandoning this run")
    persist(cluster, lab.store, known)
    models.LogEntry.objects.bulk_create(
        models.LogEntry(
            cluster=cluster,
            time=datetime.fromtimestamp(entry.time, UTC),
            level=entry.record.level,
            logger=entry.record.logger,
            message=entry.record.message,
            fields=dict(entry.record.fields),
        )
        for entry in lab.logs
    )
    # A NodePool row a concurrent write holds is skipped (its status is written by the next run): that writer
    # waits for this run's cluster lock to log its change, so waiting for it here would deadlock.
    statuses = lab.nodepool_status()
    for row in models.NodePool.objects.select_for_update(skip_locked=True).filter(cluster=cluster):
        status = statuses.get(row.name)
        if status is not None and status != row.status:
            row.status = status
            row.save(update_fields=["status"])
    cluster.clock = datetime.fromtimestamp(lab.now, UTC)
    cluster.lab_state = lab.to_state()
    cluster.engine_token = uuid.uuid4().hex
    claims = lab.store.list("NodeClaim")
    now = (cluster.clock, costs.by_nodepool(claims, lab.store.list("DisruptionCommand")))
    costs.record(cluster, [*(costs_seen or []), now], claims)
    cluster.save(update_fields=["clock", "lab_state", "cost_state", "engine_token"])


def run(cluster_name: str, change: Callable[[Lab], T], *, lease: leases.Lease | None = None) -> T:
    """Lock the cluster, take its lab (warm from memory where this process has it, else loaded), apply `change`
    (which may advance time), and save: all or nothing."""
    with _let_go_on_failure(), transaction.atomic():  # a failed commit drops the lab too
        cluster = _locked(cluster_name)
        if cluster.mode != models.Cluster.Mode.LAB:
            # A kwok or observe cluster's engine runs elsewhere: its mirrored objects are read, nothing runs here,
            # and only what `change` wrote is stored (the engine's own state is its to write).
            mirror = load(cluster, components="none")
            result = change(mirror)
            persist(cluster, mirror.store)
            return result
        running = engine(cluster)
        recorder = costs.Recorder()
        running.lab.observers.append(recorder)
        result = change(running.lab)
        save(cluster, running.lab, lease, recorder.timeline)
        _keep_warm(cluster, running.lab, running.config_key)
        return result


@contextmanager
def _let_go_on_failure() -> Iterator[None]:
    """A run that raises drops its lab (it may hold half a change the database never saw)."""
    try:
        yield
    except BaseException:
        _let_go()
        raise


def run_detached(cluster_name: str, change: Callable[[Lab], None], *, lease: leases.Lease | None = None) -> bool:
    """Run `change` on the cluster's lab without holding its row lock, then lock the row only to store what it did:
    a write meanwhile waits for that save alone, never for the engine. False if nothing could be stored.

    Writes committed meanwhile (from their rows, `writing`) come first: this run's resourceVersions are moved past
    theirs, and where one changed an object this run also changed, theirs stands and this run's change of it is
    dropped (the controllers are level-triggered: the next run sees the object as it now is). That is kube-apiserver's
    answer to a controller's update from a stale cache (409 Conflict); for a delete racing an update it is stricter
    than kube-apiserver, whose delete without preconditions would win. If the lab itself ran elsewhere meanwhile (a
    `karp advance`, a reset: a new engine token), or its configuration changed (a NodePool edited, disruption
    paused: what the run decided from may no longer be allowed), this run is dropped whole and the next one loads
    the lab again."""
    cluster = models.Cluster.objects.defer("lab_state").get(name=cluster_name)
    if cluster.mode != models.Cluster.Mode.LAB:
        run(cluster_name, change, lease=lease)
        return True
    token = cluster.engine_token
    with _let_go_on_failure():
        running = engine(cluster)
        lab = running.lab
        recorder = costs.Recorder()
        lab.observers.append(recorder)
        change(lab)
        known = summaries(lab.store)  # before the lock: a write waits for the save alone
        with transaction.atomic():
            current = _locked(cluster_name)
            if (
                current.mode != models.Cluster.Mode.LAB
                or current.engine_token != token
                or config_key(current) != running.config_key
                or not rebase(current, lab, running.seen)
            ):
                logger.info("lab run dropped: the cluster changed meanwhile", extra={"cluster": cluster_name})
                _let_go()
                return False
            save(current, lab, lease, recorder.timeline, known)
            _keep_warm(current, lab, running.config_key)
            return True


def rebase(cluster: models.Cluster, lab: Lab, seen: int) -> bool:
    """Put the writes of a run that saw the cluster at version `seen` after those committed since (the cluster,
    locked, is now further on): theirs go into the lab, overriding this run's change of the same object, and this
    run's versions move past theirs. False if the change log since `seen` was compacted away.

    An object of theirs that replaces this run's change of it may carry the very resourceVersion this run gave
    that change before the shift, so whatever the engine derived from that version and keyed by it (a pod's
    view, a Deployment's or node's memo) is dropped with it: the store's cache epoch moves on."""
    if cluster.resource_version == seen:
        return True
    if cluster.compacted_resource_version > seen or cluster.resource_version < seen:
        return False
    store = lab.store
    theirs = _log_after(cluster, seen)
    replaced = False
    for _, kind, namespace, name, _, _ in theirs:
        key = (kind, namespace, name)
        if key in store.changed or key in store.removed:
            replaced = True
            mine = store.get(kind, name, namespace) or store.removed.get(key)
            if kind == "Pod" and mine is not None:
                store.views.forget(mine["metadata"].get("uid", ""))
        store.changed.discard(key)
        store.removed.pop(key, None)
    if replaced:
        store.cache_epoch += 1
    shift = cluster.resource_version - seen
    for kind, namespace, name in store.changed:
        meta = store.must_get(kind, name, namespace)["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + shift)
    store.resource_version += shift
    _replay(store, theirs)
    return True


@dataclass
class RowRun:
    """What a change needs that reads and writes a few objects and runs no controller: the store and the time."""

    store: RowStore
    now: float


def run_rows(cluster_name: str, change: Callable[[RowRun], T]) -> T:
    """Lock the cluster, let `change` read and write the few objects it names (from their rows), and store what it
    wrote: a person's decision on a command, in any cluster's mode, without loading the cluster."""
    with transaction.atomic():
        cluster = _locked(cluster_name)
        rows = RowStore(cluster)
        result = change(RowRun(rows, cluster.clock.timestamp()))
        persist(cluster, rows)
        return result


def _locked(cluster_name: str) -> models.Cluster:
    # The lab state is read only when the lab is loaded cold: decoding it on every warm run would cost as much as
    # the run itself at 20,000 pods.
    return models.Cluster.objects.select_for_update().defer("lab_state").get(name=cluster_name)


def engine_alive(cluster: models.Cluster) -> bool:
    """Whether a worker is ticking this cluster: it ticked within the last few tick periods, or holds the lease now
    (a tick longer than those periods must not make a write run the whole lab itself, loading it a second time)."""
    if leases.taken(cluster):
        return True
    if cluster.ticked_at is None:
        return False
    since = (timezone.now() - cluster.ticked_at).total_seconds()
    return since < ENGINE_ALIVE_TICKS * settings.KARPUI_TICK_SECONDS


@contextmanager
def writing(cluster_name: str) -> Iterator[ClusterAPI]:
    """The cluster's object API for one all-or-nothing write from the CLI, the web or the Kubernetes API: what is
    written inside the block is committed together (or not at all, if the block raises).

    While a worker ticks the cluster (or for a kwok or observe cluster, whose engine runs elsewhere), the write is
    stored at once from the few rows it reads (an API server's write), and the engine reacts at its next tick,
    having caught up from the change log: the write never loads the cluster, whatever its size. With no engine running (the CLI alone, the tests), the cluster's own
    components react here, at the current time, as a real cluster's would."""
    running: Engine | None = None
    try:
        with transaction.atomic():
            cluster = _locked(cluster_name)
            if cluster.mode != models.Cluster.Mode.LAB or engine_alive(cluster):
                rows = RowStore(cluster)
                yield rows
                persist(cluster, rows)
                return
            running = engine(cluster)
            yield running.lab.store
            running.lab.settle()
            save(cluster, running.lab)
            _keep_warm(cluster, running.lab, running.config_key)
    except BaseException:
        if running is not None:  # a failed write (or commit) drops the lab it ran
            _let_go()
        raise


def advance(cluster_name: str, seconds: float) -> Lab:
    def step(lab: Lab) -> Lab:
        lab.advance(seconds)
        return lab

    return run(cluster_name, step)


# Wall seconds of engine steps one tick may run (it stops between two steps, the lab staying at the moment it was
# settling, and the next tick goes on from there): well inside the 30 s lease, and the lab keeps up with wall time.
# The steps run before the row lock is taken: a write waits only for the save.
TICK_BUDGET_SECONDS = 1.0
# Objects one tick may change before it stops, likewise between two steps: the save holds the row lock (about
# 0.4 s for this many on SQLite), and the budget above does not see it coming, so a large scale-up is written back
# over several ticks and a write waits well under two seconds for any of them.
TICK_MAX_CHANGES = 2500


def tick(cluster: models.Cluster, *, now: datetime, budget: float = TICK_BUDGET_SECONDS) -> bool:
    """Move a lab cluster's clock on with wall time, reacting to every write on the way, if no other worker holds
    the cluster; False if one does.

    The clock moves by the wall time since the last tick, or up to wall time when it is further behind than that
    (it catches up after a slow tick or a restart). A lab that `karp advance` put ahead of wall time so keeps
    running at wall time's rate, that far ahead, instead of standing still until wall time caught up with it.
    """
    with leases.held(cluster.id) as lease:
        if lease is None:
            return False
        stop_at = time.monotonic() + budget
        # Read under the lease: another worker may have ticked since `cluster` was loaded.
        last = models.Cluster.objects.filter(id=cluster.id).values_list("ticked_at", flat=True).first()
        elapsed = max((now - last).total_seconds(), 0.0) if last is not None else 0.0

        def step(lab: Lab) -> None:
            seconds = max(now.timestamp() - lab.now, elapsed)

            def out_of_time() -> bool:
                return time.monotonic() > stop_at or len(lab.store.changed) + len(lab.store.removed) >= TICK_MAX_CHANGES

            lab.advance(seconds, out_of_time=out_of_time)

        with leases.renewing(lease):
            stored = run_detached(cluster.name, step, lease=lease)
        if stored:  # else the next tick makes up the time this one could not store
            models.Cluster.objects.filter(id=cluster.id).update(ticked_at=now)
        return True


def reset(cluster_name: str) -> None:
    with transaction.atomic():
        cluster = models.Cluster.objects.select_for_update().get(name=cluster_name)
        models.KubeObject.objects.filter(cluster=cluster).exclude(kind="Namespace").delete()
        models.LogEntry.objects.filter(cluster=cluster).delete()
        models.NodePool.objects.filter(cluster=cluster).update(status={})
        cluster.lab_state = {}
        cluster.engine_token = ""  # no process may go on from the lab it kept in memory
        cluster.save(update_fields=["lab_state", "engine_token"])
        changelog.compact(cluster.pk)  # objects went without DELETED events: watchers must list again


def objects(cluster: models.Cluster, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    rows = models.KubeObject.objects.filter(cluster=cluster, kind=kind)
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    return [row.body for row in rows.order_by("namespace", "name")]
