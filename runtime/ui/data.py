"""What the pages show, as JSON, read through the façade: a sessions list row, a
session's whole state, a journal entry, an invocation (summary or in full)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlock import runtime

if TYPE_CHECKING:
    from interlock.runtime import InvocationView, JournalEntry, SessionInfo
    from interlock.runtime.ui.server import UiConfig

__all__ = ["DATA_SHOWN", "RALPH_MACHINE", "entry_json", "invocation_json", "session_data",
           "session_row", "sessions_rows"]

RALPH_MACHINE = "ralph_orchestrator"
DATA_SHOWN = 600  # characters of an entry's data in the timeline (the log has it whole)
_BODIES = ("prompt", "output", "answer", "calls")


def _cost(info: SessionInfo) -> float | None:
    """What the session's agents reported they cost (a Ralph session's spend)."""
    spend = info.context.get("spend")
    cost = spend.get("cost_usd") if isinstance(spend, Mapping) else None
    return float(cost) if isinstance(cost, int | float) else None


def session_row(info: SessionInfo) -> dict[str, Any]:
    """One line of the sessions page."""
    return {"id": info.id, "machine": info.machine, "spec": info.spec_path,
            "status": info.status, "active": list(info.active), "seq": info.seq,
            "created_at": info.created_at, "updated_at": info.updated_at,
            "parent": info.parent, "children": info.children, "cost": _cost(info),
            "ralph": info.machine == RALPH_MACHINE and info.parent is None,
            "failure": info.failure}


async def sessions_rows(config: UiConfig) -> list[dict[str, Any]]:
    """Every session of the store, children included (a page folds them)."""
    infos = await runtime.sessions(store=config.store, root=config.root, children=True)
    return [session_row(info) for info in infos]


def entry_json(entry: JournalEntry) -> dict[str, Any]:
    """A journal entry for the timeline (its data shortened to DATA_SHOWN characters)."""
    data = json.dumps(entry.data, ensure_ascii=False, default=str) if entry.data else ""
    if len(data) > DATA_SHOWN:
        data = data[:DATA_SHOWN] + f"… ({len(data)} chars)"
    return {"seq": entry.seq, "at": entry.at, "kind": entry.kind, "event": entry.event,
            "before": list(entry.before), "after": list(entry.after), "note": entry.note,
            "data": data}


def invocation_json(view: InvocationView, *, full: bool) -> dict[str, Any]:
    """An invocation; without ``full``, no prompt, output, answer or calls (a page asks
    for those of one invocation when it is opened), only how many calls."""
    shown = view.to_json()
    shown["call_count"] = len(view.calls)
    if not full:
        for key in _BODIES:
            shown.pop(key, None)
    return shown


async def _ralph(config: UiConfig, session_id: str) -> dict[str, Any] | None:
    try:
        return await runtime.ralph_status(session_id, store=config.store, root=config.root)
    except runtime.NotFound:
        return None


async def session_data(config: UiConfig, session_id: str) -> dict[str, Any]:
    """Everything the session page shows besides its timeline: the session as it
    stands, what it listens for, its Ralph status (a Ralph session), its invocations
    (summaries; a child machine's names its session) and files. NotFound for an unknown
    session."""
    where = config.where
    info = await runtime.status(session_id, **where)
    ralph = _ralph(config, session_id) if info.machine == RALPH_MACHINE else None
    listening, views, files, ralph_status = await asyncio.gather(
        runtime.listening_for(session_id, **where),
        runtime.invocations(session_id, bodies=False, **where),
        runtime.session_files(session_id, **where),
        ralph if ralph is not None else asyncio.sleep(0, None))
    shown = info.to_json()
    if ralph_status is not None:
        shown["context"] = {}  # the Ralph status says it, readably
    return {
        "info": shown, "row": session_row(info), "listening": list(listening),
        "ralph": ralph_status,
        "invocations": [invocation_json(v, full=False) for v in views],
        "files": [f.to_json() for f in files],
    }
