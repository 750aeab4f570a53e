"""Durations as written in specs: ``500ms``, ``30s``, ``3m``, ``1h30m``, ``2d``, or bare seconds."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


def parse_duration(text: str | int | float) -> float:
    """Seconds in a duration; raises ValueError with a message fit for a diagnostic.

    >>> parse_duration("1h30m")
    5400.0
    >>> parse_duration("500ms")
    0.5
    >>> parse_duration(20)
    20.0
    """
    if isinstance(text, bool):
        raise ValueError("a duration is a number of seconds or text like 500ms, 3m, 1h30m")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return float(text)
    value = text.strip()
    if _NUMBER.match(value):
        return float(value)
    if not _WHOLE.match(value):
        raise ValueError(
            f"{text!r} is not a duration; write a number with a unit: ms, s, m, h, d "
            "(for example 500ms, 3m, 1h30m)"
        )
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(value))


def format_duration(seconds: float) -> str:
    """The shortest spec-style text for a number of seconds.

    >>> format_duration(5400)
    '1h30m'
    >>> format_duration(0.25)
    '250ms'
    """
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)}ms"
    parts = []
    remaining = seconds
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        count = int(remaining // size)
        if count:
            parts.append(f"{count}{unit}")
            remaining -= count * size
    if remaining or not parts:
        whole = int(remaining)
        parts.append(f"{whole}s" if remaining == whole else f"{remaining:g}s")
    return "".join(parts)


def setting_duration(value: object) -> float:
    """A duration setting (``interlock.yaml``) in seconds: a number or text like ``3m``;
    ValueError saying why for anything else, infinities included.

    >>> setting_duration("1m30s"), setting_duration(2)
    (90.0, 2.0)
    """
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like 500ms, 3m, 1h30m")
    seconds = parse_duration(value)
    if not math.isfinite(seconds):
        raise ValueError("a duration must be a finite number of seconds")
    return seconds
