"""The dispatcher's :class:`~interlock.runtime.dispatch.types.AgentRegistry` on a store: each
agent's process group is recorded before a byte of it is read, so the orphan sweep
(:mod:`interlock.runtime.engine.orphans`) can stop it after a crash."""

from __future__ import annotations

from interlock.runtime.dispatch.process import AgentProcess
from interlock.runtime.host.owners import default_owner
from interlock.runtime.store.base import AgentProcessStore, AgentRecord


class StoreRegistry:
    """An :class:`~interlock.runtime.dispatch.types.AgentRegistry` on a store."""

    def __init__(self, store: AgentProcessStore, owner: str | None = None,
                 session_id: str | None = None) -> None:
        self.store = store
        self.owner = owner or default_owner("dispatch")
        self.session_id = session_id

    def started(self, dispatch_id: str, process: AgentProcess, started_at: float) -> None:
        self.store.record_agent(AgentRecord(
            id=dispatch_id, pgid=process.pgid, pid=process.pid, owner=self.owner,
            argv=process.argv, started_at=started_at, session_id=self.session_id))

    def stopped(self, dispatch_id: str) -> None:
        self.store.forget_agent(dispatch_id)
