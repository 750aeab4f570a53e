"""What `interlock agents check` finds before any call (runtime/agents/preflight.py), with
the real CLIs in throwaway homes: each check runs in an environment of its own (a HOME,
a PATH), never the developer's, so no real key or login leaks in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from interlock import runtime
from interlock.runtime.agents.preflight import (
    INSTALL,
    AgentCheck,
    UnknownAgent,
    check_agent,
    check_project,
)
from interlock.runtime.config.agents import AgentConfig
from interlock.testing.clis import cli_env

from support.real_clis import cli_path, require_cli

NO_SERVER = "http://127.0.0.1:9"  # nothing is called: the checks only read and ask the CLI


def bare(home: Path, path: str | None = None) -> dict[str, str]:
    """An environment with nothing but a fresh home and a PATH: no key, no login."""
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "PATH": cli_path() if path is None else path,
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_CACHE_HOME": str(home / ".cache"), "NO_COLOR": "1"}


def check(cli: str, environ: dict[str, str], workdir: Path, **settings: Any) -> AgentCheck:
    workdir.mkdir(parents=True, exist_ok=True)
    return check_agent("a", AgentConfig.model_validate({"cli": cli, **settings}), workdir,
                       environ=environ)


def project(root: Path, agents: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "interlock.yaml").write_text(agents, encoding="utf-8")
    return root


@pytest.mark.parametrize("cli", sorted(INSTALL))
def test_a_cli_missing_from_path_says_how_to_install_it(cli: str, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    found = check(cli, bare(tmp_path / "home", str(empty)), tmp_path / "work")
    assert not found.ok
    assert found.line() == (f"✗ a: {cli}: {cli} not found on PATH — install it: "
                            f"{INSTALL[cli]}")


def test_the_agents_own_path_finds_the_cli(tmp_path: Path) -> None:
    exe = require_cli("codex")
    found = check("codex", bare(tmp_path / "home", str(tmp_path)), tmp_path / "work",
                  env={"PATH": cli_path(), "CODEX_API_KEY": "k"})
    assert found.ok, found.line()
    assert f"codex 0.171.0 ({exe})" in found.line()


@pytest.mark.parametrize(("cli", "problem"), [
    ("claude", "✗ a: claude: Not logged in · Please run /login — run `claude` and /login, or set "
               "ANTHROPIC_API_KEY"),
    ("codex", "✗ a: codex: not logged in — run `codex login` (or `codex login "
              "--with-api-key`), or set CODEX_API_KEY"),
    pytest.param(
        "gemini", "✗ a: gemini: not logged in (no auth method) — run `gemini` and log in, "
                  "or set security.auth.selectedType in ~/.gemini/settings.json, or set "
                  "GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_USE_GCA",
        marks=pytest.mark.slow_cli),
])
def test_logged_out_with_an_empty_home_and_no_key(cli: str, problem: str, tmp_path: Path
                                                   ) -> None:
    require_cli(cli)
    work = tmp_path / "work"
    if cli == "codex":  # in a git repository: the login is the only problem
        work.mkdir()
        subprocess.run(["git", "init", "-q", str(work)], check=True)
    found = check(cli, bare(tmp_path / "home"), work)
    assert found.line() == problem


@pytest.mark.parametrize(("cli", "settings", "words"), [
    ("claude", {"model": "sonnet", "permissions": "edit"},
     ["key: ANTHROPIC_API_KEY", "model sonnet",
      "permissions: edit (--permission-mode acceptEdits)"]),
    ("codex", {"model": "gpt-5.5", "permissions": "full"},
     ["key: INTERLOCK_SCRIPTED_API_KEY (provider scripted)",
      "model gpt-5.5 (provider scripted)", "not a git repo: runs with --skip-git-repo-check",
      "permissions: full (--sandbox danger-full-access)"]),
    ("gemini", {"model": "flash"},
     ["key: GEMINI_API_KEY", "model flash", "untrusted folder: runs with --skip-trust",
      "permissions: read-only (--approval-mode default)"]),
])
def test_a_ready_agent_is_one_line_of_what_was_found(cli: str, settings: dict[str, Any],
                                                      words: list[str], tmp_path: Path
                                                      ) -> None:
    exe = require_cli(cli)
    environ = cli_env(cli, NO_SERVER, tmp_path / "home", path=cli_path())
    found = check(cli, environ, tmp_path / "work", **settings)
    assert found.ok, found.line()
    line = found.line()
    assert line.startswith(f"✓ a: {cli} ") and f"({exe})" in line
    parts = line.split(" · ")
    assert parts[1:] == words


def test_codex_profiles_are_files_next_to_its_config(tmp_path: Path) -> None:
    require_cli("codex")
    environ = cli_env("codex", NO_SERVER, tmp_path / "home", path=cli_path())
    codex_home = Path(environ["CODEX_HOME"])
    (codex_home / "review.config.toml").write_text('model = "gpt-5.5"\n')
    missing = check("codex", environ, tmp_path / "work", agent="nosuch")
    assert missing.line() == (
        "✗ a: codex: profile 'nosuch' not found: no ~/.codex/nosuch.config.toml — create "
        "it, or fix agent: in interlock.yaml (profiles: review)")
    found = check("codex", environ, tmp_path / "work", agent="review")
    assert found.ok and " · profile review · " in found.line()


def test_codex_without_a_login_but_with_a_providers_key(tmp_path: Path) -> None:
    require_cli("codex")
    environ = cli_env("codex", NO_SERVER, tmp_path / "home", path=cli_path())
    del environ["INTERLOCK_SCRIPTED_API_KEY"]
    found = check("codex", environ, tmp_path / "work", model="gpt-5.5")
    assert found.line().startswith(
        "✗ a: codex: provider 'scripted' needs INTERLOCK_SCRIPTED_API_KEY, which is not set "
        "— set INTERLOCK_SCRIPTED_API_KEY")


def test_codex_refuses_a_folder_outside_git_when_told_to(tmp_path: Path) -> None:
    require_cli("codex")
    environ = cli_env("codex", NO_SERVER, tmp_path / "home", path=cli_path())
    work = tmp_path / "work"
    refused = check("codex", environ, work, untrusted="refuse")
    assert refused.line() == (f"✗ a: codex: {work} is not in a git repository — run `git "
                              "init` there, or set untrusted: allow")
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "sub").mkdir()
    inside = check("codex", environ, work / "sub", untrusted="refuse")
    assert inside.ok and " · git repo · " in inside.line()


@pytest.mark.slow_cli  # gemini takes seconds a call: after make test, in .ci/run
def test_gemini_trust_models_keys_and_agents(tmp_path: Path) -> None:
    """Several gemini agents in one project, each in a folder of its own (checked in
    parallel): trustedFolders.json's rules, a .env file, an unknown model, agent:."""
    require_cli("gemini")
    home = tmp_path / "home"
    environ = cli_env("gemini", NO_SERVER, home, path=cli_path())
    keyless = {k: v for k, v in environ.items()  # the API itself: it knows gemini's models
               if k not in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL")}
    root = tmp_path / "p"
    for folder in ("repo/src", "repo/secret", "keyed"):
        (root / folder).mkdir(parents=True)
    (root / "keyed" / ".env").write_text("export GEMINI_API_KEY='from-dotenv'\n")
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({
        str(root / "repo" / "x"): "TRUST_PARENT",  # trusts repo/ and below
        str(root / "repo" / "secret"): "DO_NOT_TRUST",  # the longest rule wins
        str(root / "keyed"): "TRUST_FOLDER"}))
    project(root, """\
agents:
  src: {cli: gemini, cwd: repo/src, untrusted: refuse}
  secret: {cli: gemini, cwd: repo/secret, untrusted: refuse}
  keyed: {cli: gemini, cwd: keyed, model: gpt-4, agent: helper}
""")
    checks = {c.name: c for c in check_project(root, environ=keyless)}
    assert checks["src"].line().startswith("✗ src: gemini: gemini-api-key auth but no "
                                           "GEMINI_API_KEY — set GEMINI_API_KEY")
    assert "trust" not in checks["src"].line()
    assert checks["secret"].line().endswith(
        f"; does not trust {root / 'repo' / 'secret'} — trust it (gemini: /permissions), or "
        "set untrusted: allow")
    assert checks["keyed"].line() == (
        "✗ keyed: gemini: unknown model 'gpt-4' — use auto, pro, flash, flash-lite or a "
        "gemini-* model name; no agent flag — remove agent: from this agent")
    keyed = [f.text for f in checks["keyed"].findings if f.ok]
    assert f"key: GEMINI_API_KEY ({root / 'keyed' / '.env'})" in keyed
    assert "trusted folder" in keyed


def test_claude_knows_its_subagents_by_their_front_matter(tmp_path: Path) -> None:
    require_cli("claude")
    environ = cli_env("claude", NO_SERVER, tmp_path / "home", path=cli_path())
    agents = tmp_path / "p" / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: code-reviewer\ndescription: x\n---\nhi\n")
    work = tmp_path / "p" / "sub"  # a project's subagents count from folders below it too
    assert check("claude", environ, work, agent="code-reviewer").ok
    assert check("claude", environ, work, agent="Explore").ok
    unknown = check("claude", environ, work, agent="reviewer")
    assert unknown.line() == (
        "✗ a: claude: no agent 'reviewer' — known: claude, code-reviewer, Explore, "
        "general-purpose, Plan, statusline-setup; a subagent is .claude/agents/*.md with "
        "`name: reviewer` in its front matter")


@pytest.mark.slow_cli  # opencode takes seconds a call: after make test, in .ci/run
def test_opencode_models_and_agents_come_from_opencode_itself(tmp_path: Path) -> None:
    require_cli("opencode")
    environ = cli_env("opencode", NO_SERVER, tmp_path / "home", path=cli_path())
    found = check("opencode", environ, tmp_path / "work", model="anthropic/claude-sonnet-4-5",
                  agent="general", permissions="edit")
    assert found.line() == (
        "✗ a: opencode: no credentials for provider 'anthropic' (model "
        "anthropic/claude-sonnet-4-5) — run `opencode auth login`, or set the provider's "
        "API key; agent 'general' is a subagent — name a primary agent: build, plan")
    assert [f.text for f in found.findings if f.ok][1:] == [
        "providers: opencode, scripted", "permissions: edit (OPENCODE_PERMISSION)"]


def test_a_role_left_without_an_agent(tmp_path: Path) -> None:
    root = project(tmp_path, "agents:\n  executor: {cli: demo}\n  lint: {cli: command, "
                             "command: [sh, -c, 'true']}\n")
    lines = [c.line() for c in check_project(root, roles=True, environ=bare(tmp_path / "h"))]
    assert lines == [
        "✗ planner: no agent — add `planner: {cli: demo}` or a real agent under agents: in "
        "interlock.yaml",
        "✓ executor: demo agent (offline)",
        "✗ reviewer: no agent — add `reviewer: {cli: demo}` or a real agent under agents: "
        "in interlock.yaml",
        "✗ questioner: no agent — add `questioner: {cli: demo}` or a real agent under "
        "agents: in interlock.yaml",
        "✗ librarian: no agent — add `librarian: {cli: demo}` or a real agent under "
        "agents: in interlock.yaml"]
    merging = check_project(root, roles=True, merger=True, environ=bare(tmp_path / "h"))
    assert merging[-1].line() == ("✗ merger: no agent — add `merger: {cli: demo}` or a real "
                                  "agent under agents: in interlock.yaml")  # parallel batches
    named = check_project(root, environ=bare(tmp_path / "h"))  # not Ralph: the agents
    assert [c.name for c in named] == ["executor", "lint"]
    assert named[1].line().startswith("✓ lint: command /") and named[1].line().endswith("/sh")


def test_without_agents_the_demo_roles_are_checked(tmp_path: Path) -> None:
    for roles in (False, True):
        checks = check_project(tmp_path, roles=roles)
        assert checks[0].line() == "✓ planner: demo agent (offline)"
        assert len(checks) == 5 and all(c.ok for c in checks)


def test_a_command_or_folder_that_is_not_there(tmp_path: Path) -> None:
    root = project(tmp_path, "agents:\n  lint: {cli: command, command: [no-such-agent]}\n"
                             "  far: {cli: claude, cwd: nowhere}\n")
    lint, far = check_project(root, environ=bare(tmp_path / "h"))
    assert lint.line() == ("✗ lint: command: no-such-agent not found on PATH — install it, "
                           "or fix command: in interlock.yaml")
    assert far.line() == (f"✗ far: claude: working folder {tmp_path / 'nowhere'} does not "
                          "exist — create it, or fix cwd: in interlock.yaml")


def test_an_unknown_name_is_a_usage_error_naming_the_known_ones(tmp_path: Path) -> None:
    root = project(tmp_path, "agents:\n  reviewer: {cli: demo, role: reviewer}\n")
    with pytest.raises(UnknownAgent, match=r"no agent 'reviwer' in .*interlock.yaml \(did "
                       r"you mean 'reviewer'\?\); known: reviewer"):
        check_project(root, ["reviwer"])
    with pytest.raises(runtime.UsageError, match=r"no Ralph role 'lint'; known: planner, "):
        runtime.agents_check(["lint"], root=root, roles=True)
    checked = runtime.agents_check(["reviewer"], root=root)
    assert checked[0].to_json() == {
        "name": "reviewer", "cli": "demo", "ok": True,
        "line": "✓ reviewer: demo agent (offline)", "model": None, "agent": None,
        "permissions": "read-only", "workdir": str(root.absolute()),
        "findings": [{"ok": True, "text": "demo agent (offline)", "fix": None}]}
