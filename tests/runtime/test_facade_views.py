"""The façade's reads for a page: a session's invocations (prompt, answer, usage, error,
how each ended; a Ralph session's subagents and their agents), its files (nothing outside
its folders), the events it listens for, its statechart, and the store's wake-ups."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlock import runtime

from support.paths import require_dot
from support.ui import ask_session


def test_an_invocation_shows_its_prompt_answer_and_ending(tmp_path: Path) -> None:
    ask_session(tmp_path)
    [view] = runtime.sync.invocations("a1", root=tmp_path)
    assert view.kind == "process" and view.outcome == "done" and view.event == "done.invoke.ask"
    assert view.prompt == "What is it? six by nine"
    assert view.answer == {"p": "six times nine", "v": "GO"}
    assert view.output == "p: six times nine\nv: GO\n" and view.error is None
    assert view.usage == {"inputTokens": None, "outputTokens": None, "costUsd": None}
    [bare] = runtime.sync.invocations("a1", bodies=False, root=tmp_path)
    assert bare.prompt is None and bare.output is None and bare.answer == view.answer
    assert view.to_json()["answer"] == view.answer
    assert runtime.sync.listening_for("a1", root=tmp_path) == ("again",)


def test_a_failed_invocation_says_why(tmp_path: Path) -> None:
    ask_session(tmp_path, "no document here\n", "a2")
    [view] = runtime.sync.invocations("a2", root=tmp_path)
    assert view.outcome == "error" and view.reason == "invalid_answer"
    assert view.event == "error.invoke.ask" and "not a complete document" in (view.error or "")


def test_the_files_of_a_session_and_nothing_else(tmp_path: Path) -> None:
    ask_session(tmp_path)
    files = runtime.sync.session_files("a1", root=tmp_path)
    assert {(f.folder, f.path) for f in files} >= {("session", "invocations/0001-ask/stdin"),
                                                   ("session", "invocations/0001-ask/stdout")}
    path = runtime.sync.session_file("a1", "session", "invocations/0001-ask/stdin",
                                     root=tmp_path)
    assert path.read_text() == "What is it? six by nine"
    (tmp_path / "secret").write_text("no")
    folder = tmp_path / ".interlock" / "sessions" / "a1"
    (folder / "escape").symlink_to(tmp_path / "secret")
    for folder_key, bad in (("session", "../../../secret"), ("session", "escape"),
                            ("ralph", "metadata.yaml"), ("elsewhere", "x"),
                            ("session", str(tmp_path / "secret"))):
        with pytest.raises(runtime.NotFound):
            runtime.sync.session_file("a1", folder_key, bad, root=tmp_path)
    assert "escape" not in {f.path for f in runtime.sync.session_files("a1", root=tmp_path)}
    with pytest.raises(runtime.NotFound):
        runtime.sync.session_files("nope", root=tmp_path)


def test_the_statechart_marks_the_active_state(tmp_path: Path) -> None:
    require_dot()
    ask_session(tmp_path)
    svg = runtime.sync.session_chart("a1", root=tmp_path)
    assert svg.startswith("<svg") and 'data-state="answered" data-active="true"' in svg
    assert 'data-state="asking" data-active="false"' in svg


def test_a_ralph_sessions_invocations_are_its_subagents_and_their_agents(
        tmp_path: Path) -> None:
    (tmp_path / "interlock.yaml").write_text("ralph:\n  knowledge_approval_timeout: 50ms\n")
    runtime.ralph_init("write it", session_id="r", root=tmp_path)
    result = runtime.sync.ralph_run("r", root=tmp_path)
    assert result.outcome == "completed"
    views = runtime.sync.invocations("r", root=tmp_path)
    machines = [v for v in views if v.kind == "machine"]
    agents = [v for v in views if v.kind == "process"]
    assert [v.invoke for v in machines][:2] == ["planner", "executor"]
    assert machines[0].child == "r.0001-planner" and machines[0].outcome == "done"
    assert machines[0].calls and "Ralph-Planner" in str(machines[0].calls[0]["prompt"])
    assert agents and agents[0].session == "r.0001-planner"
    assert "Ralph-Planner" in (agents[0].prompt or "") and agents[0].answer
    assert views.index(agents[0]) == views.index(machines[0]) + 1  # after its subagent
    files = {(f.folder, f.path) for f in runtime.sync.session_files("r", root=tmp_path)}
    assert ("ralph", "metadata.yaml") in files and ("ralph", "request.md") in files
    assert any(folder == "session" and path.startswith("invocations/0001-planner/")
               for folder, path in files)


def test_store_changes_wake_on_a_commit(tmp_path: Path) -> None:
    ask_session(tmp_path)

    async def watch() -> bool:
        changes = runtime.store_changes(backstop=5.0, root=tmp_path)
        assert await anext(changes) is True  # the watch is up
        woken = asyncio.ensure_future(anext(changes))
        await runtime.send("a1", "again", root=tmp_path)  # queued: a commit
        woken = await asyncio.wait_for(woken, 4.0)
        await changes.aclose()
        return woken

    assert asyncio.run(watch()) is True
