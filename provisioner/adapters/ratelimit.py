"""Client-side rate limiting as client-go's flowcontrol token bucket: `qps` requests a second on average, bursts of
up to `burst`; a request that finds the bucket empty waits for its token instead of failing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps < 0 or burst < 1:
            raise ValueError(f"qps must be >= 0 and burst >= 1, got qps={qps}, burst={burst}")
        self.qps = qps  # 0: no limit
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds spent waiting in total, for metrics and tests

    def reserve(self) -> float:
        """Take a token now, possibly borrowed from the future; how long the caller must wait before using it."""
        if self.qps == 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def take(self) -> float:
        """Wait for a token; the seconds waited."""
        wait = self.reserve()
        if wait > 0:
            self.waited += wait
            self._sleep(wait)
        return wait
