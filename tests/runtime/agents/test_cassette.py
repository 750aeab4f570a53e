"""Cassettes around the engine's invoke: real agents run under a recorder process and
are played back by the replayer process, each started by a real session's ``agent:``
invoke (spooling, completion detection and cancel for real), to the same answers and the
same files."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.runtime.agents.cassette import (
    CassetteError,
    CassetteMismatch,
    CassettePlayer,
    CassetteRecorder,
    cassette,
    launch_digest,
    read_cassette,
)
from interlock.runtime.agents.invoke import (
    AgentResolver,
    ResolvedAgent,
    agent_resolver,
    process_handlers,
)
from interlock.runtime.config.agents import AgentLaunch
from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import BINDINGS, run_until


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "state.db")
    yield s
    s.close()


def spec(*agents: str, prompt: str = "{{ context.topic }}") -> str:
    """One invoking state per agent (in parallel regions when there are several); each
    done/error is kept in ``outcome`` under the agent's name."""
    if len(agents) == 1:
        body = (f"  working:\n    invoke: {{id: {agents[0]}, agent: {agents[0]}, "
                f"prompt: {json.dumps(prompt)}, timeout: 30s}}\n"
                f"    on: {{done.invoke: {{target: done, actions: [keep]}}, "
                f"error.invoke: {{target: done, actions: [keep]}}}}\n")
        return ("machine: taped\ninitial: working\ncontext:\n"
                "  topic: {type: str, default: parse the file}\n"
                "  outcome: {type: dict, default: {}}\n  ticks: {type: int, default: 0}\n"
                f"states:\n{body}  done: {{type: final}}\n")
    regions = "".join(
        f"      {name}:\n        initial: {name}_run\n        states:\n"
        f"          {name}_run:\n            invoke: {{id: {name}, agent: {name}, "
        f"prompt: {name}, timeout: 30s}}\n"
        f"            on: {{done.invoke.{name}: {name}_done}}\n"
        f"          {name}_done: {{type: final}}\n" for name in agents)
    return ("machine: taped\ninitial: both\ncontext:\n"
            "  outcome: {type: dict, default: {}}\n  ticks: {type: int, default: 0}\n"
            f"states:\n  both:\n    type: parallel\n    states:\n{regions}")


def play(store: SqliteStore, folder: Path, text: str, agents: AgentResolver,
         session_id: str = "s1") -> dict[str, Any]:
    """Run a session of ``text`` to its end; its ``outcome``."""
    runner, _ = Runner.open(store, text, str(folder / "spec.yaml"), session_id=session_id,
                            bindings=BINDINGS, folder=folder / session_id,
                            invokers=process_handlers(agents))
    try:
        run_until(runner, lambda: runner.session.is_final or (
            any(s.endswith("_done") for s in runner.session.active)
            and not any(s.endswith("_run") for s in runner.session.active)))
    finally:
        runner.close()
    return dict(store.get(session_id).snapshot["context"]["outcome"])


def commands(**programs: str) -> AgentResolver:
    """Agents that run ``python -c PROGRAM``, the prompt on stdin."""
    def resolve(name: str, prompt: str) -> ResolvedAgent:
        return ResolvedAgent(AgentLaunch((sys.executable, "-c", programs[name]),
                                         stdin=prompt))
    return resolve


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.md"))
            if p.is_file()}


def test_record_then_replay_gives_the_same_answer_and_files(tmp_path: Path) -> None:
    recorded_root, replayed_root = tmp_path / "rec", tmp_path / "play"
    recorded_root.mkdir()
    replayed_root.mkdir()
    tape = tmp_path / "run.cassette.jsonl"
    prompt = ("Task: T1 write the parser\nWorkdir: {{ context.topic }}\n"
              "Request: parse the file\n")

    def run(root: Path, wrap: Callable[[AgentResolver], AgentResolver]) -> dict[str, Any]:
        opened = SqliteStore(root / "state.db")
        try:
            text = spec("executor", prompt=prompt.replace("{{ context.topic }}", str(root)))
            return play(opened, root, text, wrap(agent_resolver(root)))
        finally:
            opened.close()

    recorded = run(recorded_root, CassetteRecorder(tape, root=recorded_root).wrap)
    assert recorded["result"]["success"] and recorded["answer"]["status"] == "done"
    written = files(recorded_root)
    assert written, "the demo executor writes its task file"
    [record] = read_cassette(tape)
    assert (record.seq, record.name) == (1, "executor") and record.chunks
    assert record.argv[-2:] == ("--role", "executor")  # the agent's argv, not the recorder's
    assert {f.path for f in record.files} >= {"T1.md"}
    assert str(recorded_root) not in tape.read_text()

    player = CassettePlayer(tape, root=replayed_root, speed=4.0)
    replayed = run(replayed_root, player.wrap)
    assert player.unplayed == 0
    assert replayed["answer"] == json.loads(json.dumps(recorded["answer"]).replace(
        str(recorded_root), str(replayed_root)))
    for key in ("success", "exitCode", "status", "completionMethod"):
        assert replayed["result"][key] == recorded["result"][key], key
    assert files(replayed_root) == {name: text.replace(str(recorded_root), str(replayed_root))
                                    for name, text in written.items()}


def test_a_different_invocation_is_refused_clearly(store: SqliteStore, tmp_path: Path) -> None:
    tape = tmp_path / "c.jsonl"
    agents = commands(reviewer="import sys; sys.stdin.read(); print('v: ok')")
    play(store, tmp_path, spec("reviewer"), CassetteRecorder(tape).wrap(agents))
    player = CassettePlayer(tape)
    other = AgentLaunch(("anything",), stdin="another prompt")
    with pytest.raises(CassetteMismatch, match=r"invocation 1 \(reviewer\): the prompt "
                       r"differs from the recorded one"):
        player.next_record("reviewer", launch_digest(other))
    with pytest.raises(CassetteMismatch, match=r"recorded for agent 'reviewer', not 'x'"):
        player.next_record("x", launch_digest(other))
    # through the engine, a mismatch is the invoke's spawn_error, named
    outcome = play(store, tmp_path, spec("reviewer").replace("parse the file", "other"),
                   player.wrap(agents), session_id="s2")
    assert outcome["reason"] == "spawn_error" and "prompt differs" in outcome["message"]
    assert player.wrap(agents)("reviewer", "parse the file").launch.argv[3:5] == (
        str(tape.resolve()), "1")
    with pytest.raises(CassetteMismatch, match=r"invocation 2 \(reviewer\) is not recorded"):
        player.wrap(agents)("reviewer", "parse the file")


def test_failures_replay_with_their_exit_codes(store: SqliteStore, tmp_path: Path) -> None:
    tape = tmp_path / "c.jsonl"
    flaky = ("import sys; sys.stdin.read(); print('No messages returned', file=sys.stderr);"
             " sys.exit(75)")
    agents = commands(executor=flaky)
    first = play(store, tmp_path, spec("executor"), CassetteRecorder(tape).wrap(agents))
    again = play(store, tmp_path, spec("executor"), CassettePlayer(tape, speed=10).wrap(
        agents), session_id="s2")
    assert first["reason"] == again["reason"] == "exit_nonzero"
    assert first["result"]["exitCode"] == again["result"]["exitCode"] == 75
    assert "No messages returned" in again["result"]["stderr"]


def test_a_stopped_agent_lingers_in_replay_until_stopped(store: SqliteStore,
                                                         tmp_path: Path) -> None:
    """An agent stopped after its answer (the end marker; no exit code) is replayed by a
    process that also never exits by itself: the invoke ends it the same way."""
    tape = tmp_path / "c.jsonl"
    linger = "import time; print('v: ok\\n...', flush=True); time.sleep(300)"
    agents = commands(reviewer=linger)
    recorded = play(store, tmp_path, spec("reviewer"), CassetteRecorder(tape).wrap(agents))
    [record] = read_cassette(tape)
    assert record.exit_code is None and record.status == "stopped"
    replayed = play(store, tmp_path, spec("reviewer"), CassettePlayer(tape).wrap(agents),
                    session_id="s2")
    assert (replayed["result"]["exitCode"], replayed["result"]["completionMethod"],
            replayed["answer"]) == (None, recorded["result"]["completionMethod"],
                                    recorded["answer"])


def test_bad_cassettes_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"version": 1, "seq": 1}) + "\n")
    with pytest.raises(CassetteError, match=r"bad.jsonl:1: not a cassette record: missing"):
        read_cassette(bad)
    bad.write_text("{not json\n")
    with pytest.raises(CassetteError, match=r"bad.jsonl:1: not a cassette record"):
        read_cassette(bad)
    with pytest.raises(CassetteError, match="cannot read the cassette"):
        read_cassette(tmp_path / "absent.jsonl")


def test_non_utf8_output_round_trips(store: SqliteStore, tmp_path: Path) -> None:
    tape = tmp_path / "c.jsonl"
    raw = "import sys; sys.stdout.buffer.write(b'v: ok\\n# \\xff\\xfe\\n'); sys.stdout.flush()"
    play(store, tmp_path, spec("x"), CassetteRecorder(tape).wrap(commands(x=raw)))
    record = read_cassette(tape)[0]
    assert b"".join(c.data for c in record.chunks if c.stream == "stdout") == (
        b"v: ok\n# \xff\xfe\n")


def test_parallel_invocations_replay_in_the_order_they_started(store: SqliteStore,
                                                               tmp_path: Path) -> None:
    """Two regions invoke at once; each invocation keeps the number it started with, the
    lines are written as they end, and a replay gives each its own record."""
    tape = tmp_path / "c.jsonl"
    agents = commands(slow="import time; time.sleep(0.6); print('v: slow')",
                      fast="print('v: fast')")
    recorder = CassetteRecorder(tape)
    play(store, tmp_path, spec("slow", "fast"), recorder.wrap(agents))
    records = read_cassette(tape)
    assert sorted(r.name or "" for r in records) == ["fast", "slow"]
    by_name = {r.name: r for r in records}
    assert b"".join(c.data for c in by_name["slow"].chunks) == b"v: slow\n"
    player = CassettePlayer(tape, speed=2)
    play(store, tmp_path, spec("slow", "fast"), player.wrap(agents), session_id="s2")
    assert player.unplayed == 0


def test_a_continued_recording_appends(store: SqliteStore, tmp_path: Path) -> None:
    tape = tmp_path / "c.jsonl"
    agents = commands(reviewer="import sys; sys.stdin.read(); print('v: ok')")
    play(store, tmp_path, spec("reviewer"), CassetteRecorder(tape).wrap(agents))
    again = cassette(record=tape, continued=True)
    assert isinstance(again, CassetteRecorder) and again.seq == 1
    play(store, tmp_path, spec("reviewer"), again.wrap(agents), session_id="s2")
    assert [r.seq for r in read_cassette(tape)] == [1, 2]


def test_a_continued_replay_goes_on_where_the_last_run_ended(store: SqliteStore,
                                                              tmp_path: Path) -> None:
    """A session recorded in two runs (the second appending) and replayed in two runs:
    the second replay starts at the record of its first invocation, not at the first."""
    tape = tmp_path / "c.jsonl"
    agents = commands(reviewer="import sys; print('v:', len(sys.stdin.read()))")
    play(store, tmp_path, spec("reviewer"), CassetteRecorder(tape).wrap(agents))
    again = cassette(record=tape, continued=True)
    assert isinstance(again, CassetteRecorder)
    other = spec("reviewer", prompt="check it again, more slowly")
    play(store, tmp_path, other, again.wrap(agents), session_id="s2")
    player = cassette(replay=tape, continued=True)
    assert isinstance(player, CassettePlayer)
    play(store, tmp_path, other, player.wrap(agents), session_id="s3")
    assert player.seq == 2 and player.unplayed == 0
    fresh = CassettePlayer(tape)
    with pytest.raises(CassetteMismatch, match="invocation 1"):
        fresh.next_record("reviewer", read_cassette(tape)[1].prompt_sha256)


def test_cassette_chooses(tmp_path: Path) -> None:
    assert cassette() is None
    recorder = cassette(record=tmp_path / "c.jsonl", root=tmp_path)
    assert isinstance(recorder, CassetteRecorder)
    player = cassette(replay=tmp_path / "c.jsonl", speed=3)
    assert isinstance(player, CassettePlayer) and player.unplayed == 0
    with pytest.raises(ValueError, match="cannot be used together"):
        cassette(record=tmp_path / "a", replay=tmp_path / "b")
    with pytest.raises(CassetteError):
        cassette(replay=tmp_path / "absent.jsonl")


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=64), text=st.text(max_size=40))
def test_chunks_and_files_round_trip(data: bytes, text: str) -> None:
    from interlock.runtime.agents.cassette import Chunk, FileChange

    for raw in (data, text.encode("utf-8", "surrogatepass")):
        chunk = Chunk("stderr", 1.25, raw)
        assert Chunk.from_json(json.loads(json.dumps(chunk.to_json()))) == chunk
        change = FileChange("a/b.txt", raw)
        assert FileChange.from_json(json.loads(json.dumps(change.to_json()))) == change
