"""Live updates as server-sent events, woken by the store, never by a polling loop:

* ``/events/sessions``: one watch of the store (:func:`interlock.runtime.store_changes`)
  for every open sessions page, kept :data:`LINGER` seconds after the last one closed
  (:class:`SessionsHub`): on a change that moved a session
  (:func:`interlock.runtime.session_marks`: not a lease renewed) the sessions are listed
  again (at most every :data:`MIN_GAP` seconds) and each page is sent the rows that
  changed (``rows`` events: ``upsert``, ``remove``). Every :data:`LIVENESS` seconds the
  sessions listed as running are looked at (a runner that died commits nothing).
* ``/events/s/ID``: the session's journal (:func:`interlock.runtime.follow`, woken by
  the store): every entry as an ``entry`` event, then, once the entries stop coming, the
  session's state (``session``: what :func:`interlock.runtime.ui.data.session_data`
  reads), at most every :data:`MIN_GAP` seconds, and once more :data:`SETTLE` seconds
  later (a Ralph session writes its folder's files just after a step); ``end`` when the
  session has ended. A running session's status is read after :data:`LIVENESS` quiet
  seconds.

Every stream sends a comment every :data:`KEEPALIVE` seconds so a closed page is noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from interlock import runtime
from interlock.runtime.ui.data import entry_json, session_data, sessions_rows

if TYPE_CHECKING:
    from interlock.runtime import JournalEntry
    from interlock.runtime.ui.server import UiConfig

__all__ = ["KEEPALIVE", "MIN_GAP", "ROUTES", "SessionsHub"]

MIN_GAP = 0.25  # seconds between two lists of the sessions, or two reads of a session
SETTLE = 0.5  # seconds after a step's read of a session, it is read once more
LIVENESS = 15.0  # seconds between looks at whether a running session's runner is gone
LINGER = 30.0  # seconds the sessions stay watched after the last page of them closed
KEEPALIVE = 15.0
Event = tuple[str, Any]
_END = object()


def _frame(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def event_stream(request: Request, events: AsyncIterator[Event]) -> Response:
    """``events`` as ``text/event-stream``, with a keep-alive comment when quiet, until
    they end or the server stops."""
    closing: asyncio.Event = request.app.state.closing

    async def body() -> AsyncIterator[str]:
        queue: asyncio.Queue[object] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for item in events:
                    await queue.put(item)
            finally:
                await queue.put(_END)

        async def close() -> None:
            await closing.wait()
            await queue.put(_END)

        task = asyncio.create_task(pump())
        closer = asyncio.create_task(close())
        try:
            yield "retry: 2000\n\n"
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEPALIVE)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is _END:
                    return
                name, data = cast(Event, item)
                yield _frame(name, data)
        finally:
            for running in (task, closer):
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await running
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"x-accel-buffering": "no"})


class SessionsHub:
    """The sessions as the open sessions pages last saw them, and the one watch of the
    store that keeps them current while a page is open (and :data:`LINGER` seconds after
    the last one closed: a page loaded again is served at once)."""

    def __init__(self, config: UiConfig) -> None:
        self.config = config
        self.rows: dict[str, dict[str, Any]] = {}
        self.marks: dict[str, tuple[int, str, float]] = {}  # of the rows (session_marks)
        self.version = 0
        self._listeners: set[asyncio.Queue[Event]] = set()
        self._watch: asyncio.Task[None] | None = None
        self._alone_since = 0.0  # when the last listener left
        self._lock = asyncio.Lock()

    async def current(self) -> tuple[int, list[dict[str, Any]]]:
        """The version and rows: as the watch keeps them, else listed now (and watched
        from now on)."""
        if self._watch is None:
            self._alone_since = time.monotonic()
            self._watch = asyncio.create_task(self._follow_store())  # one, for everyone
            await self.refresh()
        return self.version, list(self.rows.values())

    async def refresh(self) -> None:
        """List the sessions again; tell the listeners what changed."""
        async with self._lock:
            self.marks = await runtime.session_marks(**self.config.where)
            rows = {row["id"]: row for row in await sessions_rows(self.config)}
            upsert = [row for key, row in rows.items() if self.rows.get(key) != row]
            remove = [key for key in self.rows if key not in rows]
            if not upsert and not remove and self.version:
                return
            self.rows = rows
            self.version += 1
            change = {"version": self.version, "upsert": upsert, "remove": remove}
            for queue in self._listeners:
                queue.put_nowait(("rows", change))

    async def _runner_gone(self) -> bool:
        """Whether a session listed as running no longer is (its runner died: no commit
        says so)."""
        for row in list(self.rows.values()):
            if row["status"] == "running":
                info = await runtime.status(row["id"], **self.config.where)
                if info.status != "running":
                    return True
        return False

    def _idle(self) -> bool:
        return not self._listeners and time.monotonic() - self._alone_since > LINGER

    async def _follow_store(self) -> None:
        looked = time.monotonic()
        async for changed in runtime.store_changes(backstop=self.config.backstop,
                                                   **self.config.where):
            if self._idle():  # nobody has looked for a while: rows are read when asked
                self._watch = None
                return
            try:
                if changed:
                    async with self._lock:  # after a refresh under way
                        marks = await runtime.session_marks(**self.config.where)
                    if marks == self.marks:  # a lease renewed, an event queued...
                        continue
                elif time.monotonic() - looked < LIVENESS or not await self._runner_gone():
                    continue
                looked = time.monotonic()
                await self.refresh()
            except runtime.InterlockError:
                continue  # a busy store: the next change or backstop tries again
            await asyncio.sleep(MIN_GAP)

    async def listen(self, version: int) -> AsyncIterator[Event]:
        """The rows (all, unless the page has ``version``), then each change."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        now, rows = await self.current()
        self._listeners.add(queue)  # no await since: every later change reaches it
        try:
            if now != version:
                yield "rows", {"version": now, "reset": True, "upsert": rows, "remove": []}
            while True:
                yield await queue.get()
        finally:
            self._listeners.discard(queue)
            self._alone_since = time.monotonic()

    async def close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch


async def _sessions_events(request: Request) -> Response:
    hub: SessionsHub = request.app.state.hub
    try:
        version = int(request.query_params.get("version", "0"))
    except ValueError:
        version = 0
    return event_stream(request, hub.listen(version))


async def _follow_session(config: UiConfig, session_id: str) -> AsyncIterator[Event]:
    """The session's entries, and its state after each burst of them (see above)."""
    where = config.where
    entries: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for entry in runtime.follow(session_id, backstop=config.backstop, **where):
                await entries.put(entry)
        finally:
            await entries.put(_END)

    task = asyncio.create_task(pump())
    # dirty: entries came since the state was last read; settle: read it once more
    # SETTLE seconds after a read that entries caused (files written just after a step)
    dirty = settle = False
    shown_at, looked_at = 0.0, time.monotonic()
    status = (await runtime.status(session_id, **where)).status
    try:
        while True:
            since = time.monotonic() - shown_at
            wait = (max(0.0, MIN_GAP - since) if dirty else
                    max(0.0, SETTLE - since) if settle else
                    max(0.0, LIVENESS - (time.monotonic() - looked_at)))
            try:
                item = entries.get_nowait() if not entries.empty() else \
                    await asyncio.wait_for(entries.get(), wait)
            except TimeoutError:
                item = None
            if item is _END:
                yield "session", await session_data(config, session_id)
                yield "end", {}
                return
            if item is not None:
                yield "entry", entry_json(cast("JournalEntry", item))
                dirty = True
                if not entries.empty():
                    continue
            elif not dirty and not settle and time.monotonic() - looked_at >= LIVENESS:
                looked_at = time.monotonic()  # quiet for long: has its runner gone?
                if status == "running":
                    dirty = (await runtime.status(session_id, **where)).status != status
            since = time.monotonic() - shown_at
            if (dirty and since >= MIN_GAP) or (settle and not dirty and since >= SETTLE):
                data = await session_data(config, session_id)
                status, settle, dirty = data["info"]["status"], dirty, False
                shown_at = time.monotonic()
                yield "session", data
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def _session_events(request: Request) -> Response:
    from interlock.runtime.ui.pages import not_found

    config: UiConfig = request.app.state.config
    session_id = request.path_params["session"]
    try:
        await runtime.status(session_id, store=config.store, root=config.root)
    except (runtime.NotFound, runtime.UsageError) as exc:
        return await not_found(request, exc)
    return event_stream(request, _follow_session(config, session_id))


ROUTES = [
    Route("/events/sessions", _sessions_events),
    Route("/events/s/{session}", _session_events),
]
