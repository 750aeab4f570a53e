"""What can be checked about an agent before calling it (``interlock agents check``).

For each agent one :class:`AgentCheck`: its CLI found on the agent's PATH and its version,
credentials present, the working folder trusted where the CLI checks it (codex: a git
repository; gemini: ``~/.gemini/trustedFolders.json``), the model, profile or agent known
where the CLI can tell, and the permissions it will run with. Each problem is a
:class:`Finding` that says what to do. Nothing calls a model: the checks read files and
run the CLI's own local commands (``--version``, ``claude auth status``, ``codex login
status``, ``codex debug models``, ``opencode models``, ``opencode agent list``), each
bounded by :data:`TIMEOUT`, in the agent's folder and environment (the inherited one with
the agent's ``env:`` over it: its ``PATH`` finds the CLI, its ``HOME`` the CLI's files).

>>> AgentCheck("planner", "demo", (Finding(True, "demo agent (offline)"),)).line()
'✓ planner: demo agent (offline)'
>>> AgentCheck("planner", None, (Finding(False, "no agent", "add one"),)).line()
'✗ planner: no agent — add one'
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from interlock.machines.diagnostics import did_you_mean
from interlock.runtime.agents import claude, codex, gemini, opencode
from interlock.runtime.config.agents import AgentConfig, Permissions, load_agents, resolve_agent
from interlock.runtime.config.project_file import PROJECT_FILE
from interlock.runtime.config.role_names import MERGER, ROLES

TIMEOUT = 15.0  # seconds for each command a check runs
INSTALL: dict[str, str] = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "gemini": "npm install -g @google/gemini-cli",
    "opencode": "npm install -g opencode-ai",
}
# How each CLI is told the agent's permissions (opencode: rules in its environment).
PERMISSION_FLAGS: dict[str, Mapping[Permissions, tuple[str, ...]]] = {
    "claude": claude.PERMISSION_FLAGS, "codex": codex.PERMISSION_FLAGS,
    "gemini": gemini.PERMISSION_FLAGS,
    "opencode": dict.fromkeys(opencode.PERMISSION_RULES, ("OPENCODE_PERMISSION",))}
# The subagents built into Claude Code 2.1 (its "--agent 'x' not found. Available agents:").
CLAUDE_AGENTS = ("claude", "Explore", "general-purpose", "Plan", "statusline-setup")
# Gemini CLI's model aliases and the prefixes of its model names (packages/core/src/
# config/models.ts).
GEMINI_ALIASES = ("auto", "pro", "flash", "flash-lite")
GEMINI_PREFIXES = ("gemini-", "gemma-", "auto-gemini-")
CODEX_LOCAL_PROVIDERS = ("oss", "ollama", "lmstudio")  # built in, no key
OPENCODE_HIDDEN = ("compaction", "summary", "title")  # opencode's internal primary agents
_VERSION = re.compile(r"\d+\.\d+[\w.+-]*")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_JSONC = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.DOTALL)
_OPENCODE_LOCK = threading.Lock()
_OPENCODE_AGENT = re.compile(r"^(\S+) \((primary|subagent|all)\)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing checked: ``ok``, what was found (or is wrong), and for a problem what to
    do about it."""

    ok: bool
    text: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "text": self.text, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class AgentCheck:
    """What was checked about one agent (a name of ``agents:``, or a Ralph role); ``cli``
    is None for a role left without an agent."""

    name: str
    cli: str | None
    findings: tuple[Finding, ...]
    config: AgentConfig | None = None
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    def line(self) -> str:
        """One line: ``✓ NAME: what was found · ...``, or ``✗ NAME: CLI: problem — fix;
        ...`` naming every problem."""
        problems = [f for f in self.findings if not f.ok]
        if not problems:
            return f"✓ {self.name}: " + " · ".join(f.text for f in self.findings)
        said = "; ".join(f"{f.text} — {f.fix}" if f.fix else f.text for f in problems)
        return f"✗ {self.name}: " + (f"{self.cli}: " if self.cli else "") + said

    def to_json(self) -> dict[str, Any]:
        config = self.config
        return {"name": self.name, "cli": self.cli, "ok": self.ok, "line": self.line(),
                "model": config.model if config else None,
                "agent": config.agent if config else None,
                "permissions": config.allowed if config else None,
                "workdir": str(self.workdir) if self.workdir else None,
                "findings": [f.to_json() for f in self.findings]}


class UnknownAgent(ValueError):
    """A name to check that is no agent (nor role) of the project."""


def check_project(root: Path | str, names: Sequence[str] | None = None, *,
                  roles: bool = False, merger: bool = False,
                  environ: Mapping[str, str] | None = None) -> list[AgentCheck]:
    """Check the agents of ``ROOT/interlock.yaml``: ``names`` (default: every agent under
    ``agents:``, or the offline demo roles when there is none), or with ``roles`` the five
    Ralph roles (and the Merger with ``merger``: parallel batches), where a role missing
    from a non-empty ``agents:`` is a problem. Agents are checked in parallel. Raises
    :class:`UnknownAgent` for a name that is none of these, AgentConfigError for a broken
    ``agents:`` section."""
    folder = Path(root)
    agents = load_agents(folder / PROJECT_FILE)
    role_names = [*ROLES, MERGER] if merger else list(ROLES)
    known = role_names if roles or not agents else list(agents)
    wanted = list(dict.fromkeys(names)) if names else known
    for name in wanted:
        if name not in known:
            hint = did_you_mean(name, known)
            raise UnknownAgent((f"no Ralph role {name!r}" if roles
                                else f"no agent {name!r} in {folder / PROJECT_FILE}")
                               + (f" ({hint})" if hint else "") + "; known: " + ", ".join(known))

    def check(name: str) -> AgentCheck:
        config = resolve_agent(name, agents)
        if config is None:
            return AgentCheck(name, None, (Finding(
                False, "no agent", f"add `{name}: {{cli: demo}}` or a real agent under agents: "
                f"in {PROJECT_FILE}"),))
        return check_agent(name, config, folder, environ=environ, runs=runs)

    runs = Runs()
    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        return list(pool.map(check, wanted))


def check_agent(name: str, config: AgentConfig, root: Path | str, *,
                environ: Mapping[str, str] | None = None,
                runs: Runs | None = None) -> AgentCheck:
    """Check one agent, running in its ``cwd`` or else in ``root``, in ``environ`` (default:
    this process's) with the agent's ``env:`` over it; ``runs``: the commands already run
    by the other agents of the same check."""
    workdir = Path(config.cwd) if config.cwd else Path(root)
    env = {**(os.environ if environ is None else environ), **config.env}
    agent = _Agent(config, workdir.absolute(), env, runs or Runs())
    return AgentCheck(name, config.cli, tuple(_findings(agent)), config, agent.workdir)


@dataclass(frozen=True, slots=True)
class _Agent:
    """One agent being checked: its settings, folder, environment and CLI executable."""

    config: AgentConfig
    workdir: Path
    env: dict[str, str]
    runs: Runs  # the commands run for this check (shared by its agents)
    exe: str = ""

    @property
    def home(self) -> Path:
        return Path(self.env.get("HOME") or Path.home())

    def run(self, *args: str) -> subprocess.CompletedProcess[str] | None:
        """The CLI run with ``args`` (None: it could not start, or timed out)."""
        return self.runs.call([self.exe, *args], self.workdir, self.env)

    def which(self, program: str) -> str | None:
        """Where ``program`` is: on the agent's PATH, or a path (from its folder)."""
        if "/" in program:
            path = self.workdir / program
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        return shutil.which(program, path=self.env.get("PATH", os.defpath))

    def shown(self, path: Path) -> str:
        """``path``, with ``~`` for the agent's home."""
        return "~/" + str(path.relative_to(self.home)) if path.is_relative_to(self.home) \
            else str(path)


class Runs:
    """The CLI commands one check ran, by argv, folder and environment: five roles played
    by the same claude run ``claude --version`` and ``claude auth status`` once (a node
    CLI costs about half a second of CPU a start). Thread-safe: a second asker waits for
    the first's result."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[Any, ...], Future[subprocess.CompletedProcess[str] | None]] = {}

    def call(self, argv: list[str], cwd: Path, env: Mapping[str, str]
             ) -> subprocess.CompletedProcess[str] | None:
        key = (tuple(argv), str(cwd), tuple(sorted(env.items())))
        with self._lock:
            future = self._done.get(key)
            mine = future is None
            if future is None:
                future = self._done[key] = Future()
        if mine:
            try:
                future.set_result(_call(argv, cwd, env))
            except BaseException as exc:  # the waiters learn it too, instead of hanging
                future.set_exception(exc)
                raise
        return future.result()


def _call(argv: list[str], cwd: Path, env: Mapping[str, str]
          ) -> subprocess.CompletedProcess[str] | None:
    """Run ``argv`` to its end (its process group killed after :data:`TIMEOUT`)."""
    try:
        process = subprocess.Popen(argv, cwd=cwd, env={**env, "PWD": str(cwd), "NO_COLOR": "1"},
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, errors="replace",
                                   start_new_session=True)
    except OSError:
        return None
    with process:
        try:
            out, err = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None
    return subprocess.CompletedProcess(argv, process.returncode, _ANSI.sub("", out),
                                       _ANSI.sub("", err))


def _said(ran: subprocess.CompletedProcess[str] | None) -> str:
    """What a command said when it failed: its first two lines (stderr first)."""
    if ran is None:
        return f"did not finish within {TIMEOUT:g} s"
    lines = [line.strip() for line in (ran.stderr + "\n" + ran.stdout).splitlines()
             if line.strip()]
    return " ".join(lines[:2]) if lines else f"exit {ran.returncode}"


def _findings(agent: _Agent) -> list[Finding]:
    config = agent.config
    if config.cli == "demo":
        return [Finding(True, "demo agent (offline)")]
    if not agent.workdir.is_dir():
        return [Finding(False, f"working folder {agent.workdir} does not exist",
                        "create it, or fix cwd: in interlock.yaml")]
    program = config.command[0] if config.command else config.cli
    exe = agent.which(program)
    if exe is None:
        fix = (f"install it: {INSTALL[config.cli]}" if config.cli in INSTALL
               else "install it, or fix command: in interlock.yaml")
        return [Finding(False, f"{program} not found on PATH", fix)]
    if config.cli == "command":
        return [Finding(True, f"command {exe}")]
    agent = replace(agent, exe=exe)
    ran = agent.run("--version")
    if ran is None or ran.returncode != 0:
        return [Finding(False, f"`{program} --version` failed: {_said(ran)}",
                        f"fix what it says, or reinstall it: {INSTALL[config.cli]}")]
    version = _VERSION.search(ran.stdout)
    flags = " ".join(PERMISSION_FLAGS[config.cli][config.allowed])
    return [Finding(True, f"{config.cli} {version.group() if version else '?'} ({exe})"),
            *_CHECKS[config.cli](agent),
            Finding(True, f"permissions: {config.allowed} ({flags})")]


def _trust(agent: _Agent, trusted: bool, said: tuple[str, str], flag: str, problem: str,
           fix: str) -> Finding:
    """The folder check of a CLI that has one: trusted (``said[0]``), untrusted
    (``said[1]``) but run with ``flag`` (``untrusted: allow``), or a problem (``untrusted:
    refuse``)."""
    if trusted:
        return Finding(True, said[0])
    if agent.config.untrusted == "allow":
        return Finding(True, f"{said[1]}: runs with {flag}")
    return Finding(False, problem, f"{fix}, or set untrusted: allow")


# -- claude -------------------------------------------------------------------------------


def _claude(agent: _Agent) -> list[Finding]:
    found = [_claude_login(agent)]
    if agent.config.model:
        found.append(Finding(True, f"model {agent.config.model}"))
    if agent.config.agent:
        found.append(_claude_agent(agent, agent.config.agent))
    return found


def _claude_login(agent: _Agent) -> Finding:
    """``claude auth status`` (JSON; exit 1 when logged out): it knows every way Claude
    Code finds credentials (keys, apiKeyHelper, the login in a file or the keychain,
    Bedrock, Vertex)."""
    ran = agent.run("auth", "status")
    status = _json(ran.stdout) if ran is not None else None
    if not isinstance(status, dict):
        return Finding(True, f"credentials not checked (`claude auth status`: {_said(ran)})")
    if status.get("loggedIn") is not True:
        return Finding(False, "Not logged in · Please run /login",  # claude's own words
                       "run `claude` and /login, or set ANTHROPIC_API_KEY")
    if status.get("apiKeySource"):
        return Finding(True, f"key: {status['apiKeySource']}")
    if status.get("apiProvider") not in (None, "firstParty"):
        return Finding(True, f"provider: {status['apiProvider']}")
    return Finding(True, f"logged in ({status.get('authMethod')})")


def _claude_agent(agent: _Agent, name: str) -> Finding:
    """A subagent: built in, or a Markdown file whose front matter ``name:`` is ``name``
    under ``agents/`` of Claude Code's config folder or ``.claude/agents/`` of the working
    folder or any folder above it (as Claude Code finds them)."""
    if "--agents" in agent.config.args or ":" in name:  # given in args, or a plugin's
        return Finding(True, f"agent {name}")
    config_dir = Path(agent.env.get("CLAUDE_CONFIG_DIR") or agent.home / ".claude")
    folders = [config_dir / "agents", *(folder / ".claude" / "agents"
                                        for folder in (agent.workdir, *agent.workdir.parents))]
    known = {*CLAUDE_AGENTS, *(found for folder in folders for found in _subagents(folder))}
    if name in known:
        return Finding(True, f"agent {name}")
    return Finding(False, f"no agent {name!r}", "known: " + ", ".join(sorted(known, key=str.lower))
                   + f"; a subagent is .claude/agents/*.md with `name: {name}` in its front matter")


def _subagents(folder: Path) -> Iterator[str]:
    for file in sorted(folder.rglob("*.md")) if folder.is_dir() else ():
        try:
            text = file.read_text(encoding="utf-8")
            head = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else None
        except (OSError, UnicodeDecodeError, IndexError, yaml.YAMLError):
            continue
        if isinstance(head, dict) and isinstance(head.get("name"), str):
            yield head["name"]


# -- codex --------------------------------------------------------------------------------


def _codex(agent: _Agent) -> list[Finding]:
    home = Path(agent.env.get("CODEX_HOME") or agent.home / ".codex")
    found: list[Finding] = []
    try:
        settings = _toml(home / "config.toml")
        providers = _providers(settings)
        profile = agent.config.agent
        if profile and (home / f"{profile}.config.toml").is_file():
            layer = _toml(home / f"{profile}.config.toml")
            settings = {**settings, **layer}
            providers = {**providers, **_providers(layer)}
            found.append(Finding(True, f"profile {profile}"))
        elif profile:
            others = sorted(p.name.removesuffix(".config.toml")
                            for p in home.glob("?*.config.toml"))
            found.append(Finding(False, f"profile {profile!r} not found: no "
                                 f"{agent.shown(home / f'{profile}.config.toml')}",
                                 "create it, or fix agent: in interlock.yaml"
                                 + (f" (profiles: {', '.join(others)})" if others else "")))
    except ValueError as exc:
        return [Finding(False, str(exc), "fix the file (codex will not start)")]
    provider = str(settings.get("model_provider") or "openai")
    custom = providers.get(provider) if provider != "openai" else None  # built-ins win
    custom = custom if isinstance(custom, dict) else None
    found.insert(0, _codex_login(agent, provider, custom))
    if agent.config.model:
        found.append(_codex_model(agent, agent.config.model, provider, custom))
    git = agent.which("git")
    ran = _call([git, "rev-parse", "--is-inside-work-tree"], agent.workdir, agent.env) \
        if git else None
    found.append(_trust(agent, ran is not None and ran.stdout.strip() == "true",
                        ("git repo", "not a git repo"), codex.UNTRUSTED_FLAG,
                        f"{agent.workdir} is not in a git repository", "run `git init` there"))
    return found


def _providers(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[model_providers.NAME]`` tables of a codex config."""
    tables = settings.get("model_providers")
    return tables if isinstance(tables, dict) else {}


def _codex_login(agent: _Agent, provider: str, custom: dict[str, Any] | None) -> Finding:
    """``CODEX_API_KEY``, the key a custom provider's ``env_key`` names, or ``codex login
    status`` (a login in auth.json or the keyring; it ignores the other two)."""
    if agent.env.get("CODEX_API_KEY"):
        return Finding(True, "key: CODEX_API_KEY")
    if custom is not None and not custom.get("requires_openai_auth"):
        key = custom.get("env_key")
        if not key:
            return Finding(True, f"provider {provider} (no key)")
        if agent.env.get(str(key)):
            return Finding(True, f"key: {key} (provider {provider})")
        return Finding(False, f"provider {provider!r} needs {key}, which is not set",
                       f"set {key} (in the environment or the agent's env:)")
    if provider in CODEX_LOCAL_PROVIDERS:
        return Finding(True, f"provider {provider} (local)")
    ran = agent.run("login", "status")
    if ran is None or ran.returncode != 0:
        return Finding(False, "not logged in", "run `codex login` (or `codex login "
                       "--with-api-key`), or set CODEX_API_KEY")
    said = [line for line in (ran.stdout + ran.stderr).splitlines()
            if line.strip() and not line.startswith("WARNING")]
    return Finding(True, "logged in" + (f" ({said[0].split(' - ')[0]})" if said else ""))


def _codex_model(agent: _Agent, model: str, provider: str, custom: dict[str, Any] | None
                 ) -> Finding:
    """The model against ``codex debug models`` (the bundled catalogue): only a note, as
    the API decides (and a custom provider has models of its own)."""
    if custom is not None:
        return Finding(True, f"model {model} (provider {provider})")
    ran = agent.run("debug", "models")
    catalogue = _json(ran.stdout) if ran is not None and ran.returncode == 0 else None
    listed = catalogue.get("models") if isinstance(catalogue, dict) else None
    if not isinstance(listed, list):
        return Finding(True, f"model {model}")
    slugs = {m.get("slug") for m in listed if isinstance(m, dict)}
    return Finding(True, f"model {model}" if model in slugs
                   else f"model {model} (not in codex's catalogue: the API decides)")


# -- gemini -------------------------------------------------------------------------------


def _gemini(agent: _Agent) -> list[Finding]:
    folder = Path(agent.env.get("GEMINI_CLI_HOME") or agent.home) / ".gemini"
    try:
        settings = _jsonc(folder / "settings.json")
        trusted = _gemini_trusts(agent, folder, settings)
    except ValueError as exc:
        return [Finding(False, str(exc), "fix the file (gemini will not start)")]
    dotenv, source = _gemini_dotenv(agent, folder.parent, trusted
                                    or agent.config.untrusted == "allow")
    found = [_gemini_login(agent, folder, settings, {**dotenv, **agent.env}, source)]
    model = agent.config.model
    if model and (model in GEMINI_ALIASES or model.startswith(GEMINI_PREFIXES)):
        found.append(Finding(True, f"model {model}"))
    elif model and agent.env.get("GOOGLE_GEMINI_BASE_URL"):
        found.append(Finding(True, f"model {model} (GOOGLE_GEMINI_BASE_URL's)"))
    elif model:
        found.append(Finding(False, f"unknown model {model!r}", "use auto, pro, flash, "
                             "flash-lite or a gemini-* model name"))
    if agent.config.agent:
        found.append(Finding(False, "no agent flag", "remove agent: from this agent"))
    found.append(_trust(agent, trusted, ("trusted folder", "untrusted folder"),
                        gemini.UNTRUSTED_FLAG,
                        f"does not trust {agent.workdir}", "trust it (gemini: /permissions)"))
    return found


def _gemini_trusts(agent: _Agent, folder: Path, settings: Mapping[str, Any]) -> bool:
    """Gemini CLI's folder trust (packages/core/src/utils/trust.ts): the
    ``GEMINI_CLI_TRUST_WORKSPACE`` variable, else ``security.folderTrust.enabled: false``,
    else the longest rule of ``trustedFolders.json`` that holds the folder
    (``TRUST_FOLDER``, ``TRUST_PARENT``: the rule's parent, ``DO_NOT_TRUST``)."""
    said = agent.env.get("GEMINI_CLI_TRUST_WORKSPACE")
    if said in ("true", "false"):
        return said == "true"
    if _at(settings, "security", "folderTrust", "enabled") is False:
        return True
    rules = _jsonc(Path(agent.env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                        or folder / "trustedFolders.json"))
    here = agent.workdir.resolve()
    longest, level = -1, None
    for rule, trust in rules.items():
        base = Path(rule).parent if trust == "TRUST_PARENT" else Path(rule)
        if here.is_relative_to(base.resolve()) and len(rule) > longest:
            longest, level = len(rule), trust
    return level in ("TRUST_FOLDER", "TRUST_PARENT")


def _gemini_dotenv(agent: _Agent, home: Path, trusted: bool) -> tuple[dict[str, str], str]:
    """The variables of the ``.env`` file Gemini CLI loads (packages/cli/src/config/
    settings.ts ``findEnvFile``): the first of ``.gemini/.env`` (trusted folders only) and
    ``.env`` in the working folder and each one above it, then in the home folder."""
    for at in (agent.workdir, *agent.workdir.parents, home):
        for file in ([at / ".gemini" / ".env"] if trusted else []) + [at / ".env"]:
            if file.is_file():
                return _read_dotenv(file), agent.shown(file)
    return {}, ""


def _read_dotenv(file: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in file.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key.strip() and not key.startswith("#"):
            found[key.strip()] = value.strip().strip("'\"")
    return found


def _gemini_login(agent: _Agent, folder: Path, settings: Mapping[str, Any],
                  env: Mapping[str, str], dotenv: str) -> Finding:
    """The auth type of ``security.auth.selectedType``, else the one the environment
    implies, and what it needs (packages/cli/src/validateNonInterActiveAuth.ts,
    config/auth.ts)."""
    def where(key: str) -> str:
        return f"key: {key}" + (f" ({dotenv})" if key not in agent.env else "")

    auth = _at(settings, "security", "auth", "selectedType") or (
        "oauth-personal" if env.get("GOOGLE_GENAI_USE_GCA") == "true" else
        "vertex-ai" if env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true" else
        "gateway" if env.get("GOOGLE_GEMINI_BASE_URL") else
        "gemini-api-key" if env.get("GEMINI_API_KEY") else None)
    saved = (folder / "gemini-credentials.json").is_file()
    if auth is None:
        settings_file = agent.shown(folder / "settings.json")
        return Finding(False, "not logged in (no auth method)", "run `gemini` and log in, or "
                       f"set security.auth.selectedType in {settings_file}, or set "
                       "GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_USE_GCA")
    if auth == "gemini-api-key":
        if env.get("GEMINI_API_KEY"):
            return Finding(True, where("GEMINI_API_KEY"))
        if saved:
            return Finding(True, "key: saved by gemini")
        return Finding(False, "gemini-api-key auth but no GEMINI_API_KEY",
                       "set GEMINI_API_KEY (environment, the agent's env: or a .env file)")
    if auth == "oauth-personal":
        if saved or (folder / "oauth_creds.json").is_file() \
                or env.get("GOOGLE_APPLICATION_CREDENTIALS"):
            return Finding(True, "logged in with Google")
        return Finding(False, "not logged in with Google",
                       "run `gemini` and log in, or use GEMINI_API_KEY")
    if auth == "vertex-ai":
        if env.get("GOOGLE_API_KEY"):
            return Finding(True, "Vertex AI, " + where("GOOGLE_API_KEY"))
        if env.get("GOOGLE_CLOUD_PROJECT") and env.get("GOOGLE_CLOUD_LOCATION"):
            return Finding(True, f"Vertex AI, project {env['GOOGLE_CLOUD_PROJECT']}")
        return Finding(False, "Vertex AI needs GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, "
                       "or GOOGLE_API_KEY", "set them")
    return Finding(True, f"auth: {auth}")


# -- opencode -----------------------------------------------------------------------------


def _opencode(agent: _Agent) -> list[Finding]:
    """``opencode models`` lists the models of every provider with credentials (and
    opencode's free ones): the providers found, and the agent's model among them;
    ``opencode agent list`` the agents (an unknown one or a subagent makes ``opencode
    run`` use its default agent). One at a time: opencode's first start creates its
    database, and two first starts at once collide."""
    with _OPENCODE_LOCK:
        return _opencode_findings(agent)


def _opencode_findings(agent: _Agent) -> list[Finding]:
    ran = agent.run("models")
    if ran is None or ran.returncode != 0:
        return [Finding(False, f"`opencode models` failed: {_said(ran)}",
                        "run it to see why (a broken opencode.json?)")]
    models = set(re.findall(r"^([^\s/]+/\S+)$", ran.stdout, re.MULTILINE))
    providers = sorted({m.split("/", 1)[0] for m in models})
    found = [Finding(True, "providers: " + ", ".join(providers) if providers
                     else "no provider")]
    model = agent.config.model
    provider = model.split("/", 1)[0] if model else ""
    if model and model not in models and provider in providers:
        found.append(Finding(False, f"unknown model {model!r}",
                             f"`opencode models {provider}` lists its models"))
    elif model and model not in models:
        found.append(Finding(False, f"no credentials for provider {provider!r} (model {model})",
                             "run `opencode auth login`, or set the provider's API key"))
    elif model:
        found.append(Finding(True, f"model {model}"))
    if agent.config.agent:
        found.append(_opencode_agent(agent, agent.config.agent))
    return found


def _opencode_agent(agent: _Agent, name: str) -> Finding:
    ran = agent.run("agent", "list")
    if ran is None or ran.returncode != 0:
        return Finding(False, f"`opencode agent list` failed: {_said(ran)}", "run it to see why")
    modes = dict(_OPENCODE_AGENT.findall(ran.stdout))
    primary = sorted(a for a, mode in modes.items()
                     if mode != "subagent" and a not in OPENCODE_HIDDEN)
    if modes.get(name) in ("primary", "all"):
        return Finding(True, f"agent {name}")
    what = f"agent {name!r} is a subagent" if name in modes else f"no agent {name!r}"
    return Finding(False, what, "name a primary agent: " + ", ".join(primary))


_CHECKS: dict[str, Callable[[_Agent], list[Finding]]] = {
    "claude": _claude, "codex": _codex, "gemini": _gemini, "opencode": _opencode}


# -- files --------------------------------------------------------------------------------


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _jsonc(file: Path) -> dict[str, Any]:
    """A JSON file that may hold comments (as Gemini CLI reads its own); {} when absent;
    ValueError naming the file when it is not a JSON object."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ValueError(f"cannot read {file}: {exc.strerror or exc}") from None
    data = _json(_JSONC.sub(lambda m: m.group(1) or "", text))
    if not isinstance(data, dict):
        raise ValueError(f"{file} is not a JSON object")
    return data


def _toml(file: Path) -> dict[str, Any]:
    """A TOML file; {} when absent; ValueError naming the file when it does not parse."""
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read {file}: {exc}") from None


def _at(data: Mapping[str, Any], *keys: str) -> Any:
    """``data[k1][k2]...``, None where a level is missing or not a mapping."""
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value
