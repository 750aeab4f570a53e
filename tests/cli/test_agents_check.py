"""`interlock agents check` as a real process in a scratch project: one line per agent on
stdout, exit 0 when every agent is ready, 1 on any problem, 2 on a usage error. Each run
gets an environment of its own (a fresh HOME, a chosen PATH), never the developer's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.real_clis import cli_path, require_cli


def agents_check(root: Path, *args: str, path: str) -> subprocess.CompletedProcess[str]:
    home = root / ".home"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "PATH": path, "XDG_CONFIG_HOME": str(home / ".config"),
           "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "interlock.runtime.cli", "agents", "check",
                           *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def nothing_on_path(tmp_path: Path) -> str:
    empty = tmp_path / "bin"
    empty.mkdir()
    return str(empty)


def write(root: Path, text: str) -> None:
    (root / "interlock.yaml").write_text(text, encoding="utf-8")


def test_every_agent_ready_is_exit_0(tmp_path: Path, nothing_on_path: str) -> None:
    claude = require_cli("claude")
    write(tmp_path, f"""\
agents:
  planner: {{cli: demo}}
  lint: {{cli: command, command: [sh, -c, 'true'], env: {{PATH: /usr/bin:/bin}}}}
  executor:
    cli: claude
    env: {{PATH: "{cli_path()}", ANTHROPIC_API_KEY: sk-placeholder}}
""")
    done = agents_check(tmp_path, path=nothing_on_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "✓ planner: demo agent (offline)"
    assert lines[1].startswith("✓ lint: command /") and lines[1].endswith("/sh")
    assert lines[2] == (f"✓ executor: claude 2.1.197 ({claude}) · key: ANTHROPIC_API_KEY · "
                        "permissions: edit (--permission-mode acceptEdits)")
    assert done.stderr == "3 agent(s) checked: all ready\n"


def test_each_problem_is_one_line_and_exit_1(tmp_path: Path, nothing_on_path: str) -> None:
    require_cli("claude")
    write(tmp_path, f"""\
agents:
  executor: {{cli: claude}}
  reviewer: {{cli: claude, env: {{PATH: "{cli_path()}"}}}}
""")
    done = agents_check(tmp_path, "--ralph", path=nothing_on_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "✗ planner: no agent — add `planner: {cli: demo}` or a real agent under agents: in "
        "interlock.yaml",
        "✗ executor: claude: claude not found on PATH — install it: npm install -g "
        "@anthropic-ai/claude-code",
        "✗ reviewer: claude: Not logged in · Please run /login — run `claude` and /login, or set "
        "ANTHROPIC_API_KEY",
        "✗ questioner: no agent — add `questioner: {cli: demo}` or a real agent under "
        "agents: in interlock.yaml",
        "✗ librarian: no agent — add `librarian: {cli: demo}` or a real agent under agents: "
        "in interlock.yaml"]
    assert done.stderr == "5 agent(s) checked: 5 with problems\n"


def test_json_names_what_was_checked(tmp_path: Path, nothing_on_path: str) -> None:
    write(tmp_path, "agents:\n  coder: {cli: codex, model: gpt-5.5, untrusted: refuse}\n"
                    "  planner: {cli: demo}\n")
    done = agents_check(tmp_path, "--json", "coder", path=nothing_on_path)
    assert done.returncode == 1, done.stderr
    [coder] = json.loads(done.stdout)
    assert coder == {
        "name": "coder", "cli": "codex", "ok": False,
        "line": "✗ coder: codex: codex not found on PATH — install it: npm install -g "
                "@openai/codex",
        "model": "gpt-5.5", "agent": None, "permissions": "read-only",
        "workdir": str(tmp_path), "findings": [
            {"ok": False, "text": "codex not found on PATH",
             "fix": "install it: npm install -g @openai/codex"}]}


def test_without_agents_the_demo_roles_are_ready(tmp_path: Path, nothing_on_path: str
                                                 ) -> None:
    done = agents_check(tmp_path, path=nothing_on_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"✓ {role}: demo agent (offline)" for role in
                                        ("planner", "executor", "reviewer", "questioner",
                                         "librarian")]


@pytest.mark.parametrize(("text", "args", "code", "said"), [
    ("agents:\n  reviewer: {cli: demo, role: reviewer}\n", ["reviwer"], 2,
     "error: no agent 'reviwer' in {root}/interlock.yaml (did you mean 'reviewer'?); known: "
     "reviewer"),
    ("agents:\n  reviewer: {cli: demo, role: reviewer}\n", ["--ralph", "lint"], 2,
     "error: no Ralph role 'lint'; known: planner, executor, reviewer, questioner, librarian"),
    ("agents:\n  r: {cli: claude, modle: x}\n", [], 1,
     "{root}/interlock.yaml:2:20: error A501: unknown key 'modle' in agents.r (did you mean "
     "'model'?)"),
    ("agents: [\n", [], 1, "{root}/interlock.yaml:2:1: error Y002: YAML syntax error"),
])
def test_mistakes_are_one_line_never_a_traceback(tmp_path: Path, nothing_on_path: str,
                                                 text: str, args: list[str], code: int,
                                                 said: str) -> None:
    write(tmp_path, text)
    done = agents_check(tmp_path, *args, path=nothing_on_path)
    assert done.returncode == code and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(said.format(root=tmp_path))
