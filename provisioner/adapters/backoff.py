"""Jittered exponential back-off, as client-go's reflector backs off between failed lists and watches: each wait is
`factor` times the last (capped at `maximum`) plus up to `jitter` times itself at random, so many clients that
failed together do not retry together."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    rng: random.Random = field(default_factory=random.Random)
    _step: float = 0.0

    def next(self) -> float:
        """The next wait, in seconds."""
        self._step = self.initial if self._step == 0 else min(self._step * self.factor, self.maximum)
        return self._step * (1 + self.jitter * self.rng.random())

    def reset(self) -> None:
        """After a success: the next failure starts from `initial` again."""
        self._step = 0.0
