"""Karpenter's provisioning batcher: a window that stays open while new pods keep arriving.

A first trigger opens the window; each trigger by a pod not yet seen in it extends the window to `idle` seconds
after that trigger, but never past `maximum` seconds after it opened. Re-triggers of a seen pod do not extend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.options import BATCH_IDLE_SECONDS, BATCH_MAX_SECONDS


@dataclass
class Batcher:
    idle: float = BATCH_IDLE_SECONDS  # the cluster's options set both (ProvisioningController.reconcile)
    maximum: float = BATCH_MAX_SECONDS
    opened_at: float | None = None
    last_new_at: float | None = None
    seen: set[str] = field(default_factory=set)

    def trigger(self, uid: str, now: float) -> None:
        if self.opened_at is None:
            self.opened_at = self.last_new_at = now
            self.seen = {uid}
            return
        if uid not in self.seen:
            self.seen.add(uid)
            self.last_new_at = now

    @property
    def closes_at(self) -> float | None:
        if self.opened_at is None or self.last_new_at is None:
            return None
        return min(self.last_new_at + self.idle, self.opened_at + self.maximum)

    def due(self, now: float) -> bool:
        closes = self.closes_at
        return closes is not None and now >= closes

    def reset(self) -> None:
        self.opened_at = self.last_new_at = None
        self.seen = set()

    def to_state(self) -> dict[str, object]:
        return {"opened_at": self.opened_at, "last_new_at": self.last_new_at, "seen": sorted(self.seen)}

    @classmethod
    def from_state(cls, state: dict[str, object]) -> Batcher:
        batcher = cls()
        batcher.opened_at = state.get("opened_at")  # type: ignore[assignment]
        batcher.last_new_at = state.get("last_new_at")  # type: ignore[assignment]
        batcher.seen = set(state.get("seen") or [])  # type: ignore[call-overload]
        return batcher
