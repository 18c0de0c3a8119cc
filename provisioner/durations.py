"""Go-style durations: Kubernetes' and Karpenter's API fields ("720h", "1h30m", "10s", "Never") as whole seconds, and
Go's time.ParseDuration for Karpenter's options ("500ms", "1.5s")."""

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


def go_duration(seconds: int) -> str:
    """Go's time.Duration.String of whole seconds, as a metav1.Duration field is written: 223h -> "223h0m0s", 90 ->
    "1m30s", 0 -> "0s"."""
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


# time.ParseDuration's units, in seconds.
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_NUMBER = re.compile(r"[0-9]*(?:\.[0-9]*)?")
_GO_UNIT = re.compile(r"[^0-9.]*")


def parse_go_duration(text: str) -> float:
    """Seconds in `text` as Go's time.ParseDuration reads it: an optional sign, then decimal numbers each with a unit
    (`300ms`, `1.5h`, `2h45m`), or `0`; Go's errors otherwise (`time: invalid duration "x"`, `time: missing unit in
    duration "1"`, `time: unknown unit "d" in duration "1d"`)."""
    quoted = _quoted(text)
    rest = text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return 0.0
    if not rest:
        raise DurationError(f"time: invalid duration {quoted}")
    seconds, position = 0.0, 0
    while position < len(rest):
        number = _GO_NUMBER.match(rest, position)
        assert number is not None  # the pattern matches the empty string
        if number.group() in ("", "."):
            raise DurationError(f"time: invalid duration {quoted}")
        unit = _GO_UNIT.match(rest, number.end())
        assert unit is not None
        if not unit.group():
            raise DurationError(f"time: missing unit in duration {quoted}")
        if unit.group() not in _GO_UNITS:
            raise DurationError(f"time: unknown unit {_quoted(unit.group())} in duration {quoted}")
        seconds += float(number.group()) * _GO_UNITS[unit.group()]
        position = unit.end()
    if seconds > MAX_SECONDS:
        raise DurationError(f"time: invalid duration {quoted}")
    return -seconds if text[:1] == "-" else seconds


def _quoted(text: str) -> str:
    """Go's strconv.Quote, for what an error shows (at most 64 characters of it)."""
    shown = text if len(text) <= 64 else text[:64] + "…"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'
