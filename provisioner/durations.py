"""Go-style durations ("720h", "1h30m", "10s", "Never") as whole seconds."""

from __future__ import annotations

import re

NEVER = "Never"
_DURATION = re.compile(r"^(?:[0-9]+(?:h|m|s))+$")
_PART = re.compile(r"([0-9]+)(h|m|s)")
_UNIT = {"h": 3600, "m": 60, "s": 1}
# Go's time.Duration is an int64 of nanoseconds: Kubernetes and Karpenter read no longer duration than this.
MAX_SECONDS = (2**63 - 1) // 10**9


class DurationError(ValueError):
    """A string that is not a duration of hours, minutes and seconds."""


def parse_duration(text: str, *, allow_never: bool = False) -> int | None:
    """Seconds in `text`; None for "Never" when allowed."""
    if allow_never and text == NEVER:
        return None
    if not isinstance(text, str) or len(text) > 64 or not _DURATION.match(text):
        expected = '"Never" or ' if allow_never else ""
        shown = repr(text[:64]) + "…" if isinstance(text, str) and len(text) > 64 else repr(text)
        raise DurationError(f"invalid duration {shown}: expected {expected}a sequence like 720h, 1h30m or 10s")
    seconds = sum(int(amount) * _UNIT[unit] for amount, unit in _PART.findall(text))
    if seconds > MAX_SECONDS:
        raise DurationError(f"invalid duration {text!r}: longer than {format_duration(MAX_SECONDS)}, Go's largest")
    return seconds


def format_duration(seconds: int | None) -> str:
    """Compact form: 3600 -> "1h", 90 -> "1m30s", None -> "Never"."""
    if seconds is None:
        return NEVER
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)
