"""Cassettes: a real demo agent run is recorded, then replayed by the replayer process
through the real dispatcher to the same result and the same files."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.runtime.agents.adapters import agent_command, polling_for
from interlock.runtime.agents.cassette import (
    CassetteError,
    CassetteMismatch,
    CassettePlayer,
    CassetteRecorder,
    read_cassette,
)
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.dispatch import AgentCommand, Dispatch, DispatchResult
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.ralph.config import RalphConfig, RetryPolicy
from interlock.runtime.ralph.invocation import invoke

EXECUTOR = AgentConfig.model_validate({"cli": "demo", "role": "executor", "delay": 0.05})


def _prompt(root: Path) -> str:
    return (f"Task: T1 write the parser\nWorkdir: {root / 'work'}\n"
            f"Knowledge: {root / 'knowledge'}\nRequest: parse the file\n")


async def _run(runner: CassetteRecorder | CassettePlayer, command: AgentCommand,
               polling: PollingConfiguration) -> DispatchResult:
    return await runner(Dispatch(command, polling))


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_record_then_replay_gives_the_same_result_and_files(tmp_path: Path) -> None:
    recorded_root, replayed_root = tmp_path / "rec", tmp_path / "play"
    recorded_root.mkdir()
    replayed_root.mkdir()
    cassette = tmp_path / "run.cassette.jsonl"
    polling = polling_for(EXECUTOR)

    command = agent_command(EXECUTOR, _prompt(recorded_root), name="executor")
    recorded = asyncio.run(_run(CassetteRecorder(cassette, root=recorded_root), command,
                                polling))
    assert recorded.polling.success
    written = _files(recorded_root)
    assert written, "the demo executor writes its task file"

    records = read_cassette(cassette)
    assert [r.seq for r in records] == [1]
    record = records[0]
    assert record.name == "executor" and record.chunks
    assert [c.at for c in record.chunks] == sorted(c.at for c in record.chunks)
    assert {f.path for f in record.files} == set(written)

    player = CassettePlayer(cassette, root=replayed_root, speed=4.0)
    # the prompt names the other folder: the recorded folder is a placeholder in the digest
    replay_command = agent_command(EXECUTOR, _prompt(replayed_root), name="executor")
    replayed = asyncio.run(_run(player, replay_command, polling))
    for field in ("success", "exit_code", "status", "completion_method", "verdict"):
        assert getattr(replayed.polling, field) == getattr(recorded.polling, field), field
    assert replayed.polling.stdout == recorded.polling.stdout.replace(
        str(recorded_root), str(replayed_root))
    assert replayed.argv[1:3] == ("-m", "interlock.runtime.agents.replay")
    assert _files(replayed_root) == {
        name: text.replace(str(recorded_root), str(replayed_root))
        for name, text in written.items()}
    assert str(recorded_root) not in cassette.read_text()


def test_a_different_prompt_is_refused_clearly(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    command = AgentCommand((sys.executable, "-c", "print('v: ok')"), prompt="first",
                           name="reviewer")
    polling = PollingConfiguration.model_validate({"minOutputLength": 0})
    asyncio.run(_run(CassetteRecorder(cassette), command, polling))
    player = CassettePlayer(cassette)
    other = AgentCommand(command.argv, prompt="second", name="reviewer")
    with pytest.raises(CassetteMismatch, match=r"invocation 1 \(reviewer\): the prompt "
                       r"differs from the recorded one"):
        player.command(other)
    assert player.command(command).argv[3:5] == (str(cassette.resolve()), "1")
    with pytest.raises(CassetteMismatch, match=r"invocation 2 \(reviewer\) is not recorded: "
                       r"the cassette holds 1 invocation"):
        player.command(command)


def test_retries_and_failures_replay_too(tmp_path: Path) -> None:
    """A transient failure then a success: both attempts are recorded, and the replay
    retries exactly as the recorded run did, with the recorded exit codes."""
    script = tmp_path / "flaky.py"
    script.write_text(
        "import pathlib, sys\nc = pathlib.Path(sys.argv[1])\n"
        "n = int(c.read_text()) + 1 if c.exists() else 1\nc.write_text(str(n))\n"
        "if n == 1:\n    print('No messages returned', file=sys.stderr); sys.exit(1)\n"
        "print('v: done')\n")
    command = AgentCommand((sys.executable, str(script), str(tmp_path / "n")), prompt="go",
                           name="executor")
    polling = PollingConfiguration.model_validate({"minOutputLength": 0})
    config = RalphConfig(retry=RetryPolicy(output_patterns=("No messages",), attempts=3))

    async def no_wait(seconds: float) -> None:
        return None

    cassette = tmp_path / "c.jsonl"
    first = asyncio.run(invoke(command, polling, config, runner=CassetteRecorder(cassette),
                               sleep=no_wait))
    again = asyncio.run(invoke(command, polling, config, runner=CassettePlayer(cassette,
                               speed=10), sleep=no_wait))
    assert [a.result.polling.exit_code for a in again.attempts] == [
        a.result.polling.exit_code for a in first.attempts] == [1, 0]
    assert again.result.polling.stdout == first.result.polling.stdout == "v: done\n"
    assert "No messages returned" in again.attempts[0].result.polling.stderr


def test_a_stopped_agent_lingers_in_replay_until_stopped(tmp_path: Path) -> None:
    """An agent stopped by the dispatcher after its answer (no exit code) is replayed by a
    process that also never exits by itself: the dispatcher ends it the same way."""
    cassette = tmp_path / "c.jsonl"
    linger = "import time; print('v: ok\\n...', flush=True); time.sleep(300)"
    command = AgentCommand((sys.executable, "-c", linger), name="reviewer")
    polling = PollingConfiguration.model_validate({"minOutputLength": 0})
    recorded = asyncio.run(_run(CassetteRecorder(cassette), command, polling))
    replayed = asyncio.run(_run(CassettePlayer(cassette), command, polling))
    assert recorded.polling.exit_code is None and recorded.polling.success
    assert (replayed.polling.exit_code, replayed.polling.completion_method,
            replayed.polling.stdout) == (None, recorded.polling.completion_method,
                                         recorded.polling.stdout)


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


def test_non_utf8_output_round_trips(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    raw = "import sys; sys.stdout.buffer.write(b'v: ok\\n# \\xff\\xfe\\n'); sys.stdout.flush()"
    command = AgentCommand((sys.executable, "-c", raw), name="x")
    polling = PollingConfiguration.model_validate({"minOutputLength": 0})
    asyncio.run(_run(CassetteRecorder(cassette), command, polling))
    record = read_cassette(cassette)[0]
    assert b"".join(c.data for c in record.chunks if c.stream == "stdout") == (
        b"v: ok\n# \xff\xfe\n")


def test_parallel_invocations_replay_in_the_order_they_started(tmp_path: Path) -> None:
    """The slow reviewer starts first and ends last: it stays invocation 1."""
    cassette = tmp_path / "c.jsonl"
    polling = PollingConfiguration.model_validate({"minOutputLength": 0})

    def reviewer(name: str, delay: float) -> AgentCommand:
        code = f"import time; time.sleep({delay}); print('v: {name}')"
        return AgentCommand((sys.executable, "-c", code), prompt=name, name=name)

    async def both(runner: CassetteRecorder | CassettePlayer) -> list[DispatchResult]:
        commands = [reviewer("slow", 0.6), reviewer("fast", 0.0)]
        return list(await asyncio.gather(*(runner(Dispatch(c, polling)) for c in commands)))

    recorded = asyncio.run(both(CassetteRecorder(cassette)))
    lines = [json.loads(line)["seq"] for line in cassette.read_text().splitlines()]
    assert lines == [2, 1]  # written as they ended
    assert [r.name for r in read_cassette(cassette)] == ["slow", "fast"]
    replayed = asyncio.run(both(CassettePlayer(cassette, speed=2)))
    assert [r.polling.stdout for r in replayed] == [r.polling.stdout for r in recorded] == [
        "v: slow\n", "v: fast\n"]


def test_cassette_runner_chooses(tmp_path: Path) -> None:
    from interlock.runtime.agents.cassette import cassette_runner

    assert cassette_runner() is None
    recorder = cassette_runner(record=tmp_path / "c.jsonl", root=tmp_path)
    assert isinstance(recorder, CassetteRecorder)
    player = cassette_runner(replay=tmp_path / "c.jsonl", speed=3)
    assert isinstance(player, CassettePlayer) and player.unplayed == 0
    with pytest.raises(ValueError, match="cannot be used together"):
        cassette_runner(record=tmp_path / "a", replay=tmp_path / "b")
    with pytest.raises(CassetteError):
        cassette_runner(replay=tmp_path / "absent.jsonl")


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=64), text=st.text(max_size=40))
def test_chunks_and_files_round_trip(data: bytes, text: str) -> None:
    from interlock.runtime.agents.cassette import Chunk, FileChange

    for raw in (data, text.encode("utf-8", "surrogatepass")):
        chunk = Chunk("stderr", 1.25, raw)
        assert Chunk.from_json(json.loads(json.dumps(chunk.to_json()))) == chunk
        change = FileChange("a/b.txt", raw)
        assert FileChange.from_json(json.loads(json.dumps(change.to_json()))) == change
