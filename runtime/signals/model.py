"""Live signals (seed 004): what a signal file holds, how it is named, and how it is checked.

A signal file is a small YAML mapping::

    type: STEER          # STEER | INFO | PAUSE | ABORT | APPROVE | SKIP
    target: ALL          # ALL, or the name of one consumer (Ralph-Orchestrator, Ralph-Executor)
    message: "Use bar, not foo."
    iteration: 1         # optional; APPROVE/SKIP for another iteration are not applied
    task: T2             # optional; for the subagent working on that task only

named ``signal.<YYMMDD-HHmmss>-<ms>-<random>.yaml`` so that automated writers never
collide (seed 004's forward-compatibility note); the seed's own second-level names are
read too, with a 6-digit date as in its schema (``signal.260208-143000.yaml``) or an
8-digit one as in its workflow example (``signal.20260208-143000.yaml``). ``target`` may
be left out, as in the seed's example: it means ``ALL``. The name without ``signal.`` and
``.yaml`` is the signal's id, unique within its mailbox. Everything here is pure: no
file system, no clock (times are passed in).
"""

from __future__ import annotations

import difflib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from interlock.machines import SpecError
from interlock.machines.yamlsrc import parse_yaml

SIGNAL_TYPES = ("STEER", "INFO", "PAUSE", "ABORT", "APPROVE", "SKIP")
UNIVERSAL_TYPES = ("STEER", "INFO", "PAUSE", "ABORT")  # any consumer may take them
STATE_SPECIFIC_TYPES = ("APPROVE", "SKIP")  # only a state that accepts them takes them
NEEDS_MESSAGE = ("STEER", "INFO")
TARGET_ALL = "ALL"
MAX_SIGNAL_BYTES = 64 * 1024
FIELDS = ("type", "target", "message", "iteration", "task")

NAME_RE = re.compile(r"^signal\.(?P<id>(?P<stamp>(?:\d{2})?\d{6}-\d{6})(?:-(?P<ms>\d{3}))?"
                     r"(?:-(?P<rand>[A-Za-z0-9]{1,32}))?)\.ya?ml$")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class SignalError(ValueError):
    """A signal, a name or an identifier is not acceptable; the message says why."""


def check_identifier(value: str, what: str) -> str:
    """``value`` if it is a safe name for a session or a target: letters, digits, ``_``,
    ``.`` and ``-``, starting with a letter or digit, no ``..``, at most 128 characters.
    Such a name can never leave the folder it is joined to."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value) or ".." in value:
        raise SignalError(
            f"{what} {value!r} is not a valid name: use letters, digits, '_', '.' and '-' "
            "(no '/', no '..'), starting with a letter or digit")
    return value


@dataclass(frozen=True, slots=True)
class Signal:
    """One parsed signal; ``id`` comes from its file name."""

    id: str
    type: str
    target: str
    message: str | None = None
    iteration: int | None = None
    task: str | None = None  # an extension of seed 004's format: one task's subagent only

    @property
    def file_name(self) -> str:
        return f"signal.{self.id}.yaml"

    @property
    def event(self) -> str:
        """The session event this signal becomes: ``signal.STEER``, ``signal.APPROVE``..."""
        return f"signal.{self.type}"

    def event_data(self) -> dict[str, Any]:
        data = {"signal_id": self.id, "target": self.target, "message": self.message,
                "iteration": self.iteration}
        if self.task is not None:
            data["task"] = self.task
        return data

    def to_yaml_fields(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "target": self.target}
        if self.message is not None:
            data["message"] = self.message
        if self.iteration is not None:
            data["iteration"] = self.iteration
        if self.task is not None:
            data["task"] = self.task
        return data


def new_signal_id(now: datetime, random_part: str | None = None) -> str:
    """``YYMMDD-HHmmss-<ms>-<random>`` in UTC: sorts by time, never collides in practice
    (64 random bits)."""
    now = now.astimezone(UTC)
    rand = random_part if random_part is not None else secrets.token_hex(8)
    return f"{now:%y%m%d-%H%M%S}-{now.microsecond // 1000:03d}-{rand}"


def signal_id_of(file_name: str) -> str | None:
    """The id in a signal file name, or None when the name is not a signal's."""
    match = NAME_RE.match(file_name)
    return match.group("id") if match else None


def fifo_key(file_name: str) -> tuple[str, str, str]:
    """Sort key: timestamp, then milliseconds, then the whole name (FIFO by timestamp)."""
    match = NAME_RE.match(file_name)
    if match is None:
        return ("", "", file_name)
    stamp = match.group("stamp")
    if len(stamp) == 13:  # YYMMDD-HHmmss: this century, like the 8-digit form
        stamp = "20" + stamp
    return (stamp, match.group("ms") or "000", file_name)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, FIELDS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_signal(raw: bytes, file_name: str) -> Signal:
    """A :class:`Signal` from a file's bytes; SignalError naming the field, or the line and
    column, for anything malformed (too large, not UTF-8, bad YAML, unknown type, missing
    or unknown fields)."""
    signal_id = signal_id_of(file_name)
    if signal_id is None:
        raise SignalError(f"{file_name!r} is not a signal file name; write "
                          "signal.<YYMMDD-HHmmss>-<ms>-<random>.yaml (interlock signal does)")
    if len(raw) > MAX_SIGNAL_BYTES:
        raise SignalError(f"the file is {len(raw)} bytes; signals are limited to "
                          f"{MAX_SIGNAL_BYTES} bytes")
    try:
        document = parse_yaml(raw, file_name)
    except SpecError as exc:
        first = exc.diagnostics[0]
        why = ("a signal is a YAML mapping (type, target, message)"
               if first.code == "Y003" else first.message)
        raise SignalError(f"{first.mark.line}:{first.mark.column}: {why}") from None
    data = document.data
    if not isinstance(data, dict):
        raise SignalError(f"a signal is a YAML mapping (type, target, message), "
                          f"not a {type(data).__name__}")
    for key in data:
        if key not in FIELDS:
            mark = document.source.key((key,))
            raise SignalError(f"{mark.line}:{mark.column}: unknown field {key!r}"
                              f"{_did_you_mean(str(key))}; a signal has {', '.join(FIELDS)}")
    kind = data.get("type")
    if kind is None:
        raise SignalError("missing field 'type' (one of " + ", ".join(SIGNAL_TYPES) + ")")
    if not isinstance(kind, str) or kind.strip().upper() not in SIGNAL_TYPES:
        raise SignalError(f"unknown signal type {kind!r}; one of {', '.join(SIGNAL_TYPES)}")
    kind = kind.strip().upper()
    target = data.get("target", TARGET_ALL)
    if not isinstance(target, str):
        raise SignalError(f"target must be text, not {target!r}")
    check_identifier(target, "target")
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise SignalError(f"message must be text, not {type(message).__name__}")
    if kind in NEEDS_MESSAGE and not (message or "").strip():
        raise SignalError(f"a {kind} signal needs a message")
    iteration = data.get("iteration")
    if iteration is not None and (isinstance(iteration, bool) or not isinstance(iteration, int)
                                  or iteration < 0):
        raise SignalError(f"iteration must be a whole number >= 0, not {iteration!r}")
    task = data.get("task")
    if task is not None:
        if not isinstance(task, str | int) or isinstance(task, bool):
            raise SignalError(f"task must be a task id such as T2, not {task!r}")
        task = str(task)
        check_identifier(task, "task")
    return Signal(id=signal_id, type=kind, target=target, message=message,
                  iteration=iteration, task=task)


def render_signal(signal: Signal) -> str:
    """The file text of a signal, as the writer creates it."""
    import yaml

    return str(yaml.safe_dump(signal.to_yaml_fields(), sort_keys=False, allow_unicode=True,
                              width=1000))


def make_signal(kind: str, target: str = TARGET_ALL, message: str | None = None,
                iteration: int | None = None, *, now: datetime,
                random_part: str | None = None, task: str | None = None) -> Signal:
    """A new signal, checked like one read from a file."""
    kind = kind.strip().upper()
    if kind not in SIGNAL_TYPES:
        raise SignalError(f"unknown signal type {kind!r}; one of {', '.join(SIGNAL_TYPES)}")
    check_identifier(target, "target")
    if kind in NEEDS_MESSAGE and not (message or "").strip():
        raise SignalError(f"a {kind} signal needs a message")
    if iteration is not None and iteration < 0:
        raise SignalError(f"iteration must be >= 0, not {iteration}")
    if task is not None:
        check_identifier(task, "task")
    return Signal(new_signal_id(now, random_part), kind, target, message, iteration, task)


def iso_utc(now: datetime) -> str:
    """``2026-02-08T14:30:05.123Z``, the seed's handled_at format with milliseconds."""
    now = now.astimezone(UTC)
    return f"{now:%Y-%m-%dT%H:%M:%S}.{now.microsecond // 1000:03d}Z"
