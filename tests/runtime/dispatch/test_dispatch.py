"""The dispatcher with real processes: every completion method and every misbehaving agent.

Each test runs real agent processes (tests/support/agents/, `interlock demo-agent`, coreutils,
perl) and checks the result, how soon it came, and that nothing of the agent is left: its
process group has no live member and the child itself was reaped (no zombie).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.config.dispatch import PollingConfiguration, parse_dispatch_config
from interlock.runtime.dispatch import AgentCommand, Dispatch, dispatch_all
from interlock.runtime.dispatch.output import OutputChunk
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.host.procfs import group_members

from support.proc_helpers import agent_argv, cli_argv
from support.stress import scaled

# pollingInterval and the silence window are the smallest the seed allows (1 s, 2 cycles).
FAST: dict[str, Any] = {"dispatchTimeout": 30, "pollingInterval": 1, "idleTimeout": 10,
                        "terminateGrace": 1}
WINDOW = 2.0  # minSilenceCycles x pollingInterval
SLACK = 1.5  # scheduling slack on a loaded 2-core CI machine; the bench measures precisely


def config(**overrides: Any) -> PollingConfiguration:
    return parse_dispatch_config({**FAST, **overrides})


def run(argv: list[str], cfg: PollingConfiguration | None = None, *, tmp_path: Path,
        prompt: str | None = None, options: SpawnOptions | None = None,
        ) -> tuple[Dispatch, Any, float]:
    """Dispatch ``argv``; returns the Dispatch, its result and the wall time it took."""
    dispatch = Dispatch(AgentCommand(tuple(argv), prompt=prompt,
                                     options=options or SpawnOptions()),
                        cfg or config(), spill_dir=tmp_path / "spill")
    started = time.monotonic()
    result = asyncio.run(dispatch.run())
    return dispatch, result, time.monotonic() - started


def assert_nothing_left(dispatch: Dispatch) -> None:
    process = dispatch.process
    assert process is not None
    assert list(group_members(process.pgid)) == [], "a member of the agent's group survived"
    assert process.returncode is not None, "the agent was not reaped"
    with pytest.raises(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)


def python_agent(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# -- completion methods --------------------------------------------------------------------


def test_exit_zero_completes_with_the_whole_answer_and_its_verdict(tmp_path: Path) -> None:
    dispatch, result, took = run(cli_argv("demo-agent", "--role", "TECHLEAD", "--delay", "0",
                                          "--prompt", "review"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method, polling.exit_code) == (
        "completed", "exit", 0)
    assert polling.success
    assert polling.stdout.startswith("p: TECHLEAD\n")
    assert polling.verdict is not None and polling.verdict.role == "TECHLEAD"
    assert polling.verdict.verdict in ("GO", "CONDITIONAL", "NO-GO")
    assert took < 10
    assert_nothing_left(dispatch)


def test_non_zero_exit_is_an_error_with_the_output_kept(tmp_path: Path) -> None:
    dispatch, result, _ = run(cli_argv("demo-agent", "--role", "QA", "--fail", "--delay", "0",
                                       "--prompt", "x"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method, polling.exit_code) == (
        "error", "exit", 1)
    assert not polling.success
    assert polling.stderr  # the agent's complaint is returned
    assert_nothing_left(dispatch)


def test_a_hung_agent_is_done_one_silence_window_after_its_answer(tmp_path: Path) -> None:
    dispatch, result, took = run(agent_argv("answers_then_hangs"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert polling.success and polling.exit_code is None  # we stopped it: no exit code
    assert polling.verdict is not None and polling.verdict.verdict is not None
    last = dispatch.buffer.streams["stdout"].last_at
    assert last is not None
    assert WINDOW <= took < WINDOW + SLACK + 1.0  # + terminate (TERM is honoured)
    assert polling.poll_count >= 1
    assert_nothing_left(dispatch)


def test_an_end_marker_completes_at_once_without_waiting_for_silence(tmp_path: Path) -> None:
    dispatch, result, took = run(cli_argv("demo-agent", "--role", "QA", "--delay", "0",
                                          "--end-marker", "--linger", "600", "--prompt", "x"),
                                 tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert took < WINDOW  # no silence window was waited for
    assert polling.stdout.rstrip().endswith("...")
    assert_nothing_left(dispatch)


def test_a_verdict_line_alone_does_not_cut_off_the_issues_after_it(tmp_path: Path) -> None:
    # v: first, then a pause shorter than the silence window, then the issue list.
    code = ("import sys, time\n"
            "w = sys.stdout.write\n"
            "w('p: SECURITY\\nv: NO-GO\\n'); sys.stdout.flush(); time.sleep(1.5)\n"
            "w('i:\\n  - C: Missing test: tabs are ignored\\n  - H: no idle timeout\\n')\n"
            "sys.stdout.flush(); time.sleep(600)\n")
    dispatch, result, _ = run(python_agent(code), config(completionMarkers={
        "minSilenceCycles": 2}), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert polling.verdict is not None
    assert [(i.severity, i.text) for i in polling.verdict.issues] == [
        ("C", "Missing test: tabs are ignored"), ("H", "no idle timeout")]
    assert_nothing_left(dispatch)


def test_idle_timeout_returns_the_partial_output(tmp_path: Path) -> None:
    code = ("import sys, time\n"
            "sys.stdout.write('thinking about it, at length, ' * 8 + '\\n')\n"
            "sys.stdout.flush(); time.sleep(600)\n")
    dispatch, result, took = run(python_agent(code), config(idleTimeout=1),
                                 tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method, polling.success) == (
        "timeout", "idle", False)
    assert polling.stdout.startswith("thinking about it")
    assert took < 1 + 1 + SLACK  # idle + grace
    assert_nothing_left(dispatch)


PERL_AGENT = ["perl", "-e", 'print "p: QA\\nv: GO\\ni: []\\n"; sleep 600;']


def test_the_hard_timeout_cases(tmp_path: Path) -> None:
    """Three runs that only the dispatch timeout ends (run side by side, so one timeout
    is waited for; 4 s, as `--timeout 4` may set, below the 10 s a file may set):

    * 4 bytes, then nothing: the agent has not "started" (seed 001), so the 1 s idle
      timeout does not apply;
    * an agent that never stops talking: never idle, never complete;
    * perl printing into a pipe, block-buffered: nothing arrives at all (with a pty it
      does; see the next test).
    """
    short = "import sys, time\nsys.stdout.write('hmm\\n'); sys.stdout.flush(); time.sleep(600)\n"
    chatty = ("import sys, time\n"
              "while True:\n"
              "    sys.stdout.write('still working on it\\n'); sys.stdout.flush()\n"
              "    time.sleep(0.2)\n")
    timeout = 4
    cfg = parse_dispatch_config({**FAST, "idleTimeout": 1, "dispatchTimeout": timeout},
                                timeout_from_flag=True)
    runs = [Dispatch(AgentCommand(tuple(argv)), cfg, spill_dir=tmp_path)
            for argv in (python_agent(short), python_agent(chatty), PERL_AGENT)]

    async def main() -> list[Any]:
        return list(await asyncio.gather(*(r.run() for r in runs)))

    started = time.monotonic()
    results = asyncio.run(main())
    took = time.monotonic() - started
    for result in results:
        polling = result.polling
        assert (polling.status, polling.completion_method, polling.success) == (
            "timeout", "timeout", False)
        assert timeout <= polling.elapsed_time < timeout + 1 + SLACK
        assert polling.poll_count >= timeout - 1
    assert took < timeout + 1 + 2 * SLACK
    short_result, chatty_result, perl_result = results
    assert short_result.polling.stdout == "hmm\n"
    assert "still working on it" in chatty_result.polling.stdout
    assert perl_result.polling.stdout == ""
    for run_ in runs:
        assert_nothing_left(run_)


def test_a_command_that_does_not_exist_is_a_spawn_error(tmp_path: Path) -> None:
    dispatch = Dispatch(AgentCommand(("no-such-agent-cli-x",)), config(),
                        spill_dir=tmp_path)
    result = asyncio.run(dispatch.run())
    polling = result.polling
    assert (polling.status, polling.completion_method, polling.success) == (
        "error", "spawn", False)
    assert result.error == "command not found: 'no-such-agent-cli-x'"
    assert "command not found" in polling.stderr
    assert dispatch.process is None


def test_a_command_that_is_not_executable_is_a_spawn_error(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    _, result, _ = run([str(script)], tmp_path=tmp_path)
    assert (result.polling.status, result.polling.completion_method) == ("error", "spawn")
    assert "permission denied" in (result.error or "")


# -- robustness ----------------------------------------------------------------------------


def test_a_grandchild_holding_the_pipes_neither_delays_the_result_nor_survives(
        tmp_path: Path) -> None:
    dispatch, result, took = run(agent_argv("grandchild_holds_pipes"), tmp_path=tmp_path)
    assert (result.polling.status, result.polling.completion_method) == ("completed", "exit")
    assert result.polling.verdict is not None and result.polling.verdict.verdict == "GO"
    assert took < 1 + SLACK  # exit is seen at once; EOF never came
    assert_nothing_left(dispatch)


def test_an_agent_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    dispatch, result, took = run(agent_argv("ignores_sigterm"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert polling.verdict is not None and polling.verdict.verdict == "NO-GO"
    assert WINDOW + 1 <= took < WINDOW + 1 + SLACK  # silence window + terminate grace
    assert_nothing_left(dispatch)


@pytest.mark.stress
def test_a_flood_is_spilled_whole_while_memory_stays_capped(tmp_path: Path) -> None:
    """256 MiB through a 1 MiB cap (1 GiB with INTERLOCK_STRESS=full): memory is checked
    after every chunk the dispatcher takes in."""
    size = scaled(1 << 28, 1 << 30)
    cap = 1 << 20
    dispatch = Dispatch(AgentCommand(tuple(agent_argv("flood", str(size)))),
                        config(outputMemoryCap=cap), spill_dir=tmp_path)
    peak = 0
    add = dispatch.buffer.add

    def add_and_measure(chunk: OutputChunk) -> None:
        nonlocal peak
        add(chunk)
        peak = max(peak, dispatch.buffer.held_bytes)

    dispatch.buffer.add = add_and_measure  # type: ignore[method-assign]
    result = asyncio.run(dispatch.run())
    assert (result.polling.status, result.polling.completion_method) == ("completed", "exit")
    assert result.polling.verdict is not None and result.polling.verdict.role == "QA"
    answer = b"p: QA\nv: GO\ni: []\n"
    assert result.stdout_bytes == size + len(answer)
    assert 0 < peak <= cap
    assert result.stdout_file is not None
    spill = Path(result.stdout_file)
    assert spill.stat().st_size == size + len(answer)  # nothing dropped
    assert spill.stat().st_mode & 0o077 == 0
    with spill.open("rb") as f:
        f.seek(-len(answer), os.SEEK_END)
        assert f.read() == answer
    assert len(result.polling.stdout.encode()) <= cap // 2
    assert_nothing_left(dispatch)


def test_one_ten_megabyte_line_arrives_whole(tmp_path: Path) -> None:
    size = 10 * 1024 * 1024
    dispatch, result, _ = run(agent_argv("long_line", str(size)), tmp_path=tmp_path)
    assert (result.polling.status, result.polling.completion_method) == ("completed", "exit")
    assert result.polling.verdict is not None and result.polling.verdict.role == "ARCHITECT"
    answer = b"\np: ARCHITECT\nv: GO\ni: []\n"
    assert result.stdout_bytes == size + len(answer)
    assert result.stdout_file is not None
    assert Path(result.stdout_file).stat().st_size == size + len(answer)
    assert_nothing_left(dispatch)


def test_invalid_utf8_is_replaced_in_text_and_kept_raw(tmp_path: Path) -> None:
    dispatch, result, _ = run(agent_argv("invalid_utf8"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "exit")
    assert "\ufffd" in polling.stdout and "\ufffd" in polling.stderr
    assert polling.verdict is not None and polling.verdict.verdict == "CONDITIONAL"
    raw = dispatch.buffer.streams["stdout"].tail_bytes()
    assert raw.decode("utf-8", "replace") == polling.stdout
    assert_nothing_left(dispatch)


def test_no_trailing_newline_is_still_the_whole_answer(tmp_path: Path) -> None:
    dispatch, result, _ = run(agent_argv("no_trailing_newline"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "exit")
    assert polling.stdout == "p: QA\nv: GO\ni: []"
    assert polling.verdict is not None and polling.verdict.verdict == "GO"
    assert_nothing_left(dispatch)


@pytest.mark.parametrize(("code", "status"), [("0", "completed"), ("3", "error")])
def test_an_agent_that_exits_at_once(tmp_path: Path, code: str, status: str) -> None:
    dispatch, result, took = run(agent_argv("exits_at_once", code), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method, polling.exit_code) == (
        status, "exit", int(code))
    assert polling.stdout == "" and polling.verdict is None
    assert took < 1 + SLACK
    assert_nothing_left(dispatch)


def test_a_block_buffered_python_agent_is_unbuffered_by_pythonunbuffered(
        tmp_path: Path) -> None:
    dispatch, result, _ = run(agent_argv("block_buffered"), tmp_path=tmp_path)
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert polling.verdict is not None and polling.verdict.role == "TECHLEAD"
    assert_nothing_left(dispatch)


GREP_AGENT = ["sh", "-c", "{ printf 'p: QA\\nv: GO\\ni: []\\n'; sleep 600; } | grep ."]


def test_stdbuf_line_buffers_a_c_stdio_agent(tmp_path: Path) -> None:
    # grep block-buffers into a pipe; under stdbuf -oL its lines arrive at once.
    assert shutil.which("stdbuf") and shutil.which("grep")
    dispatch, result, took = run(GREP_AGENT, tmp_path=tmp_path,
                                 options=SpawnOptions(line_buffered=True))
    assert (result.polling.status, result.polling.completion_method) == ("completed", "marker")
    assert result.polling.stdout == "p: QA\nv: GO\ni: []\n"
    assert took < WINDOW + SLACK + 1
    assert_nothing_left(dispatch)


def test_a_pty_line_buffers_an_agent_that_block_buffers_pipes(tmp_path: Path) -> None:
    assert shutil.which("perl")
    dispatch, result, _ = run(PERL_AGENT, config(idleTimeout=1, dispatchTimeout=10),
                              tmp_path=tmp_path, options=SpawnOptions(use_pty=True))
    polling = result.polling
    assert (polling.status, polling.completion_method) == ("completed", "marker")
    assert polling.stdout == "p: QA\nv: GO\ni: []\n"  # raw mode: no \r\n
    assert_nothing_left(dispatch)


def test_a_large_prompt_goes_to_stdin_without_deadlock(tmp_path: Path) -> None:
    prompt = "review this line please\n" * 50_000  # 1.2 MB, far more than a pipe holds
    code = ("import sys\nn = len(sys.stdin.read())\n"
            "sys.stdout.write(f'p: QA\\nv: GO\\ni: []\\nn: {n}\\n')\n")
    dispatch, result, _ = run(python_agent(code), tmp_path=tmp_path, prompt=prompt)
    assert (result.polling.status, result.polling.completion_method) == ("completed", "exit")
    assert f"n: {len(prompt)}" in result.polling.stdout
    assert_nothing_left(dispatch)


def test_without_a_prompt_stdin_is_at_end_of_file(tmp_path: Path) -> None:
    code = ("import sys\nn = len(sys.stdin.read())\n"
            "sys.stdout.write(f'p: QA\\nv: GO\\ni: []\\nn: {n}\\n')\n")
    _, result, took = run(python_agent(code), tmp_path=tmp_path)
    assert "n: 0" in result.polling.stdout
    assert took < 1 + SLACK


def test_stderr_chatter_after_the_answer_does_not_delay_completion(tmp_path: Path) -> None:
    code = ("import sys, time\n"
            "sys.stdout.write('p: QA\\nv: GO\\ni: []\\n'); sys.stdout.flush()\n"
            "while True:\n"
            "    sys.stderr.write('spinner\\n'); sys.stderr.flush(); time.sleep(0.1)\n")
    dispatch, result, took = run(python_agent(code), tmp_path=tmp_path)
    assert (result.polling.status, result.polling.completion_method) == ("completed", "marker")
    assert "spinner" in result.polling.stderr
    assert took < WINDOW + SLACK + 1
    assert_nothing_left(dispatch)


# -- parallel ------------------------------------------------------------------------------


def test_four_reviewers_in_parallel_each_get_their_own_result(tmp_path: Path) -> None:
    agent = cli_argv("demo-agent")
    commands = [
        AgentCommand((*agent, "--role", "TECHLEAD", "--delay", "0", "--prompt", "p"),
                     name="TECHLEAD"),
        AgentCommand((*agent, "--role", "SECURITY", "--linger", "600", "--prompt", "p"),
                     name="SECURITY"),
        AgentCommand((*agent, "--role", "QA", "--end-marker", "--linger", "600",
                      "--prompt", "p"), name="QA"),
        AgentCommand((*agent, "--role", "ARCHITECT", "--fail", "--prompt", "p"),
                     name="ARCHITECT"),
    ]
    started = time.monotonic()
    results = asyncio.run(dispatch_all(commands, config(), spill_dir=tmp_path))
    took = time.monotonic() - started
    assert [r.name for r in results] == ["TECHLEAD", "SECURITY", "QA", "ARCHITECT"]
    assert [(r.status, r.polling.completion_method) for r in results] == [
        ("completed", "exit"), ("completed", "marker"), ("completed", "marker"),
        ("error", "exit")]
    for result in results[:3]:
        assert result.polling.verdict is not None
        assert result.polling.verdict.role == result.name
    assert len({r.dispatch_id for r in results}) == 4
    assert took < 2 * (WINDOW + SLACK)  # together, not one after the other


def test_one_silence_cycle_completes_on_the_first_silent_poll(tmp_path: Path) -> None:
    dispatch, result, took = run(agent_argv("answers_then_hangs"),
                                 config(completionMarkers={"minSilenceCycles": 1}),
                                 tmp_path=tmp_path)
    assert (result.polling.status, result.polling.completion_method) == ("completed", "marker")
    assert 1.0 <= took < 1.0 + SLACK
    assert_nothing_left(dispatch)


def test_a_missing_command_under_stdbuf_is_still_a_spawn_error(tmp_path: Path) -> None:
    # stdbuf would run and exit 127 itself; the dispatcher checks the command first.
    for argv in (["no-such-agent-cli-x"], ["./no-such-agent.sh"]):
        _, result, _ = run(argv, tmp_path=tmp_path, options=SpawnOptions(line_buffered=True))
        assert (result.polling.status, result.polling.completion_method) == ("error", "spawn")
        assert result.error == f"command not found: {argv[0]!r}"
