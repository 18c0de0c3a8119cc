"""The object API a controller may use on any cluster: the lab's in-memory API server or a real one.

Objects are Kubernetes-shaped dicts (`objects.Obj`). What every implementation guarantees:

* `get` and `list` return the implementation's current objects. A caller that changes one must hand it back with
  `update` (or `patch`) in the same reconcile, or discard the change by reading it again; objects are never shared
  between clusters.
* `scan` returns every object of a kind, unsorted and unfiltered, for reading only: a caller never changes them.
* `list` returns objects sorted by namespace, then name, filtered by namespace (None: all), a label selector and
  exact-match field selectors (`{"spec.nodeName": "node-a"}`, `{"metadata.name": "x"}`).
* Every write bumps the cluster's resourceVersion and stores it in `metadata.resourceVersion`; `update` of an
  object whose resourceVersion is not the stored one raises `Conflict` (409); `spec_changed=True` bumps
  `metadata.generation`, as the API server does when a spec changes.
* `create` raises `AlreadyExists` (409) for a taken name; it fills `uid`, `creationTimestamp` and `generation`.
* `delete` of an object with finalizers only sets `deletionTimestamp` (once); the object goes when the last
  finalizer is removed (`remove_finalizer`). A missing object raises `NotFound` (404).
* `evict` is the eviction subresource: it deletes the pod, or raises `TooManyRequests` (429) when a
  PodDisruptionBudget allows no more disruptions. `evict_all` evicts many pods (a remote cluster's at once, as
  Karpenter's eviction queue does) and answers, pod by pod, None or the error `evict` would have raised.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from provisioner.cluster.objects import APIError, NotFound, Obj
from provisioner.selectors import LabelSelector


class ClusterReader(Protocol):
    """The read half of the port: what views and explanations need."""

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None: ...

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> list[Obj]: ...

    def scan(self, kind: str) -> builtins.list[Obj]:
        """Every object of `kind`, in no particular order, to read and never to change: the implementation's own
        objects (a cache's, without the copies its `list` makes), for a controller that only reads many of them."""
        ...

    def kind_version(self, kind: str) -> int:
        """A number that changes whenever an object of `kind` is written (a cache bumps it on each watch event):
        a controller that read only unchanged kinds since its last run may skip the run."""
        ...


class ClusterAPI(ClusterReader, Protocol):
    """Reads and writes, as a controller makes them."""

    def must_get(self, kind: str, name: str, namespace: str = "") -> Obj: ...

    def create(self, obj: Obj) -> Obj: ...

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj: ...

    def patch(self, kind: str, name: str, namespace: str, patch: Mapping[str, Any]) -> Obj:
        """Apply a JSON merge patch (RFC 7386) to the stored object."""
        ...

    def delete(self, kind: str, name: str, namespace: str = "", *, grace_period_seconds: int | None = None) -> Obj:
        """Delete (DeleteOptions.gracePeriodSeconds `grace_period_seconds`: a pod's time to stop; None, its own)."""
        ...

    def remove_finalizer(self, obj: Obj, finalizer: str) -> None: ...

    def evict(self, pod: Obj) -> None: ...

    def evict_all(self, pods: Sequence[Obj]) -> builtins.list[APIError | None]: ...


def evict_each(api: ClusterAPI, pods: Sequence[Obj]) -> builtins.list[APIError | None]:
    """`evict_all` one pod after another: a pod already gone is evicted."""
    outcomes: builtins.list[APIError | None] = []
    for pod in pods:
        try:
            api.evict(pod)
            outcomes.append(None)
        except NotFound:
            outcomes.append(None)
        except APIError as error:
            outcomes.append(error)
    return outcomes
