"""The warm engine: a process keeps the lab it last ran and goes on from memory, catching up from the change log.

A process keeps the lab it last ran, with the token that run wrote on the cluster's row. Its next run goes on from
memory while the token is still its own: the only writes since were single writes (`lab.writing` while an engine
is alive, `lab.run_rows`), which left the token alone and logged every change, so catching up is replaying the
change log since the version it saved (and, for a tick's run made without the row lock, `rebase`). A run anywhere
else (a `karp advance`, a write with no engine alive) wrote a new token, and the lab is loaded again; so is one
whose change log was compacted meanwhile, or reset. A failed run drops the warm lab: it may hold half a change the
database never saw.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from karpui import models
from karpui.clusters.configuration import config_key, lab_config
from provisioner.cluster.memory import ObjectStore
from provisioner.lab import Lab
from provisioner.manifests import ManifestError

logger = logging.getLogger(__name__)


Problems = list[tuple[dict[str, Any], str]]  # NodePools left out, with why


def loaded(cluster: models.Cluster, components: str | None = None) -> tuple[Lab, Problems]:
    """The cluster's lab loaded cold from its rows, and the NodePools left out of it (`report` says why)."""
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


def report(lab: Lab, problems: list[tuple[dict[str, Any], str]]) -> None:
    """Each NodePool left out of the lab, and why, recorded on the lab's context and through its guard."""
    lab.ctx.unparsed_nodepools = {
        nodepool["metadata"]["name"]: f"left out until fixed: {error}" for nodepool, error in problems
    }
    for nodepool, error in problems:
        with lab.ctx.guard("nodepool", nodepool):
            raise ManifestError(f"NodePool {nodepool['metadata']['name']} left out until fixed: {error}")


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
                    report(lab, problems)
                return Engine(lab, key, seen)
            # This runs without the row lock: the log was pruned past the lab's version between the check above
            # and the catch-up's read, so what the catch-up missed is gone from it. The lab is loaded again.
            logger.info("warm lab dropped: the change log was compacted past it", extra={"cluster": cluster.name})
            del lab
    except BaseException:
        let_go()  # the warm lab is dropped: its objects must not stay frozen
        raise
    if warm is not None or _frozen.size:
        del warm
        _collect_dropped_lab()
    lab, problems = loaded(cluster)
    # Read without the row lock (`run_detached`), the rows may be newer than the cluster's version read before
    # them: replaying the log after that version brings every object to one moment, whatever it read.
    catch_up(cluster, lab.store, cluster.resource_version)
    seen = lab.store.resource_version
    report(lab, problems)
    return Engine(lab, key, seen)


# A warm lab this large is moved out of the cycle collector's reach (gc.freeze) when kept, and again each time it
# has doubled since: at 20,000 pods its ~700,000 objects made each full collection, which a run's allocations set
# off every few ticks, cost 0.4-0.65 s on a loaded machine. Frozen objects are never collected, so whatever drops a
# lab unfreezes them first (`_collect_dropped_lab`, `let_go`).
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
    let_go()
    gc.collect()


def let_go() -> None:
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


def keep_warm(cluster: models.Cluster, lab: Lab, key: tuple[Any, ...]) -> None:
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


def rebase(cluster: models.Cluster, lab: Lab, seen: int) -> bool:
    """Put the writes of a run that saw the cluster at version `seen` after those committed since (the cluster,
    locked, is now further on): theirs go into the lab, overriding this run's change of the same object, and this
    run's versions move past theirs. False if the change log since `seen` was compacted away.

    An object of theirs that replaces this run's change of it may carry the very resourceVersion this run gave
    that change before the shift, so whatever the engine derived from that version and keyed by it (a pod's
    view, a Deployment's or node's memo) is dropped with it: the store's cache epoch moves on."""
    return rebase_store(cluster, lab.store, seen)


def rebase_store(cluster: models.Cluster, store: ObjectStore, seen: int) -> bool:
    """`rebase` of a store alone (a real cluster's engine keeps only karpui's own objects in one)."""
    if cluster.resource_version == seen:
        return True
    if cluster.compacted_resource_version > seen or cluster.resource_version < seen:
        return False
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
