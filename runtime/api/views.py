"""Reading a session for a page (``interlock ui``), through the façade: its invocations
with their prompts and answers, its files, the events it listens for, and a wait for the
store to change.

A session's files are those of its folders: ``session`` (``.interlock/sessions/<id>``,
where its agents' output is spooled; a child machine session's is inside its parent's)
and, for a Ralph session, ``ralph`` (``.ralph-sessions/<id>``). A file is named by its
folder and its path inside it; nothing outside them is ever served
(:func:`session_file`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interlock.machines import ir_of
from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import NotFound
from interlock.runtime.api.sessions import accepted_events, check_session_id
from interlock.runtime.engine.invocation_log import InvocationView, invocation_views
from interlock.runtime.engine.session_files import file_in, files_in, session_folder
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.signals.addressing import RALPH_SESSIONS_DIR
from interlock.runtime.store import Store
from interlock.runtime.store.wakeup import StoreChanges

__all__ = ["FOLDERS", "InvocationView", "SessionFile", "invocations", "listening_for",
           "session_file", "session_files", "session_marks", "store_changes"]

Folder = Literal["session", "ralph"]
FOLDERS: tuple[Folder, ...] = ("ralph", "session")


@dataclass(frozen=True, slots=True)
class SessionFile:
    """A file of a session: its ``folder`` (``ralph`` or ``session``), its ``path``
    inside it (``/``-separated), size in bytes, last modified (seconds since the epoch)."""

    folder: Folder
    path: str
    size: int
    modified: float

    def to_json(self) -> dict[str, Any]:
        return {"folder": self.folder, "path": self.path, "size": self.size,
                "modified": self.modified}


def _folders(store: Store, base: Path, session_id: str) -> dict[Folder, Path]:
    store.get(session_id)  # SessionNotFound for none
    found: dict[Folder, Path] = {}
    ralph = base / RALPH_SESSIONS_DIR / session_id
    if ralph.is_dir():
        found["ralph"] = ralph
    found["session"] = session_folder(store, session_id)
    return found


async def invocations(session_id: str, *, children: bool = True, bodies: bool = True,
                      store: str | None = None, root: Path | str | None = None
                      ) -> list[InvocationView]:
    """The session's invocations by start time, each with its rendered prompt, answer,
    usage, error and how it ended; with ``children``, those of the child machine
    sessions it invoked (a Ralph session's subagents and their agents), each after the
    invocation that started it. Without ``bodies``, prompts and outputs are not read
    (a summary). NotFound for an unknown session."""
    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        return await asyncio.to_thread(invocation_views, opened, session_id,
                                       children=children, bodies=bodies)


async def session_files(session_id: str, *, store: str | None = None,
                        root: Path | str | None = None) -> list[SessionFile]:
    """The files of the session's folders (``ralph`` first), sorted by path; symlinks are
    not listed. NotFound for an unknown session."""
    check_session_id(session_id)
    base = root_of(root)

    def listed(opened: Store) -> list[SessionFile]:
        return [SessionFile(key, f.path, f.size, f.modified)
                for key, folder in _folders(opened, base, session_id).items()
                for f in files_in(folder)]

    with opened_store(store, base, create=False, session_id=session_id) as opened, \
            translated():
        return await asyncio.to_thread(listed, opened)


async def session_file(session_id: str, folder: str, path: str, *,
                       store: str | None = None, root: Path | str | None = None) -> Path:
    """The file ``path`` of the session's ``folder`` (``ralph`` or ``session``). NotFound
    unless it is a regular file inside that folder once symlinks are resolved: a ``..``
    part, an absolute path or a symlink out of the folder is refused."""
    check_session_id(session_id)
    base = root_of(root)
    with opened_store(store, base, create=False, session_id=session_id) as opened, \
            translated():
        folders = await asyncio.to_thread(_folders, opened, base, session_id)
    where = folders.get(folder)  # type: ignore[call-overload]
    found = await asyncio.to_thread(file_in, where, path) if where is not None else None
    if found is None:
        raise NotFound(f"session {session_id} has no file {folder}/{path}")
    return found


async def listening_for(session_id: str, *, store: str | None = None,
                        root: Path | str | None = None) -> tuple[str, ...]:
    """The events the session's active states take (timers excluded), sorted: what it
    waits for. NotFound for an unknown session."""
    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        row = await asyncio.to_thread(opened.get, session_id)
    configuration = Snapshot.from_json(row.snapshot).configuration
    return accepted_events(ir_of(row.spec_text, row.spec_path), configuration)


async def session_marks(*, store: str | None = None, root: Path | str | None = None
                        ) -> dict[str, tuple[int, str, float]]:
    """Each session's last step as ``(seq, stored status, updated_at)``, by id, from one
    read of the store: a listing needs reading anew only when these changed (or a runner
    came or went). Empty without a store."""

    def marks(opened: Store) -> dict[str, tuple[int, str, float]]:
        return {row.id: (row.seq, row.status, row.updated_at) for row in opened.list()}

    try:
        with opened_store(store, root_of(root), create=False) as opened, translated():
            return await asyncio.to_thread(marks, opened)
    except NotFound:
        return {}


async def store_changes(*, backstop: float = 1.0, store: str | None = None,
                        root: Path | str | None = None) -> AsyncIterator[bool]:
    """Yields True once the watch is up (what changed before, the caller reads then), and
    each time the session store may have changed since: a commit by any process (the
    store's wake-up), or every ``backstop`` seconds where the store gives no wake-ups
    (PostgreSQL); and False every ``backstop`` seconds without a wake-up, so that the
    caller can look at what no commit says (a runner that died). Nothing is read
    meanwhile; without a store yet, it looks for one every ``backstop`` seconds."""
    base = root_of(root)
    while True:
        try:
            with opened_store(store, base, create=False) as opened:
                changes = StoreChanges(opened, poll=backstop, backstop=backstop)
                try:
                    yield True  # watched from now: what came before, the caller reads
                    while True:
                        woken = await asyncio.to_thread(changes.wait, backstop)
                        yield woken or not changes.watched
                finally:
                    changes.close()
        except NotFound:  # nothing has run here yet
            await asyncio.sleep(backstop)
            yield True
