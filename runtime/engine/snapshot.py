"""The session snapshot: versioned JSON of everything a restart needs.

Configuration (in the engine's order), history memory, context, armed timers (absolute
deadlines) and events accepted but not yet processed. ``SNAPSHOT_VERSION`` is bumped on
every change of shape, with a function in ``MIGRATIONS`` that upgrades the previous one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

SNAPSHOT_FORMAT = "interlock.session"
SNAPSHOT_VERSION = 1

# MIGRATIONS[n] upgrades a version-n snapshot (as JSON data) to version n + 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


class SnapshotError(ValueError):
    """A snapshot cannot be written (context not JSON) or read (unknown version, shape)."""


@dataclass(frozen=True, slots=True)
class Timer:
    """An armed ``after`` transition: its timer event fires at ``deadline``."""

    event: str
    state: str
    deadline: float


@dataclass(frozen=True)
class Snapshot:
    machine: str
    configuration: tuple[str, ...]
    history: Mapping[str, tuple[str, ...]]
    context: Mapping[str, Any]
    timers: tuple[Timer, ...] = ()
    pending: tuple[tuple[str, Mapping[str, Any]], ...] = field(default=())
    terminated: bool = False

    def to_json(self) -> dict[str, Any]:
        data = {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "machine": self.machine,
            "configuration": list(self.configuration),
            "history": {k: list(v) for k, v in self.history.items()},
            "context": dict(self.context),
            "timers": [{"event": t.event, "state": t.state, "deadline": t.deadline}
                       for t in self.timers],
            "pending": [{"event": e, "data": dict(d)} for e, d in self.pending],
            "terminated": self.terminated,
        }
        _check_json(data)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        data = migrate(dict(data))
        try:
            return cls(
                machine=str(data["machine"]),
                configuration=tuple(data["configuration"]),
                history={str(k): tuple(v) for k, v in data["history"].items()},
                context=dict(data["context"]),
                timers=tuple(Timer(str(t["event"]), str(t["state"]), float(t["deadline"]))
                             for t in data["timers"]),
                pending=tuple((str(p["event"]), dict(p["data"])) for p in data["pending"]),
                terminated=bool(data["terminated"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise SnapshotError(f"malformed session snapshot: {reason}") from None


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Upgrade snapshot data to the current version, one step at a time."""
    if data.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError("not an interlock session snapshot")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise SnapshotError(f"snapshot has no valid version: {version!r}")
    if version > SNAPSHOT_VERSION:
        raise SnapshotError(f"snapshot version {version} is newer than this interlock "
                            f"(reads up to {SNAPSHOT_VERSION}); upgrade interlock")
    while version < SNAPSHOT_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
        data["version"] = version
    return data


def _check_json(data: dict[str, Any]) -> None:
    try:
        json.dumps(data["context"], allow_nan=False)  # the common case: one pass
    except (TypeError, ValueError):
        _name_the_field(data["context"])
    for timer in data["timers"]:
        if not math.isfinite(timer["deadline"]):
            raise SnapshotError(f"timer {timer['event']!r} has no finite deadline")


def _name_the_field(context: dict[str, Any]) -> None:
    for key, value in context.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SnapshotError(
                f"context field {key!r} cannot be saved: {exc} (session context must be "
                "JSON: numbers, text, booleans, null, lists and mappings with text keys)"
            ) from None
