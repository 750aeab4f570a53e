"""``interlock run inbox_poller`` as a durable session through the façade: opt-in (stays
disabled without ``inbox:``), polls the configured inbox, surfaces messages into the
session folder, explicit ``poll.done``, ``shutdown`` to the final state."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from interlock import runtime
from interlock.runtime.inbox.builtin_poller import prompts_dir
from interlock.runtime.inbox.model import Status
from interlock.runtime.inbox.sqlite import SqliteInbox


async def _wait(check: object, what: str, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():  # type: ignore[operator]
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def _run(root: Path, session_id: str, scenario: object) -> None:
    async def main() -> runtime.RunResult:
        stop = asyncio.Event()
        run = asyncio.create_task(runtime.start("inbox_poller", session_id=session_id,
                                                root=root, stop=stop, signals=False))

        async def running() -> bool:
            listed = {s.id: s.status for s in await runtime.sessions(root=root)}
            return listed.get(session_id) == "running"

        try:
            await _wait(running, "the runner")
            await scenario(root)  # type: ignore[operator]
        finally:
            await runtime.send(session_id, "shutdown", root=root)
            result = await asyncio.wait_for(run, 60)
        assert result.outcome == "finished" and result.active == ("stopped",)
        return result

    asyncio.run(main())


def test_without_an_inbox_section_it_stays_disabled(tmp_path: Path) -> None:
    async def scenario(root: Path) -> None:
        receipt = await runtime.send("p1", "start", root=root)
        assert receipt.outcome == "taken" and receipt.active == ("disabled",)

    _run(tmp_path, "p1", scenario)


def test_polls_the_configured_inbox(tmp_path: Path) -> None:
    (tmp_path / "interlock.yaml").write_text("inbox:\n  store: inbox.db\n  interval: 50ms\n")
    inbox = SqliteInbox(tmp_path / "inbox.db")
    message_id = inbox.post("review", "alice", "PR 7")

    async def scenario(root: Path) -> None:
        receipt = await runtime.send("p2", "start", root=root)
        assert receipt.active == ("enabled", "healthy", "waiting")
        surfaced = prompts_dir(root / ".interlock" / "sessions" / "p2") / f"{message_id}.json"

        async def arrived() -> bool:
            return surfaced.exists()

        await _wait(arrived, "the message surfaced")
        assert json.loads(surfaced.read_text())["from"] == "alice"
        assert inbox.get(message_id).status is Status.IN_PROGRESS  # never auto-acked
        done = await runtime.send("p2", "poll.done", {"id": message_id}, root=root)
        assert done.outcome == "taken"
        info = await runtime.status("p2", root=root)
        assert info.context["inbox_count"] == 1

    _run(tmp_path, "p2", scenario)
    journal = inbox.journal(message_id)
    assert [e.after for e in journal] == [Status.DONE]
    assert journal[0].actor != "operator"  # the poller's, fenced by its claim's token
    inbox.close()
