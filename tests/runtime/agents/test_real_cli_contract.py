"""The agent adapter contract against the REAL claude, codex, gemini and opencode CLIs.

Each CLI (pinned in tests/tools/agent-clis, installed by ``make test``) runs for real
through interlock's dispatcher, with its own home, pointed at the scripted model server
of :mod:`interlock.testing` on 127.0.0.1: the CLI does its own tool calls, permission
checks, retries, output format and exit codes; the server records what it was sent.
The same cases run against every CLI (docs/agents.md: "The real CLIs, tested").
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
import pytest

from interlock.runtime.agents.adapters import (
    adapter_for,
    agent_command,
    launch_command,
    polling_for,
)
from interlock.runtime.config.agents import AgentConfig
from interlock.runtime.dispatch import Dispatch, DispatchResult, with_overrides
from interlock.runtime.engine.agent_output import AgentOutput
from interlock.runtime.host.procfs import carries_dispatch_id
from interlock.testing import cut, fail, say, write_file

from support.real_clis import RealCli

pytestmark = pytest.mark.real_cli

ANSWER = "verdict: accept\nsummary: looks fine\n"


def run(config: AgentConfig, prompt: str, *, timeout: float | None = None
        ) -> tuple[DispatchResult, AgentOutput, str]:
    """Dispatch ``prompt`` to the agent (``timeout``: seconds, as ``--timeout`` gives it);
    the result, the adapter's reading, the dispatch id."""
    polling = polling_for(config)
    if timeout is not None:
        polling = with_overrides(polling, timeout=timeout)
    job = Dispatch(agent_command(config, prompt, name=config.cli), polling)
    result = asyncio.run(job.run())
    output = adapter_for(config).read(result.polling.stdout, result.polling.stderr)
    return result, output, job.dispatch_id


def leftovers(dispatch_id: str) -> list[int]:
    return [p.pid for p in psutil.process_iter() if carries_dispatch_id(p.pid, dispatch_id)]


def test_an_answer_with_its_usage(every_real_cli: RealCli) -> None:
    cli = every_real_cli
    cli.server.script.add(say(ANSWER, input_tokens=321, output_tokens=45))
    result, output, _ = run(cli.config(), "Review the parser.")
    assert result.status == "completed", result.polling.stderr
    assert output.error is None and output.reason is None
    assert output.answer.strip() == ANSWER.strip()
    assert output.usage.input_tokens is not None and output.usage.input_tokens >= 321
    assert output.usage.output_tokens is not None and output.usage.output_tokens >= 45
    assert "Review the parser." in cli.server.requests[0].user_text


def test_a_tool_write_lands_in_the_workdir(real_cli: RealCli) -> None:
    real_cli.server.script.add(write_file("hello.txt", "hi there\n"), say("written: hello.txt"))
    result, output, _ = run(real_cli.config(permissions="edit"), "Write hello.txt.")
    assert result.status == "completed", result.polling.stderr
    assert (real_cli.workdir / "hello.txt").read_text() == "hi there\n"
    assert output.denials == ()
    assert output.answer.strip() == "written: hello.txt"
    assert real_cli.server.requests[1].tool_results  # the tool's result went back


def test_a_denied_write_is_named(real_cli: RealCli) -> None:
    real_cli.server.script.add(write_file("hello.txt", "hi there\n"), say("written: hello.txt"))
    _, output, _ = run(real_cli.config(permissions="read-only"), "Write hello.txt.")
    assert not (real_cli.workdir / "hello.txt").exists()
    assert output.denials, output
    # codex logs a refused patch without its path (docs/agents.md): only the tool is named
    named = "apply_patch" if real_cli.cli == "codex" else "hello.txt"
    assert any(named in denial for denial in output.denials), output.denials


def test_a_shell_command_needs_full(real_cli: RealCli) -> None:
    from interlock.testing import run_shell

    real_cli.server.script.add(run_shell("echo ran > ran.txt"), say("ran it"))
    result, output, _ = run(real_cli.config(permissions="full"), "Run the command.")
    assert result.status == "completed", result.polling.stderr
    assert (real_cli.workdir / "ran.txt").read_text().strip() == "ran"
    assert output.denials == ()


def test_auth_failure_is_the_clis_own_words(real_cli: RealCli) -> None:
    real_cli.server.script.add(*[fail(401, "invalid x-api-key")] * 5)
    result, output, _ = run(real_cli.config(), "Hello.")
    assert result.status == "error"
    assert output.reason == "auth", output
    assert output.error and real_cli.cli in output.error.lower()


def test_rate_limited(real_cli: RealCli) -> None:
    real_cli.server.script.add(*[fail(429, "rate limit reached", retry_after=0)] * 20)
    result, output, _ = run(real_cli.config(), "Hello.")
    assert result.status == "error"
    assert output.reason == "rate_limited", output


def test_server_error(real_cli: RealCli) -> None:
    # retry_after=0: opencode backs off 2+4+8+16+32 s without one (no setting bounds it)
    real_cli.server.script.add(*[fail(500, "internal failure", retry_after=0)] * 20)
    result, output, _ = run(real_cli.config(), "Hello.")
    assert result.status == "error"
    assert output.reason == "unavailable", output
    assert output.error


def test_a_stream_cut_mid_answer_fails_or_recovers(real_cli: RealCli) -> None:
    """A cut stream is an error, or the CLI retried it and the retry's answer came."""
    real_cli.server.script.add(cut("verdict: acc" * 20), say(ANSWER))
    result, output, _ = run(real_cli.config(), "Hello.")
    if result.status == "completed":
        assert output.answer.strip() == ANSWER.strip()
        assert len(real_cli.server.requests) == 2
    else:
        assert output.error


def test_the_invoke_timeout_ends_the_whole_group(real_cli: RealCli) -> None:
    real_cli.server.script.add(say(ANSWER, delay=60))
    started = time.monotonic()
    result, _, dispatch_id = run(real_cli.config(), "Hello.", timeout=3)
    assert result.status == "timeout"
    assert time.monotonic() - started < 30
    assert leftovers(dispatch_id) == []


def test_cancel_mid_call_leaves_no_process(real_cli: RealCli) -> None:
    real_cli.server.script.add(say(ANSWER, delay=30))
    config = real_cli.config()
    job = Dispatch(agent_command(config, "Hello.", name=config.cli), polling_for(config))

    async def cancel_once_asked() -> None:
        task = asyncio.create_task(job.run())
        await asyncio.to_thread(real_cli.server.wait_for, 1, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_once_asked())
    deadline = time.monotonic() + 10
    while leftovers(job.dispatch_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers(job.dispatch_id) == []


@pytest.mark.parametrize("prompt", [
    pytest.param("-p --help: a prompt that starts like a flag", id="dash"),
    pytest.param("Résumé: naïve café, 日本語, emoji 🙂, and a quote \" and $HOME", id="unicode"),
])
def test_the_prompt_arrives_whole(real_cli: RealCli, prompt: str) -> None:
    real_cli.server.script.add(say("réponse: très bien 🙂"))
    result, output, _ = run(real_cli.config(), prompt)
    assert result.status == "completed", result.polling.stderr
    assert prompt in real_cli.server.requests[0].user_text
    assert output.answer.strip() == "réponse: très bien 🙂"


def test_a_megabyte_prompt_arrives_whole_and_never_in_argv(real_cli: RealCli) -> None:
    """Whole at the server, and in no process's argv (what `ps` shows) while the CLI
    works: the CLIs' own child processes included."""
    line = "the quick brown fox jumps over the lazy dog, 0123456789\n"
    prompt = "BEGIN\n" + line * (1_048_576 // len(line)) + "END\n"
    real_cli.server.script.add(say(ANSWER, delay=1.5))
    config = real_cli.config()
    launch = adapter_for(config).launch(config, prompt)
    assert all("quick brown fox" not in arg for arg in launch.argv)
    job = Dispatch(agent_command(config, prompt, name=config.cli), polling_for(config))
    shown: list[str] = []

    async def run_and_look() -> DispatchResult:
        task = asyncio.create_task(job.run())
        await asyncio.to_thread(real_cli.server.wait_for, 1, 60)
        for proc in psutil.process_iter(["cmdline"]):
            shown.extend(proc.info["cmdline"] or ())
        return await task

    result = asyncio.run(run_and_look())
    assert result.status == "completed", result.polling.stderr[-2000:]
    assert prompt.strip() in real_cli.server.requests[0].user_text
    assert shown and not [arg for arg in shown if "quick brown fox" in arg]


def test_a_steer_continues_the_conversation(real_cli: RealCli) -> None:
    adapter = adapter_for(real_cli.config())
    real_cli.server.script.add(say("first: answered"), say("second: steered"))
    config = real_cli.config()
    _, first, _ = run(config, "Plan the parser.")
    assert first.session, first
    launch = adapter.resume(config, first.session, "STEER: use a recursive descent parser")
    assert launch is not None
    job = Dispatch(launch_command(launch, name="steer"), polling_for(config))
    result = asyncio.run(job.run())
    second = adapter.read(result.polling.stdout, result.polling.stderr)
    assert second.answer.strip() == "second: steered"
    steered = real_cli.server.requests[-1]
    assert "Plan the parser." in steered.user_text  # the earlier turns
    assert "first: answered" in "\n".join(m.text for m in steered.messages
                                           if m.role == "assistant")
    assert "recursive descent" in steered.user_text


def test_a_config_without_the_server_cannot_reach_it(tmp_path: Path) -> None:
    """Sanity: the sandbox is what points the CLI at the server (no ambient credentials)."""
    from interlock.testing.clis import cli_env

    env = cli_env("claude", "http://127.0.0.1:9", tmp_path / "home")
    assert env["HOME"] == str(tmp_path / "home")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
