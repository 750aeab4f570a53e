"""Ralph with REAL agents: the real claude (and codex) CLIs in the roles, offline.

Each CLI runs for real (pinned, tests/tools/agent-clis) against the scripted model server
of :mod:`interlock.testing`, which plays Ralph's roles (:class:`RalphModel`): the Planner
plans, the Executor's files are written by the CLI's own tool calls, the Reviewer
approves, the Librarian promotes. The runner is the installed ``interlock`` CLI.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from interlock.testing import ModelServer
from interlock.testing.clis import cli_env
from interlock.testing.ralph_model import RalphModel

from support.ralph_e2e import cli, finish, meta, post, progress, project, session, start, wait_until
from support.real_clis import cli_path, require_cli

pytestmark = pytest.mark.real_cli

ROLES = ("planner", "executor", "reviewer", "questioner", "librarian")


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(RalphModel()) as server:
        yield server


def agent_line(role: str, cli_name: str, url: str, home: Path, **settings: str) -> str:
    env = cli_env(cli_name, url, home, path=cli_path())
    extra = "".join(f", {key}: {value}" for key, value in settings.items())
    return f"{role}: {{cli: {cli_name}, env: {json.dumps(env)}{extra}}}"


def claude_project(root: Path, server: ModelServer, *, request: str = "write the parser; "
                   "write the report", ralph: str = "", **executor: str) -> None:
    require_cli("claude")
    home = root.parent / f"{root.name}-home"
    lines = [agent_line(role, "claude", server.url, home, **(executor if role == "executor"
                                                              else {}))
             for role in ROLES]
    project(root, "\n".join(lines), ralph=ralph, request=request)


def test_every_role_on_the_real_claude_completes(tmp_path: Path, model: ModelServer) -> None:
    claude_project(tmp_path, model)
    done = cli(tmp_path, "ralph", "run", "s", timeout=120)
    assert done.returncode == 0, done.stderr
    for role in ROLES[:3]:
        assert f"✓ {role}: claude 2.1.197" in done.stderr  # which agent each role uses
    assert progress(tmp_path).count("[x]") == 2
    assert sorted(p.name for p in tmp_path.glob("T*.md")) == ["T1.md", "T2.md"]
    writes = [r for r in model.requests if r.tool_results
              and "You are Ralph-Executor" in r.user_text]
    assert len(writes) == 2  # each task's files went through claude's own Write tool
    assert all("File created successfully" in r.tool_results[-1] for r in writes)
    status = json.loads(cli(tmp_path, "ralph", "status", "s", "--json").stdout)
    assert status["spend"]["cost_usd"] > 0  # the cost claude reported, summed


def test_a_read_only_executor_fails_with_permission_denied(tmp_path: Path,
                                                          model: ModelServer) -> None:
    claude_project(tmp_path, model, permissions="read-only")
    done = cli(tmp_path, "ralph", "run", "s", timeout=120)
    assert done.returncode == 4, done.stderr
    assert not list(tmp_path.glob("T*.md"))
    last = done.stderr.strip().splitlines()[-1]
    assert "Ralph-Executor failed: claude refused Write" in last
    assert str(tmp_path / "T1.md") in last
    calls = (session(tmp_path) / "iterations/1/invocations/002-executor.md").read_text()
    assert "permission_denied" in calls or "claude refused Write" in calls


def test_claude_logged_out_stops_the_run_in_its_own_words(tmp_path: Path) -> None:
    """Caught before the first call (`interlock agents check --ralph`), in claude's own
    words; the same words from the call itself when the check passed (a key set, no
    server): the run ends with exit 4 either way."""
    require_cli("claude")
    home = tmp_path.parent / "empty-home"
    env = {"HOME": str(home), "PATH": cli_path(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    lines = [f"{role}: {{cli: claude, env: {json.dumps(env)}}}" for role in ROLES]
    project(tmp_path, "\n".join(lines))
    started = time.monotonic()
    done = cli(tmp_path, "ralph", "run", "s", timeout=60)
    assert done.returncode == 4, done.stderr
    assert time.monotonic() - started < 15
    assert "✗ planner: claude: Not logged in · Please run /login" in done.stderr
    assert "no Ralph session" not in done.stderr and "Traceback" not in done.stderr
    assert not (session(tmp_path) / "iterations/1/invocations").exists()  # nothing ran


def test_a_call_that_cannot_reach_the_api_pauses_the_session(tmp_path: Path) -> None:
    """Credentials pass the check, but the API cannot be reached (retried, transient):
    after the retries the session pauses with claude's words and `ralph run` exits 4."""
    require_cli("claude")
    env = cli_env("claude", "http://127.0.0.1:9", tmp_path.parent / "home", path=cli_path())
    lines = [f"{role}: {{cli: claude, env: {json.dumps(env)}}}" for role in ROLES]
    project(tmp_path, "\n".join(lines), ralph="retry: {attempts: 2, base: 10ms, cap: 20ms}")
    done = cli(tmp_path, "ralph", "run", "s", timeout=90)
    assert done.returncode == 4, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "Ralph-Planner failed: claude: API Error: Unable to connect to API" in last
    assert "then `interlock ralph run s`" in last


def test_a_steer_continues_the_running_executors_conversation(tmp_path: Path) -> None:
    with ModelServer(RalphModel(delays={"executor": 4.0})) as server:
        claude_project(tmp_path, server, request="write the parser")
        proc = start(tmp_path, "ralph", "run", "s")
        wait_until(lambda: any("You are Ralph-Executor" in r.user_text
                               for r in server.requests), proc=proc, what="the executor")
        post(tmp_path, "STEER", "use a recursive descent parser", target="Ralph-Executor")
        code, err = finish(proc, timeout=120)
        assert code == 0, err
        executor = [r for r in server.requests if "You are Ralph-Executor" in r.user_text]
        steered = next(r for r in executor if "recursive descent" in r.user_text)
        first = executor[0].prompt
        assert first and first in steered.user_text  # the call's earlier turns, carried
        assert "STEER: use a recursive descent parser" in steered.user_text
    assert "recursive descent" in (tmp_path / "T1.md").read_text()


def test_max_cost_stops_on_the_cost_claude_reports(tmp_path: Path, model: ModelServer) -> None:
    claude_project(tmp_path, model, ralph="max_cost: 0.001")
    done = cli(tmp_path, "ralph", "run", "s", timeout=120)
    assert done.returncode == 3, done.stderr
    assert "cost" in done.stderr.lower()
    assert meta(tmp_path)["stop_reason"]


def test_codex_as_the_executor(tmp_path: Path, model: ModelServer) -> None:
    require_cli("claude")
    require_cli("codex")
    home = tmp_path.parent / "homes"
    lines = [agent_line(role, "codex" if role == "executor" else "claude", model.url,
                        home / role) for role in ROLES]
    project(tmp_path, "\n".join(lines), request="write the parser; write the report")
    done = cli(tmp_path, "ralph", "run", "s", timeout=180)
    assert done.returncode == 0, done.stderr
    assert "✓ executor: codex 0.171.0" in done.stderr
    assert progress(tmp_path).count("[x]") == 2
    assert sorted(p.name for p in tmp_path.glob("T*.md")) == ["T1.md", "T2.md"]
    assert any(r.wire == "openai_responses" for r in model.requests)
    record = yaml.safe_load((session(tmp_path) / "metadata.yaml").read_text())
    assert record["status"] == "completed"


def test_parallel_executors_on_the_real_claude_work_in_their_worktrees(
        tmp_path: Path, model: ModelServer) -> None:
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost",
                               *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout

    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "start")
    claude_project(tmp_path, model, ralph="parallel: 2")
    with (tmp_path / "interlock.yaml").open("a") as project_file:
        project_file.write("  merger: {cli: demo}\n")
    done = cli(tmp_path, "ralph", "run", "s", timeout=180)
    assert done.returncode == 0, done.stderr
    assert sorted(git("ls-tree", "--name-only", "ralph/s").split()) == ["T1.md", "T2.md"]
    assert not list(tmp_path.glob("T*.md"))  # written in the worktrees, not the project
    assert progress(tmp_path).count("[x]") == 2
    knowledge = session(tmp_path) / "iterations/1/knowledge"  # staged in the worktree
    assert sorted(p.name for p in knowledge.iterdir()) == ["T1.md", "T2.md"]
    assert ".ralph-knowledge" not in git("ls-tree", "-r", "--name-only", "ralph/s")
