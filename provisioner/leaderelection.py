"""Leader election with a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it (the Python client has
only a ConfigMap lock): so that of several engines pointed at one cluster exactly one acts.

* A candidate holds the lease while `spec.holderIdentity` is its identity; it renews `spec.renewTime` every
  `retry_period`, each write carrying the lease's resourceVersion (409 Conflict: someone else wrote first, and this
  attempt failed).
* Another candidate may take the lease only when it is free (no holder, as a released lease is) or expired: the
  lease's record has not changed for `leaseDurationSeconds` *as this candidate observed it on its own monotonic
  clock*. Comparing the record's renewTime with the local wall clock would trust two machines' clocks to agree.
* A leader that could not renew for `renew_deadline` (shorter than the lease duration) stops leading before anyone
  else may take over, so two never act at once; `is_leader()` says so without a request.
* `release()` on an orderly stop hands the lease over at once (holder emptied, duration 1 s), as Karpenter's
  LeaderElectionReleaseOnCancel does.
* `fence()` is the check before each write a leader sends: it raises `NotLeading` unless the lease was renewed
  within the renew deadline. Checking only at the start of a step let a leader paused mid-step (SIGSTOP, a long GC,
  a stalled VM) wake after another had taken over and finish its step: every object it created then was created
  twice. Fenced per write, a write leaves at most `renew_deadline` after the last renewal, while another candidate
  takes over no sooner than `lease_duration` after it observed that renewal: the difference (5 s by default) is
  the margin a write has to reach the API server. Monotonic time goes on while a process is stopped, so the paused
  leader's first write after it wakes is refused.

It needs only get, create and update of a Lease (the cluster port, or an uncached client of a real API server).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from provisioner.cluster.objects import APIError, NotLeading, Obj

logger = logging.getLogger(__name__)


class LeaseStore(Protocol):
    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None: ...

    def create(self, obj: Obj) -> Obj: ...

    def update(self, obj: Obj, *, spec_changed: bool = False) -> Obj: ...


@dataclass(frozen=True)
class ElectionConfig:
    identity: str
    name: str = "karpui-leader-election"
    namespace: str = "default"
    lease_duration: float = 15.0  # client-go's and Karpenter's defaults
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("identity: a candidate needs a non-empty identity")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "retry_period < renew_deadline < lease_duration is required, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )


def micro_time(seconds: float) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        config: ElectionConfig,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.config = config
        self._wall = wall
        self._monotonic = monotonic
        self._observed: dict[str, Any] | None = None  # the lease's spec as last seen
        self._observed_at = 0.0  # when it was last seen to change (monotonic)
        self._renewed_at: float | None = None  # when this candidate last wrote itself as holder (monotonic)
        self.transitions = 0  # times this candidate became leader
        self._release_on_stop = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # One attempt --------------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Holding the lease, renewed within the renew deadline."""
        return self._renewed_at is not None and self._monotonic() - self._renewed_at < self.config.renew_deadline

    @property
    def holder(self) -> str:
        """Who holds the lease as this candidate last read it ("" when free or not read yet)."""
        return str((self._observed or {}).get("holderIdentity") or "")

    def fence(self) -> None:
        """Raise NotLeading unless this candidate may write now (see the module's docstring)."""
        if self._renewed_at is None:
            raise NotLeading(f"{self.config.identity} does not hold lease {self.config.namespace}/{self.config.name}")
        age = self._monotonic() - self._renewed_at
        if age >= self.config.renew_deadline:
            raise NotLeading(
                f"{self.config.identity} last renewed lease {self.config.namespace}/{self.config.name} {age:.1f} s ago"
                f" (renew deadline {self.config.renew_deadline:g} s): another candidate may lead"
            )

    def try_acquire_or_renew(self) -> bool:
        """Read the lease and take or renew it if this candidate may; whether it holds it now."""
        config, now = self.config, self._monotonic()
        lease = self.store.get("Lease", config.name, config.namespace)
        if lease is None:
            return self._write(None, self._spec(None))
        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._observed, self._observed_at = spec, now
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or config.lease_duration)
        if holder and holder != config.identity and now < self._observed_at + duration:
            self._renewed_at = None
            return False
        return self._write(lease, self._spec(spec))

    def _spec(self, current: dict[str, Any] | None) -> dict[str, Any]:
        config, wall = self.config, micro_time(self._wall())
        held = current is not None and current.get("holderIdentity") == config.identity
        transitions = int((current or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": config.identity,
            "leaseDurationSeconds": int(config.lease_duration),
            "acquireTime": (current or {}).get("acquireTime") if held else wall,
            "renewTime": wall,
            "leaseTransitions": transitions if held or current is None else transitions + 1,
        }

    def _write(self, lease: Obj | None, spec: dict[str, Any]) -> bool:
        config = self.config
        was_leader = self.is_leader()
        try:
            if lease is None:
                self.store.create(
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": config.name, "namespace": config.namespace},
                        "spec": spec,
                    }
                )
            else:
                lease["spec"] = spec
                self.store.update(lease, spec_changed=True)
        except APIError as error:  # Conflict or AlreadyExists: another candidate wrote first; or the API failed
            logger.info("lease %s/%s not written: %s", config.namespace, config.name, error)
            return self.is_leader()
        now = self._monotonic()
        self._observed, self._observed_at, self._renewed_at = spec, now, now
        if not was_leader:
            self.transitions += 1
            logger.info("%s became leader of lease %s/%s", config.identity, config.namespace, config.name)
        return True

    def release(self) -> bool:
        """Give the lease up at once, if this candidate holds it."""
        config = self.config
        was_leader, self._renewed_at = self.is_leader(), None
        if not was_leader:
            return False
        lease = self.store.get("Lease", config.name, config.namespace)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != config.identity:
            return False
        lease["spec"] = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
        lease["spec"]["renewTime"] = micro_time(self._wall())
        try:
            self.store.update(lease, spec_changed=True)
        except APIError:
            return False
        return True

    # Running in a thread ------------------------------------------------------------------------------------

    def run(self) -> None:
        """Try every retry period (jittered, as client-go's JitterUntil) until stopped; then release."""
        rng = random.Random()  # noqa: S311 - jitter, not secrets
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
            except Exception:  # a failing API must not end the candidate: it simply is not leader meanwhile
                logger.exception("leader election attempt failed")
            self._stop.wait(self.config.retry_period * (1 + 0.2 * rng.random()))
        if self._release_on_stop:
            self.release()
        else:
            self._renewed_at = None

    def start(self) -> LeaderElector:
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=f"leader-{self.config.identity}", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True, timeout: float = 10.0) -> None:
        """Stop trying; release the lease when `release` (an orderly stop), else just go quiet (as a crash)."""
        self._release_on_stop = release
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
