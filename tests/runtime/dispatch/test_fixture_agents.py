"""Smoke tests of tests/support/agents/: each misbehaves exactly as documented.

Every child runs in its own session and its process group is SIGKILLed on the way out
(``Child`` is a context manager), so no fixture agent outlives its test.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess

import pytest
import yaml

from support.proc_helpers import AGENTS, Child, agent_argv

ANSWER_KEYS = {"p", "v", "i"}


def test_every_agent_is_documented_and_has_a_docstring() -> None:
    readme = (AGENTS / "README.md").read_text()
    scripts = sorted(AGENTS.glob("*.py"))
    assert len(scripts) == 9
    for script in scripts:
        assert f"`{script.name}" in readme, script.name
        assert script.read_text().startswith('"""'), script.name


def test_answers_then_hangs_answers_completely_and_never_exits() -> None:
    with Child(agent_argv("answers_then_hangs")) as agent:
        lines = [agent.readline().decode() for _ in range(4)]
        assert set(yaml.safe_load("".join(lines))) == ANSWER_KEYS
        assert agent.proc.poll() is None
        assert agent.nothing_pending()  # answer done, stdout still open: no EOF to wait for
        agent.proc.terminate()
        assert agent.proc.wait(20) == -signal.SIGTERM


def test_grandchild_keeps_the_pipes_open_after_the_parent_exits() -> None:
    with Child(agent_argv("grandchild_holds_pipes")) as agent:
        assert agent.proc.wait(20) == 0  # the parent is reaped...
        assert yaml.safe_load(agent.drain()) == {"p": "TECHLEAD", "v": "GO", "i": []}
        match = re.fullmatch(rb"grandchild pid (\d+)\n", agent.readline("stderr"))
        assert match is not None
        grandchild = int(match[1])
        assert os.getpgid(grandchild) == agent.pid  # same group: killpg reaches it
        # ...yet EOF does not come: the grandchild still holds the write ends.
        assert agent.nothing_pending("stdout")
        assert agent.nothing_pending("stderr")
        agent.kill_group()
        assert agent.read_to_eof("stdout") == b""  # the group is gone, so EOF arrives
        assert agent.read_to_eof("stderr") == b""


def test_ignores_sigterm_survives_sigterm_and_dies_to_sigkill() -> None:
    with Child(agent_argv("ignores_sigterm"), stdin=subprocess.PIPE) as agent:
        lines = [agent.readline().decode() for _ in range(5)]  # SIG_IGN is set before this
        assert set(yaml.safe_load("".join(lines))) == ANSWER_KEYS
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.proc.stdin is not None
        agent.proc.stdin.write(b"ping\n")
        agent.proc.stdin.flush()
        assert agent.readline() == b"alive\n"  # it took SIGTERM and still answers
        assert agent.proc.poll() is None
        agent.kill_group()
        assert agent.proc.returncode == -signal.SIGKILL


def test_flood_writes_bytes_in_big_chunks_then_the_answer() -> None:
    size = 3 * 1024 * 1024 + 123
    with Child(agent_argv("flood", str(size))) as agent:
        out, err, code = agent.communicate()
    assert (code, err) == (0, b"")
    answer = b"p: QA\nv: GO\ni: []\n"
    assert len(out) == size + len(answer)
    assert out.endswith(answer)
    assert out[:64] == b"flood " * 10 + b"...\n"


def test_long_line_is_one_line_of_bytes_then_the_answer() -> None:
    size = 2 * 1024 * 1024
    with Child(agent_argv("long_line", str(size))) as agent:
        out, _, code = agent.communicate()
    assert code == 0
    line, _, rest = out.partition(b"\n")
    assert line == b"x" * size
    assert set(yaml.safe_load(rest)) == ANSWER_KEYS


def test_invalid_utf8_mixes_bad_bytes_with_an_answer() -> None:
    with Child(agent_argv("invalid_utf8")) as agent:
        out, err, code = agent.communicate()
    assert code == 0
    for data in (out, err):
        with pytest.raises(UnicodeDecodeError):
            data.decode("utf-8")
    text = out.decode("utf-8", errors="replace")
    assert "p: TECHLEAD\nv: CONDITIONAL\ni:\n" in text


def test_no_trailing_newline_answers_and_exits_0() -> None:
    with Child(agent_argv("no_trailing_newline")) as agent:
        out, _, code = agent.communicate()
    assert code == 0
    assert not out.endswith(b"\n")
    assert yaml.safe_load(out) == {"p": "QA", "v": "GO", "i": []}


@pytest.mark.parametrize(("args", "expected"), [((), 0), (("3",), 3), (("127",), 127)])
def test_exits_at_once_prints_nothing(args: tuple[str, ...], expected: int) -> None:
    with Child(agent_argv("exits_at_once", *args)) as agent:
        assert agent.communicate() == (b"", b"", expected)


def _env(unbuffered: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def test_block_buffered_answer_is_stuck_in_the_process_and_lost_on_sigterm() -> None:
    with Child(agent_argv("block_buffered"), env=_env(False)) as agent:
        assert b"lingering" in agent.readline("stderr")  # print() has returned...
        assert agent.nothing_pending("stdout")  # ...but nothing reached the pipe
        agent.proc.terminate()
        assert agent.proc.wait(20) == -signal.SIGTERM
        assert agent.read_to_eof("stdout") == b""  # the buffer died with the process


def test_block_buffered_answer_arrives_with_pythonunbuffered() -> None:
    with Child(agent_argv("block_buffered"), env=_env(True)) as agent:
        agent.readline("stderr")  # stdout was written before this line
        assert yaml.safe_load(agent.drain()) == {"p": "TECHLEAD", "v": "GO", "i": []}
        assert agent.proc.poll() is None


def test_block_buffered_answer_arrives_through_a_pty() -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(agent_argv("block_buffered"), stdin=subprocess.DEVNULL,
                                stdout=follower, stderr=subprocess.PIPE,
                                start_new_session=True, env=_env(False))
        os.close(follower)
        try:
            assert proc.stderr is not None
            assert b"lingering" in proc.stderr.readline()
            # A tty makes stdout line-buffered, so the answer is already readable.
            out = b""
            while out.count(b"\n") < 3:
                out += os.read(leader, 1024)
            assert yaml.safe_load(out.replace(b"\r\n", b"\n")) == {"p": "TECHLEAD", "v": "GO",
                                                                  "i": []}
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(20)
            assert proc.stderr is not None
            proc.stderr.close()
    finally:
        os.close(leader)
