"""interlock.runtime: the façade over everything that touches files, processes, clocks and
stores. The command line calls only this; so can you.

Every call is a coroutine (``interlock.runtime.sync`` has the same calls, blocking)::

    import asyncio
    from interlock import runtime

    result = asyncio.run(runtime.start("door.yaml", bindings="door_bindings.py"))
    print(result.outcome, result.active)

Names are imported on first use, so ``import interlock.runtime`` stays cheap for agent
processes that only need one room.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # sessions
    "start": "sessions", "resume": "sessions", "send": "sessions", "status": "sessions",
    "sessions": "sessions", "log": "sessions", "follow": "sessions",
    "accepted_events": "sessions", "resolve_bindings": "sessions",
    "check_session_id": "sessions",
    "SessionInfo": "sessions", "SessionStatus": "sessions", "RunResult": "sessions",
    "SendReceipt": "sessions", "TimerInfo": "sessions", "RunnerInfo": "sessions",
    # errors
    "InterlockError": "errors", "UsageError": "errors", "NotFound": "errors",
    "Conflict": "errors", "StepFailed": "errors",
    # blocking variants
    "sync": "",
}

if TYPE_CHECKING:
    from interlock.runtime.api import sync as sync
    from interlock.runtime.api.errors import Conflict as Conflict
    from interlock.runtime.api.errors import InterlockError as InterlockError
    from interlock.runtime.api.errors import NotFound as NotFound
    from interlock.runtime.api.errors import StepFailed as StepFailed
    from interlock.runtime.api.errors import UsageError as UsageError
    from interlock.runtime.api.sessions import RunnerInfo as RunnerInfo
    from interlock.runtime.api.sessions import RunResult as RunResult
    from interlock.runtime.api.sessions import SendReceipt as SendReceipt
    from interlock.runtime.api.sessions import SessionInfo as SessionInfo
    from interlock.runtime.api.sessions import SessionStatus as SessionStatus
    from interlock.runtime.api.sessions import TimerInfo as TimerInfo
    from interlock.runtime.api.sessions import accepted_events as accepted_events
    from interlock.runtime.api.sessions import check_session_id as check_session_id
    from interlock.runtime.api.sessions import follow as follow
    from interlock.runtime.api.sessions import log as log
    from interlock.runtime.api.sessions import resolve_bindings as resolve_bindings
    from interlock.runtime.api.sessions import resume as resume
    from interlock.runtime.api.sessions import send as send
    from interlock.runtime.api.sessions import sessions as sessions
    from interlock.runtime.api.sessions import start as start
    from interlock.runtime.api.sessions import status as status

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'interlock.runtime' has no attribute {name!r}")
    if name == "sync":
        return importlib.import_module("interlock.runtime.api.sync")
    value = getattr(importlib.import_module(f"interlock.runtime.api.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
