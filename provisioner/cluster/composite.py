"""One cluster port over two stores: the cluster's own API (a real API server, through the kube adapter) and karpui's
store for what is karpui's alone (its DisruptionCommands, and in observe mode its Events), routed by kind.

The mode decides what may be written to the cluster. kwok mode: everything the controllers write (karpui is the
provisioner). observe mode: only what the gate over Karpenter writes (controllers/holds.py: its hold budgets in
NodePools and `karpenter.sh/do-not-disrupt` on Nodes during a release) and the deletion of a NodeClaim a person asked
to disrupt; any other write there raises `Forbidden` before it reaches the API server, so observing can never change
the observed cluster by mistake. In observe mode karpui's own Events (its explanations) are kept in its store beside
the cluster's: a list of Events has both, a get or a write is karpui's own.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from provisioner.cluster.api import ClusterAPI
from provisioner.cluster.objects import APIError, Obj
from provisioner.selectors import LabelSelector

KWOK, OBSERVE = "kwok", "observe"
# The kinds that exist only in karpui, whatever the mode.
KARPUI_KINDS = frozenset({"DisruptionCommand"})
# What observe mode writes to the cluster: (kind, verb).
OBSERVE_WRITES = frozenset({("NodeClaim", "delete"), ("NodePool", "update"), ("Node", "patch")})


class Forbidden(APIError):
    """A write observe mode does not make (403, as the API server would answer a role without the verb)."""

    code = 403
    reason = "Forbidden"


class CompositeCluster:
    def __init__(self, remote: ClusterAPI, local: ClusterAPI, *, mode: str, local_kinds: Iterable[str] = ()) -> None:
        if mode not in (KWOK, OBSERVE):
            raise ValueError(f"mode must be {KWOK} or {OBSERVE}, got {mode!r}")
        self.remote = remote
        self.local = local
        self.mode = mode
        self.local_kinds = frozenset(local_kinds) | KARPUI_KINDS | (frozenset({"Event"}) if mode == OBSERVE else set())
        self.remote_writes = 0  # writes sent to the cluster: observe mode's tests count them

    def _store(self, kind: str) -> ClusterAPI:
        return self.local if kind in self.local_kinds else self.remote

    def _writing(self, kind: str, verb: str) -> ClusterAPI:
        store = self._store(kind)
        if store is self.remote:
            if self.mode == OBSERVE and (kind, verb) not in OBSERVE_WRITES:
                raise Forbidden(
                    f"observe mode does not {verb} {kind} objects in the cluster (it updates NodePools' budgets, "
                    "patches Nodes' annotations and deletes NodeClaims only)"
                )
            self.remote_writes += 1
        return store

    # Reads ----------------------------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._store(kind).get(kind, name, namespace)

    def must_get(self, kind: str, name: str, namespace: str = "") -> Obj:
        return self._store(kind).must_get(kind, name, namespace)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> builtins.list[Obj]:
        if kind == "Event" and self.mode == OBSERVE:
            return [
                *self.local.list(kind, namespace, selector, fields),
                *self.remote.list(kind, namespace, selector, fields),
            ]
        return self._store(kind).list(kind, namespace, selector, fields)

    def scan(self, kind: str) -> builtins.list[Obj]:
        if kind == "Event" and self.mode == OBSERVE:
            return [*self.local.scan(kind), *self.remote.scan(kind)]
        return self._store(kind).scan(kind)

    def kind_version(self, kind: str) -> int:
        if kind == "Event" and self.mode == OBSERVE:
            return self.local.kind_version(kind) + self.remote.kind_version(kind)
        return self._store(kind).kind_version(kind)

    # Writes ---------------------------------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        return self._writing(obj["kind"], "create").create(obj)

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj:
        return self._writing(obj["kind"], "update").update(obj, spec_changed=spec_changed)

    def patch(self, kind: str, name: str, namespace: str, patch: Mapping[str, Any]) -> Obj:
        return self._writing(kind, "patch").patch(kind, name, namespace, patch)

    def delete(self, kind: str, name: str, namespace: str = "", *, grace_period_seconds: int | None = None) -> Obj:
        return self._writing(kind, "delete").delete(kind, name, namespace, grace_period_seconds=grace_period_seconds)

    def remove_finalizer(self, obj: Obj, finalizer: str) -> None:
        self._writing(obj["kind"], "update").remove_finalizer(obj, finalizer)

    def evict(self, pod: Obj) -> None:
        self._writing("Pod", "evict").evict(pod)

    def evict_all(self, pods: Sequence[Obj]) -> builtins.list[APIError | None]:
        return self._writing("Pod", "evict").evict_all(pods)
